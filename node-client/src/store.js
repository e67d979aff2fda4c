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
const { resolvePython } = require('./launcher.js');
const { PythonError, StoreError } = require('./errors.js');
const { StatusTracker } = require('./status.js');
const feed = require('./feed.js');
const jsonform = require('./jsonform.js');
const { EVENT_NAMES } = require('./job_events.js');
const { metricNames } = require('./job_arguments.js');

const POLL_MS = 50; // how often an attached job's events file is read
// The keeper publishes 'status' at least once a second while its job's process lives: its events
// file silent this long means it is not answering ('supervisor' event; bridge/attach.py).
const SUPERVISOR_SILENT_MS = 5000;
// attach(id, {since}): 'start' (every event), 'now' (the job's state and its keeper's last
// status, read from the end of the feed), or an event number N (the events numbered N and after,
// found by bisection): src/feed.js, bridge/attach.py.
const SINCE = ['start', 'now'];
const MAX_REPLIES = 256; // replies kept for a waiter: any face's requests are in the same feed
const ROW_EVERY_MS = 500; // how often the row is read while the file is quiet
const REPO_ROOT = path.resolve(__dirname, '../..');
// Installed from its tarball, the package carries the Python package here (scripts/bundle-python.js)
const BUNDLED_PYTHON = path.resolve(__dirname, '../python');

/**
 * Where the store helper imports trainbridge from: the checkout (in the repository), else the
 * package's own copy, so a training venv with only pyzmq and msgpack serves the store.
 */
function trainbridgeRoot() {
  for (const dir of [REPO_ROOT, BUNDLED_PYTHON]) {
    if (fs.existsSync(path.join(dir, 'trainbridge', '__init__.py'))) return dir;
  }
  return null;
}

/** The helper's stderr as one sentence when it could not import (what to install where), else all of it. */
function helperFailure(stderr) {
  const lines = stderr.trim().split('\n');
  const last = lines[lines.length - 1] || '';
  const missing = /^(?:ImportError|ModuleNotFoundError): (.*)$/.exec(last);
  return missing ? missing[1] : stderr.trim();
}

