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
 *   submit(spec)        -> id                     throws SpecError for a bad spec
 *   cancel(id)          -> Promise<summary>
 *   dumpStacks(id)      -> Promise<string|null>   (also recorded in the view)
 *   close()             -> Promise                ends what this source started
 *
 * MemorySource runs jobs with launch() in this process: they live as long as it does.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { EventEmitter } = require('node:events');
const { launch, resolvePython } = require('../src/index.js');
const model = require('./model.js');
const { createSampler } = require('./resources.js');

const REPO = path.resolve(__dirname, '..', '..');
const DEMO_SCRIPT = path.join(REPO, 'examples', 'demo_train.py');
const DEMO_STAGES = ['config', 'data', 'model', 'optimizer', 'train', 'save'];
const TIMEOUT_KEYS = ['startupTimeout', 'heartbeatTimeout', 'stallTimeout', 'stalledAfter', 'killGrace', 'cancelGrace'];

class SpecError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SpecError';
  }
}

function positive(value, name, { allowNull = true } = {}) {
  if (value === undefined || value === null || value === '') {
    if (allowNull) return null;
    throw new SpecError(`${name} is required`);
  }
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new SpecError(`${name} must be a positive number of seconds, not ${JSON.stringify(value)}`);
  return n;
}

/**
 * A submitted spec -> launch options (pure). Specs:
 *   {kind: 'demo', steps?, failAt?, hangAt?, crashAt?, stallTimeout?, budget?}
 *   {kind: 'command', argv: [program, ...args], cwd?, timeouts?: {startupTimeout, heartbeatTimeout, stallTimeout, ...}}
 */
