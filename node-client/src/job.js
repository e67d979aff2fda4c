'use strict';
/**
 * Job: the glue around the pure core, in Node's idiom. The mirror of bridge/job.py.
 *
 * It turns what happens (worker messages from the hub, output bytes from the pipes, the
 * OS's exit, timers) into state-machine events, performs the machine's actions (signals,
 * commands, evidence, drain, finish), and tells the user through an EventEmitter:
 *
 *   hello, stage, progress, log, heartbeat, stalled, state, hang, signal, error, end
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
const util = require('node:util');
const { EventEmitter } = require('node:events');
const { PassThrough } = require('node:stream');
const codec = require('./codec.js');
const machine = require('./machine.js');
const { LineSplitter, RedrawThrottle, decodeLine, logText } = require('./lines.js');
const launcher = require('./launcher.js');
const evidence = require('./evidence.js');
const oom = require('./oom.js');
const procfs = require('./procfs.js');
const { diagnoseHang } = require('./diagnosis.js');
const { PythonError } = require('./errors.js');
const { buildReport, minimalReport, logFooter, crashFileSize, signalDumpedPids } = require('./report.js');
const { StatusTracker } = require('./status.js');
const ranks = require('./ranks.js');

const DEFAULT_TAIL_LINES = 40;
const OUTBOX_LIMIT = 1000; // job.send() messages held until the worker says hello (bridge/job.py's)
const STDIN_MODES = { ignore: 'ignore', devnull: 'ignore', pipe: 'pipe', inherit: 'inherit' };
const SIZE_KEY = Buffer.alloc(32);
const LOADED_POLL_MS = 250; // before hello: how often to look for the worker's stage box
const LIVE_DIAGNOSIS_S = 2.0; // while stalled, the live diagnosis is refreshed at most this often
const OUTPUT_EVENT_S = 0.25; // output lines reach the state machine at most this often (issue 12)
const STAGES_KEPT = 1000; // stage records kept for the report (a stage per step must not grow)
const DUMPS_KEPT = 4; // dump_stacks replies kept for the report
const LEADS_KEPT = 16; // lead changes kept for the report
const LEAD_CHECK_MS = 1000; // how often a lead other than the launched process is checked
// What bridge/inject/sitecustomize.py and the worker print when they cannot run: no hello
// will come from that process, so waiting for one (the startup deadline) would only kill it.
const NO_WORKER_MARKERS = ['[trainbridge] zero-code mode is off', '[trainbridge] worker disabled'];
const QUIET_MS = 5; // after the exit, nothing readable on the socket and nothing received for this long
const PIPE_LINGER_MS = 200; // after the exit: how long a pipe held by a grandchild may keep us
const SNAPSHOT_WINDOW_MS = 500; // CPU is measured over this window (bridge/evidence.py's)
const STATE_SAMPLE_MS = 20; // how often the main thread's state is sampled in the window
const FATAL_MARKERS = ['Fatal Python error:', 'Timeout (']; // faulthandler's crash and watchdog headers
const FATAL_LINES_MAX = 400; // stderr lines kept after "Fatal Python error"
const WORKER_SETTINGS = ['heartbeat_s', 'stall_s', 'freeze_s', 'ack_timeout_s'];
/**
 * How many processes the OOM killer took in our cgroup while a job that ended badly ran (a
 * DataLoader worker killed while the main process lived); null when unknown or clean. As
 * bridge/job.py _oom_kills_since.
 */
function oomKillsSince(before, code, signal) {
  if (before === null || before === undefined || (code === 0 && !signal)) return null;
  const after = oom.oomKillCount(null);
  return after === null ? null : Math.max(0, after - before);
}

const EVENT_NAMES = ['spawn', 'no_worker', 'cancel', 'hello', 'lead', 'stage', 'progress', 'log', 'heartbeat', 'stalled', 'state', 'hang', 'signal', 'log_error', 'error', 'end', 'message'];
const EVENT_QUEUE = 10000; // events kept for a slow events() consumer; the oldest go first
// With rejectOnFailure, `done` rejects on these; a cancel (the user's own stop) still resolves.
const FAILED_OUTCOMES = ['failed', 'crashed', 'hung'];
// A job whose output is piped into this process cannot outlive it (it dies of a broken pipe
// at its next print): a job that must outlive its client runs under a keeper instead.
const DETACHED_REMOVED = 'launch({detached: true}) was removed: its output went into this process\'s pipes, so the job '
  + 'died of a broken pipe soon after this process. Use openStore(path).submit({...}): the job runs under its own '
  + 'keeper, outlives this process, and any process can attach to it (docs/STORE.md)';

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
    else throw new LaunchError(`unknown timeout ${JSON.stringify(name)}; known: ${[...Object.keys(machine.DEFAULTS), ...WORKER_SETTINGS].join(', ')}`);
  }
  // As bridge.job.launch: a stall deadline makes the job show "stalled" halfway there.
  if (config.stall_timeout !== undefined && config.stall_timeout !== null && !('stalled_after' in config)) {
    config.stalled_after = Math.min(machine.DEFAULTS.stalled_after, config.stall_timeout / 2);
  }
  return { config, worker };
}

