'use strict';
const os = require('node:os');
const { resolvePython, openStore } = require('../src/index.js');
const model = require('./model.js');
const { MemorySource, DUMP_TIMEOUT_S } = require('./source.js');
const { launchOptions, titleOf } = require('./spec.js');

/** @typedef {import('../src/store.js').StoredJob} StoredJob */
/** @typedef {import('../src/store.js').StoreWatch} StoreWatch */
/**
 * A followed job (source.js Entry): its job an AttachedJob, with the store's row as last heard.
 * @typedef {{view: import('./model.js').View, job: import('../src/store.js').AttachedJob, row: StoredJob,
 *   logPath: string | null, listeners: Set<() => void>}} StoreEntry
 */

/**
 * Jobs in the scheduler's job store (docs/STORE.md, src/store.js): they run under their
 * keepers, not in this process, so they outlive the dashboard; a restarted dashboard attaches
 * to them again (each job's events from the first one) and shows the running ones live and the
 * ended ones with their reports. Jobs submitted elsewhere (`trainbridge submit`) appear too.
 * The list follows the store's change feed (store.watch(), bridge/watch.py): a job submitted
 * anywhere appears, a row's change is folded in, a job forgotten (forget(), retention) leaves
 * the list, as each is committed; nothing here reads the rows on a timer.
 * options: storePath (default: the store's default path), python, slots (the store's, as
 * openStore's: {jobs, gpus}; default the store's own), limit (the newest jobs followed and
 * shown, 100). Each job's keeper samples its process tree: its 'resources' events.
 * @extends {MemorySource<StoreEntry>}
 */
class StoreSource extends MemorySource {
  /** @param {{storePath?: string, python?: string, slots?: {jobs?: number, gpus?: number[]}, limit?: number}} [options] */
  constructor({ storePath, python, slots, limit = 100 } = {}) {
    super({ dataDir: os.tmpdir(), python });
    this._ownDir = false;
    this._store = openStore(storePath, { ...(python ? { python } : {}), ...(slots ? { slots } : {}) });
    this.path = this._store.path;
    this._limit = limit;
    /** @type {string | null} */
    this._lastError = null;
    /** @type {StoredJob[] | null} */
    this._initial = []; // the rows before the watch is ready: only the newest `limit` are followed
    this._watch = this._store.watch();
    this._watch.on('job', (change) => this._change(change));
    /** @type {{paused: boolean, seq: number} | null} */
    this._queue = null; // the queue's state: from the change feed, or this server's own pause/resume
    this._watch.on('queue', ({ paused }) => this._queueIs(paused));
    this._watch.on('error', ({ message }) => {
      // Said once per new failure, where the server's user sees it; the pages keep what they have.
      if (message !== this._lastError) process.stderr.write(`[dashboard] cannot read the job store ${this.path}: ${message}\n`);
      this._lastError = message;
    });
    // ready: set by store.watch(); _initial: null only once this ran
    this._ready = /** @type {Promise<StoreWatch>} */ (this._watch.ready).then(() => {
      for (const row of /** @type {StoredJob[]} */ (this._initial).slice(-this._limit)) this._row(row);
      this._initial = null;
    });
  }

  /** Resolves once the store's rows are in the list (the change feed's first rows). */
  refresh() {
    return this._ready;
  }

  /** @param {{change: string, id: string, row?: any}} change */
  _change({ change, id, row }) {
    if (change === 'removed') {
      const entry = this._jobs.get(id);
      if (!entry) return;
      entry.job.close();
      this._jobs.delete(id);
      this._notify(entry); // the list is sent again, without it
    } else if (this._initial) {
      this._initial.push(row);
    } else {
      this._row(row);
    }
  }

  /** A row, new or changed: followed (the newest `limit` jobs), its pid and log noted. @param {StoredJob} row */
  _row(row) {
    let entry = this._jobs.get(row.id);
    if (!entry) {
      entry = this._follow(row);
      this._unfollowOldest();
    }
    entry.row = row;
    entry.logPath = row.log_path;
    if (row.job_pid && entry.view.pid !== row.job_pid && row.state !== 'ended') {
      this._apply(entry, 'spawn', { pid: row.job_pid });
    }
  }

  /** Beyond `limit` jobs, the oldest ended one leaves the list (the store keeps it). */
  _unfollowOldest() {
    if (this._jobs.size <= this._limit) return;
    for (const [id, entry] of this._jobs) { // in the order followed: oldest first
      if (entry.view.state !== 'ended') continue;
      entry.job.close();
      this._jobs.delete(id);
      this._notify(entry);
      return;
    }
  }

