'use strict';
/**
 * Output lines: split a child's byte stream into lines and decode each one. Pure.
 *
 * The mirror of bridge/lines.py; both obey vectors/lines.json.
 *
 * Splitting rules (docs/CLIENT.md, "Output lines"):
 * - A line ends at "\n", at "\r" (progress bars such as tqdm redraw with "\r") or at
 *   "\r\n", which counts once. Its `end` says which: "lf", "cr", "crlf".
 * - An empty line ended by a lone "\r" is dropped (tqdm starts every redraw with "\r").
 * - A chunk that ends in "\r" keeps that line back until the next byte shows whether "\n"
 *   follows, so the lines never depend on where the pipe happened to cut the stream.
 * - A line longer than `maxLine` bytes is cut into pieces of at most `maxLine` bytes; every
 *   piece but the last has end "max". A cut never splits a UTF-8 sequence that fits.
 * - At EOF, flush() returns what is left with end "eof" (no trailing newline).
 *
 * Decoding rules: UTF-8 (strict); else GBK (strict, when the whole line decodes); else
 * UTF-8 with PEP 383 surrogates (each undecodable byte 0xhh becomes U+DChh). A bad byte
 * never throws, and lineBytes(text, encoding) gives back the original bytes.
 */

const { decodeUtf8Escaped, isUtf8 } = require('./utf8.js');

const DEFAULT_MAX_LINE = 64 * 1024;
const LF = 0x0a;
const CR = 0x0d;

/** Incremental splitter: feed(chunk) -> complete lines ({data, end}); flush() at EOF. */
class LineSplitter {
  constructor(maxLine = DEFAULT_MAX_LINE) {
    if (maxLine < 4) throw new RangeError('maxLine must be at least 4 bytes (one UTF-8 sequence)');
    this.maxLine = maxLine;
    this._parts = []; // pending bytes of the current line, as chunks (no copying per feed)
    this._size = 0;
    this._crPending = false; // the last chunk ended in "\r"; "\n" may follow
  }

  feed(chunk) {
    const out = [];
    const raw = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    const n = raw.length;
    let pos = 0;
    if (this._crPending && n) {
      this._crPending = false;
      const crlf = raw[0] === LF;
      this._emit(out, crlf ? 'crlf' : 'cr');
      pos = crlf ? 1 : 0;
    }
    while (pos < n) {
      const i = nextTerminator(raw, pos);
      if (i < 0) {
        this._append(raw.subarray(pos));
        this._cutLong(out);
        break;
      }
      this._append(raw.subarray(pos, i));
      this._cutLong(out);
      let end;
      if (raw[i] === LF) {
        end = 'lf'; pos = i + 1;
      } else if (i + 1 === n) { // "\r" at the end of the chunk: wait for the next byte
        this._crPending = true;
        break;
      } else if (raw[i + 1] === LF) {
        end = 'crlf'; pos = i + 2;
      } else {
        end = 'cr'; pos = i + 1;
      }
      this._emit(out, end);
    }
    return out;
  }

  /** EOF: the line held back by a trailing "\r", then any unterminated rest. */
  flush() {
    const out = [];
    if (this._crPending) {
      this._crPending = false;
      this._emit(out, 'cr');
    } else if (this._size) {
      out.push({ data: this._take(), end: 'eof' });
    }
    return out;
  }

  _append(bytes) {
    if (bytes.length) { this._parts.push(bytes); this._size += bytes.length; }
  }

  _take() {
    const data = this._parts.length === 1 ? Buffer.from(this._parts[0]) : Buffer.concat(this._parts, this._size);
    this._parts = [];
    this._size = 0;
    return data;
  }

  _emit(out, end) {
    // An empty line ended by a lone "\r" is no line: tqdm starts every redraw with "\r".
    const data = this._take();
    if (data.length || end !== 'cr') out.push({ data, end });
  }

  /** Cut pieces off the buffer while it holds more than maxLine bytes. */
  _cutLong(out) {
    if (this._size <= this.maxLine) return;
    let buf = this._take();
    while (buf.length > this.maxLine) {
      const cut = utf8SafeCut(buf, this.maxLine);
      out.push({ data: Buffer.from(buf.subarray(0, cut)), end: 'max' });
      buf = buf.subarray(cut);
    }
    this._append(buf);
  }
}