class Job extends EventEmitter {
  /**
   * Use launch() (src/index.js). options: command, args, cwd, env, timeouts, logPath,
   * logTimestamps (prefix each log line with its UTC time),
   * tailLines, zeroCode, injectDir; hub: the Hub that routes this job's messages.
   */
  constructor(options, hub) {
    super();
    checkOptions(options); // before anything is registered or spawned
    if (options.detached) throw new TypeError(DETACHED_REMOVED);
    const { config, worker } = splitTimeouts(options.timeouts);
    this.id = `job-${crypto.randomBytes(6).toString('hex')}`;
    this.key = crypto.randomBytes(32);
    // No command: the Python of `python` (python-shell's `pythonPath` is the same option), else
    // $TRAINBRIDGE_PYTHON, the active venv's, the repository's .venv, python3 (resolvePython).
    const command = options.command || launcher.resolvePython({ python: options.python || options.pythonPath });
    this.command = [command, ...(options.args || [])].map(String);
    this.clientSeq = 0;
    this.state = 'starting';
    this.pid = null;
    this.report = null;
    this._options = options;
    this._m = machine.initial(config, now());
    this._workerSettings = worker;
    this._hub = hub;
    this._tailLines = options.tailLines ?? DEFAULT_TAIL_LINES;
    this._splitters = { stdout: new LineSplitter(), stderr: new LineSplitter() };
    this._redraws = new RedrawThrottle(); // a bar's redraws reach the log once a second
    this._status = new StatusTracker(now()); // the lead's stages and progress, for status()
    this._pipesOpen = 0;
    this._peers = new Set();
    this._lead = null; // routing id of the process that speaks for the job
    this._present = new Map(); // routing id -> hello, of the processes that may lead, in order
    this._foreign = new Set(); // routing ids whose hello came from outside the job's tree
    this._gone = new Set(); // routing ids whose connection ended (the hub's disconnect notice)
    this._drainCheck = null; // while draining: look again now (a connection ended)
    this._leadWatch = null; // interval that notices a lead (not the launched process) gone
    this._queue = [];
    this._stepping = false;
    this._timer = null;
    this._lastMsgAt = 0;
    this._exitAt = null;
    this._dumpSeq = null;
    // While stalled: the current diagnosis from a cheap look (issue 12 item 12).
    this.liveDiagnosis = null;
    this._liveT = null;
    this._liveMark = null;
    this._signalDumpAt = null; // crash file size when SIGUSR1 went
    this._stackRequests = new Map(); // command seq -> resolve(reply body)
    this._fatalCapture = false;
    this._internal = false; // failInternal ran: a bug in trainbridge ended the job
    this._errorTaps = new Set(); // events() iterators: they get Python errors without listening to 'error'
    // Facts for the report, gathered as they come (the names of bridge/job.py's).
    this._facts = {
      started: now(), startedWall: Date.now() / 1000, ended: null,
      tail: [], lines: { stdout: 0, stderr: 0 }, bytes: { stdout: 0, stderr: 0 },
      hellos: new Map(), ranks: ranks.initial(), leadPid: null, dumpPids: [], nativeDumpPids: [], stages: [], stagesDropped: 0, progress: null, error: null, bye: null,
      heartbeat: null, stacks: [], fatalLines: [], oomKilled: null, oomBefore: null,
      leftovers: [], signalsSent: [], exitCode: null, exitSignal: null, snapshot: null,
      rejected: {}, lost: 0, cancel: null, foreignHellos: 0, leads: [], internalError: null,
      dropped: new Map(), // routing id -> the worker's drop counts (heartbeat, bye)
      logLines: 0, logError: null, // lines written to the log file; why it is incomplete
      unroutedAtStart: hub.unrouted, unrouted: 0,
      undelivered: {}, // kind -> messages to the worker it never got (gone, or held at the end)
    };
    this.sendWaited = 0; // times a full worker queue made a send wait (the hub held it)
    this._cancelSeqs = null; // [first, last] seq of the in-band cancel in flight
    this._logFd = null;
    // stdin: 'pipe' gives a Writable now (what is written before the spawn waits for it);
    // raw: true gives stdout/stderr Readables of the output's bytes, exactly as written.
    const stdinMode = options.stdin ?? 'ignore';
    if (!Object.prototype.hasOwnProperty.call(STDIN_MODES, stdinMode)) {
      throw new TypeError(`stdin must be one of ${Object.keys(STDIN_MODES).join(', ')}, not ${JSON.stringify(stdinMode)}`);
    }
    this._stdinMode = STDIN_MODES[stdinMode];
    this.stdin = this._stdinMode === 'pipe' ? new PassThrough() : null;
    this.stdout = options.raw ? new PassThrough() : null;
    this.stderr = options.raw ? new PassThrough() : null;
    this._outbox = [];
    this.done = new Promise((resolve, reject) => { this._resolveDone = resolve; this._rejectDone = reject; });
    this.done.catch(() => undefined); // a launch error also reaches 'error' listeners; never unhandled
    hub.register(this); // now, so a hub whose last job just ended does not close under us
    if (options.signal) this._followAbortSignal(options.signal);
    this._start().catch((err) => this._launchFailed(err));
  }

  // --- public API -------------------------------------------------------------------
  /**
   * Ask the job to stop: in-band cancel, then SIGTERM to the tree, then SIGKILL. `reason` is
   * echoed in the report's `cancel`; a worker that cannot interrupt the script (SIGINT
   * ignored) says so (the 'cancel' event), and SIGTERM follows at once.
   */
  cancel({ grace, reason } = {}) {
    if (this._facts.cancel === null) {
      this._facts.cancel = { reason: reason || 'cancelled by the client', accepted: null, refused: null, traceback: null };
    }
    this._post({ type: 'cancel', ...(grace === undefined ? {} : { grace }) });
    return this.done;
  }

  /**
   * The user sent the process `signal` (SIGINT / SIGTERM / SIGHUP) outside cancel(), as the
   * shell adapter's kill() does: no escalation, but the job is cancelled however it then
   * ends; the report's `cancel` says by what (by: 'signal'). Python: Job.note_user_signal.
   */
  noteUserSignal(signal, reason) {
    if (this._facts.cancel === null && this._facts.exitCode === null && this._facts.exitSignal === null) {
      this._facts.cancel = { reason, accepted: null, refused: null, traceback: null, by: 'signal', signal };
    }
    this._post({ type: 'user_signal', signal });
  }

  /**
   * A snapshot for a GUI: state, pid, elapsed_s, stages (open, outermost first),
   * script_stages (without zero-code mode's own), step, total, rate (steps/s), eta_s,
   * progress_age_s (src/status.js).
   */
  status() {
    return this._status.snapshot(this.state, this.pid, now());
  }

  /**
   * Send a message (any JSON-like value) to the training script: worker.on_message() /
   * worker.receive() get it (PROTOCOL.md "user"). In order; held until the worker says
   * hello (at most OUTBOX_LIMIT). Throws a RangeError when too large, an Error when the
   * job ended or the outbox is full.
   */
  send(data) {
    try {
      codec.encode('user', 1, { data }, SIZE_KEY, this.id);
    } catch (err) {
      throw new RangeError(`job.send: cannot send this message (${err.message})`);
    }
    if (this.report) throw new Error(`job.send: job ${this.id} has ended`);
    if (this._lead === null && this._outbox.length >= OUTBOX_LIMIT) {
      throw new Error(`job.send: ${OUTBOX_LIMIT} messages wait for the worker's hello; does the script import trainbridge.worker?`);
    }
    this._outbox.push(data);
    this._sendOutbox();
  }

  _sendOutbox() {
    if (this._lead === null || this.report) return; // sent once the lead said hello
    while (this._outbox.length) this._hub.send(this, this._lead, 'user', { data: this._outbox.shift() });
  }

  /** Every thread's Python stack, from the worker (null: no worker, or no answer in time). */
  async dumpStacks({ timeout = 2 } = {}) {
    const reply = await this._ask('dump_stacks', timeout);
    return reply && reply.stacks !== undefined && reply.stacks !== null ? String(reply.stacks) : null;
  }

  /** Round trip to the worker's beacon in seconds (null: no worker, or no answer in time). */
  async ping({ timeout = 2 } = {}) {
    const started = now();
    const reply = await this._ask('ping', timeout);
    return reply && reply.ok ? now() - started : null;
  }

