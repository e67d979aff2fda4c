'use strict';
/**
 * Job sources: where the dashboard's jobs come from. The server speaks only this interface,
 * so a source over a persistent job store (the scheduler's) can replace the in-memory one:
 *
 *   list()              -> [summary]              newest first
 *   get(id)             -> view | null            (model.js)
 *   report(id)          -> the full report | null (once ended)
 *   logPath(id)         -> the full log's file | null
 *   attach(id, fn)      -> detach()               fn() after every change of that job
 *   watch(fn)           -> unwatch()              fn(id) after every change of any job
 *   submit(spec)        -> id, or a Promise of it  throws SpecError for a bad spec
 *   cancel(id)          -> Promise<summary>
 *   dumpStacks(id)      -> Promise<string|null>   (also recorded in the view; waits DUMP_TIMEOUT_S)
 *   rerun(id)           -> Promise<new id>         an ended job's spec again
 *   forget(id)          -> Promise<bool>           an ended job and its files; false when not ended
 *   queue()             -> Promise<{paused}|null>  null: no queue (every job starts at once)
 *   queueState()        -> {paused, seq} | null     the same, as last heard (no I/O); seq grows
 *   pause(), resume()   -> Promise                 the queue (NoQueueError without one)
 *   close()             -> Promise                ends what this source started
 *
 * MemorySource runs jobs with launch() in this process: they live as long as it does.
 * StoreSource (store_source.js) follows the scheduler's job store: its jobs outlive the server.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { EventEmitter } = require('node:events');
const { launch, resolvePython } = require('../src/index.js');

// How long "Dump stacks" waits for the worker's answer: a person clicked and reads "asking";
// a busy laptop's worker may take seconds (2 of 4 browser runs beside two CPU loops missed 3 s).
const DUMP_TIMEOUT_S = 10;
const model = require('./model.js');
const { launchOptions } = require('./spec.js');
const { privateDir } = require('../src/private_files.js');

/** @typedef {import('./model.js').View} View */
/** @typedef {import('../src/feed_job.js').Report} Report */
/** @typedef {import('../src/job.js').Job} Job */
/**
 * A job a source follows: its view, the job (a launched Job here, an AttachedJob in
 * StoreSource), its full log's file, and the pages' listeners (attach()).
 * @typedef {{view: View, job: Job | import('../src/store.js').AttachedJob, logPath: string | null,
 *   listeners: Set<() => void>}} Entry
 */
/** @typedef {(id: string | null) => void} Watcher watch()'s fn: a job's id, null for the queue */

/** What pause()/resume() throw where jobs are not queued (the in-memory source). */
class NoQueueError extends Error {}

