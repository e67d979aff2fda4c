'use strict';
/**
 * The job's files the report reads, when the job ends: the crash file (faulthandler's dumps,
 * the newest CRASH_TEXT_MAX bytes) and the stage box a worker process writes beside it; and,
 * while the job runs, where a SIGUSR1 dump starts and which processes answered it. The only
 * I/O of the report; buildReport (src/report.js) is pure and gets what readFiles() read. The
 * Python twin is bridge/report_files.py.
 */

const fs = require('node:fs');
const path = require('node:path');
const codec = require('./codec.js');
const { decodeUtf8Escaped } = require('./utf8.js');

const CRASH_TEXT_MAX = 256 * 1024; // bytes of the crash file kept (its end: the newest dumps)

/**
 * What buildReport needs from the job's files, read by the shell when the job ends (before the
 * runtime directory goes): the crash file's stack text, and the stages that `pid` (the lead,
 * else the launched process) had open in its stage box. As bridge/report.py read_files.
 */
function readFiles(crashFile, pid) {
  return { crash_text: readCrashFile(crashFile), stage_box: readStageBox(crashFile, pid), unsent: readUnsent(crashFile) };
}

/**
 * How many records the job's worker processes queued at exit and never sent: the numbers they
 * wrote beside the crash file (<crash file>.unsent.<pid>), added up. As bridge/report_files.py.
 */
function readUnsent(crashFile) {
  if (!crashFile) return 0;
  const dir = path.dirname(crashFile);
  const prefix = `${path.basename(crashFile)}.unsent.`;
  let names;
  try { names = fs.readdirSync(dir).filter((n) => n.startsWith(prefix)); } catch { return 0; }
  let total = 0;
  for (const name of names) {
    try {
      const n = Number.parseInt(fs.readFileSync(path.join(dir, name), 'ascii').slice(0, 32).trim() || '0', 10);
      if (Number.isFinite(n)) total += n;
    } catch { /* a torn or foreign file: the worker's stderr line said it too */ }
  }
  return total;
}

/**
 * The stages a worker process had open when it last changed stage, from the file it writes
 * synchronously beside the crash file (worker/runtime.py, PROTOCOL.md section 2), outermost
 * first; null when there is none. As bridge/report.py read_stage_box.
 */
function readStageBox(crashFile, pid) {
  if (!crashFile || pid === null || pid === undefined) return null;
  let data;
  try {
    data = fs.readFileSync(`${crashFile}.stages.${pid}`).subarray(0, 64 * 1024);
  } catch {
    return null;
  }
  const names = [];
  for (const line of data.toString('latin1').split('\n')) {
    if (line === '.') return names;
    try {
      names.push(codec.unescape(line));
    } catch {
      names.push(line);
    }
  }
  return null; // no closing line: a torn or foreign file
}

/** What faulthandler wrote (native crash, SIGUSR1 dump, freeze watchdog), or null. */
function readCrashFile(file) {
  if (!file) return null;
  let data;
  try {
    data = fs.readFileSync(file);
  } catch {
    return null;
  }
  data = data.subarray(Math.max(0, data.length - CRASH_TEXT_MAX));
  // The worker writes a "[trainbridge] ..." banner first; only dumps count as stacks.
  // eslint-disable-next-line no-control-regex -- \x1c-\x1e break lines for Python's str.splitlines
  const text = decodeUtf8Escaped(data).split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/)
    .filter((line) => !line.startsWith('[trainbridge]')).join('\n').trim();
  return text || null;
}

/** Where the next dump will start in the crash file (null: there is none yet). */
function crashFileSize(file) {
  if (!file) return null;
  try {
    return fs.statSync(file).size;
  } catch {
    return null;
  }
}

const SIGNAL_DUMP_MARK = /^\[trainbridge\] pid (\d+): stacks on SIGUSR1$/gm;

/** The processes whose SIGUSR1 handler wrote its stacks after offset `since` of the crash
 * file (each marks its dump with a "[trainbridge] pid N: stacks on SIGUSR1" line). */
function signalDumpedPids(file, since) {
  const pids = new Set();
  if (!file) return pids;
  let data;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const buf = Buffer.alloc(CRASH_TEXT_MAX);
      data = buf.subarray(0, fs.readSync(fd, buf, 0, CRASH_TEXT_MAX, since || 0));
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return pids;
  }
  for (const pid of signalDumpedIn(data.toString('latin1'))) pids.add(pid);
  return pids;
}

/**
 * The processes whose SIGUSR1 handler wrote its stacks into this crash file text: their main
 * thread ran Python, however late (pure; bridge/report_files.py signal_dumped_in).
 */
function signalDumpedIn(text) {
  return new Set([...String(text ?? '').matchAll(SIGNAL_DUMP_MARK)].map((m) => Number(m[1])));
}

module.exports = { CRASH_TEXT_MAX, SIGNAL_DUMP_MARK, readFiles, readUnsent, readStageBox, readCrashFile, crashFileSize, signalDumpedPids, signalDumpedIn };
