'use strict';
/**
 * The job store from Node: list, submit, cancel and attach to scheduled jobs (docs/STORE.md).
 *
 *   const { openStore } = require('trainbridge');
 *   const store = openStore('/home/me/.local/share/trainbridge/jobs.db');
 *   const id = await store.submit({ command: 'python', args: ['train.py'], resources: { gpus: 1 } });
 *   const job = store.attach(id);            // the events of a launched Job, from the first one
 *   job.on('progress', (p) => ...);
 *   const report = await job.done;
 *   await store.close();
 *
 * The mirror of bridge/scheduler.py + bridge/attach.py. Rows and commands go through one
 * helper process, `python -m trainbridge.bridge.storeserve` (a Python Scheduler spoken to in
 * JSON lines), so the package needs no native SQLite module and there is one implementation
 * of the queue, the slots and reconciliation. Attaching needs no helper: it tails the job's
 * events file (one ASCII JSON line per event, written by the job's keeper).
 */

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { EventEmitter } = require('node:events');
const { resolvePython, helperEnv, helperFailure, readLines } = require('./launcher.js');
const { StoreError } = require('./errors.js');
const feed = require('./feed.js');
const jsonform = require('./jsonform.js');
const { FeedJob } = require('./feed_job.js');
const { metricNames } = require('./job_arguments.js');

const POLL_MS = 50; // how often an attached job's events file is read
// attach(id, {since}): 'start' (every event), 'now' (the job's state and its keeper's last
// status, read from the end of the feed), or an event number N (the events numbered N and after,
// found by bisection): src/feed.js, bridge/attach.py.
const SINCE = ['start', 'now'];
/** @typedef {import('./feed_job.js').FeedLine} FeedLine */
/**
 * A row of the jobs table as the helper sent it (docs/STORE.md, index.d.ts StoredJob): parsed
 * JSON, each field checked or passed on where it is read.
 * @typedef {Record<string, any>} StoredJob
 */
/**
 * openStore()'s options (index.d.ts openStore): keepEnded is checked by the constructor.
 * @typedef {{python?: string, slots?: {jobs?: number, gpus?: number[]}, keepEnded?: number | null}} StoreOptions
 */
/**
 * submit()'s options (index.d.ts SubmitOptions): the command is checked here, stopOnNan by
 * metricNames(), the rest by the helper (Python's Scheduler.submit).
 * @typedef {object} SubmitOptions
 * @property {string} [command]
 * @property {unknown[]} [args]
 * @property {string} [cwd]
 * @property {NodeJS.ProcessEnv} [env]
 * @property {Record<string, unknown>} [timeouts]
 * @property {{gpus?: number}} [resources]
 * @property {number} [priority]
 * @property {number} [maxRestarts]
 * @property {number} [restartBackoff]
 * @property {boolean} [zeroCode]
 * @property {string} [name]
 * @property {string[]} [tags]
 * @property {Record<string, unknown>} [meta]
 * @property {string} [logPath]
 * @property {unknown} [stopOnNan]
 * @property {Record<string, unknown>} [slurm]
 */
/** @typedef {{resolve: (result: any) => void, reject: (err: Error) => void}} Waiter a call's promise */
/** The default store: $TRAINBRIDGE_STORE, else the per-user data dir (bridge/store.py's rule). */
/**
 * {ntasksPerNode: 1} -> {ntasks_per_node: 1}: the helper's (Python's) names.
 * @param {Record<string, unknown>} options
 * @returns {Record<string, unknown>}
 */
function snakeKeys(options) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [name, value] of Object.entries(options)) out[name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
  return out;
}

function defaultStorePath() {
  if (process.env.TRAINBRIDGE_STORE) return process.env.TRAINBRIDGE_STORE;
  const home = require('node:os').homedir();
  let base;
  if (process.platform === 'win32') base = process.env.LOCALAPPDATA || home;
  else if (process.platform === 'darwin') base = path.join(home, 'Library', 'Application Support');
  else base = process.env.XDG_DATA_HOME || path.join(home, '.local', 'share');
  return path.join(base, 'trainbridge', 'jobs.db');
}

