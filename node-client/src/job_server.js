'use strict';
/**
 * The job server: the Python supervisor that judges this process's launched jobs
 * (`python -m trainbridge.bridge.jobserve`, bridge/jobserve.py), one per Python interpreter,
 * started with the first launch. Requests go to its stdin and its feed comes from its stdout,
 * one JSON object per line each way: each job's events numbered from 1, as a scheduled job's
 * events file has them (docs/PROTOCOL.md "The feed"). This module only carries lines; the
 * Job (src/job.js) renders them.
 *
 * While a job runs the server keeps this process alive; once none does, its pipes are unref'd,
 * so a script that awaited its last job exits, and the server (stdin at EOF) exits with it. A
 * server that dies ends each of its jobs with a report that says so (outcome 'lost'): the jobs'
 * workers end their trees when their supervisor is gone (TRAINBRIDGE_CLIENT_PID); one that never
 * started (a Python without pyzmq and msgpack) fails their launch with a LaunchError that says
 * what to install where.
 */

const { spawn } = require('node:child_process');
const { helperEnv, helperFailure, readLines } = require('./launcher.js');
const jsonform = require('./jsonform.js');
const { LaunchError } = require('./job_arguments.js');

const STDERR_KEPT = 16 * 1024; // of the server's stderr, for the report when it dies
/** @type {Map<string, JobServer>} */
const servers = new Map(); // Python interpreter -> its JobServer (this process's own)

/** @typedef {import('./job.js').Job} Job */
/**
 * What whenReady() resolves to: the server's pid (its 'ready' line's) and its Python.
 * @typedef {{pid: number | null, python: string}} ServerInfo
 */

class JobServer {
  /** @param {string} python */
  constructor(python) {
    this.python = python;
    /** @type {number | null} */
    this.pid = null;
    this.ready = false; // it said it serves (its first line)
    /** @type {Map<string, Job>} */
    this._jobs = new Map(); // job id -> Job, while it runs
    this._stderr = '';
    /** @type {string | null} */
    this._gone = null; // why the server is gone (a sentence), once it is
    /** @type {string | null} */
    this._spawnError = null; // the Python could not be started at all (not found, not executable)
    this._nextRequest = 1;
    /** @type {string[]} */
    this._outbox = []; // request lines of this tick, written together at its end (send)
    /** @type {[(info: ServerInfo) => void, (err: Error) => void][]} */
    this._readyWaiters = []; // prepare()'s: [resolve, reject]
    this._proc = spawn(python, ['-m', 'trainbridge.bridge.jobserve'], {
      env: helperEnv(), stdio: ['pipe', 'pipe', 'pipe'],
    });
    this._unread = readLines(this._proc.stdout, 'latin1', (line) => this._route(line)); // the feed is ASCII
    this._proc.stderr.setEncoding('utf8');
    this._proc.stderr.on('data', (text) => { this._stderr = (this._stderr + text).slice(-STDERR_KEPT); });
    this._proc.stdin.on('error', () => undefined); // EPIPE: the exit says why
    this._proc.on('error', (err) => { this._spawnError = `cannot start ${JSON.stringify(python)}: ${err.message}`; this._onGone(this._spawnError); });
    this._proc.on('exit', (code, signal) => this._onGone(code === 0 && !signal
      ? 'it exited'
      : `it exited with ${signal || `code ${code}`}${this._stderr ? `: ${helperFailure(this._stderr)}` : ''}`));
    this._idle();
  }

  /**
   * This process's server for `python`, started on first use (a dead one is replaced).
   * @param {string} python
   * @returns {JobServer}
   */
  static for(python) {
    let server = servers.get(python);
    if (!server || server._gone) {
      server = new JobServer(python);
      servers.set(python, server);
    }
    return server;
  }

  /**
   * Resolves to {pid, python} once the server serves; rejects with why it cannot start.
   * @returns {Promise<ServerInfo>}
   */
  whenReady() {
    if (this._gone) return Promise.reject(new LaunchError(this.ready ? this._gone : this._startFailure(this._gone)));
    if (this.ready) return Promise.resolve({ pid: this.pid, python: this.python });
    this._busy(); // an awaited prepare() keeps this process alive until it is answered
    return /** @type {Promise<ServerInfo>} */ (new Promise((resolve, reject) => this._readyWaiters.push([resolve, reject])))
      .finally(() => { if (!this._jobs.size && !this._gone) this._idle(); });
  }

