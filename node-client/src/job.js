'use strict';
/**
 * Job: the glue around the pure core, in Node's idiom. The mirror of bridge/job.py.
 *
 * It turns what happens (worker messages from the hub, output bytes from the pipes, the
 * OS's exit, timers) into state-machine events, performs the machine's actions (signals,
 * commands, evidence, drain, finish), and tells the user through an EventEmitter:
 *
 *   hello, stage, progress, log, heartbeat, stalled, state, error, end
 *
 * plus `job.state`, `await job.done` (the report), `job.cancel()`, `job.dumpStacks()` and
 * `for await (const event of job)`.
 *
 * 'error' is emitted only while someone listens for it: an EventEmitter throws an 'error'
 * nobody handles, and a Python exception must not crash the GUI that supervises it.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { EventEmitter } = require('node:events');
const machine = require('./machine.js');
const { LineSplitter, decodeLine, logText } = require('./lines.js');
const launcher = require('./launcher.js');
const evidence = require('./evidence.js');
const { PythonError } = require('./errors.js');
const { buildReport } = require('./report.js');

const DEFAULT_TAIL_LINES = 50;
const QUIET_MS = 20; // after the exit, the socket must stay quiet this long to count as drained
const PIPE_WAIT_MS = 250; // a grandchild holding the pipes open must not hold the job
const WORKER_SETTINGS = ['heartbeat_s', 'stall_s', 'freeze_s', 'ack_timeout_s'];
const EVENT_NAMES = ['hello', 'stage', 'progress', 'log', 'heartbeat', 'stalled', 'state', 'error', 'end'];

const now = () => performance.now() / 1000; // the shell's monotonic clock, in seconds
const snake = (name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Split user timeouts (snake_case or camelCase) into machine config and worker settings. */
function splitTimeouts(timeouts = {}) {
  const config = {};
  const worker = {};
  for (const [name, value] of Object.entries(timeouts || {})) {
    const key = snake(name);
    if (key in machine.DEFAULTS) config[key] = value;
    else if (WORKER_SETTINGS.includes(key)) worker[key] = value;
    else throw new RangeError(`unknown timeout ${JSON.stringify(name)}; known: ${[...Object.keys(machine.DEFAULTS), ...WORKER_SETTINGS].join(', ')}`);
  }
  return { config, worker };
}

class Job extends EventEmitter {
  /**
   * Use launch() (src/index.js). options: command, args, cwd, env, timeouts, logPath,
   * tailLines, cancelReason; hub: the Hub that routes this job's messages.
   */
  constructor(options, hub) {
    super();
    if (!options || !options.command) throw new TypeError('launch() needs a command, e.g. {command: "python", args: ["train.py"]}');
    const { config, worker } = splitTimeouts(options.timeouts);
    this.id = `job-${crypto.randomBytes(6).toString('hex')}`;
    this.key = crypto.randomBytes(32);
    this.command = [options.command, ...(options.args || [])].map(String);
    this.clientSeq = 0;
    this.state = 'starting';
    this.pid = null;
    this.report = null;
    this._options = options;
    this._config = config;
    this._workerSettings = worker;
    this._hub = hub;
    this._tailLines = options.tailLines ?? DEFAULT_TAIL_LINES;
    this._tail = [];
    this._splitters = { stdout: new LineSplitter(), stderr: new LineSplitter() };
    this._pipesOpen = 0;
    this._peers = new Set();
    this._queue = [];
    this._stepping = false;
    this._timer = null;
    this._lastMsgAt = 0;
    this._exitAt = null;
    this._dumpSeqs = new Set();
    this._stackRequests = new Map(); // command seq -> resolve(stacks)
    this._facts = {
      hello: null, stages: [], progress: null, heartbeat: null, errors: [], fatalError: null,
      bye: null, dumpText: null, signalDumpText: null, snapshot: null, rejected: {}, lost: 0,
      spawnError: null, startedAt: null, endedAt: null,
    };
    this._logFd = null;
    this.done = new Promise((resolve) => { this._resolveDone = resolve; });
    this._start().catch((err) => this._startFailed(err));
  }

  // --- public API -------------------------------------------------------------------
  /** Ask the job to stop: in-band cancel, then SIGTERM to the tree, then SIGKILL. */
  cancel({ grace } = {}) {
    this._post({ type: 'cancel', ...(grace === undefined ? {} : { grace }) });
    return this.done;
  }

