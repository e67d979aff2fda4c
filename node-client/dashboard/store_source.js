'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { resolvePython } = require('../src/index.js');
const model = require('./model.js');
const { MemorySource } = require('./source.js');
const { launchOptions, titleOf } = require('./spec.js');

/**
 * Jobs in the scheduler's job store (docs/STORE.md, src/store.js): they run under their
 * keepers, not in this process, so they outlive the dashboard; a restarted dashboard attaches
 * to them again (each job's events from the first one) and shows the running ones live and the
 * ended ones with their reports. Jobs submitted elsewhere (`trainbridge submit`) appear too.
 * options: storePath (default: the store's default path), python, sampleMs, gpuProbe,
 * refreshMs (how often the store's rows are read, default 1000), limit (jobs shown, 100).
 */
const STORE_MODULE = path.join(__dirname, '..', 'src', 'store.js');

/** Whether this build has the scheduler's job store (src/store.js, issue 17). */
function storeAvailable() {
  return fs.existsSync(STORE_MODULE);
}

class StoreSource extends MemorySource {
  constructor({ storePath, python, sampleMs = 1000, gpuProbe, refreshMs = 1000, limit = 100 } = {}) {
    if (!storeAvailable()) {
      throw new Error(`this build has no job store (${STORE_MODULE}, the scheduler's): run with --memory`);
    }
    const { openStore } = require(STORE_MODULE);
    super({ dataDir: os.tmpdir(), sampleMs, gpuProbe, python });
    this._ownDir = false;
    this._store = openStore(storePath, python ? { python } : {});
    this.path = this._store.path;
    this._limit = limit;
    this._refreshing = null;
    this._lastError = null;
    this._refreshTimer = setInterval(() => this.refresh().then(() => { this._lastError = null; }, (err) => {
      // Said once per new failure, where the server's user sees it; the pages keep what they have.
      if (err.message !== this._lastError) process.stderr.write(`[dashboard] cannot read the job store ${this.path}: ${err.message}\n`);
      this._lastError = err.message;
    }), refreshMs);
    this._refreshTimer.unref();
  }

  /** Read the store's rows; attach to the jobs not seen yet. Resolves when done. */
  refresh() {
    if (!this._refreshing) {
      this._refreshing = this._refresh().finally(() => { this._refreshing = null; });
    }
    return this._refreshing;
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
    const entry = { view, job, row, logPath: row.log_path, listeners: new Set(), eventT: null };
    this._jobs.set(row.id, entry);
    // The events file has each event's time: a replay after a restart keeps the timeline.
    // (AttachedJob keeps it to itself; its _deliver sees the line first.)
    if (typeof job._deliver === 'function') {
      const deliver = job._deliver.bind(job);
      job._deliver = (event) => {
        entry.eventT = typeof event.t === 'number' ? Math.round(event.t * 1000) : null;
        try { deliver(event); } finally { entry.eventT = null; }
      };
    }
    const fold = (type) => (data) => this._apply(entry, type, data);
    for (const type of ['state', 'hello', 'stage', 'progress', 'log', 'stalled', 'hang', 'signal']) job.on(type, fold(type));
    job.on('error', () => undefined);
    job.done.then((report) => this._apply(entry, 'end', report), (err) => this._apply(entry, 'end', {
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
    const stacks = await e.job.dumpStacks({ timeout: 3000 });
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

  _apply(entry, type, data) {
    model.apply(entry.view, { type, data, t: entry.eventT ?? Date.now() });
    this._notify(entry);
  }

  _pidOf(entry) {
    return entry.view.pid; // the store's row has it (job_pid), not an attached job
  }
}

module.exports = { StoreSource, storeAvailable };