class Store {
  /**
   * Use openStore(). options: python (default resolvePython()), slots ({jobs, gpus}).
   * @param {string} [storePath]
   * @param {StoreOptions} [options]
   */
  constructor(storePath, options = {}) {
    this.path = path.resolve(storePath || defaultStorePath());
    const env = helperEnv();
    const args = ['-m', 'trainbridge.bridge.storeserve', this.path];
    if (options.keepEnded !== undefined && options.keepEnded !== null
      && !(Number.isInteger(options.keepEnded) && options.keepEnded >= 0)) {
      throw new TypeError(`openStore: keepEnded must be a whole number >= 0, or null to keep every ended job; got ${JSON.stringify(options.keepEnded)}`);
    }
    args.push(options.slots ? JSON.stringify(options.slots) : '');
    // Retention, as Python's Scheduler(keep_ended=): the newest N ended jobs are kept, older
    // ones forgotten with their files (default 1000; null keeps all).
    if (options.keepEnded !== undefined) args.push(JSON.stringify({ keep_ended: options.keepEnded }));
    this._helper = spawn(options.python || resolvePython(), args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    /** @type {Map<number, Waiter>} */
    this._pending = new Map();
    this._nextId = 1;
    this._stderr = '';
    this._closed = false;
    /** @type {Set<AttachedJob>} */
    this._attached = new Set(); // followed until close(): an attacher left polling kept a GUI alive
    /** @type {Map<number, StoreWatch>} */
    this._watches = new Map(); // number -> StoreWatch (watch())
    this._nextWatch = 1;
    /** @type {Map<number, AttachedJob>} */
    this._judged = new Map(); // number -> AttachedJob (attach(): the helper's op 'judge')
    this._nextJudge = 1;
    readLines(this._helper.stdout, 'utf8', (line) => this._onLine(line));
    this._helper.stderr.setEncoding('utf8');
    this._helper.stderr.on('data', (text) => { this._stderr = (this._stderr + text).slice(-4000); });
    /** @type {Promise<void>} */
    this._exited = new Promise((resolve) => {
      this._helper.on('close', (code, signal) => {
        const why = `the store helper (python -m trainbridge.bridge.storeserve) exited (${signal || code})`
          + (this._stderr ? `: ${helperFailure(this._stderr)}` : '');
        for (const { reject } of this._pending.values()) reject(new Error(why));
        this._pending.clear();
        this._closed = true;
        if (!this._closing) this._failure = why; // a later call says why, not only "closed"
        // An attached job's judge is gone with it: said, not left waiting for an end.
        if (!this._closing) for (const job of this._judged.values()) job._fail(new Error(why));
        this._judged.clear();
        resolve();
      });
    });
    this._helper.on('error', (err) => {
      for (const { reject } of this._pending.values()) reject(new Error(`cannot start the store helper: ${err.message}. Set options.python or TRAINBRIDGE_PYTHON to a Python with pyzmq and msgpack installed.`));
      this._pending.clear();
    });
  }

  /** @param {string} line */
  _onLine(line) {
    let answer;
    try {
      answer = jsonform.parse(line);
    } catch (err) { // a bug in the helper: kept for the next failure's message, not dropped unseen
      this._stderr = `${this._stderr}a line of the store helper is not JSON (${/** @type {Error} */ (err).message}): ${line.slice(0, 200)}\n`.slice(-4000);
      return;
    }
    if (answer.watch !== undefined && answer.change) { // a watch's change, not an answer
      const watch = this._watches.get(answer.watch);
      if (watch) watch._deliver(answer.change);
      return;
    }
    if (answer.judge !== undefined && answer.event) { // an attached job's judgement, not an answer
      const job = this._judged.get(answer.judge);
      if (job) job._judged(answer.event);
      return;
    }
    const waiter = this._pending.get(answer.id);
    if (!waiter) return;
    this._pending.delete(answer.id);
    if (answer.ok) waiter.resolve(answer.result);
    else if (answer.kind) waiter.reject(new StoreError(answer.error.replace(/^\w+: /, ''), answer.kind));
    else waiter.reject(new Error(answer.error));
  }

  /**
   * @param {string} op
   * @param {Record<string, unknown>} [args]
   * @returns {Promise<any>} the helper's result: parsed JSON
   */
  _call(op, args = {}) {
    if (this._closed) return Promise.reject(new Error(this._failure || 'the store is closed'));
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject });
      this._helper.stdin.write(`${JSON.stringify({ id, op, args })}\n`);
    });
  }

  /** Rows, newest first. state: a state, a list of states, or 'active'; limit: how many. */
  /** @param {{state?: string | string[], limit?: number, tag?: string}} [options] */
  jobs({ state, limit, tag } = {}) { return this._call('jobs', { state, limit, tag }); }

  /**
   * One row (with its attempts), or null.
   * @param {string} id
   * @returns {Promise<StoredJob | null>}
   */
  get(id) { return this._call('get', { id }); }

  /**
   * Queue a job; resolves to its id. options: command, args, cwd, env (the whole environment;
   * default this process's), timeouts (snake_case or camelCase), resources ({gpus}),
   * priority, maxRestarts, restartBackoff (seconds), zeroCode (as launch()'s; default true),
   * name, tags (strings), meta (a JSON object) kept in the row for the GUI (jobs({tag})), and
   * logPath (the output log there instead of in the job's folder); stopOnNan as launch()'s
   * (metric names whose first NaN or infinity cancels the job); slurm sends it to Slurm
   * (docs/SCALE.md: {listen, nodes, ntasksPerNode, cpusPerTask, gres, time, partition, account,
   * qos, sbatch}).
   * @param {SubmitOptions} options
   */
  submit(options) {
    if (!options || !options.command) throw new TypeError('submit() needs a command, e.g. {command: "python", args: ["train.py"]}');
    metricNames(options.stopOnNan); // a LaunchError that names stopOnNan, before the helper's
    const timeouts = snakeKeys(options.timeouts || {});
    return this._call('submit', {
      cmd: [options.command, ...(options.args || [])].map(String),
      cwd: options.cwd ? path.resolve(options.cwd) : process.cwd(),
      env: options.env || { ...process.env },
      timeouts,
      // The rest as given (undefined and null: not given); the defaults are Python's
      // (bridge/scheduler.py SubmitOptions), in one place.
      resources: options.resources,
      priority: options.priority,
      max_restarts: options.maxRestarts,
      restart_backoff: options.restartBackoff,
      zero_code: options.zeroCode,
      name: options.name,
      tags: options.tags,
      meta: options.meta,
      log_path: options.logPath ? path.resolve(options.logPath) : undefined,
      stop_on_nan: options.stopOnNan,
      slurm: options.slurm ? snakeKeys(options.slurm) : undefined,
    });
  }

  /** Start no queued job (in any process on this store) until resume(); running jobs go on. */
  pause() { return this._call('pause'); }

  /** Start queued jobs again. */
  resume() { return this._call('resume'); }

  /** Whether the queue is paused (by any process on this store). */
  paused() { return this._call('paused'); }

  /** What retention forgot so far ({count, keep_ended, at, last: ids}; {} when nothing). */
  forgotten() { return this._call('forgotten'); }

  /** The store's retention (openStore's keepEnded sets it for every process); null: keep all. */
  keepEnded() { return this._call('keep_ended'); }

  /**
   * Queue a new job with an ended one's spec (command, cwd, timeouts, resources, priority,
   * restarts, zeroCode, name, tags, meta, log path); resolves to the new id. Its environment is
   * options.env, else this process's (the old job's values were never kept).
   */
  /** @param {string} id @param {{env?: NodeJS.ProcessEnv}} [options] */
  rerun(id, { env } = {}) { return this._call('rerun', { id, env: env || { ...process.env } }); }

  /**
   * Cancel a queued or running job; resolves to false when it is unknown or already ended.
   * @param {string} id
   * @param {{reason?: string | null, grace?: number | null}} [options]
   */
  cancel(id, { reason = null, grace = null } = {}) { return this._call('cancel', { id, reason, grace }); }

  /**
   * The job list's change feed (bridge/watch.py, through the helper; no polling by the caller):
   * a StoreWatch emitting 'job' ({event: 'job', change: 'added' | 'changed' | 'removed', id,
   * row, t, initial, why}): every row 'added' first (initial: true), oldest first, then each
   * change anyone commits. 'error' ({event: 'error', message, kind}) when the store fails
   * while watched (emitted only to a listener). `ready` resolves once the first rows are out
   * (rejects with a StoreError); close() stops it. Python: Scheduler.watch().
   */
  watch() {
    const number = this._nextWatch++;
    const watch = new StoreWatch(this, number);
    this._watches.set(number, watch);
    watch.ready = this._call('watch', { watch: number }).then(() => watch, (err) => {
      this._watches.delete(number);
      throw err;
    });
    watch.ready.catch(() => undefined);
    return watch;
  }

  /** Delete an ended job's row and files; false when it is not ended. @param {string} id */
  forget(id) { return this._call('forget', { id }); }

  /**
   * A handle on the job with a launched Job's events, `done`, cancel() and dumpStacks(): from
   * the first event; with {since: 'now'} the job's state and its keeper's last status, then what
   * comes next; with {since: N} the events numbered N and after (a face that saw up to
   * job.position rejoins with position + 1). bridge/attach.py.
   */
  /** @param {string} id @param {{since?: any}} [options] 'start', 'now' or an event number: checked here */
  attach(id, { since = 'start' } = {}) {
    if (!SINCE.includes(since) && !(Number.isInteger(since) && since >= 1)) {
      throw new TypeError(`attach: since must be 'start', 'now' or an event number from 1, not ${JSON.stringify(since)}`);
    }
    const job = new AttachedJob(this, id, since);
    this._attached.add(job);
    return job;
  }

  /** Stop the helper and every attached job's following (the jobs go on), so the process can exit. */
  async close() {
    this._closing = true;
    for (const job of this._attached) job.close();
    this._attached.clear();
    this._watches.clear();
    this._judged.clear();
    if (!this._closed) this._helper.stdin.end();
    await this._exited;
  }
}

