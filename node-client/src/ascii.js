'use strict';
/**
 * The ASCII rule of the wire (docs/PROTOCOL.md section 3): every text travels as ASCII,
 * escaped reversibly. Pure; the Python twin is protocol/ascii.py.
 *
 * Encoders escape: "\" -> "\\"; U+0080..U+00FF -> \xhh; up to U+FFFF (lone surrogates
 * too) -> \uhhhh; beyond -> \Uhhhhhhhh; hex lowercase. Undecodable bytes travel as the
 * PEP 383 surrogates U+DC80..U+DCFF, so they get a reversible \udcXX escape.
 */

const { ProtocolError } = require('./errors.js');

const NEEDS_ESCAPE = /[\\\u0080-\uffff]/;
// eslint-disable-next-line no-control-regex -- NUL..DEL is exactly the ASCII range tested here
const NON_ASCII = /[^\x00-\x7f]/;
const ESCAPE_AT = /\\(?:\\|x[89a-f][0-9a-f]|u(?!00)[0-9a-f]{4}|U0010[0-9a-f]{4}|U000[1-9a-f][0-9a-f]{4})/y;

function escapeCodePoint(cp) {
  if (cp === 0x5c) return '\\\\';
  if (cp < 0x80) return String.fromCharCode(cp);
  if (cp <= 0xff) return '\\x' + cp.toString(16).padStart(2, '0');
  if (cp <= 0xffff) return '\\u' + cp.toString(16).padStart(4, '0');
  return '\\U' + cp.toString(16).padStart(8, '0');
}

/** Make `text` ASCII, reversibly, by code point. ASCII text without a backslash comes back as is. */
function escape(text) {
  if (!NEEDS_ESCAPE.test(text)) return text;
  const parts = [];
  let plainStart = 0;
  let i = 0;
  while (i < text.length) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80 && unit !== 0x5c) { i += 1; continue; }
    if (plainStart < i) parts.push(text.slice(plainStart, i));
    const cp = text.codePointAt(i); // a lone surrogate comes back as itself
    parts.push(escapeCodePoint(cp));
    i += cp > 0xffff ? 2 : 1;
    plainStart = i;
  }
  if (plainStart < text.length) parts.push(text.slice(plainStart));
  return parts.join('');
}

function checkEscapes(text) {
  let pos = 0;
  for (;;) {
    const i = text.indexOf('\\', pos);
    if (i < 0) return;
    ESCAPE_AT.lastIndex = i;
    const m = ESCAPE_AT.exec(text);
    if (m === null) throw new ProtocolError('bad_escape', JSON.stringify(text.slice(i, i + 12)));
    pos = ESCAPE_AT.lastIndex;
  }
}

/** Inverse of escape(). Throws ProtocolError for non-ASCII or a malformed escape. */
function unescape(text) {
  if (NON_ASCII.test(text)) throw new ProtocolError('non_ascii', JSON.stringify(text.slice(0, 40)));
  if (text.indexOf('\\') < 0) return text;
  return unescapeAscii(text);
}

/** unescape() of a string already known to be ASCII and to hold a backslash. */
function unescapeAscii(text) {
  checkEscapes(text);
  return text.replace(/\\(?:\\|x(..)|u(....)|U(........))/g, (all, x, u, U) => {
    if (all === '\\\\') return '\\';
    return String.fromCodePoint(parseInt(x || u || U, 16));
  });
}

/**
 * escape(text), or if longer than `limit`, that of the longest prefix of `text` (in code
 * points) whose escape fits. Returns [escaped, cut].
 */
function escapeWithin(text, limit) {
  const out = escape(text);
  if (out.length <= limit) return [out, false];
  // Escaped lengths only grow with the prefix, so walk code points until the next one
  // would not fit: the same prefix Python's binary search finds.
  let used = 0;
  let end = 0;
  while (end < text.length) {
    const cp = text.codePointAt(end);
    const width = cp === 0x5c ? 2 : cp < 0x80 ? 1 : cp <= 0xff ? 4 : cp <= 0xffff ? 6 : 10;
    if (used + width > limit) break;
    used += width;
    end += cp > 0xffff ? 2 : 1;
  }
  return [escape(text.slice(0, end)), true];
}

module.exports = { NON_ASCII, escape, unescape, unescapeAscii, escapeWithin };