  /** Send a command to the worker and wait for its reply body (null on timeout). */
  _ask(kind, timeout) {
    if (!this._peers.size || this.report) return Promise.resolve(null); // nobody to ask
    return new Promise((resolve) => {
      const seq = this._command(kind);
      const timer = setTimeout(() => finish(null), timeout * 1000);
      const finish = (body) => {
        clearTimeout(timer);
        this._stackRequests.delete(seq);
        resolve(body);
      };
      this._stackRequests.set(seq, finish);
    });
  }

  /**
   * Events as an async iterator: {type, data}, from now until {type: "end", data: report}.
   * At most EVENT_QUEUE wait for a slow consumer; beyond that the oldest go, and the next
   * event it gets is {type: "dropped", data: {count, kinds}} (as bridge's events() does;
   * kinds: how many of each event type).
   */
  events() {
    const buffer = [];
    let dropped = 0;
    let kinds = {}; // of `dropped`, per event type (as bridge's `kinds`)
    let wake = null;
    let ended = false;
    const listeners = EVENT_NAMES.map((type) => {
      const fn = (data) => {
        if (buffer.length >= EVENT_QUEUE) {
          const gone = buffer.shift();
          dropped += 1;
          kinds[gone.type] = (kinds[gone.type] || 0) + 1;
        }
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
          if (ended || job.report) { detach(); return { done: true, value: undefined }; }
          await new Promise((resolve) => { wake = resolve; });
        }
        if (dropped) {
          const data = { count: dropped, kinds };
          dropped = 0;
          kinds = {};
          return { done: false, value: { type: 'dropped', data } };
        }
        return { done: false, value: buffer.shift() };
      },
      async return() { detach(); return { done: true, value: undefined }; },
    };
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  /** An AbortSignal (as execa's and child_process's): its abort cancels the job. */
  _followAbortSignal(signal) {
    const onAbort = () => this.cancel();
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    this._unfollowAbort = () => signal.removeEventListener('abort', onAbort);
  }

  /** Zero-code mode cannot load in some process of the job: say so, once per process line. */
  _noWorker(reason) {
    this._emit('no_worker', { reason });
    this._post({ type: 'no_worker', reason });
  }

  // --- start ------------------------------------------------------------------------
  async _start() {
    const endpoint = await this._hub.start();
    if (this._options.logPath) this._logFd = openLog(this._options.logPath);
    this._dir = path.join(this._hub.runtimeDir, this.id);
    fs.mkdirSync(this._dir, { mode: 0o700 });
    this._crashFile = path.join(this._dir, 'crash.txt');
    const env = launcher.childEnv(this._options.env, {
      endpoint, jobId: this.id, key: this.key, crashFile: this._crashFile,
      serverKey: this._hub.serverKey,
      ...workerTimings(this._m.config), ...this._workerSettings,
    }, { pythonEnv: this._options.pythonEnv !== false });
    if (this._options.zeroCode !== false) {
      // As bridge.launch(zero_code=True): every Python process of the job says hello and
      // reports startup/main stages even if the script never imports the worker.
      const dir = launcher.injectDir(this._options.injectDir);
      if (dir) launcher.addZeroCodeHook(env, dir);
      else this._zeroCodeMissing = true;
    }
    const child = launcher.spawnChild({
      command: this.command[0], args: (this._options.args || []).map(String), cwd: this._options.cwd, env,
      stdin: this._stdinMode,
    });
    this._child = child;
    await new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.on('error', () => undefined); // after the spawn only a failed child.kill() emits it; we never call that
    this.pid = child.pid;
    if (this.stdin && child.stdin) {
      child.stdin.on('error', () => undefined); // EPIPE once the child is gone: it reads no more
      this.stdin.pipe(child.stdin);
    }
    this._tree = { rootPid: this.pid, pgid: this.pid, jobId: this.id };
    this._emit('spawn', { pid: this.pid, command: [...this.command] });
    if (this._zeroCodeMissing) {
      this._noWorker('[trainbridge] zero-code mode is off: its hook (bridge/inject/sitecustomize.py) was not found; '
        + 'set injectDir or $TRAINBRIDGE_INJECT_DIR, or reinstall the trainbridge package');
    }
    this._facts.oomBefore = oom.oomKillCount(this.pid);
    for (const stream of ['stdout', 'stderr']) {
      this._pipesOpen += 1;
      child[stream].on('data', (chunk) => this._guard(() => this._output(stream, chunk)));
      child[stream].on('close', () => {
        this._pipesOpen -= 1;
        this._lines(stream, this._splitters[stream].flush());
        if (this[stream]) this[stream].end();
      });
      child[stream].on('error', () => undefined);
    }
    child.on('exit', (code, signal) => this._guard(() => this._onExit(code, signal)));
    // Before any hello: watch for the worker's stage box (issue 12 item 4, as bridge/job.py).
    this._loadedPoll = setInterval(() => this._guard(() => this._checkLoaded()), LOADED_POLL_MS);
    this._emit('state', this.state);
    this._pump(); // a cancel() made before the spawn
    this._schedule();
  }

  /** The command could not be started (not found, not executable, bad cwd): no report. */
  _launchFailed(err) {
    this._hub.unregister(this);
    this._closeLog();
    const error = err instanceof LaunchError ? err
      : new LaunchError(`cannot start ${JSON.stringify(this.command[0])}: ${err.message}`, err);
    if (this.listenerCount('error') > 0) this._emit('error', error);
    this._rejectDone(error);
  }

  _onExit(code, signal) {
    if (this._internal) return; // failInternal ends the job itself
    this._exitAt = now();
    this._facts.ended = this._exitAt;
    this._facts.exitCode = code;
    this._facts.exitSignal = signal;
    if (signal === 'SIGKILL' && !this._facts.signalsSent.includes('SIGKILL')) {
      this._facts.oomKilled = oom.oomKilled(this._facts.oomBefore, oom.oomKillCount(null));
    }
    this._facts.oomKills = oomKillsSince(this._facts.oomBefore, code, signal);
    this._post({ type: 'exit', code, signal });
  }

  // --- a bug while handling this job --------------------------------------------------
  /** Run one piece of this job's handling; if it throws (a bug), this job alone fails. */
  _guard(fn) {
    try {
      fn();
    } catch (err) {
      this.failInternal(err);
    }
  }

  /**
   * Handling this job threw (a bug in trainbridge): the job is stopped at once and ends
   * `failed` with an `internal` diagnosis that carries the stack; other jobs go on. The hub
   * calls this too. Mirrors bridge/job.py fail_internal.
   */
  failInternal(err) {
    if (this.report || this._internal) return;
    this._internal = true;
    const message = err && err.message !== undefined ? err.message : String(err);
    this._facts.internalError = {
      type: (err && err.name) || 'Error', message: `trainbridge failed while supervising this job: ${message}`,
      traceback: String((err && err.stack) || message), kind: 'internal', fatal: true,
    };
    this._facts.error = this._facts.internalError;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    this._queue = [];
    this._m = { ...this._m, state: 'ended', outcome: 'failed', ending: null };
    this.state = 'ended';
    const end = () => {
      if (this.report) return;
      clearTimeout(fallback);
      try {
        this._emit('state', 'ended');
        this._finish();
      } catch (err2) {
        if (!this.report) {
          this.report = minimalReport(this._reportInput(), err2);
          this._hub.unregister(this);
          this._resolveDone(this.report);
        }
      }
    };
    // Wait (bounded) for the killed process's exit, so that nothing of the job outlives the report.
    const fallback = setTimeout(end, 5000);
    if (this._child && this._child.exitCode === null && this._child.signalCode === null) {
      this._child.once('exit', (code, signal) => {
        this._facts.exitCode = code;
        this._facts.exitSignal = signal;
        this._facts.ended = now();
        end();
      });
    } else {
      setImmediate(end);
    }
    if (this._tree) {
      this._facts.signalsSent.push('SIGKILL');
      launcher.signalTree(this._tree, 'SIGKILL');
    }
  }

  // --- the machine ------------------------------------------------------------------
  /** Hand one event (stamped now) to the machine; events before the spawn wait for it. */
  _post(event) {
    this._queue.push({ t: now(), ...event });
    this._pump();
  }

  _pump() {
    if (this._stepping || this.pid === null) return;
    this._stepping = true;
    try {
      while (this._queue.length) {
        const ev = this._queue.shift();
        const [state, actions] = machine.step(this._m, ev);
        this._m = state;
        for (const action of actions) this._perform(action);
      }
    } finally {
      this._stepping = false;
    }
    this._schedule();
  }

  _schedule() {
    if (this.pid === null || this.report) return;
    const deadline = machine.nextDeadline(this._m);
    // A timer armed for an earlier time stays: an early "timer" event changes nothing (the
    // machine judges deadlines itself), and re-arming on every message would cost more.
    if (this._timer && deadline !== null && this._timerAt <= deadline) return;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    if (deadline === null) return;
    this._timerAt = deadline;
    const ms = Math.max(0, (deadline - now()) * 1000) + 1;
    this._timer = setTimeout(() => { this._timer = null; this._guard(() => this._onTimer()); }, ms);
  }

  _onTimer() {
    // Did the lead's SIGUSR1 handler answer? If not, the machine sends SIGUSR2 next.
    const { ending } = this._m;
    if (ending && ending.step === 'signal_dump' && !this._m.answered
        && signalDumpedPids(this._crashFile, this._signalDumpAt).has(this._facts.leadPid)) {
      this._post({ type: 'signal_dumped' });
    }
    this._post({ type: 'timer' });
  }

  _perform(action) {
    switch (action.do) {
      case 'state':
        this.state = action.state;
        this._emit('state', action.state);
        if (action.state === 'stalled') this._liveDiagnose(true);
        break;
      case 'snapshot':
        this._emit('hang', { reason: action.reason, stage: (this._m.hang || {}).stage ?? null });
        this._snapshot();
        break;
      case 'dump_stacks':
        this._dumpSeq = this._command('dump_stacks');
        break;
      case 'cancel': {
        const first = this.clientSeq + 1;
        const last = this._command('cancel', { reason: (this._facts.cancel || {}).reason || 'cancelled by the client' });
        this._cancelSeqs = last === null ? null : [first, last];
        break;
      }
      case 'signal':
        this._signal(action.signal);
        break;
      case 'drain':
        this._drain();
        break;
      case 'finish':
        this._finish();
        break;
      default:
        break;
    }
  }

  /** Send a command to every process of the job that spoke; returns its seq (or null). */
  _command(kind, body = {}) {
    let seq = null;
    for (const peer of this._peers) seq = this._hub.send(this, peer, kind, body);
    return seq;
  }

  _signal(signal) {
    this._facts.signalsSent.push(signal);
    this._emit('signal', signal);
    if (signal === 'SIGUSR1') {
      this._signalDumpAt = crashFileSize(this._crashFile);
      for (const pid of this._facts.dumpPids) launcher.signalProcess(pid, signal);
      return;
    }
    if (signal === 'SIGUSR2') {
      // Only to the processes whose SIGUSR1 handler did not answer: Python runs in the
      // others, and the C dump would race it (worker/hooks.py).
      const answered = signalDumpedPids(this._crashFile, this._signalDumpAt);
      for (const pid of this._facts.nativeDumpPids) if (!answered.has(pid)) launcher.signalProcess(pid, signal);
      return;
    }
    launcher.signalTree(this._tree, signal);
  }

  /** Hang evidence from the live process over SNAPSHOT_WINDOW_MS, then "snapshotted". */
  _snapshot() {
    const first = evidence.sample(this.pid);
    const states = [procfs.mainThreadSample(this.pid)];
    const { pid, status, name, alive, notes, sockets, children, main_thread: mainThread } = first;
    // Until the window is over: what can be read at once (no CPU deltas yet).
    this._facts.snapshot = { pid, status, name, alive, notes, sockets, children, main_thread: mainThread };
    const sampler = setInterval(() => states.push(procfs.mainThreadSample(this.pid)), STATE_SAMPLE_MS);
    setTimeout(() => {
      clearInterval(sampler);
      if (this.report) return;
      if (this._m.exit === null) {
        const measured = evidence.measure(first, states);
        // What was read at the start counts when none can be read now (the process just ended).
        if (!(measured.sockets && measured.sockets.length) && first.sockets) measured.sockets = first.sockets;
        if (!(measured.children && measured.children.length) && first.children) measured.children = first.children;
        this._facts.snapshot = measured;
      }
      this._post({ type: 'snapshotted' });
    }, SNAPSHOT_WINDOW_MS);
  }

  _drain() {
    // Whatever of the tree outlived the main process is an orphan now: ask it to go (it is
    // SIGKILLed at finish), so it cannot hold our pipes. Then wait for the pipes' end (at
    // most PIPE_LINGER_MS) and for the socket to stay quiet QUIET_MS: the last messages.
    this._facts.leftovers = launcher.jobLeftovers(this._tree);
    this._drainScanned = true;
    if (this._facts.leftovers.length) launcher.signalTree(this._tree, 'SIGTERM', { includeRoot: false });
    const start = now();
    const check = () => {
      if (this.report) return;
      const t = now();
      const pipesDone = this._pipesOpen <= 0 || (t - start) * 1000 >= PIPE_LINGER_MS;
      // After an acked bye the worker sent its last message; otherwise (a crash) messages may
      // still be queued: wait until every connection of the job has ended (the hub's notice
      // comes after all it delivered) or, without notices, until the socket has nothing to
      // read and was quiet QUIET_MS.
      const quiet = this._facts.bye !== null || this._connectionsEnded()
        || (!this._hub.readable() && (t - Math.max(this._lastMsgAt, this._exitAt || 0)) * 1000 >= QUIET_MS);
      if (pipesDone && quiet) {
        this._drainCheck = null;
        this._post({ type: 'drained' });
        return;
      }
      if (timer === null) timer = setTimeout(() => { timer = null; check(); }, 2);
    };
    let timer = null;
    this._drainCheck = () => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      check();
    };
    setImmediate(check); // the pipes' last chunks and EOF are often already queued
  }

