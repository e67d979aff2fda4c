'use strict';
/**
 * The feed file: a scheduled job's events, numbered, as its keeper judged them (bridge/feed.py,
 * docs/PROTOCOL.md "The feed"). One ASCII JSON object per line, each beginning {"seq": N, ...}.
 * Pure synchronous reads with bounded memory, pinned with the Python twin by vectors/feed.json:
 *
 * - lastSeq(file): the number of the last whole line (0 for an empty or missing file);
 * - lastStatus(file): {offset after the last whole line, the last 'status' event or null},
 *   reading backwards (CATCH_UP_BYTES at most): how a face joins "now";
 * - offsetOf(file, seq): where the first line numbered seq or more begins, by bisection over
 *   byte offsets: how a face joins "from event N".
 */

const fs = require('node:fs');
const jsonform = require('./jsonform.js');

const CATCH_UP_BYTES = 8 * 1024 * 1024;
const BLOCK = 256 * 1024;
const PROBE = 4096;
const SEQ = /^\{"seq": ?(\d+)[,}]/;

class FeedError extends Error {
  /** @param {string} message */
  constructor(message) { super(message); this.name = 'FeedError'; }
}

/**
 * @param {string} file
 * @returns {number | null}
 */
function openOrNull(file) {
  try { return fs.openSync(file, 'r'); } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * @param {number} fd
 * @param {number} pos
 * @param {number} length
 * @returns {Buffer}
 */
function read(fd, pos, length) {
  const buf = Buffer.alloc(length);
  const n = fs.readSync(fd, buf, 0, length, pos);
  return buf.subarray(0, n);
}

/**
 * The number at the start of a feed line (a Buffer or string), or null.
 * @param {Buffer | string} line
 * @returns {number | null}
 */
function seqOf(line) {
  const m = SEQ.exec(typeof line === 'string' ? line : line.toString('latin1'));
  return m ? Number(m[1]) : null;
}

/**
 * The offset just after the file's last newline (a line being written is not in the feed).
 * @param {number} fd
 * @returns {number}
 */
function boundary(fd) {
  let pos = fs.fstatSync(fd).size;
  let size = PROBE; // a line is usually short: a small read first, larger ones after
  while (pos > 0) {
    const step = Math.min(size, pos);
    pos -= step;
    const cut = read(fd, pos, step).lastIndexOf(10);
    if (cut >= 0) return pos + cut + 1;
    size = Math.min(size * 2, BLOCK);
  }
  return 0;
}

/**
 * The first line start at or after pos (pos itself when a newline precedes it), or end.
 * @param {number} fd
 * @param {number} pos
 * @param {number} end
 * @returns {number}
 */
function nextStart(fd, pos, end) {
  if (pos <= 0) return 0;
  let at = pos - 1;
  while (at < end) {
    const block = read(fd, at, PROBE);
    if (!block.length) return end;
    const cut = block.indexOf(10);
    if (cut >= 0) return Math.min(at + cut + 1, end);
    at += block.length;
  }
  return end;
}

/**
 * The number of the feed's last whole line; 0 when it has none. FeedError when it has no number.
 * @param {string} file
 * @returns {number}
 */
function lastSeq(file) {
  const fd = openOrNull(file);
  if (fd === null) return 0;
  try {
    const end = boundary(fd);
    if (end === 0) return 0;
    let pos = end - 1;
    while (pos > 0) { // back to the start of the last line
      const step = Math.min(BLOCK, pos);
      const cut = read(fd, pos - step, step).lastIndexOf(10);
      if (cut >= 0) { pos = pos - step + cut + 1; break; }
      pos -= step;
    }
    const seq = seqOf(read(fd, pos, 32));
    if (seq === null) throw new FeedError(`${file}: its lines carry no event number (an older keeper wrote it)`);
    return seq;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Where the first whole line numbered seq or more begins; the offset after the last whole line
 * when there is none yet. FeedError when the file's lines carry no number.
 * @param {string} file
 * @param {number} seq
 * @returns {number}
 */
function offsetOf(file, seq) {
  if (!Number.isInteger(seq) || seq < 1) throw new TypeError(`an event number is an integer from 1, not ${JSON.stringify(seq)}`);
  const fd = openOrNull(file);
  if (fd === null) return 0;
  try {
    const end = boundary(fd);
    const number = (/** @type {number} */ pos) => {
      const got = seqOf(read(fd, pos, 32));
      if (got === null) {
        throw new FeedError(`${file}: the line at byte ${pos} carries no event number (an older keeper wrote this job's events): attach from the start or from now instead`);
      }
      return got;
    };
    // lo is a line start; every line before lo is numbered below seq (bridge/feed.py).
    let lo = 0;
    let hi = end;
    while (lo < hi) {
      const mid = nextStart(fd, Math.floor((lo + hi) / 2), end);
      if (mid >= hi) {
        if (number(lo) >= seq) return lo;
        lo = nextStart(fd, lo + 1, end);
        continue;
      }
      if (number(mid) >= seq) hi = mid;
      else lo = nextStart(fd, mid + 1, end);
    }
    return lo;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * {offset: after the last whole line, status: the last 'status' event or null}.
 * @param {string} file
 * @returns {{offset: number, status: any}} status: the event as parsed (arbitrary JSON)
 */
function lastStatus(file) {
  const fd = openOrNull(file);
  if (fd === null) return { offset: 0, status: null };
  try {
    const end = boundary(fd);
    let pos = end;
    let tail = '';
    while (pos > 0 && end - pos < CATCH_UP_BYTES) {
      const step = Math.min(BLOCK, pos);
      pos -= step;
      tail = read(fd, pos, step).toString('latin1') + tail; // the file is ASCII
      const lines = tail.split('\n');
      tail = pos > 0 ? lines[0] : '';
      const whole = pos > 0 ? lines.slice(1) : lines;
      for (let i = whole.length - 1; i >= 0; i -= 1) {
        if (!whole[i].includes('"status"')) continue;
        let event;
        try { event = jsonform.parse(whole[i]); } catch { continue; }
        if (event.event === 'status') return { offset: end, status: event };
      }
    }
    return { offset: end, status: null };
  } finally {
    fs.closeSync(fd);
  }
}

module.exports = { CATCH_UP_BYTES, FeedError, seqOf, lastSeq, offsetOf, lastStatus };