/** @template {Entry} [E=Entry] what it keeps of each job: StoreSource's entries also have the row */
class MemorySource extends EventEmitter {
  /**
   * options: dataDir (job logs; default a new temp dir), python, env (the jobs' environment),
   * launchFn. Each job's supervisor samples its process tree (launch's sampleResources: the
   * 'resources' events, bridge/resources.py); nothing here reads /proc or nvidia-smi.
   * @param {{dataDir?: string, python?: string, env?: NodeJS.ProcessEnv,
   *   launchFn?: (options: import('../src/job.js').LaunchOptions) => Job}} [options]
   */
  constructor({ dataDir, python, env, launchFn = launch } = {}) {
    super();
    this.dataDir = dataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'trainbridge-dashboard-'));
    this._ownDir = !dataDir;
    privateDir(this.dataDir); // the jobs' logs: this user's only
    this._python = python;
    this._env = env;
    this._launch = launchFn;
    /** @type {Map<string, E>} */
    this._jobs = new Map(); // id -> {view, job, logPath, listeners:Set}
    /** @type {Set<Watcher>} */
    this._watchers = new Set();
    this._seq = 0;
  }

  list() {
    return [...this._jobs.values()].map((e) => model.summaryOf(e.view)).reverse();
  }

  /** @param {string} id */
  get(id) {
    const e = this._jobs.get(id);
    return e ? e.view : null;
  }

  /** @param {string} id */
  report(id) {
    const e = this._jobs.get(id);
    return e && e.job ? e.job.report : null;
  }

  /** @param {string} id */
  logPath(id) {
    const e = this._jobs.get(id);
    return e ? e.logPath : null;
  }

  /** @param {string} id @param {() => void} fn */
  attach(id, fn) {
    const e = this._jobs.get(id);
    if (!e) return null;
    e.listeners.add(fn);
    return () => e.listeners.delete(fn);
  }

  /** @param {Watcher} fn */
  watch(fn) {
    this._watchers.add(fn);
    return () => this._watchers.delete(fn);
  }

  /**
   * @param {any} spec the request body as parsed (arbitrary JSON): checked by launchOptions()
   * @returns {string | Promise<string>}
   */
  submit(spec) {
    const { title, options } = launchOptions(spec, { python: this._python || resolvePython(), env: this._env || process.env });
    this._seq += 1;
    const logPath = path.join(this.dataDir, `job-${this._seq}.log`);
    const job = this._launch({ ...options, logPath, sampleResources: true });
    const view = model.createView({ id: job.id, title, command: job.command, spec, t: Date.now() });
    const entry = /** @type {E} */ ({ view, job, logPath, listeners: new Set() });
    this._jobs.set(job.id, entry);
    // Each event carries the supervisor's time of it (seconds): the view's timeline is the job's.
    /** @type {(type: string) => (data: unknown, t: number | null) => void} */
    const fold = (type) => (data, t) => this._apply(entry, type, data, t);
    for (const type of model.FOLDED) job.on(type, fold(type));
    job.on('error', () => undefined); // Python errors are in the report; listening keeps them from throwing
    job.on('end', (report, t) => this._apply(entry, 'end', report, t));
    job.done.then(
      () => undefined,
      (err) => this._apply(entry, 'end', {
        outcome: 'failed', exit_code: null, signal: null, stages: [], duration_s: 0,
        summary: `The job did not start: ${err.message}. Check the program name and the working directory.`,
        diagnosis: { kind: 'launch_error', summary: `could not start ${job.command[0]}: ${err.message}`,
          hint: 'check that the program exists and is executable, and that the working directory exists', evidence: {} },
      }),
    );
    this._notify(entry);
    return job.id;
  }

  /** @param {string} id */
  async cancel(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    await e.job.cancel();
    return model.summaryOf(e.view);
  }

  /** Submit an ended job's spec again (the form's, kept in its view); resolves to the new id. @param {string} id */
  async rerun(id) {
    const e = this._jobs.get(id);
    if (!e || !e.view.spec) throw new Error(`no spec of job ${id} to run again`);
    return this.submit(e.view.spec);
  }

  /** Drop an ended job and its log; false when it is not ended (cancel it first). @param {string} id */
  async forget(id) {
    const e = this._jobs.get(id);
    if (!e || e.view.state !== 'ended') return false;
    this._jobs.delete(id);
    if (e.logPath && this._ownDir) fs.rmSync(e.logPath, { force: true });
    this._notify(e); // the list is sent again, without it
    return true;
  }

  /** null: jobs run at once here, there is no queue to pause. @returns {Promise<{paused: boolean} | null>} */
  async queue() { return null; }

  /** @returns {{paused: boolean, seq: number} | null} */
  queueState() { return null; }

  async pause() { throw new NoQueueError('jobs run at once with --memory: there is no queue to pause (the job store has one)'); }

  async resume() { return this.pause(); }

  /** @param {string} id */
  async dumpStacks(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    if (e.view.state === 'ended') return null;
    const stacks = await e.job.dumpStacks({ timeout: DUMP_TIMEOUT_S });
    this._apply(e, 'stacks', stacks);
    return stacks;
  }

  async close() {
    const live = [...this._jobs.values()].filter((e) => e.view.state !== 'ended');
    await Promise.all(live.map((e) => e.job.cancel({ grace: 1 }).catch(() => null)));
    if (this._ownDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  /**
   * Fold one event into the view; t: its time in seconds (the supervisor's), else now.
   * @param {E} entry
   * @param {string} type
   * @param {unknown} data
   * @param {number | null} [t]
   */
  _apply(entry, type, data, t) {
    const at = typeof t === 'number' ? Math.round(t * 1000) : Date.now();
    if (entry.view.pid === null && entry.job.pid) model.apply(entry.view, { type: 'spawn', data: { pid: entry.job.pid }, t: at });
    model.apply(entry.view, { type, data, t: at });
    this._notify(entry);
  }

  /** @param {E} entry */
  _notify(entry) {
    for (const fn of entry.listeners) fn();
    for (const fn of this._watchers) fn(entry.view.id);
  }
}

module.exports = { MemorySource, NoQueueError, DUMP_TIMEOUT_S };