  /**
   * Whether the socket can hold nothing more from this job: every process of it that spoke
   * has ended its connection (the hub's notice is queued after all that connection
   * delivered), and the drain found none of its processes still running.
   */
  _connectionsEnded() {
    if (!this._hub.notifies || this._peers.size === 0 || this._facts.leftovers.length > 0) return false;
    for (const peer of this._peers) if (!this._gone.has(peer)) return false;
    return true;
  }

  _finish() {
    if (this.report) return;
    clearInterval(this._loadedPoll);
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    if (this._leadWatch !== null) clearInterval(this._leadWatch);
    this._leadWatch = null;
    for (const stream of ['stdout', 'stderr']) this._lines(stream, this._splitters[stream].flush());
    // Nothing of the job outlives it: a grandchild still holding a pipe, say. The /proc
    // scan costs milliseconds; when the drain's scan (after the main process's exit) found
    // no other process, none can have appeared since, so it is not repeated.
    const rescan = !this._drainScanned || this._facts.leftovers.length > 0;
    if (this._tree && rescan && launcher.jobProcesses(this._tree).some((p) => p.pid !== this.pid)) {
      launcher.signalTree(this._tree, 'SIGKILL', { includeRoot: false });
    }
    if (this._child) {
      this._child.stdout.destroy();
      this._child.stderr.destroy();
    }
    this._hub.giveUp(this);
    for (let i = 0; i < this._outbox.length; i += 1) this.undelivered('user'); // no hello came
    this._outbox = [];
    try {
      this.report = buildReport(this._reportInput());
    } catch (err) {
      this.report = minimalReport(this._reportInput(), err);
    }
    for (const resolve of this._stackRequests.values()) resolve(null);
    this._hub.unregister(this);
    this._endLog();
    this._closeLog();
    if (this._unfollowAbort) this._unfollowAbort();
    if (this.stdin) this.stdin.unpipe();
    launcher.removeTree(this._dir); // the crash file is in the report now
    this._emit('end', this.report);
    if (this._options.rejectOnFailure && FAILED_OUTCOMES.includes(this.report.outcome)) {
      this._rejectDone(new JobFailedError(this.report));
    } else {
      this._resolveDone(this.report);
    }
  }