function nextTerminator(raw, pos) {
  const lf = raw.indexOf(LF, pos);
  const cr = raw.indexOf(CR, pos);
  if (lf < 0) return cr;
  if (cr < 0) return lf;
  return Math.min(lf, cr);
}

/**
 * A cut position <= limit that does not split a UTF-8 sequence.
 * If the byte at `limit` continues a sequence whose lead byte (at most 3 bytes back) says
 * it runs past `limit`, cut before that lead byte; otherwise cut at `limit`.
 */
function utf8SafeCut(buf, limit) {
  for (let lead = limit - 1; lead > Math.max(limit - 4, 0); lead--) {
    const b = buf[lead];
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: keep looking for the lead
    if (b >= 0xc0 && (buf[limit] & 0xc0) === 0x80) {
      const size = b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
      if (lead + size > limit) return lead;
    }
    break;
  }
  return limit;
}

// --- GBK ------------------------------------------------------------------------------
// Python's "gbk" codec (CP936 without the user-defined areas) accepts fewer byte pairs than
// the WHATWG "gbk" decoder Node ships (that one is GB18030: it also takes 0x80 alone, the
// four-byte forms and the private-use areas). Where both accept a pair they agree, so a line
// is GBK here when every pair is in Python's table below (generated from Python's codec and
// checked pair by pair in test/lines.test.js), and the WHATWG decoder then maps it.
const GBK_DEFAULT_TRAIL = [[0x40, 0x7e], [0x80, 0xfe]];
const GBK_TRAIL_EXCEPTIONS = {
  0xa1: [[0xa1, 0xfe]],
  0xa2: [[0xa1, 0xaa], [0xb1, 0xe2], [0xe5, 0xee], [0xf1, 0xfc]],
  0xa3: [[0xa1, 0xfe]],
  0xa4: [[0xa1, 0xf3]],
  0xa5: [[0xa1, 0xf6]],
  0xa6: [[0xa1, 0xb8], [0xc1, 0xd8], [0xe0, 0xeb], [0xee, 0xf2], [0xf4, 0xf5]],
  0xa7: [[0xa1, 0xc1], [0xd1, 0xf1]],
  0xa8: [[0x40, 0x7e], [0x80, 0x95], [0xa1, 0xbb], [0xbd, 0xbe], [0xc0, 0xc0], [0xc5, 0xe9]],
  0xa9: [[0x40, 0x57], [0x59, 0x5a], [0x5c, 0x5c], [0x60, 0x7e], [0x80, 0x88], [0x96, 0x96], [0xa4, 0xef]],
  0xaa: [[0x40, 0x7e], [0x80, 0xa0]],
  0xab: [[0x40, 0x7e], [0x80, 0xa0]],
  0xac: [[0x40, 0x7e], [0x80, 0xa0]],
  0xad: [[0x40, 0x7e], [0x80, 0xa0]],
  0xae: [[0x40, 0x7e], [0x80, 0xa0]],
  0xaf: [[0x40, 0x7e], [0x80, 0xa0]],
  0xd7: [[0x40, 0x7e], [0x80, 0xf9]],
  0xf8: [[0x40, 0x7e], [0x80, 0xa0]],
  0xf9: [[0x40, 0x7e], [0x80, 0xa0]],
  0xfa: [[0x40, 0x7e], [0x80, 0xa0]],
  0xfb: [[0x40, 0x7e], [0x80, 0xa0]],
  0xfc: [[0x40, 0x7e], [0x80, 0xa0]],
  0xfd: [[0x40, 0x7e], [0x80, 0xa0]],
  0xfe: [[0x40, 0x4f]],
};

// 65536-bit table: GBK_PAIR[lead << 8 | trail] === 1 where Python's gbk decodes the pair.
const GBK_PAIR = new Uint8Array(65536);
for (let lead = 0x81; lead <= 0xfe; lead++) {
  for (const [lo, hi] of GBK_TRAIL_EXCEPTIONS[lead] || GBK_DEFAULT_TRAIL) {
    for (let t = lo; t <= hi; t++) GBK_PAIR[(lead << 8) | t] = 1;
  }
}

let gbkDecoder = null;
try {
  gbkDecoder = new TextDecoder('gbk', { fatal: true });
} catch {
  gbkDecoder = null; // a Node built without full ICU: GBK lines stay "escaped" (reversible)
}