/** Store.watch()'s handle: the changes of the store's job list, as events. */
class StoreWatch extends EventEmitter {
  /** @param {Store} store @param {number} number */
  constructor(store, number) {
    super();
    this._store = store;
    this._number = number;
    /** @type {Promise<StoreWatch> | null} */
    this.ready = null;
  }

  /** @param {{event: string, [field: string]: unknown}} change a change as the helper sent it */
  _deliver(change) {
    if (change.event === 'error' && this.listenerCount('error') === 0) return;
    this.emit(change.event, change);
  }

  /** Stop watching (resolves when the helper has stopped it). */
  async close() {
    if (!this._store._watches.delete(this._number)) return;
    await this._store._call('unwatch', { watch: this._number }).catch(() => false);
  }
}

/**
 * A scheduled job, followed through its events file: a FeedJob (src/feed_job.js), so it emits
 * what a launched Job emits, with the feed's time `t` as each listener's second argument (the
 * row's ended_at for an end read from the row without its line, as bridge/attach.py row_end); plus 'attempt' ({attempt, outcome, report,
 * restart_in}) when a failed attempt will be restarted, 'supervisor' when its keeper stops or
 * starts answering, and 'unreadable' for a line that is not an event.
 */
class AttachedJob extends FeedJob {
  /**
   * @param {Store} store
   * @param {string} id
   * @param {'start' | 'now' | number} [since] checked by attach()
   */
  constructor(store, id, since = 'start') {
    super(id);
    this._since = since;
    this.state = 'unknown';
    this._store = store;
    this._offset = 0;
    this._buf = '';
    this._stopped = false;
    /** @type {boolean | null} */
    this.answering = null; // false while the keeper is not answering ('supervisor' event)
    /** @type {number | null} */
    this._judge = null; // its number with the store helper's judge (op 'judge'), once asked
    // Lines of the feed that are not an event (a keeper killed mid-line): counted and said
    // (an 'unreadable' event), never skipped silently (bridge/attach.py).
    this.unreadable = 0;
    this._start();
  }