  /** @param {StoredJob} row @returns {StoreEntry} */
  _follow(row) {
    const view = model.createView({ id: row.id, title: titleOf(row.command), command: row.command,
      t: Math.round(row.submitted_at * 1000), state: row.state === 'queued' ? 'queued' : 'starting' });
    const job = this._store.attach(row.id);
    /** @type {StoreEntry} */
    const entry = { view, job, row, logPath: row.log_path, listeners: new Set() };
    this._jobs.set(row.id, entry);
    // Each attached event carries its time from the events file (seconds): a replay after a
    // restart keeps the job's own timeline, not the time it was read.
    /** @type {(type: string) => (data: unknown, t: number | null) => void} */
    const fold = (type) => (data, t) => this._apply(entry, type, data, t);
    // 'resources': the keeper's samples of the job's tree, from the job's start (a restarted
    // dashboard draws the whole history).
    for (const type of model.FOLDED) job.on(type, fold(type));
    job.on('error', () => undefined);
    job.on('end', (report, t) => this._apply(entry, 'end', report, t));
    job.done.then(() => undefined, (err) => this._apply(entry, 'end', {
      outcome: row.outcome || 'failed', summary: `The dashboard cannot follow this job: ${err.message}`, stages: [] }));
    this._notify(entry);
    return entry;
  }

  /**
   * @param {any} spec the request body as parsed (arbitrary JSON): checked by launchOptions()
   * @returns {Promise<string>}
   */
  async submit(spec) {
    const { options } = launchOptions(spec, { python: this._python || resolvePython(), env: this._env || process.env });
    const id = await this._store.submit(options);
    // In the list before the page asks for it (the change feed brings it too, a moment later).
    if (!this._jobs.has(id)) {
      const row = await this._store.get(id);
      await this._ready;
      if (row && !this._jobs.has(id)) this._row(row);
    }
    return id;
  }

  /** A new job with an ended one's spec (docs/STORE.md rerun), in the list when this resolves. @param {string} id */
  async rerun(id) {
    const newId = await this._store.rerun(id, { env: this._env || process.env });
    const row = await this._store.get(newId);
    if (row && !this._jobs.has(newId)) this._row(row);
    return newId;
  }

  /** Forget an ended job with its files (the change feed takes it off the list). @param {string} id */
  async forget(id) {
    const done = await this._store.forget(id);
    const entry = done && this._jobs.get(id);
    if (entry) this._change({ change: 'removed', id });
    return done;
  }

  async queue() { return { paused: await this._store.paused() }; }

  /**
   * The queue as last heard ({paused, seq}), or null before the change feed has said. `seq`
   * grows with each news of it, so that a page drops a state older than one it has drawn (the
   * list's stream and a click's answer travel on two connections).
   */
  queueState() { return this._queue; }

  /** @param {boolean} paused */
  _queueIs(paused) {
    this._queue = { paused, seq: (this._queue ? this._queue.seq : 0) + 1 };
    for (const fn of this._watchers) fn(null); // the list's stream sends the queue again
  }

  // Once the store said done, the queue is as asked: the change feed may not have looked yet,
  // and a list sent meanwhile must not draw the state before the click.
  async pause() { await this._store.pause(); this._queueIs(true); }

  async resume() { await this._store.resume(); this._queueIs(false); }

  /** @param {string} id */
  report(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    return e.job.report || (e.row && e.row.report) || null;
  }

  /** @param {string} id */
  async cancel(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    await this._store.cancel(id);
    await e.job.done.catch(() => null);
    return model.summaryOf(e.view);
  }

  /** @param {string} id */
  async dumpStacks(id) {
    const e = this._jobs.get(id);
    if (!e || e.view.state === 'ended') return null;
    const stacks = await e.job.dumpStacks({ timeout: DUMP_TIMEOUT_S });
    this._apply(e, 'stacks', stacks);
    return stacks;
  }

  /** Stop following (the jobs go on under their keepers) and stop the store's helper. */
  async close() {
    await this._watch.close();
    for (const e of this._jobs.values()) e.job.close();
    await this._store.close();
  }

  /**
   * Fold one event into the view; t: its time in seconds (the events file's), else now.
   * @param {StoreEntry} entry
   * @param {string} type
   * @param {unknown} data
   * @param {number | null} [t]
   */
  _apply(entry, type, data, t) {
    model.apply(entry.view, { type, data, t: typeof t === 'number' ? Math.round(t * 1000) : Date.now() });
    this._notify(entry);
  }
}

module.exports = { StoreSource };
