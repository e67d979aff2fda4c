'use strict';
/**
 * Bytes -> text the way Python's bytes.decode("utf-8", "surrogateescape") does it (PEP 383):
 * every byte that is not part of a well-formed UTF-8 sequence becomes the lone surrogate
 * U+DC00 + byte, so the original bytes can always be recovered and nothing ever throws.
 */

const { isUtf8 } = require('node:buffer');

/** Length of the well-formed UTF-8 sequence starting at `i`, or 0 (Unicode table 3-7). */
function sequenceLength(bytes, i) {
  const b0 = bytes[i];
  if (b0 < 0x80) return 1;
  const cont = (k, lo = 0x80, hi = 0xbf) => i + k < bytes.length && bytes[i + k] >= lo && bytes[i + k] <= hi;
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((b0 >= 0xe1 && b0 <= 0xec) || b0 === 0xee || b0 === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (b0 === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0; // no encoded surrogates
  if (b0 === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xf1 && b0 <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/** UTF-8 with PEP 383 surrogates for undecodable bytes. */
function decodeUtf8Escaped(bytes) {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (isUtf8(buf)) return buf.toString('utf8');
  const parts = [];
  let start = 0;
  let i = 0;
  while (i < buf.length) {
    const n = sequenceLength(buf, i);
    if (n > 0) { i += n; continue; }
    if (start < i) parts.push(buf.toString('utf8', start, i));
    parts.push(String.fromCharCode(0xdc00 + buf[i]));
    i += 1;
    start = i;
  }
  if (start < buf.length) parts.push(buf.toString('utf8', start));
  return parts.join('');
}

module.exports = { decodeUtf8Escaped, isUtf8 };