  _reportInput() {
    this._facts.unrouted = this._hub.unrouted - this._facts.unroutedAtStart; // for no job, meanwhile
    return {
      m: this._m, facts: this._facts, crashFile: this._crashFile, pid: this.pid, id: this.id,
      command: this.command, logPath: this._options.logPath || null,
    };
  }

  /** The log file ends with the bar's last state, the verdict and the stacks. */
  _endLog() {
    const held = this._redraws.flush();
    if (held.length) this._writeLog(held.map(logText).join('\n'));
    this._writeLog(logText(logFooter(this.report)));
  }

  _closeLog() {
    if (this._logFd !== null) {
      try { fs.closeSync(this._logFd); } catch { /* already closed */ }
      this._logFd = null;
    }
  }

  // --- from the hub -----------------------------------------------------------------
  rejected(reason) {
    this._facts.rejected[reason] = (this._facts.rejected[reason] || 0) + 1;
  }

  lost(count) {
    this._facts.lost += count;
  }

  undelivered(kind) {
    this._facts.undelivered[kind] = (this._facts.undelivered[kind] || 0) + 1;
  }

  /** The hub's notice that the connection of `peer` ended: it delivers nothing more. */
  disconnected(peer) {
    this._gone.add(peer);
    if (this._drainCheck) this._drainCheck();
  }

  refused(reason) {
    this._post({ type: 'refused', reason });
  }