  async _start() {
    try {
      this.row = await this._store.get(this.id);
    } catch (err) {
      if (!this._stopped) this._fail(err);
      return;
    }
    if (this._stopped) return; // closed while the row was asked for: follow nothing
    if (!this.row) { this._fail(new Error(`no job ${JSON.stringify(this.id)} in ${this._store.path}`)); return; }
    this.state = this.row.state;
    this.pid = this.row.job_pid;
    if (typeof this._since === 'number') {
      try {
        this._offset = feed.offsetOf(this.row.events_path, this._since);
      } catch (err) {
        this._fail(err); // a feed an older release wrote carries no numbers
        return;
      }
    } else if (this._since === 'now') {
      const { offset, status } = feed.lastStatus(this.row.events_path);
      this._offset = offset;
      this._deliver({ event: 'state', state: this.row.state, t: Date.now() / 1000 });
      if (status) this._deliver(status);
    }
    this._timer = setInterval(() => this._poll(), POLL_MS);
    this._poll();
    if (this._stopped) return; // its end line was read at once
    // What is judged beyond the lines (the keeper not answering, the end from the row when the
    // line never comes) is the helper's: bridge/feed_judge.py, the rule of Python's attach().
    const judge = this._store._nextJudge++;
    this._judge = judge;
    this._store._judged.set(judge, this);
    this._store._call('judge', { id: this.id, judge }).catch((err) => {
      if (!this._stopped && this._store._judged.delete(judge)) this._fail(err);
    });
  }