/** The default store: $TRAINBRIDGE_STORE, else the per-user data dir (bridge/store.py's rule). */
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
  /** Use openStore(). options: python (default resolvePython()), slots ({jobs, gpus}). */
  constructor(storePath, options = {}) {
    this.path = path.resolve(storePath || defaultStorePath());
    const env = { ...process.env };
    const root = trainbridgeRoot();
    if (root) env.PYTHONPATH = root + (env.PYTHONPATH ? path.delimiter + env.PYTHONPATH : '');
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
    this._pending = new Map();
    this._nextId = 1;
    this._stderr = '';
    this._buf = '';
    this._closed = false;
    this._attached = new Set(); // followed until close(): an attacher left polling kept a GUI alive
    this._watches = new Map(); // number -> StoreWatch (watch())
    this._nextWatch = 1;
    this._helper.stdout.setEncoding('utf8');
    this._helper.stdout.on('data', (text) => this._onData(text));
    this._helper.stderr.setEncoding('utf8');
    this._helper.stderr.on('data', (text) => { this._stderr = (this._stderr + text).slice(-4000); });
    this._exited = new Promise((resolve) => {
      this._helper.on('close', (code, signal) => {
        const why = `the store helper (python -m trainbridge.bridge.storeserve) exited (${signal || code})`
          + (this._stderr ? `: ${helperFailure(this._stderr)}` : '');
        for (const { reject } of this._pending.values()) reject(new Error(why));
        this._pending.clear();
        this._closed = true;
        if (!this._closing) this._failure = why; // a later call says why, not only "closed"
        resolve();
      });
    });
    this._helper.on('error', (err) => {
      for (const { reject } of this._pending.values()) reject(new Error(`cannot start the store helper: ${err.message}. Set options.python or TRAINBRIDGE_PYTHON to a Python with pyzmq and msgpack installed.`));
      this._pending.clear();
    });
  }

  _onData(text) {
    this._buf += text;
    let nl;
    while ((nl = this._buf.indexOf('\n')) >= 0) {
      const line = this._buf.slice(0, nl);
      this._buf = this._buf.slice(nl + 1);
      if (!line.trim()) continue;
      let answer;
      try { answer = jsonform.parse(line); } catch { continue; }
      if (answer.watch !== undefined && answer.change) { // a watch's change, not an answer
        const watch = this._watches.get(answer.watch);
        if (watch) watch._deliver(answer.change);
        continue;
      }
      const waiter = this._pending.get(answer.id);
      if (!waiter) continue;
      this._pending.delete(answer.id);
      if (answer.ok) waiter.resolve(answer.result);
      else if (answer.kind) waiter.reject(new StoreError(answer.error.replace(/^\w+: /, ''), answer.kind));
      else waiter.reject(new Error(answer.error));
    }
  }

  _call(op, args = {}) {
    if (this._closed) return Promise.reject(new Error(this._failure || 'the store is closed'));
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject });
      this._helper.stdin.write(`${JSON.stringify({ id, op, args })}\n`);
    });
  }

  /** Rows, newest first. state: a state, a list of states, or 'active'; limit: how many. */
  jobs({ state, limit, tag } = {}) { return this._call('jobs', { state, limit, tag }); }

  /** One row (with its attempts), or null. */
  get(id) { return this._call('get', { id }); }

  /**
   * Queue a job; resolves to its id. options: command, args, cwd, env (the whole environment;
   * default this process's), timeouts (snake_case or camelCase), resources ({gpus}),
   * priority, maxRestarts, restartBackoff (seconds), zeroCode (as launch()'s; default true),
   * name, tags (strings), meta (a JSON object) kept in the row for the GUI (jobs({tag})), and
   * logPath (the output log there instead of in the job's folder); stopOnNan as launch()'s
   * (metric names whose first NaN or infinity cancels the job).
   */
  submit(options) {
    if (!options || !options.command) throw new TypeError('submit() needs a command, e.g. {command: "python", args: ["train.py"]}');
    metricNames(options.stopOnNan); // a LaunchError that names stopOnNan, before the helper's
    const timeouts = {};
    for (const [name, value] of Object.entries(options.timeouts || {})) {
      timeouts[name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
    }
    return this._call('submit', {
      cmd: [options.command, ...(options.args || [])].map(String),
      cwd: options.cwd ? path.resolve(options.cwd) : process.cwd(),
      env: options.env || { ...process.env },
      timeouts,
      resources: options.resources || {},
      priority: options.priority || 0,
      max_restarts: options.maxRestarts || 0,
      restart_backoff: options.restartBackoff ?? 1.0,
      zero_code: options.zeroCode ?? true,
      name: options.name ?? null,
      tags: options.tags ?? null,
      meta: options.meta ?? null,
      log_path: options.logPath ? path.resolve(options.logPath) : null,
      stop_on_nan: options.stopOnNan ?? null,
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
  rerun(id, { env } = {}) { return this._call('rerun', { id, env: env || { ...process.env } }); }

  /** Cancel a queued or running job; resolves to false when it is unknown or already ended. */
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

  /** Delete an ended job's row and files; false when it is not ended. */
  forget(id) { return this._call('forget', { id }); }

  /**
   * A handle on the job with a launched Job's events, `done`, cancel() and dumpStacks(): from
   * the first event; with {since: 'now'} the job's state and its keeper's last status, then what
   * comes next; with {since: N} the events numbered N and after (a face that saw up to
   * job.position rejoins with position + 1). bridge/attach.py.
   */
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
    if (!this._closed) this._helper.stdin.end();
    await this._exited;
  }
}

/**
 * A scheduled job, followed through its events file. Emits what a launched Job emits:
 * spawn, no_worker, cancel, state, hello, stage, progress, log, heartbeat, stalled, hang,
 * signal, log_error, error (only while listened to), end (the report); status() as a Job's; plus 'attempt' ({attempt, outcome, report, restart_in})
 * when a failed attempt will be restarted. `done` resolves to the final report.
 * Each listener gets the event's time as a second argument, `t`: the keeper's wall clock in
 * seconds (as Python's events carry "t"), so a replay keeps the job's own timeline; null
 * for an end read from the row without its line. events() yields {type, data, t}.
 */
/** Store.watch()'s handle: the changes of the store's job list, as events. */
class StoreWatch extends EventEmitter {
  constructor(store, number) {
    super();
    this._store = store;
    this._number = number;
    this.ready = null;
  }

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

class AttachedJob extends EventEmitter {
  constructor(store, id, since = 'start') {
    super();
    this.id = id;
    this._since = since;
    this.state = 'unknown';
    this.report = null;
    this._store = store;
    this._stacksWaiters = [];
    this._replies = new Map(); // request id -> the keeper's reply nobody waits for yet
    this._replyWaiters = new Map(); // request id -> resolve
    this._offset = 0;
    this._buf = '';
    this._nextRow = 0;
    this._stopped = false;
    this.pid = null;
    this.answering = null; // false while the keeper is not answering ('supervisor' event)
    this._heardAt = null; // when the events file last grew (ms)
    this._status = null; // status(): the keeper's latest 'status' event, never judged again here
    // The feed number (seq) of the last event read: attach again with {since: position + 1} to go
    // on from here without a gap or a repeat.
    this.position = null;
    // Lines of the feed that are not an event (a keeper killed mid-line): counted and said
    // (an 'unreadable' event), never skipped silently (bridge/attach.py).
    this.unreadable = 0;
    this.done = new Promise((resolve, reject) => { this._resolve = resolve; this._reject = reject; });
    this.done.catch(() => undefined);
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
  }

  _fail(err) {
    this._stopped = true;
    if (this.listenerCount('error') > 0) this.emit('error', err);
    this._reject(err);
  }

  /**
   * A launched Job's status() snapshot (state, pid, elapsed_s, stages, step, metrics, rate,
   * eta_s, ...) as the keeper's Job published it last (bridge/attach.py status()).
   */
  status() {
    if (this._status) return { ...this._status };
    return new StatusTracker(0).snapshot(this.state || 'starting', this.pid ?? null, 0);
  }

  /**
   * Cancel the job for everyone (queued or running), as a launched Job's cancel({grace, reason}):
   * the keeper's Job sends the in-band cancel with `reason` and SIGTERM after `grace` seconds.
   */
  cancel({ grace = null, reason = null } = {}) { return this._store.cancel(this.id, { reason, grace }).then(() => this.done); }

  /**
   * Every thread's Python stack from the worker (through the keeper), or null; `timeout` in
   * seconds, as a launched Job's dumpStacks().
   */
  async dumpStacks({ timeout = 2 } = {}) {
    const got = new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), (timeout + 1) * 1000);
      this._stacksWaiters.push((stacks) => { clearTimeout(timer); resolve(stacks); });
    });
    const sent = await this._store._call('dump_stacks', { id: this.id });
    if (!sent) { this._stacksWaiters.shift(); return null; }
    return got;
  }

  /**
   * As a launched Job's ping(): the round trip between the job's keeper and its worker, in
   * seconds, or null (no worker, no answer, no running keeper). The keeper answers with a
   * 'reply' line in the feed (bridge/attach.py ping()). `timeout` in seconds, at most 60 (the
   * keeper waits no longer): more rejects with a RangeError.
   */
  async ping({ timeout = 2 } = {}) {
    let asked;
    try {
      asked = await this._store._call('request', { id: this.id, op: 'ping', data: { timeout } });
    } catch (err) {
      // A bad timeout (more than the keeper's 60 s, not a number) is refused as Python's is;
      // otherwise the job ended, or runs not yet: nobody to ask.
      if (/^ValueError: /.test(err.message)) throw new RangeError(err.message.replace(/^ValueError: /, ''));
      return null;
    }
    const reply = await this._reply(asked, (timeout + 1) * 1000);
    return reply && reply.ok ? reply.rtt_s : null;
  }

  /**
   * As a launched Job's send(): pass `data` to the training script, in order, through the keeper
   * (held until the worker's hello); resolves when the keeper took it. Rejects with a RangeError
   * when it cannot be sent, an Error when the job ended, has no running keeper, or the keeper
   * refused it or did not answer within `timeout` seconds (then it may still arrive).
   */
  async send(data, { timeout = 5 } = {}) {
    let asked;
    try {
      asked = await this._store._call('request', { id: this.id, op: 'send', data });
    } catch (err) {
      if (/^ValueError: /.test(err.message)) throw new RangeError(err.message.replace(/^ValueError: /, ''));
      throw new Error(err.message.replace(/^[A-Za-z]+Error: /, ''));
    }
    const reply = await this._reply(asked, timeout * 1000);
    if (!reply && this.report) {
      throw new Error(`job.send: job ${this.id} ended (${this.report.outcome}) before its keeper answered; the message may not have been delivered`);
    }
    if (!reply) throw new Error(`job.send: the keeper of ${this.id} did not answer in ${timeout} s (stopped or starved?); the message may still be delivered`);
    if (!reply.ok) throw new Error(`job.send: ${reply.error}`);
  }

  /** The keeper's 'reply' to a request, or null (the timeout, or the job ended). */
  _reply(requestId, timeoutMs) {
    if (this._replies.has(requestId)) {
      const reply = this._replies.get(requestId);
      this._replies.delete(requestId);
      return Promise.resolve(reply);
    }
    if (this.report) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this._replyWaiters.delete(requestId); resolve(null); }, timeoutMs);
      this._replyWaiters.set(requestId, (reply) => { clearTimeout(timer); resolve(reply); });
    });
  }

  /**
   * Events as an async iterator: {type, data, t, seq}, from the first until {type: 'end'}; seq is
   * the feed number of the line the event came from (null for one made here).
   */
  events() {
    const buffer = [];
    let wake = null;
    // A launched Job's events (health, starting, starved, computing were missing from a
    // hand-kept list), and the ones only an attached job has.
    const names = [...EVENT_NAMES, 'supervisor', 'unreadable', 'resources', 'attempt'];
    const listeners = names.map((type) => {
      const fn = (data, t) => {
        buffer.push({ type, data, t: t ?? null, seq: this._lineSeq ?? null });
        if (wake) { wake(); wake = null; }
      };
      this.on(type, fn);
      return [type, fn];
    });
    const detach = () => { for (const [type, fn] of listeners) this.off(type, fn); };
    let ended = false;
    return {
      [Symbol.asyncIterator]() { return this; },
      async next() {
        while (!buffer.length) {
          if (ended) { detach(); return { done: true, value: undefined }; }
          await new Promise((resolve) => { wake = resolve; });
        }
        const value = buffer.shift();
        if (value.type === 'end') ended = true;
        return { done: false, value };
      },
      async return() { detach(); return { done: true, value: undefined }; },
    };
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  /** Stop following (the job goes on). */
  close() {
    this._stopped = true;
    clearInterval(this._timer);
  }

  _poll() {
    if (this._stopped || this._reading) return;
    this._reading = true;
    try {
      let fd;
      try { fd = fs.openSync(this.row.events_path, 'r'); } catch { fd = null; }
      let got = false;
      if (fd !== null) {
        try {
          const chunk = Buffer.alloc(1 << 16);
          let n;
          while ((n = fs.readSync(fd, chunk, 0, chunk.length, this._offset)) > 0) {
            this._offset += n;
            this._buf += chunk.toString('latin1', 0, n); // the file is ASCII
            got = true;
          }
        } finally { fs.closeSync(fd); }
      }
      const at = Date.now();
      if (got) {
        if (this.answering === false && this._heardAt !== null) this._sayAnswering(true, at - this._heardAt);
        this._heardAt = at;
      } else if (this._heardAt !== null && this.answering !== false && at - this._heardAt > SUPERVISOR_SILENT_MS
        && ['starting', 'running', 'stalled'].includes(this.row.state)) {
        this._sayAnswering(false, at - this._heardAt);
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
      if (!got && !this._stopped && Date.now() >= this._nextRow) {
        this._nextRow = Date.now() + ROW_EVERY_MS;
        this._checkRow();
      }
    } finally {
      this._reading = false;
    }
  }

  /** The 'supervisor' event: the keeper stopped answering, or answers again (bridge/attach.py). */
  /** A line of the feed is not an event: what it held is lost to every face; the count and where it was are not. */
  _sayUnreadable(line, err) {
    this.unreadable += 1;
    const error = String(err.message).split(/\s+/).filter(Boolean).join(' ').slice(0, 120).replace(/[^\x20-\x7e]/g, '?');
    this._emit('unreadable', { count: this.unreadable, after_seq: this.position, bytes: line.length, error }, Date.now() / 1000);
  }

  _sayAnswering(answering, silentMs) {
    this.answering = answering;
    this._emit('supervisor', { answering, silent_s: Math.round(silentMs / 100) / 10, keeper_pid: this.row.keeper_pid ?? null }, Date.now() / 1000);
  }

  async _checkRow() {
    let row;
    try { row = await this._store.get(this.id); } catch { return; }
    if (this._stopped) return;
    if (row && row.state !== 'ended') { this.row = row; return; }
    this._poll(); // the end line may have just been written
    if (this._stopped) return;
    this._end(row ? (row.report || { outcome: row.outcome, note: row.note }) : { outcome: null, note: 'the job was forgotten' },
      row && typeof row.ended_at === 'number' ? row.ended_at : null);
  }

  _end(report, t) {
    this.state = 'ended';
    this.report = report;
    this.close();
    for (const waiter of this._replyWaiters.values()) waiter(null); // no reply will come now
    this._replyWaiters.clear();
    this._emit('end', report, t);
    this._resolve(report);
  }

  _emit(name, value, t) {
    try {
      this.emit(name, value, t);
    } catch (err) {
      queueMicrotask(() => { throw err; });
    }
  }

  /** One line of the events file -> the events a launched Job emits (bridge event names). */
  _deliver(event) {
    const t = typeof event.t === 'number' ? event.t : null; // the keeper's wall clock, seconds
    if (Number.isInteger(event.seq)) this.position = event.seq;
    this._lineSeq = Number.isInteger(event.seq) ? event.seq : null; // for events(), while emitting
    try {
      this._deliverKind(event, t);
    } finally {
      this._lineSeq = null;
    }
  }

  _deliverKind(event, t) {
    const emit = (name, value) => this._emit(name, value, t);
    switch (event.event) {
      case 'state':
        this.state = event.state;
        emit('state', event.state);
        break;
      case 'stalled': // the keeper's Job judged it, with its live diagnosis (as a launched Job's)
        emit('stalled', { stage: event.stage ?? null, idle_s: event.idle_s ?? null, stack: event.stack ?? null, diagnosis: event.diagnosis ?? null });
        break;
      case 'output':
        emit('log', { stream: event.stream, text: event.text, end: event.end });
        break;
      case 'spawn':
        this.pid = event.pid;
        emit('spawn', { pid: event.pid, command: event.command });
        break;
      case 'no_worker':
        emit('no_worker', { reason: event.reason });
        break;
      case 'cancel':
        emit('cancel', { reason: event.reason, accepted: event.accepted, refused: event.refused });
        break;
      case 'log_error': {
        const { event: _kind, t: _t, ...info } = event;
        emit('log_error', info);
        break;
      }
      case 'status':
        this._status = event.status || null;
        emit('status', this._status);
        break;
      case 'message': {
        const body = event.body || {};
        // As a launched Job: the job's stage and progress are its lead's; another process's
        // are in its own events only (bridge/job_messages.py marks each sender's lead).
        const lead = !event.sender || event.sender.lead !== false;
        if (event.kind === 'log') {
          emit('log', { stream: 'worker', text: String(body.message), level: body.level, logger: body.logger ?? null, record: body });
        } else if (event.kind === 'user') { // worker.send(): as a launched Job's 'message'
          emit('message', body.data ?? null);
        } else if (event.kind === 'error') {
          if (this.listenerCount('error') > 0) emit('error', new PythonError(body));
        } else if (['hello', 'stage', 'progress', 'heartbeat'].includes(event.kind) && (lead || event.kind === 'hello')) {
          emit(event.kind, body);
        } else if (event.kind === 'artifact') { // any process's file, as a launched Job's
          emit('artifact', body);
        }
        break;
      }
      case 'hang':
        emit('hang', { reason: event.reason, stage: event.stage ?? null });
        break;
      case 'starting': // the deadline's look saw a job starting, starved of CPU or computing, not hung (look.js)
      case 'starved':
      case 'computing':
        emit(event.event, { why: event.why, for_s: event.for_s ?? null });
        break;
      case 'health': { // a metric became NaN or infinite (src/health.js), as a launched Job's
        const { event: _kind, seq: _seq, ...entry } = event;
        emit('health', entry);
        break;
      }
      case 'signal':
        emit('signal', event.signal);
        break;
      case 'resources': { // the keeper's sample of the job's tree (bridge/resources.py)
        const { event: _kind, t: _t, seq: _seq, ...sample } = event;
        emit('resources', sample);
        break;
      }
      case 'attempt':
        emit('attempt', { attempt: event.attempt, outcome: event.outcome, report: event.report, restart_in: event.restart_in });
        break;
      case 'reply': { // the keeper's answer to a ping or send (bridge/attach.py)
        const waiter = this._replyWaiters.get(event.request);
        if (waiter) { this._replyWaiters.delete(event.request); waiter(event); break; }
        this._replies.set(event.request, event);
        if (this._replies.size > MAX_REPLIES) this._replies.delete(this._replies.keys().next().value);
        break;
      }
      case 'stacks': {
        const waiter = this._stacksWaiters.shift();
        if (waiter) waiter(event.stacks ?? null);
        break;
      }
      case 'launch_failed':
        if (this.listenerCount('error') > 0) emit('error', new Error(event.message));
        break;
      case 'end':
        this._end(event.report || { outcome: event.outcome }, t);
        break;
      default:
        break;
    }
  }
}

/** Open a store (default: defaultStorePath()); starts its helper. Close it when done. */
function openStore(storePath, options) {
  return new Store(storePath, options);
}

module.exports = { openStore, defaultStorePath, Store, StoreWatch, AttachedJob };