  /** One authentic, in-order message from a worker process (`peer`: its routing id). */
  receive(msg, peer) {
    const { body } = msg;
    if (this._foreign.has(peer)) {
      this.rejected('foreign');
      return;
    }
    if ((msg.kind === 'heartbeat' || msg.kind === 'bye') && body.dropped && typeof body.dropped === 'object') {
      this._facts.dropped.set(peer, body.dropped); // counts only grow: the latest wins
    }
    if (msg.kind === 'hello' && !this._helloInTree(body)) {
      // Not a process of this job (docs/PROTOCOL.md "Trust boundary"): it neither leads
      // nor is listed, and what it sends later is rejected and counted.
      this._foreign.add(peer);
      this._facts.foreignHellos += 1;
      return;
    }
    this._peers.add(peer); // commands (cancel, dumps) go to the job's own processes only
    if (this._gone.size) this._gone.delete(peer); // it spoke again: a new connection (libzmq reconnects)
    ranks.observe(this._facts.ranks, peer, msg.kind, body, msg.ts); // every process's own state
    if (msg.kind === 'hello') {
      this._present.set(peer, body);
      if (this._elect() && peer !== this._lead) this._post({ type: 'lead', present: this._lead !== null });
    }
    const lead = peer !== null && peer === this._lead;
    // Every emitted body names its sender (docs/CLIENT.md "Ranks"): rank, local_rank, host, pid, role, lead.
    const sender = { ...ranks.sender(this._facts.ranks, peer), lead };
    if (body && typeof body === 'object' && msg.kind !== 'logs') body.sender = sender;
    this._sender = sender;
    if (lead) this._lastMsgAt = now();
    if (!lead) {
      this._fromOther(msg, peer);
      if (msg.kind === 'bye') this._leave(peer); // it can no longer lead
      return;
    }
    if (msg.kind === 'reply' && this._cancelSeqs && body.to >= this._cancelSeqs[0] && body.to <= this._cancelSeqs[1]) {
      this._onCancelReply(body);
    }
    switch (msg.kind) {
      case 'hello': {
        const rank = Number(peer.split('/')[1]);
        this._facts.hellos.set(rank, body);
        // SIGUSR1 only to processes that registered faulthandler for it (it kills others).
        if (body.dump_signal === 'SIGUSR1' && this._inTree(body.pid)) this._facts.dumpPids.push(body.pid);
        if (body.native_dump_signal === 'SIGUSR2' && this._inTree(body.pid)) this._facts.nativeDumpPids.push(body.pid);
        this._emit('hello', body);
        this._post({
          type: 'hello', dump_signal: this._facts.dumpPids.length > 0,
          native_dump: this._facts.nativeDumpPids.length > 0 && process.platform !== 'win32',
          awaits_ranks: ranks.awaitsRanks(body),
        });
        this._sendOutbox();
        break;
      }
      case 'stage':
        this._recordStage(body);
        this._status.stage(body);
        this._emit('stage', body);
        this._post({ type: 'stage', event: body.event, name: body.name, depth: body.depth ?? null, budget_s: body.budget_s ?? null });
        break;
      case 'progress':
        this._facts.progress = { step: body.step, total: body.total ?? null, metrics: body.metrics || {} };
        this._status.progress(body, now());
        body.t = Date.now() / 1000; // when it arrived, as the Python client's event "t"
        this._emit('progress', body);
        this._post({ type: 'progress' });
        break;
      case 'error': {
        if (body.fatal || this._facts.error === null) this._facts.error = body;
        const err = new PythonError(body);
        if (this.listenerCount('error') > 0) this._emit('error', err);
        for (const tap of this._errorTaps) tap(err);
        this._post({ type: 'error', fatal: Boolean(body.fatal), kind: body.kind, exit_code: body.exit_code ?? null });
        break;
      }
      case 'bye':
        this._facts.bye = body;
        this._post({ type: 'bye', reason: body.reason, exit_code: body.exit_code ?? null });
        this._leave(peer);
        break;
      case 'heartbeat':
        this._facts.heartbeat = body;
        this._emit('heartbeat', body);
        this._post({ type: 'beat' });
        if (this._m.state === 'stalled') this._liveDiagnose();
        break;
      case 'log':
        this._emit('log', { stream: 'worker', text: String(body.message), level: body.level, logger: body.logger ?? null, record: body, sender: this._sender });
        this._post({ type: 'beat' });
        break;
      case 'logs':
        // A batch of consecutive records (PROTOCOL.md): listeners see each as a worker
        // 'log', as if it had come alone; the machine hears of the message once.
        for (const record of body.records) {
          this._emit('log', { stream: 'worker', text: String(record.message), level: record.level, logger: record.logger ?? null, record, sender: this._sender });
        }
        this._post({ type: 'beat' });
        break;
      case 'reply':
        this._onReply(body);
        this._post({ type: 'beat' });
        break;
      case 'user':
        this._emit('message', body.data ?? null);
        this._post({ type: 'beat' });
        break;
      default:
        this._post({ type: 'beat' });
        break;
    }
  }

  // --- who speaks for the job (bridge/job.py's twins) --------------------------------
  /** Apply machine.chooseLead to the processes present; true when the lead changed. */
  _elect() {
    const pid = machine.chooseLead([...this._present.values()], this.pid);
    let lead = null;
    for (const [peer, hello] of this._present) if (hello.pid === pid) { lead = peer; break; }
    if (lead === this._lead) return false;
    this._lead = lead;
    this._facts.leadPid = pid;
    this._facts.leads = [...this._facts.leads, pid].slice(-LEADS_KEPT);
    this._watchLead();
    this._emit('lead', { pid });
    return true;
  }

  /**
   * A process said bye or is gone. The launched process never leaves: its last words are
   * the job's. Another one that led hands the lead back (machine event "lead").
   */
  _leave(peer) {
    const hello = this._present.get(peer);
    if (hello === undefined || hello.pid === this.pid) return;
    this._present.delete(peer);
    if (this._elect() && this._m.exit === null) this._post({ type: 'lead', present: this._lead !== null });
  }

  /** While a process other than the launched one leads, notice when it is gone. */
  _watchLead() {
    const watch = this._lead !== null && this._facts.leadPid !== this.pid;
    if (watch && this._leadWatch === null) {
      this._leadWatch = setInterval(() => {
        if (this._lead === null || this._m.state === 'ended') return;
        if (!launcher.jobProcesses(this._tree).some((p) => p.pid === this._facts.leadPid)) this._leave(this._lead);
      }, LEAD_CHECK_MS);
      this._leadWatch.unref();
    } else if (!watch && this._leadWatch !== null) {
      clearInterval(this._leadWatch);
      this._leadWatch = null;
    }
  }

  /**
   * A message from a process that does not lead the job (a subprocess in zero-code mode,
   * torchrun's launcher once rank 0 spoke): published to listeners, but it drives neither
   * the machine nor the report, as in bridge/job.py.
   */
  _fromOther(msg, peer) {
    const { body } = msg;
    switch (msg.kind) {
      case 'hello': {
        const rank = Number(peer.split('/')[1]);
        if (!this._facts.hellos.has(rank)) this._facts.hellos.set(rank, body); // every rank is listed
        // A rank's hello: the job has started, even when its lead is a launcher elsewhere.
        if ((body.world_size ?? null) !== null && this._m.awaiting_ranks) this._post({ type: 'hello', dump_signal: this._facts.dumpPids.length > 0 });
        if (body.dump_signal === 'SIGUSR1' && this._inTree(body.pid)) this._facts.dumpPids.push(body.pid);
        if (body.native_dump_signal === 'SIGUSR2' && this._inTree(body.pid)) this._facts.nativeDumpPids.push(body.pid);
        this._emit('hello', body);
        break;
      }
      case 'stage': this._emit('stage', body); break;
      case 'progress': body.t = Date.now() / 1000; this._emit('progress', body); break;
      case 'heartbeat': this._emit('heartbeat', body); break;
      case 'log':
        this._emit('log', { stream: 'worker', text: String(body.message), level: body.level, logger: body.logger ?? null, record: body, sender: this._sender });
        break;
      case 'logs':
        for (const record of body.records) {
          this._emit('log', { stream: 'worker', text: String(record.message), level: record.level, logger: record.logger ?? null, record, sender: this._sender });
        }
        break;
      case 'reply': this._onReply(body); break; // dumps answer from every process of the job
      case 'user': this._emit('message', body.data ?? null); break;
      default: break;
    }
  }

  /** The lead's answer to the in-band cancel: accepted, or refused and why. */
  _onCancelReply(body) {
    this._cancelSeqs = null;
    if (this._facts.cancel === null) this._facts.cancel = { reason: null, accepted: null, refused: null, traceback: null };
    const info = this._facts.cancel;
    info.accepted = Boolean(body.ok);
    info.refused = body.ok ? null : String(body.error || 'refused');
    this._emit('cancel', { reason: info.reason, accepted: info.accepted, refused: info.refused });
    if (!info.accepted) this._post({ type: 'cancel_refused', reason: info.refused });
  }

