'use strict';
const os = require('node:os');
const { resolvePython, openStore } = require('../src/index.js');
const model = require('./model.js');
const { MemorySource } = require('./source.js');
const { launchOptions, titleOf } = require('./spec.js');

/**
 * Jobs in the scheduler's job store (docs/STORE.md, src/store.js): they run under their
 * keepers, not in this process, so they outlive the dashboard; a restarted dashboard attaches
 * to them again (each job's events from the first one) and shows the running ones live and the
 * ended ones with their reports. Jobs submitted elsewhere (`trainbridge submit`) appear too.
 * options: storePath (default: the store's default path), python, slots (the store's, as
 * openStore's: {jobs, gpus}; default the store's own), sampleMs, gpuProbe,
 * refreshMs (how often the store's rows are read, default 1000), limit (jobs shown, 100).
 */
class StoreSource extends MemorySource {
  constructor({ storePath, python, slots, sampleMs = 1000, gpuProbe, refreshMs = 1000, limit = 100 } = {}) {
    super({ dataDir: os.tmpdir(), sampleMs, gpuProbe, python });
    this._ownDir = false;
    this._store = openStore(storePath, { ...(python ? { python } : {}), ...(slots ? { slots } : {}) });
    this.path = this._store.path;
    this._limit = limit;
    this._refreshing = null;
    this._refreshAgain = null; // the read queued behind the one under way (refresh())
    this._lastError = null;
    this._refreshTimer = setInterval(() => this.refresh().then(() => { this._lastError = null; }, (err) => {
      // Said once per new failure, where the server's user sees it; the pages keep what they have.
      if (err.message !== this._lastError) process.stderr.write(`[dashboard] cannot read the job store ${this.path}: ${err.message}\n`);
      this._lastError = err.message;
    }), refreshMs);
    this._refreshTimer.unref();
  }

  /**
   * Read the store's rows; attach to the jobs not seen yet. Resolves when a read that began
   * after this call is done: one already under way may have read the rows before the caller's
   * change (submit() waits on this, and the page then asks for the job by its id).
   */
  refresh() {
    if (!this._refreshing) {
      this._refreshing = this._refresh().finally(() => { this._refreshing = null; });
      return this._refreshing;
    }
    if (!this._refreshAgain) {
      this._refreshAgain = this._refreshing.catch(() => undefined).then(() => {
        this._refreshAgain = null;
        return this.refresh();
      });
    }
    return this._refreshAgain;
  }

  async _refresh() {
    const rows = await this._store.jobs({ limit: this._limit });
    for (const row of [...rows].reverse()) { // oldest first: the list shows newest first
      let entry = this._jobs.get(row.id);
      if (!entry) entry = this._follow(row);
      entry.row = row;
      entry.logPath = row.log_path;
      if (row.job_pid && entry.view.pid !== row.job_pid && row.state !== 'ended') {
        this._apply(entry, 'spawn', { pid: row.job_pid });
      }
    }
  }

  _follow(row) {
    const view = model.createView({ id: row.id, title: titleOf(row.command), command: row.command,
      t: Math.round(row.submitted_at * 1000), state: row.state === 'queued' ? 'queued' : 'starting' });
    const job = this._store.attach(row.id);
    const entry = { view, job, row, logPath: row.log_path, listeners: new Set() };
    this._jobs.set(row.id, entry);
    // Each attached event carries its time from the events file (seconds): a replay after a
    // restart keeps the job's own timeline, not the time it was read.
    const fold = (type) => (data, t) => this._apply(entry, type, data, t);
    // 'resources': the keeper's samples of the job's tree, from the job's start (a restarted
    // dashboard draws the whole history; this source samples no store job itself).
    for (const type of ['state', 'hello', 'stage', 'progress', 'status', 'log', 'stalled', 'hang', 'signal', 'resources']) job.on(type, fold(type));
    job.on('error', () => undefined);
    job.on('end', (report, t) => this._apply(entry, 'end', report, t));
    job.done.then(() => undefined, (err) => this._apply(entry, 'end', {
      outcome: row.outcome || 'failed', summary: `The dashboard cannot follow this job: ${err.message}`, stages: [] }));
    this._notify(entry);
    return entry;
  }

  async submit(spec) {
    const { options } = launchOptions(spec, { python: this._python || resolvePython(), env: this._env || process.env });
    const id = await this._store.submit(options);
    await this.refresh();
    return id;
  }

  report(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    return e.job.report || (e.row && e.row.report) || null;
  }

  async cancel(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    await this._store.cancel(id);
    await e.job.done.catch(() => null);
    return model.summaryOf(e.view);
  }

  async dumpStacks(id) {
    const e = this._jobs.get(id);
    if (!e || e.view.state === 'ended') return null;
    const stacks = await e.job.dumpStacks({ timeout: 3 });
    this._apply(e, 'stacks', stacks);
    return stacks;
  }

  /** Stop following (the jobs go on under their keepers) and stop the store's helper. */
  async close() {
    clearInterval(this._timer);
    clearInterval(this._refreshTimer);
    for (const e of this._jobs.values()) e.job.close();
    await this._store.close();
  }

  /** Fold one event into the view; t: its time in seconds (the events file's), else now. */
  _apply(entry, type, data, t) {
    model.apply(entry.view, { type, data, t: typeof t === 'number' ? Math.round(t * 1000) : Date.now() });
    this._notify(entry);
  }

  _pidOf() {
    return null; // a store job's keeper samples it: its 'resources' events (bridge/resources.py)
  }
}

module.exports = { StoreSource };