function launchOptions(spec, { python = resolvePython(), env = process.env } = {}) {
  if (!spec || typeof spec !== 'object') throw new SpecError('the request body must be a JSON object');
  if (spec.kind === 'demo') {
    const args = [DEMO_SCRIPT];
    const title = ['demo'];
    if (spec.steps !== undefined && spec.steps !== null && spec.steps !== '') {
      const steps = Number(spec.steps);
      if (!Number.isInteger(steps) || steps < 1) throw new SpecError(`steps must be a whole number above 0, not ${JSON.stringify(spec.steps)}`);
      args.push('--steps', String(steps));
    }
    for (const [key, flag] of [['failAt', '--fail-at'], ['hangAt', '--hang-at'], ['crashAt', '--crash-at']]) {
      const stage = spec[key];
      if (stage === undefined || stage === null || stage === '') continue;
      if (!DEMO_STAGES.includes(stage)) throw new SpecError(`${flag} takes one of ${DEMO_STAGES.join(', ')}, not ${JSON.stringify(stage)}`);
      args.push(flag, stage);
      title.push(`${flag} ${stage}`);
    }
    const budget = positive(spec.budget, 'budget');
    if (budget !== null) args.push('--budget', String(budget));
    const stallTimeout = positive(spec.stallTimeout, 'stallTimeout');
    return { title: title.join(' '), options: { command: python, args, cwd: REPO, env,
      timeouts: { startupTimeout: 120, stallTimeout, killGrace: 3 } } };
  }
  if (spec.kind === 'command') {
    const argv = spec.argv;
    if (!Array.isArray(argv) || !argv.length || argv.some((a) => typeof a !== 'string') || !argv[0].trim()) {
      throw new SpecError('a command job needs argv: the program and its arguments, as strings');
    }
    const timeouts = {};
    for (const [key, value] of Object.entries(spec.timeouts || {})) {
      if (!TIMEOUT_KEYS.includes(key)) throw new SpecError(`unknown timeout ${JSON.stringify(key)}; known: ${TIMEOUT_KEYS.join(', ')}`);
      const v = positive(value, key);
      if (v !== null) timeouts[key] = v;
    }
    let cwd = REPO;
    if (spec.cwd) {
      cwd = path.resolve(REPO, String(spec.cwd));
      if (!fs.existsSync(cwd)) throw new SpecError(`the working directory ${cwd} does not exist`);
    }
    const line = argv.map((a) => (/[\s'"()$`\\;&|<>*?]/.test(a) ? JSON.stringify(a) : a)).join(' ');
    const title = line.length > 100 ? `${line.slice(0, 99)}…` : line;
    return { title, options: { command: argv[0], args: argv.slice(1), cwd, env, timeouts } };
  }
  throw new SpecError(`kind must be "demo" or "command", not ${JSON.stringify(spec.kind)}`);
}

class MemorySource extends EventEmitter {
  /**
   * options: dataDir (job logs; default a new temp dir), python, env (the jobs' environment),
   * sampleMs (resource sampling period, default 1000), gpuProbe (resources.js), launchFn.
   */
  constructor({ dataDir, python, env, sampleMs = 1000, gpuProbe, launchFn = launch } = {}) {
    super();
    this.dataDir = dataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'trainbridge-dashboard-'));
    this._ownDir = !dataDir;
    fs.mkdirSync(this.dataDir, { recursive: true });
    this._python = python;
    this._env = env;
    this._launch = launchFn;
    this._jobs = new Map(); // id -> {view, job, logPath, listeners:Set}
    this._watchers = new Set();
    this._seq = 0;
    this._sample = createSampler(gpuProbe ? { gpuProbe } : {});
    this._sampling = false;
    this._timer = setInterval(() => this._sampleRound(), sampleMs);
    this._timer.unref();
  }

  list() {
    return [...this._jobs.values()].map((e) => model.summaryOf(e.view)).reverse();
  }

  get(id) {
    const e = this._jobs.get(id);
    return e ? e.view : null;
  }

  report(id) {
    const e = this._jobs.get(id);
    return e && e.job ? e.job.report : null;
  }

  logPath(id) {
    const e = this._jobs.get(id);
    return e ? e.logPath : null;
  }

  attach(id, fn) {
    const e = this._jobs.get(id);
    if (!e) return null;
    e.listeners.add(fn);
    return () => e.listeners.delete(fn);
  }

  watch(fn) {
    this._watchers.add(fn);
    return () => this._watchers.delete(fn);
  }

  submit(spec) {
    const { title, options } = launchOptions(spec, { python: this._python || resolvePython(), env: this._env || process.env });
    this._seq += 1;
    const logPath = path.join(this.dataDir, `job-${this._seq}.log`);
    const job = this._launch({ ...options, logPath });
    const view = model.createView({ id: job.id, title, command: job.command, spec, t: Date.now() });
    const entry = { view, job, logPath, listeners: new Set() };
    this._jobs.set(job.id, entry);
    const fold = (type) => (data) => this._apply(entry, type, data);
    for (const type of ['state', 'hello', 'stage', 'progress', 'log', 'stalled', 'hang', 'signal']) job.on(type, fold(type));
    job.on('error', () => undefined); // Python errors are in the report; listening keeps them from throwing
    job.done.then(
      (report) => this._apply(entry, 'end', report),
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

  async cancel(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    await e.job.cancel();
    return model.summaryOf(e.view);
  }

  async dumpStacks(id) {
    const e = this._jobs.get(id);
    if (!e) return null;
    if (e.view.state === 'ended') return null;
    const stacks = await e.job.dumpStacks({ timeout: 3 });
    this._apply(e, 'stacks', stacks);
    return stacks;
  }

  async close() {
    clearInterval(this._timer);
    const live = [...this._jobs.values()].filter((e) => e.view.state !== 'ended');
    await Promise.all(live.map((e) => e.job.cancel({ grace: 1 }).catch(() => null)));
    if (this._ownDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  _apply(entry, type, data) {
    if (entry.view.pid === null && entry.job.pid) model.apply(entry.view, { type: 'spawn', data: { pid: entry.job.pid }, t: Date.now() });
    model.apply(entry.view, { type, data, t: Date.now() });
    this._notify(entry);
  }

  _notify(entry) {
    for (const fn of entry.listeners) fn();
    for (const fn of this._watchers) fn(entry.view.id);
  }

  /** The pid whose process tree is the job (sampled for CPU, memory, GPU). */
  _pidOf(entry) {
    return entry.job.pid || null;
  }

  async _sampleRound() {
    if (this._sampling) return;
    const live = [...this._jobs.values()].filter((e) => e.view.state !== 'ended' && this._pidOf(e));
    if (!live.length) return;
    this._sampling = true;
    try {
      const samples = await this._sample(live.map((e) => this._pidOf(e)));
      for (const e of live) {
        const s = samples.get(this._pidOf(e));
        if (s && s.processes && e.view.state !== 'ended') this._apply(e, 'resources', s);
      }
    } finally {
      this._sampling = false;
    }
  }
}

module.exports = { MemorySource, SpecError, launchOptions, DEMO_STAGES, DEMO_SCRIPT };

/** A short, readable title for a stored command (the demo's options; else the command line). */
function titleOf(command) {
  const argv = (command || []).map(String);
  const i = argv.findIndex((a) => a.endsWith(path.join('examples', 'demo_train.py')));
  if (i >= 0) {
    const opts = [];
    for (let k = i + 1; k < argv.length; k++) if (/^--(fail|hang|crash)-at$/.test(argv[k])) opts.push(`${argv[k]} ${argv[k + 1]}`);
    return ['demo', ...opts].join(' ');
  }
  const line = argv.map((a) => (/[\s'"()$`\\;&|<>*?]/.test(a) ? JSON.stringify(a) : a)).join(' ');
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}

/**
 * Jobs in the scheduler's job store (docs/STORE.md, src/store.js): they run under their
 * keepers, not in this process, so they outlive the dashboard; a restarted dashboard attaches
 * to them again (each job's events from the first one) and shows the running ones live and the
 * ended ones with their reports. Jobs submitted elsewhere (`trainbridge submit`) appear too.
 * options: storePath (default: the store's default path), python, sampleMs, gpuProbe,
 * refreshMs (how often the store's rows are read, default 1000), limit (jobs shown, 100).
 */
class StoreSource extends MemorySource {
  constructor({ storePath, python, sampleMs = 1000, gpuProbe, refreshMs = 1000, limit = 100 } = {}) {
    super({ dataDir: os.tmpdir(), sampleMs, gpuProbe, python });
    const { openStore } = require('../src/store.js');
    this._ownDir = false;
    this._store = openStore(storePath, python ? { python } : {});
    this.path = this._store.path;
    this._limit = limit;
    this._refreshing = null;
    this._refreshTimer = setInterval(() => this.refresh().catch(() => undefined), refreshMs);
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

module.exports.StoreSource = StoreSource;
module.exports.titleOf = titleOf;