  /**
   * While stalled, before any deadline: the diagnosis now, from the last heartbeat's stack
   * and a cheap look at the process, at most every LIVE_DIAGNOSIS_S; emitted as 'stalled'
   * {stage, idle_s, stack, diagnosis} and kept in job.liveDiagnosis (as bridge/job.py).
   */
  /**
   * Before any hello: has the worker loaded in the launched process? Its stage box is written
   * synchronously at `import worker`, before the beacon can speak; a GIL held right after
   * would otherwise be seen only at the startup timeout. The box's mtime says when, /proc's
   * SigCgt whether SIGUSR1 has a handler (as bridge/job.py _check_loaded).
   */
  _checkLoaded() {
    if (this._m.hello || this._m.exit !== null || (this._m.loaded_t ?? null) !== null || this.report) {
      clearInterval(this._loadedPoll);
      return;
    }
    let mtimeMs;
    try { mtimeMs = fs.statSync(`${this._crashFile}.stages.${this.pid}`).mtimeMs; } catch { return; }
    const t = now();
    const loaded = Math.min(t, t - (Date.now() - mtimeMs) / 1000);
    let caught = false;
    let native = false;
    try {
      const m = /^SigCgt:\s*([0-9a-f]+)/m.exec(fs.readFileSync(`/proc/${this.pid}/status`, 'latin1'));
      caught = m !== null && (BigInt(`0x${m[1]}`) & (1n << 9n)) !== 0n; // SIGUSR1 = 10
      // SIGUSR2 = 12, faulthandler's C dump: answers even when a held GIL stops SIGUSR1's.
      native = m !== null && (BigInt(`0x${m[1]}`) & (1n << 11n)) !== 0n && process.platform !== 'win32';
    } catch { /* gone */ }
    if (native && !this._facts.nativeDumpPids.includes(this.pid)) this._facts.nativeDumpPids.push(this.pid);
    clearInterval(this._loadedPoll);
    this._queue.push({ t: loaded, type: 'worker_loaded', dump_signal: caught, native_dump: native });
    this._post({ type: 'timer' });
  }

  _liveDiagnose(force = false) {
    const t = now();
    if (this.pid === null || (!force && this._liveT !== null && t - this._liveT < LIVE_DIAGNOSIS_S)) return;
    this._liveT = t;
    const hb = this._facts.heartbeat || {};
    const running = this._facts.stages.filter((s) => s.status === 'running').map((s) => s.name);
    const last = this._m.last_activity_t;
    const idle = last !== null && last !== undefined ? Math.round((t - last) * 10) / 10 : (hb.idle_s ?? null);
    let found;
    try {
      const ev = evidence.live(this.pid, this._liveMark);
      this._liveMark = ev.mark || null;
      delete ev.mark;
      found = diagnoseHang({ reason: 'stall', stage: running.length ? running[running.length - 1] : null, stages: running,
        idle_s: idle, stack: hb.stack ?? null, saw_hello: this._facts.hellos.size > 0, evidence: ev, progress: this._facts.progress });
      // Ranks waiting in a collective for one that is elsewhere (issue 12 item 12).
      found = ranks.liveCollective(this._facts.ranks) || found;
    } catch (err) {
      found = { kind: 'unknown', summary: `live diagnosis failed: ${err.message}`, hint: '', evidence: {} };
    }
    this.liveDiagnosis = { kind: found.kind, frame: found.evidence.frame ?? null, summary: found.summary, hint: found.hint, idle_s: idle };
    this._emit('stalled', { stage: hb.stage ?? null, idle_s: idle, stack: hb.stack ?? null, diagnosis: this.liveDiagnosis });
  }

  _onReply(body) {
    const text = body.stacks ?? null;
    if (text) this._facts.stacks = [...this._facts.stacks, String(text)].slice(-DUMPS_KEPT);
    const resolve = this._stackRequests.get(body.to);
    if (resolve) resolve(body);
    if (body.to !== undefined && body.to === this._dumpSeq) {
      this._dumpSeq = null;
      this._post({ type: 'dumped' });
    }
  }

  _recordStage(body) {
    const { stages } = this._facts;
    if (body.event === 'begin') {
      if (stages.length >= STAGES_KEPT) this._forgetAClosedStage();
      this._stageEvents = (this._stageEvents || 0) + 1;
      stages.push({ name: body.name, status: 'running', duration_s: null, depth: body.depth ?? 0,
        budget_s: body.budget_s ?? null, started: now() - this._facts.started, began: this._stageEvents });
      return;
    }
    const depth = body.depth ?? null;
    for (let i = stages.length - 1; i >= 0; i--) {
      const entry = stages[i];
      if (entry.name === body.name && entry.status === 'running' && (depth === null || entry.depth === depth)) {
        entry.status = body.status || 'ok';
        this._stageEvents = (this._stageEvents || 0) + 1;
        entry.closed = this._stageEvents; // the order of begins and ends
        entry.duration_s = body.duration_s ?? null;
        if (entry.duration_s === null) entry.duration_s = Math.round((now() - this._facts.started - entry.started) * 1e6) / 1e6;
        return;
      }
    }
  }

  /** Drop the oldest closed stage record (open ones say where the job is). */
  _forgetAClosedStage() {
    const i = this._facts.stages.findIndex((entry) => entry.status !== 'running');
    if (i >= 0) {
      this._facts.stages.splice(i, 1);
      this._facts.stagesDropped += 1;
    }
  }

  /**
   * Whether a hello comes from the job's tree: its pid is, or (a subprocess that said hello
   * and exited before we looked) its pid is gone and its parent is ours (bridge/job.py's rule).
   */
  _helloInTree(hello) {
    if (this._inTree(hello.pid)) return true;
    return Number.isInteger(hello.pid) && processGone(hello.pid) && this._inTree(hello.ppid);
  }

  _inTree(pid) {
    if (!Number.isInteger(pid)) return false;
    if (pid === this.pid) return true; // ours for sure, as in bridge/job.py
    if (!this._tree) return false;
    return launcher.jobProcesses(this._tree).some((p) => p.pid === pid);
  }

  // --- output -----------------------------------------------------------------------
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
    this._facts.lastOutputT = t;
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
      this._facts.fatalLines = [];
    }
    if (this._fatalCapture && this._facts.fatalLines.length < FATAL_LINES_MAX) this._facts.fatalLines.push(text);
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
      const fromLine = this._facts.logLines + countLines(data, done) + 1;
      this._facts.logError = { path: this._options.logPath, from_line: fromLine, error: osErrorText(err) };
      this._closeLog();
      this._emit('log_error', this._facts.logError);
      return;
    }
    this._facts.logLines += countLines(data, data.length);
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