  /**
   * The helper judge's word on this job (bridge/storeserve.py FeedWatch): the keeper stopped
   * answering or answers again; or the end made from the row, its feed's end line not coming.
   * @param {FeedLine} event
   */
  _judged(event) {
    if (this._stopped) return;
    const t = typeof event.t === 'number' ? event.t : null;
    if (event.event === 'supervisor') {
      this.answering = event.answering;
      this._emit('supervisor', { answering: event.answering, silent_s: event.silent_s, keeper_pid: event.keeper_pid ?? null }, t);
    } else if (event.event === 'end') { // the last word for it: close() lets the helper forget it
      this._poll(); // what the file holds is read first (its end line, had it just come)
      if (!this._stopped) this._end(event.report || { outcome: event.outcome ?? null }, t);
    }
  }

  /** @param {unknown} err */
  _fail(err) {
    this.close();
    this._emitError(err);
    this._rejectDone(err);
  }

  /**
   * Cancel the job for everyone (queued or running), as a launched Job's cancel({grace, reason}):
   * the keeper's Job sends the in-band cancel with `reason` and SIGTERM after `grace` seconds.
   * @param {{grace?: number | null, reason?: string | null}} [options]
   */
  cancel({ grace = null, reason = null } = {}) { return this._store.cancel(this.id, { reason, grace }).then(() => this.done); }

  /**
   * Every thread's Python stack from the worker (through the keeper, which waits `timeout`
   * seconds for it), or null (no worker, no answer, no running keeper), as a launched Job's
   * dumpStacks(). More than 60 s rejects with a RangeError (the keeper waits no longer).
   */
  async dumpStacks({ timeout = 2 } = {}) {
    const reply = await this._askKeeper('dump_stacks', timeout);
    return reply && reply.ok ? reply.stacks : null;
  }

  /**
   * As a launched Job's ping(): the round trip between the job's keeper and its worker, in
   * seconds, or null (no worker, no answer, no running keeper). The keeper answers with a
   * 'reply' line in the feed (bridge/attach.py ping()). `timeout` in seconds, at most 60 (the
   * keeper waits no longer): more rejects with a RangeError.
   */
  async ping({ timeout = 2 } = {}) {
    const reply = await this._askKeeper('ping', timeout);
    return reply && reply.ok ? reply.rtt_s : null;
  }

  /**
   * The keeper's reply to a ping or a dump_stacks that waits `timeout` s for the worker, or null.
   * @param {string} op
   * @param {number} timeout
   * @returns {Promise<FeedLine | null>}
   */
  async _askKeeper(op, timeout) {
    let asked;
    try {
      asked = await this._store._call('request', { id: this.id, op, data: { timeout } });
    } catch (err) {
      // A bad timeout (more than the keeper's 60 s, not a number) is refused as Python's is;
      // otherwise the job ended, or runs not yet: nobody to ask.
      const error = /** @type {Error} */ (err);
      if (/^ValueError: /.test(error.message)) throw new RangeError(error.message.replace(/^ValueError: /, ''));
      return null;
    }
    return this._reply(asked, (timeout + 1) * 1000);
  }

