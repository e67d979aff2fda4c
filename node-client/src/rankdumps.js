'use strict';
/**
 * The per-rank faulthandler fallback at hang time (as bridge/rankdumps.py): a rank whose
 * beacon did not answer the hang's dump_stacks still gets its stack into `ranks`, from its
 * SIGUSR1 dump in the crash file when its main thread ran Python, else from SIGUSR2,
 * faulthandler's C handler for the main thread. Every process of a job writes to the one
 * crash file and a SIGUSR2 dump carries no pid, so SIGUSR2 goes to one rank at a time and
 * its dump is what the file grew by after it.
 */
const fs = require('node:fs');
const { SIGNAL_DUMP_MARK } = require('./report_files.js');

const ANY_MARK = /^\[trainbridge\] /m;
const NATIVE_WAIT_MS = 500; // the longest to wait for one rank's SIGUSR2 dump to appear
const SETTLE_MS = 20; // the file has stopped growing: faulthandler wrote the whole stack

/** pid -> the stacks its SIGUSR1 handler wrote (from its marker to the next "[trainbridge]" line). */
function sigusr1Sections(text) {
  const out = new Map();
  for (const m of text.matchAll(SIGNAL_DUMP_MARK)) {
    const rest = text.slice(m.index + m[0].length + 1);
    const end = ANY_MARK.exec(rest);
    out.set(Number(m[1]), end ? rest.slice(0, end.index) : rest);
  }
  return out;
}

function size(file) {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

function readFrom(file, offset, limit = 1 << 20) {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const buf = Buffer.alloc(limit);
      return buf.subarray(0, fs.readSync(fd, buf, 0, limit, offset)).toString('latin1');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/**
 * Send SIGUSR2 to `pid` (through `send`) and resolve to what faulthandler wrote for it: the
 * crash file's growth once it stops growing, within NATIVE_WAIT_MS; null when nothing came.
 */
async function nativeDump(file, pid, send) {
  const start = size(file);
  send(pid);
  const deadline = Date.now() + NATIVE_WAIT_MS;
  let seen = start;
  let since = Date.now();
  while (Date.now() < deadline) {
    const now = size(file);
    if (now !== seen) {
      seen = now;
      since = Date.now();
    } else if (seen > start && Date.now() - since >= SETTLE_MS) {
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return seen > start ? readFrom(file, start, seen - start) : null;
}

module.exports = { sigusr1Sections, nativeDump, readFrom };
