'use strict';
/**
 * A Job's output: the child's stdout and stderr split into lines, kept in the tail, written to
 * the log file and emitted as 'log' events; the log file's opening and its write failures.
 * Part of Job (src/job.js mixes these methods into Job.prototype; the fields they use are set
 * up in Job's constructor). The Python twin is bridge/job_output.py.
 */

const fs = require('node:fs');
const util = require('node:util');
const { decodeLine, logText } = require('./lines.js');
const { LaunchError } = require('./job_arguments.js');
const { now } = require('./job_actions.js');
const { PrivateFileError, openAppend } = require('./private_files.js');

const OUTPUT_EVENT_S = 0.25; // output lines reach the state machine at most this often (issue 12)
// What bridge/inject/sitecustomize.py and the worker print when they cannot run: no hello
// will come from that process, so waiting for one (the startup deadline) would only kill it.
const NO_WORKER_MARKERS = ['[trainbridge] zero-code mode is off', '[trainbridge] worker disabled'];
const FATAL_MARKERS = ['Fatal Python error:', 'Timeout (']; // faulthandler's crash and watchdog headers
const FATAL_LINES_MAX = 400; // stderr lines kept after "Fatal Python error"

class JobOutput {
  /** Zero-code mode cannot load in some process of the job: say so, once per process line. */
  _noWorker(reason) {
    this._emit('no_worker', { reason });
    this._post({ type: 'no_worker', reason });
  }

  _output(stream, chunk) {
    this._facts.bytes[stream] += chunk.length;
    if (this[stream]) this[stream].write(chunk); // raw: the bytes as read, before any split
    this._lines(stream, this._splitters[stream].feed(chunk));
  }

  _lines(stream, rawLines) {
    if (!rawLines.length) return;
    const { tail } = this._facts;
    const texts = [];
    const t = now();
    // With logTimestamps, each log line starts with its UTC time (issue 12 item 9).
    const stamp = this._options.logTimestamps ? `${new Date().toISOString()} ` : '';
    for (const raw of rawLines) {
      const { text, encoding } = decodeLine(raw.data);
      this._facts.lines[stream] += 1;
      for (const kept of this._redraws.feed(stream, text, raw.end, t)) texts.push(stamp + logText(kept));
      // tqdm redraws replace each other in the tail instead of filling it.
      if (tail.length && tail[tail.length - 1].end === 'cr' && tail[tail.length - 1].stream === stream) tail.pop();
      tail.push({ stream, text, end: raw.end });
      if (tail.length > this._tailLines) tail.shift();
      if (stream === 'stderr') {
        this._captureFatal(text);
        if (NO_WORKER_MARKERS.some((m) => text.startsWith(m))) this._noWorker(text);
      }
      this._emit('log', { stream, text, encoding, end: raw.end });
    }
    if (texts.length) this._writeLog(texts.join('\n'));
    this._outputActivity();
  }

  /** As bridge/job.py _output_activity: the job printed (activity while it has no progress source). */
  _outputActivity() {
    const t = now();
    this._lastOutputT = t;
    const last = this._outputEventT ?? null;
    if (last === null || t - last >= OUTPUT_EVENT_S || this._m.state === 'stalled') {
      this._outputEventT = t;
      this._post({ type: 'output' });
    }
  }

  _captureFatal(text) {
    // PYTHONFAULTHANDLER prints a crashed process's stacks on stderr; keep them whole even
    // when they are longer than the tail.
    if (FATAL_MARKERS.some((m) => text.startsWith(m))) {
      this._fatalCapture = true;
      this._facts.fatal_lines = [];
    }
    if (this._fatalCapture && this._facts.fatal_lines.length < FATAL_LINES_MAX) this._facts.fatal_lines.push(text);
  }

  /**
   * Append lines to the log file, at once (it must survive a crash of this process). A
   * failed write (a full disk) stops the log, never the supervision: the report and a
   * 'log_error' event say from which line on the file is incomplete, and why.
   */
  _writeLog(text) {
    if (this._logFd === null) return;
    const data = Buffer.from(`${text}\n`, 'utf8');
    let done = 0;
    try {
      while (done < data.length) done += fs.writeSync(this._logFd, data, done, data.length - done);
    } catch (err) {
      const fromLine = this._facts.log_lines + countLines(data, done) + 1;
      this._facts.log_error = { path: this._options.logPath, from_line: fromLine, error: osErrorText(err) };
      this._closeLog();
      this._emit('log_error', this._facts.log_error);
      return;
    }
    this._facts.log_lines += countLines(data, data.length);
  }

  _closeLog() {
    if (this._logFd !== null) {
      try { fs.closeSync(this._logFd); } catch { /* already closed */ }
      this._logFd = null;
    }
  }
}

/**
 * An fd appending to the log file (0600 when new; never through a link, never into another
 * account's file: private_files.js), or a LaunchError saying what is wrong with it.
 */
function openLog(logPath) {
  try {
    return openAppend(logPath);
  } catch (err) {
    if (err instanceof PrivateFileError) throw new LaunchError(`cannot write the log file ${err.message}`, err);
    throw new LaunchError(`cannot write the log file ${logPath}: ${osErrorText(err)}; choose a writable path for the log`, err);
  }
}

/** 'No space left on device (ENOSPC)': what went wrong, with the name to search for (as bridge/job.py). */
function osErrorText(err) {
  const known = typeof err.errno === 'number' ? util.getSystemErrorMap().get(err.errno) : undefined;
  if (!known) return err.message;
  return `${known[1].charAt(0).toUpperCase()}${known[1].slice(1)} (${known[0]})`;
}

/** Newlines in the first `end` bytes of `data`. */
function countLines(data, end) {
  let count = 0;
  for (let i = data.indexOf(10); i !== -1 && i < end; i = data.indexOf(10, i + 1)) count += 1;
  return count;
}


module.exports = { JobOutput, openLog, osErrorText };