/** True when Python's strict gbk codec decodes every byte of `data`. */
function isGbk(data) {
  let i = 0;
  while (i < data.length) {
    const b = data[i];
    if (b < 0x80) { i += 1; continue; }
    if (i + 1 >= data.length || !GBK_PAIR[(b << 8) | data[i + 1]]) return false;
    i += 2;
  }
  return true;
}

/** Bytes of one line -> {text, encoding}: encoding "utf-8", "gbk" or "escaped" (PEP 383). */
function decodeLine(data) {
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data);
  if (isUtf8(buf)) return { text: buf.toString('utf8'), encoding: 'utf-8' };
  if (gbkDecoder && isGbk(buf)) return { text: gbkDecoder.decode(buf), encoding: 'gbk' };
  return { text: decodeUtf8Escaped(buf), encoding: 'escaped' };
}

let gbkEncodeTable = null; // char -> [lead, trail], built on first use

function gbkEncode(text) {
  if (!gbkEncodeTable) {
    gbkEncodeTable = new Map();
    for (let code = 0; code < 65536; code++) {
      if (!GBK_PAIR[code]) continue;
      gbkEncodeTable.set(gbkDecoder.decode(Buffer.from([code >> 8, code & 0xff])), [code >> 8, code & 0xff]);
    }
  }
  const bytes = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (cp < 0x80) { bytes.push(cp); continue; }
    const pair = gbkEncodeTable.get(ch);
    if (!pair) throw new RangeError(`U+${cp.toString(16)} is not GBK`);
    bytes.push(pair[0], pair[1]);
  }
  return Buffer.from(bytes);
}

/** Inverse of decodeLine: the original bytes of a decoded line. */
function lineBytes(text, encoding) {
  if (encoding === 'gbk') return gbkEncode(text);
  // UTF-8, with each PEP 383 surrogate U+DC80..U+DCFF back to its byte.
  const parts = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const u = text.charCodeAt(i);
    const lone = u >= 0xdc80 && u <= 0xdcff && !(i > 0 && text.charCodeAt(i - 1) >= 0xd800 && text.charCodeAt(i - 1) <= 0xdbff);
    if (!lone) continue;
    parts.push(Buffer.from(text.slice(start, i), 'utf8'), Buffer.from([u - 0xdc00]));
    start = i + 1;
  }
  parts.push(Buffer.from(text.slice(start), 'utf8'));
  return Buffer.concat(parts);
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A decoded line as it is written to a UTF-8 log file: undecodable bytes (lone
 * surrogates) become visible \udcXX escapes instead of failing the write.
 */
function logText(text) {
  return text.replace(LONE_SURROGATE, (s) => '\\u' + s.charCodeAt(0).toString(16).padStart(4, '0'));
}


/**
 * Which output lines go to the log file (a pure rule; vectors/redraws.json), as
 * bridge/lines.py's RedrawThrottle: every line, except a progress bar's redraws (ended by a
 * bare CR), of which a stream's log keeps at most one per `interval` seconds. A held-back
 * redraw is dropped when a full line follows on its stream, written by flush() at the end.
 */
class RedrawThrottle {
  constructor(interval = 1.0) {
    this.interval = interval;
    this._written = new Map(); // stream -> time of the last redraw written
    this._held = new Map(); // stream -> the latest redraw not written
  }

  /** The texts to write now for one line (its time `t`, seconds). */
  feed(stream, text, end, t) {
    if (end !== 'cr') {
      this._held.delete(stream);
      return [text];
    }
    const last = this._written.get(stream);
    if (last !== undefined && t - last < this.interval) {
      this._held.set(stream, text);
      return [];
    }
    this._written.set(stream, t);
    this._held.delete(stream);
    return [text];
  }

  /** At the end of the output: the redraws still held back, stdout's first. */
  flush() {
    const streams = [...this._held.keys()].sort((a, b) => (a !== 'stdout') - (b !== 'stdout'));
    const held = streams.map((s) => this._held.get(s));
    this._held.clear();
    return held;
  }
}

module.exports = { DEFAULT_MAX_LINE, LineSplitter, utf8SafeCut, decodeLine, lineBytes, logText, isGbk, RedrawThrottle };