  /**
   * As a launched Job's send(): pass `data` to the training script, in order, through the keeper
   * (held until the worker's hello); resolves when the keeper took it. Rejects with a RangeError
   * when it cannot be sent, an Error when the job ended, has no running keeper, or the keeper
   * refused it or did not answer within `timeout` seconds (then it may still arrive).
   */
  /** @param {unknown} data @param {{timeout?: number}} [options] */
  async send(data, { timeout = 5 } = {}) {
    let asked;
    try {
      asked = await this._store._call('request', { id: this.id, op: 'send', data });
    } catch (err) {
      const error = /** @type {Error} */ (err);
      if (/^ValueError: /.test(error.message)) throw new RangeError(error.message.replace(/^ValueError: /, ''));
      throw new Error(error.message.replace(/^[A-Za-z]+Error: /, ''));
    }
    const reply = await this._reply(asked, timeout * 1000);
    if (!reply && this.report) {
      throw new Error(`job.send: job ${this.id} ended (${this.report.outcome}) before its keeper answered; the message may not have been delivered`);
    }
    if (!reply) throw new Error(`job.send: the keeper of ${this.id} did not answer in ${timeout} s (stopped or starved?); the message may still be delivered`);
    if (!reply.ok) throw new Error(`job.send: ${reply.error}`);
  }

  /** Stop following (the job goes on). */
  close() {
    this._stopped = true;
    clearInterval(this._timer);
    const judge = this._judge;
    if (judge !== null && this._store._judged.delete(judge)) {
      this._store._call('unjudge', { judge }).catch(() => false);
    }
  }

  _poll() {
    if (this._stopped || this._reading) return;
    this._reading = true;
    try {
      let fd;
      // this.row: read by _start() before the first poll
      try { fd = fs.openSync(/** @type {StoredJob} */ (this.row).events_path, 'r'); } catch { fd = null; }
      if (fd !== null) {
        try {
          const chunk = Buffer.alloc(1 << 16);
          let n;
          while ((n = fs.readSync(fd, chunk, 0, chunk.length, this._offset)) > 0) {
            this._offset += n;
            this._buf += chunk.toString('latin1', 0, n); // the file is ASCII
          }
        } finally { fs.closeSync(fd); }
      }
      let nl;
      while (!this._stopped && (nl = this._buf.indexOf('\n')) >= 0) {
        const line = this._buf.slice(0, nl);
        this._buf = this._buf.slice(nl + 1);
        if (!line.trim()) continue;
        let event;
        try {
          event = jsonform.parse(line);
        } catch (err) {
          this._sayUnreadable(line, err);
          continue;
        }
        // {since: N} on a feed that ended before N (a queued job has none yet): the lines that
        // came since are read from where it ended, and those below N are not asked for.
        if (typeof this._since === 'number' && Number.isInteger(event.seq) && event.seq < this._since) continue;
        this._deliver(event);
      }
    } finally {
      this._reading = false;
    }
  }

  /** A line of the feed is not an event: what it held is lost to every face; the count and where it was are not. */
  /** @param {string} line @param {unknown} err */
  _sayUnreadable(line, err) {
    this.unreadable += 1;
    const error = String(/** @type {Error} */ (err).message).split(/\s+/).filter(Boolean).join(' ').slice(0, 120).replace(/[^\x20-\x7e]/g, '?');
    this._emit('unreadable', { count: this.unreadable, after_seq: this.position, bytes: line.length, error }, Date.now() / 1000);
  }

  _ended() {
    this.close();
  }

  /** The keeper's own lines: a launch that failed (bridge/keeper.py). @param {FeedLine} event */
  _other(event) {
    if (event.event === 'launch_failed') {
      this._emitError(new Error(event.message));
    }
  }
}

/**
 * Open a store (default: defaultStorePath()); starts its helper. Close it when done.
 * @param {string} [storePath]
 * @param {StoreOptions} [options]
 */
function openStore(storePath, options) {
  return new Store(storePath, options);
}

module.exports = { openStore, defaultStorePath, Store, StoreWatch, AttachedJob };