/** An fd appending to the log file, or a LaunchError saying what is wrong with it. */
function openLog(logPath) {
  try {
    return fs.openSync(logPath, 'a');
  } catch (err) {
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

/** Whether a process is gone (no /proc entry, or a zombie). */
function processGone(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.charAt(stat.lastIndexOf(')') + 2) === 'Z';
  } catch {
    return true;
  }
}

/** The worker's timing variables, derived from the deadlines as bridge/job.py does. */
function workerTimings(config) {
  const timeout = config.heartbeat_timeout;
  // A beat often enough that heartbeat_timeout spans several of them.
  const heartbeat = timeout === null ? 1.0 : Math.max(0.05, Math.min(1.0, timeout / 4));
  const out = { heartbeat_s: pyFloat(heartbeat) };
  if (config.stalled_after !== null) out.stall_s = pyFloat(config.stalled_after);
  // The GIL-freeze watchdog must write the main stack before we declare silence.
  if (timeout !== null) out.freeze_s = pyFloat(Math.max(2 * heartbeat, timeout / 2));
  // SIGTERM -> SIGKILL, also when the worker ends the job because this client is gone.
  if (config.kill_grace !== null && config.kill_grace !== undefined) out.kill_grace_s = pyFloat(config.kill_grace);
  return out;
}

/** A number as Python's repr(float(x)) writes it ("1.0", "0.25"). */
function pyFloat(x) {
  return Number.isInteger(x) ? x.toFixed(1) : String(x);
}

/** `done`'s rejection with rejectOnFailure: the job failed, crashed or hung; `report` says how. */
class JobFailedError extends Error {
  constructor(report) {
    super(`trainbridge: ${report.summary || `the job ${report.outcome}`}`);
    this.name = 'JobFailedError';
    this.outcome = report.outcome;
    this.report = report;
  }
}

const show = (value) => (value === undefined ? 'undefined' : typeof value === 'string' ? JSON.stringify(value)
  : typeof value === 'number' || typeof value === 'boolean' || value === null ? String(value)
    : Array.isArray(value) ? 'an array' : typeof value === 'function' ? 'a function' : `a ${typeof value}`);

/**
 * Refuse bad launch() options with a LaunchError that says which and why, before anything
 * is registered or spawned; the rules of bridge/job.py check_arguments (settings:
 * machine.configProblem, pinned by vectors/config.json).
 */
function checkOptions(options) {
  if (!options || typeof options !== 'object') {
    throw new LaunchError('launch() needs options, e.g. {command: "python", args: ["train.py"]}');
  }
  const { command, args, cwd, env, logPath, tailLines, timeouts } = options;
  // No command at all: the resolved Python runs `args` (see the constructor).
  if (command !== undefined && command !== null && (typeof command !== 'string' || command === '')) {
    throw new LaunchError(`command must be the program to run (a non-empty string), got ${show(command)}; e.g. {command: "python", args: ["train.py"]}`);
  }
  if (typeof command === 'string' && /\s/.test(command) && !fs.existsSync(command)) {
    const [program, ...rest] = command.trim().split(/\s+/);
    throw new LaunchError(`command must be one program, not a shell line: got ${JSON.stringify(command)}; write {command: ${JSON.stringify(program)}, args: ${JSON.stringify(rest)}} (there is no shell)`);
  }
  if (args !== undefined && args !== null) {
    if (!Array.isArray(args)) throw new LaunchError(`args must be an array of strings, got ${show(args)}`);
    args.forEach((arg, i) => {
      if (typeof arg !== 'string') throw new LaunchError(`args[${i}] must be a string, got ${show(arg)} in ${JSON.stringify(args)}`);
    });
  }
  for (const [name, value] of [['cwd', cwd], ['logPath', logPath], ['python', options.python], ['pythonPath', options.pythonPath]]) {
    if (value !== undefined && value !== null && typeof value !== 'string') {
      throw new LaunchError(`${name} must be a path (a string) or null, got ${show(value)}`);
    }
  }
  if (env !== undefined && env !== null) {
    if (typeof env !== 'object' || Array.isArray(env)) throw new LaunchError(`env must be an object of strings or null, got ${show(env)}`);
    for (const [key, value] of Object.entries(env)) {
      if (key === '' || key.includes('=') || key.includes('\0')) throw new LaunchError(`env keys must be non-empty strings without '=', got ${JSON.stringify(key)}`);
      if (typeof value !== 'string' || value.includes('\0')) {
        throw new LaunchError(`env[${JSON.stringify(key)}] must be a string, got ${show(value)}; to leave a variable out, do not put it in env`);
      }
    }
  }
  if (tailLines !== undefined && !(Number.isInteger(tailLines) && tailLines >= 0)) {
    throw new LaunchError(`tailLines must be a whole number >= 0, got ${show(tailLines)}`);
  }
  if (timeouts !== undefined && timeouts !== null && (typeof timeouts !== 'object' || Array.isArray(timeouts))) {
    throw new LaunchError(`timeouts must be an object, got ${show(timeouts)}`);
  }
  const names = {};
  const config = {};
  const worker = {};
  for (const [name, value] of Object.entries(timeouts || {})) {
    const key = snake(name);
    names[key] = name;
    if (WORKER_SETTINGS.includes(key)) worker[key] = value;
    else config[key] = value;
  }
  const problem = machine.configProblem(config);
  if (problem !== null) {
    const [key, what] = problem;
    const name = `timeouts.${names[key]}`;
    const value = config[key];
    if (what === 'unknown') throw new LaunchError(`unknown timeout ${JSON.stringify(names[key])}; known: ${[...Object.keys(machine.DEFAULTS), ...WORKER_SETTINGS].join(', ')}`);
    if (what === 'type') throw new LaunchError(`${name} must be a number of seconds${machine.OPTIONAL.includes(key) ? ' or null (off)' : ''}, got ${show(value)}`);
    if (what === 'not_finite') throw new LaunchError(`${name} must be a finite number of seconds, got ${show(value)}`);
    throw new LaunchError(`${name} must be >= 0 seconds, got ${show(value)}`);
  }
  for (const [key, value] of Object.entries(worker)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new LaunchError(`timeouts.${names[key]} must be a finite number of seconds > 0, got ${show(value)}`);
    }
  }
}

class LaunchError extends Error {
  /** The command could not be started (not found, not executable, bad cwd). */
  constructor(message, cause) {
    super(message, { cause });
    this.name = 'LaunchError';
    this.code = cause && cause.code;
  }
}

module.exports = { Job, LaunchError, JobFailedError, checkOptions, splitTimeouts, workerTimings, DEFAULT_TAIL_LINES };