  /** A request number, unique in this server: replies carry it back. */
  requestId() {
    const id = this._nextRequest;
    this._nextRequest += 1;
    return id;
  }

  /**
   * Start `job` (its events go to job._deliver, its end to job._lost when the server dies).
   * @param {Job} job
   * @param {Record<string, unknown>} request
   */
  launch(job, request) {
    this._jobs.set(job.id, job);
    this._busy();
    this.send({ op: 'launch', job: job.id, ...request });
  }

  /**
   * One request line; false when the server is gone (nothing was sent). The lines of one tick
   * go in one write, so the server reads them together: a kill() right after a launch is read
   * with it, and sent the moment the process exists (bridge/jobserve.py first_stop).
   * @param {Record<string, unknown>} request
   * @returns {boolean}
   */
  send(request) {
    if (this._gone) return false;
    this._outbox.push(`${jsonform.stringify(request)}\n`);
    if (this._outbox.length === 1) process.nextTick(() => this._flush());
    return true;
  }

  _flush() {
    const text = this._outbox.join('');
    this._outbox = [];
    if (!this._gone) this._proc.stdin.write(text);
  }

  /**
   * `job` ended: it hears nothing more from here.
   * @param {Job} job
   */
  forget(job) {
    this._jobs.delete(job.id);
    if (!this._jobs.size) this._idle();
  }

  /** @param {string} line */
  _route(line) {
    let event;
    try {
      event = jsonform.parse(line);
    } catch (err) {
      this._stderr = `${this._stderr}a line of its feed is not JSON (${/** @type {Error} */ (err).message}): ${line.slice(0, 200)}\n`.slice(-STDERR_KEPT);
      return;
    }
    if (event.event === 'ready') {
      this.pid = event.pid;
      this.ready = true;
      for (const [resolve] of this._readyWaiters.splice(0)) resolve({ pid: this.pid, python: this.python });
      return;
    }
    if (event.event === 'request_error') { // a bug here: keep it for whoever asks why
      this._stderr = `${this._stderr}request refused: ${event.error}\n`.slice(-STDERR_KEPT);
      return;
    }
    const job = this._jobs.get(event.job);
    if (job) job._fromServer(event);
  }

  /** @param {string} why */
  _onGone(why) {
    if (this._gone) return;
    this._gone = `the trainbridge supervisor (${this.python} -m trainbridge.bridge.jobserve${this.pid ? `, pid ${this.pid}` : ''}) is gone: ${why}`;
    const rest = this._unread();
    if (rest.trim()) this._route(rest); // its last words, without their newline
    if (servers.get(this.python) === this) servers.delete(this.python);
    // Before its first line it could not start (a Python without pyzmq): the jobs never started.
    const failed = this.ready ? null : this._startFailure(why);
    for (const [, reject] of this._readyWaiters.splice(0)) reject(new LaunchError(failed || this._gone));
    for (const job of [...this._jobs.values()]) {
      if (failed) job._launchFailed({ message: failed }); else job._lost(this._gone);
    }
    this._jobs.clear();
  }

  /**
   * Why a server that never said it serves could not start (a sentence).
   * @param {string} why
   * @returns {string}
   */
  _startFailure(why) {
    return this._spawnError
      || `cannot run the trainbridge supervisor with ${this.python}: ${this._stderr ? helperFailure(this._stderr) : why}`;
  }

  /** While a job runs, the server's pipes keep this process alive. */
  _busy() {
    this._proc.ref();
    for (const stream of /** @type {any[]} */ ([this._proc.stdin, this._proc.stdout, this._proc.stderr])) if (stream.ref) stream.ref();
  }

  _idle() {
    this._proc.unref();
    for (const stream of /** @type {any[]} */ ([this._proc.stdin, this._proc.stdout, this._proc.stderr])) if (stream.unref) stream.unref();
  }
}

module.exports = { JobServer };