  /** Every thread's Python stack, from the worker (null when it does not answer in time). */
  dumpStacks({ timeout = 2 } = {}) {
    if (!this._peers.size || this.report) return Promise.resolve(null);
    return new Promise((resolve) => {
      const seqs = [...this._peers].map((peer) => this._hub.send(this, peer, 'dump_stacks'));
      const timer = setTimeout(() => finish(null), timeout * 1000);
      const finish = (stacks) => {
        clearTimeout(timer);
        for (const s of seqs) this._stackRequests.delete(s);
        resolve(stacks);
      };
      for (const s of seqs) this._stackRequests.set(s, finish);
    });
  }

  /** Events as an async iterator: {type, data}; the last one is {type: "end", data: report}. */
  events() {
    const buffer = [];
    let wake = null;
    let ended = false;
    const listeners = EVENT_NAMES.map((type) => {
      const fn = (data) => {
        buffer.push({ type, data });
        if (type === 'end') ended = true;
        if (wake) { wake(); wake = null; }
      };
      // 'error' goes through its own hook: listening to it would change whether it is emitted.
      if (type === 'error') this._errorTaps.add(fn); else this.on(type, fn);
      return [type, fn];
    });
    const detach = () => {
      for (const [type, fn] of listeners) {
        if (type === 'error') this._errorTaps.delete(fn); else this.off(type, fn);
      }
    };
    const job = this;
    return {
      [Symbol.asyncIterator]() { return this; },
      async next() {
        while (!buffer.length) {
          if (ended || (job.report && !buffer.length)) { detach(); return { done: true, value: undefined }; }
          await new Promise((resolve) => { wake = resolve; });
        }
        return { done: false, value: buffer.shift() };
      },
      async return() { detach(); return { done: true, value: undefined }; },
    };
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  get _errorTaps() {
    if (!this.__errorTaps) this.__errorTaps = new Set();
    return this.__errorTaps;
  }

  // --- start ------------------------------------------------------------------------
  async _start() {
    const endpoint = await this._hub.start();
    if (this._options.logPath) this._logFd = fs.openSync(this._options.logPath, 'a');
    const crashFile = path.join(this._hub.runtimeDir, `${this.id}.crash`);
    this._crashFile = crashFile;
    const env = launcher.childEnv(this._options.env, {
      endpoint, jobId: this.id, key: this.key, crashFile, ...this._workerSettings,
    });
    this._hub.register(this);
    this._facts.startedAt = Date.now() / 1000;
    this._m = machine.initial(this._config, now());
    const child = launcher.spawnChild({
      command: this._options.command, args: (this._options.args || []).map(String), cwd: this._options.cwd, env,
    });
    this._child = child;
    this.pid = child.pid ?? null;
    this._tree = { rootPid: this.pid, pgid: this.pid, jobId: this.id };
    child.on('error', (err) => {
      if (this.pid === null || child.exitCode === null) this._startFailed(err);
    });
    for (const stream of ['stdout', 'stderr']) {
      this._pipesOpen += 1;
      child[stream].on('data', (chunk) => this._output(stream, chunk));
      child[stream].on('close', () => { this._pipesOpen -= 1; });
      child[stream].on('error', () => undefined);
    }
    child.on('exit', (code, signal) => {
      this._exitAt = now();
      this._post({ type: 'exit', code, signal });
    });
    this._schedule();
  }

  _startFailed(err) {
    if (this._facts.spawnError || this.report) return;
    this._facts.spawnError = err;
    if (!this._m) this._m = machine.initial(this._config, now());
    // A command that cannot start is a failed job with the shell's status for it.
    const code = err && err.code === 'ENOENT' ? 127 : 126;
    this._post({ type: 'exit', code, signal: null });
  }

  // --- the machine ------------------------------------------------------------------
  _post(event) {
    this._queue.push(event);
    if (this._stepping || !this._m) return;
    this._stepping = true;
    try {
      while (this._queue.length) {
        const ev = this._queue.shift();
        const [state, actions] = machine.step(this._m, { t: now(), ...ev });
        this._m = state;
        for (const action of actions) this._perform(action);
      }
    } finally {
      this._stepping = false;
    }
    this._schedule();
  }

  _schedule() {
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    if (!this._m) return;
    const deadline = machine.nextDeadline(this._m);
    if (deadline === null) return;
    const ms = Math.max(0, (deadline - now()) * 1000) + 1;
    this._timer = setTimeout(() => { this._timer = null; this._post({ type: 'timer' }); }, ms);
  }

  _perform(action) {
    switch (action.do) {
      case 'state':
        this.state = action.state;
        this._emit('state', action.state);
        if (action.state === 'stalled') {
          const hb = this._facts.heartbeat || {};
          this._emit('stalled', { stage: hb.stage ?? null, idle_s: hb.idle_s ?? null, stack: hb.stack ?? null });
        }
        break;
      case 'snapshot':
        this._facts.snapshot = { reason: action.reason, t: now(), first: evidence.sample(this.pid), evidence: null };
        break;
      case 'dump_stacks':
        for (const peer of this._peers) this._dumpSeqs.add(this._hub.send(this, peer, 'dump_stacks'));
        break;
      case 'cancel':
        for (const peer of this._peers) this._hub.send(this, peer, 'cancel', { reason: this._options.cancelReason || 'cancelled by the client' });
        break;
      case 'signal':
        this._signal(action.signal);
        break;
      case 'drain':
        this._drain();
        break;
      case 'finish':
        this._finish(action.outcome);
        break;
      default:
        break;
    }
  }

  _signal(signal) {
    if (this.pid === null) return;
    if (signal === 'SIGUSR1') {
      this._crashOffset = this._crashSize();
      launcher.signalProcess(this.pid, signal);
      return;
    }
    if (signal === 'SIGTERM') {
      // faulthandler wrote the SIGUSR1 dump synchronously; read it while we still can.
      if (this._crashOffset !== undefined) this._facts.signalDumpText = this._readCrash(this._crashOffset);
      const snap = this._facts.snapshot;
      if (snap && !snap.evidence) snap.evidence = evidence.measure(snap.first);
    }
    launcher.signalTree(this._tree, signal);
  }

  _drain() {
    // What the dead process left: the rest of its pipes (unless a grandchild holds them)
    // and the messages still in flight on the socket (quiet for QUIET_MS).
    const start = now();
    const check = () => {
      if (this.report) return;
      const t = now();
      const pipesDone = this._pipesOpen <= 0 || (t - start) * 1000 >= PIPE_WAIT_MS;
      const quiet = (t - Math.max(this._lastMsgAt, this._exitAt || 0)) * 1000 >= QUIET_MS;
      if (pipesDone && quiet) {
        this._post({ type: 'drained' });
        return;
      }
      setTimeout(check, 5);
    };
    setTimeout(check, this._pipesOpen <= 0 ? QUIET_MS : 2);
  }

  _finish(outcome) {
    if (this.report) return;
    this._facts.endedAt = Date.now() / 1000;
    for (const stream of ['stdout', 'stderr']) {
      for (const line of this._splitters[stream].flush()) this._line(stream, line);
    }
    // Nothing of the job outlives it: a grandchild still holding a pipe, say.
    launcher.signalTree(this._tree, 'SIGKILL');
    if (this._child) {
      this._child.stdout.destroy();
      this._child.stderr.destroy();
    }
    const crashText = this._readCrash(0);
    this.report = buildReport({
      outcome,
      machine: this._m,
      facts: this._facts,
      crashText,
      logTail: this._tail.map((l) => l.text),
      pid: this.pid,
      jobId: this.id,
      command: this.command,
      logPath: this._options.logPath || null,
    });
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    for (const resolve of this._stackRequests.values()) resolve(null);
    this._hub.unregister(this);
    if (this._logFd !== null) {
      try { fs.closeSync(this._logFd); } catch { /* already closed */ }
      this._logFd = null;
    }
    this._emit('end', this.report);
    this._resolveDone(this.report);
  }

  // --- from the hub -----------------------------------------------------------------
  rejected(reason) {
    this._facts.rejected[reason] = (this._facts.rejected[reason] || 0) + 1;
  }

  lost(count) {
    this._facts.lost += count;
  }

  refused(reason) {
    this._post({ type: 'refused', reason });
  }

  /** One authentic, in-order message from a worker process. */
  receive(msg, peer) {
    this._lastMsgAt = now();
    const { body } = msg;
    switch (msg.kind) {
      case 'hello':
        this._peers.add(peer);
        this._facts.hello = body;
        this._emit('hello', body);
        this._post({ type: 'hello', dump_signal: body.dump_signal === 'SIGUSR1' });
        break;
      case 'stage':
        this._stage(body);
        this._emit('stage', body);
        this._post({ type: 'stage', event: body.event, name: body.name, budget_s: body.budget_s ?? null });
        break;
      case 'progress':
        this._facts.progress = body;
        this._emit('progress', body);
        this._post({ type: 'progress' });
        break;
      case 'heartbeat':
        this._facts.heartbeat = body;
        this._emit('heartbeat', body);
        this._post({ type: 'beat' });
        break;
      case 'log': {
        const text = String(body.message);
        this._writeLog(`[${body.level}] ${text}`);
        this._emit('log', { stream: 'worker', text, level: body.level, logger: body.logger ?? null, record: body });
        this._post({ type: 'beat' });
        break;
      }
      case 'error': {
        this._facts.errors.push(body);
        if (body.fatal) this._facts.fatalError = body;
        const err = new PythonError(body);
        if (this.listenerCount('error') > 0) this._emit('error', err);
        for (const tap of this._errorTaps) tap(err);
        this._post({ type: 'error', fatal: Boolean(body.fatal), kind: body.kind, exit_code: body.exit_code ?? null });
        break;
      }
      case 'bye':
        this._facts.bye = body;
        this._post({ type: 'bye', reason: body.reason, exit_code: body.exit_code ?? null });
        break;
      case 'reply':
        this._reply(body);
        this._post({ type: 'beat' });
        break;
      default:
        break;
    }
  }

  _stage(body) {
    const stages = this._facts.stages;
    if (body.event === 'begin') {
      stages.push({ name: body.name, depth: body.depth, status: 'open', duration_s: null, budget_s: body.budget_s ?? null, begin: now() });
      return;
    }
    for (let i = stages.length - 1; i >= 0; i--) {
      if (stages[i].name === body.name && stages[i].status === 'open') {
        stages[i].status = body.status || 'ok';
        stages[i].duration_s = body.duration_s ?? Math.round((now() - stages[i].begin) * 1e6) / 1e6;
        return;
      }
    }
  }

  _reply(body) {
    const resolve = this._stackRequests.get(body.to);
    if (resolve) resolve(body.ok ? String(body.stacks ?? '') : null);
    if (this._dumpSeqs.has(body.to)) {
      this._dumpSeqs.clear();
      if (body.ok && body.stacks) this._facts.dumpText = String(body.stacks);
      this._post({ type: 'dumped' });
    }
  }

  // --- output -----------------------------------------------------------------------
  _output(stream, chunk) {
    for (const line of this._splitters[stream].feed(chunk)) this._line(stream, line);
  }

  _line(stream, raw) {
    const { text, encoding } = decodeLine(raw.data);
    this._tail.push({ stream, text });
    if (this._tail.length > this._tailLines) this._tail.shift();
    this._writeLog(text);
    this._emit('log', { stream, text, encoding, end: raw.end });
  }

  _writeLog(text) {
    if (this._logFd === null) return;
    try {
      // Written at once, not buffered: the log must survive a crash of this process.
      fs.writeSync(this._logFd, `${logText(text)}\n`);
    } catch {
      this._logFd = null; // a full disk must not stop the supervision
    }
  }

  // --- crash file -------------------------------------------------------------------
  _crashSize() {
    try { return fs.statSync(this._crashFile).size; } catch { return 0; }
  }

  _readCrash(offset) {
    try {
      const buf = fs.readFileSync(this._crashFile);
      const text = buf.subarray(offset).toString('latin1');
      const body = text.split('\n').filter((l) => !l.startsWith('[trainbridge] pid ')).join('\n').trim();
      return body || null;
    } catch {
      return null;
    }
  }

  _emit(name, value) {
    try {
      this.emit(name, value);
    } catch (err) {
      // A throwing listener must not break supervision; it still surfaces, as Node would.
      queueMicrotask(() => { throw err; });
    }
  }
}

module.exports = { Job, splitTimeouts, DEFAULT_TAIL_LINES };
