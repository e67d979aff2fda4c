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
 *
 * This module is the facade: Job's set-up and public API. Its rooms, each one concern
 * (docs/CLIENT.md "Rooms of the Job"), the same as bridge/'s:
 *   job_arguments  the option check (launch() and openStore().submit() use it)
 *   job_events     the event queue behind events() / for await
 *   job_output     pipes, lines, the tail, the log file
 *   job_messages   worker messages, the lead, replies, stage records
 *   job_actions    the state machine's events and actions, timers, signals, live diagnosis
 *   job_end        exit, drain, snapshot, report, failInternal
 *   job_facts      the facts record the report is built from (pure)
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { EventEmitter } = require('node:events');
const { PassThrough } = require('node:stream');
const codec = require('./codec.js');
const machine = require('./machine.js');
const { LineSplitter, RedrawThrottle } = require('./lines.js');
const launcher = require('./launcher.js');
const oom = require('./oom.js');
const { StatusTracker } = require('./status.js');
const ranks = require('./ranks.js');
const jobFacts = require('./job_facts.js');
const {
  checkOptions, metricNames, splitTimeouts, LaunchError, DEFAULT_TAIL_LINES,
} = require('./job_arguments.js');
const { EVENT_QUEUE, events } = require('./job_events.js');
const { JobActions, now } = require('./job_actions.js');
const { JobMessages } = require('./job_messages.js');
const { JobOutput, openLog } = require('./job_output.js');
const { JobEnd, JobFailedError } = require('./job_end.js');

const OUTBOX_LIMIT = 1000; // job.send() messages held until the worker says hello (bridge/job.py's)
const STDIN_MODES = { ignore: 'ignore', devnull: 'ignore', pipe: 'pipe', inherit: 'inherit' };
const SIZE_KEY = Buffer.alloc(32);
const LOADED_POLL_MS = 250; // before hello: how often to look for the worker's stage box
// A job whose output is piped into this process cannot outlive it (it dies of a broken pipe
// at its next print): a job that must outlive its client runs under a keeper instead.
const DETACHED_REMOVED = 'launch({detached: true}) was removed: its output went into this process\'s pipes, so the job '
  + 'died of a broken pipe soon after this process. Use openStore(path).submit({...}): the job runs under its own '
  + 'keeper, outlives this process, and any process can attach to it (docs/STORE.md)';

/** Reject, in words, an address this host does not have (bridge/remote.py check_local). */
function checkLocal(address) {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err) => {
      if (err.code !== 'EADDRNOTAVAIL') reject(err);
      else {
        reject(new TypeError(`listen address ${address} is not an address of this host; give this host's address on the `
          + 'network the other hosts reach it by (`ip -brief address` lists them)'));
      }
    });
    probe.listen(0, address, () => probe.close(() => resolve()));
  });
}

class Job extends EventEmitter {
  /**
   * Use launch() (src/index.js). options: command, args, cwd, env, timeouts, logPath,
   * logTimestamps (prefix each log line with its UTC time),
   * tailLines, zeroCode, injectDir, stopOnNan (metric names whose first NaN or infinity cancels
   * the job; '*' for every one); hub: the Hub that routes this job's messages.
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
    this._stopOnNan = metricNames(options.stopOnNan); // health.js: cancel on these metrics' NaN
    // One clock read for the machine's start, the status tracker's and the report's (two reads
    // with a slow step between them made a startup hang's after_s less than the deadline).
    const t0 = now();
    this._m = machine.initial(config, t0);
    this._workerSettings = worker;
    this._hub = hub;
    this._tailLines = options.tailLines ?? DEFAULT_TAIL_LINES;
    this._splitters = { stdout: new LineSplitter(), stderr: new LineSplitter() };
    this._redraws = new RedrawThrottle(); // a bar's redraws reach the log once a second
    this._status = new StatusTracker(t0); // the lead's stages and progress, for status()
    this._statusTick = null; // publishes 'status' while the process lives (job_actions.js)
    this._pipesOpen = 0;
    this._peers = new Set();
    this._lead = null; // routing id of the process that speaks for the job
    this._heard = {}; // the lead's heartbeats: its work count and where its main thread was (look.heard)
    this._present = new Map(); // routing id -> hello, of the processes that may lead, in order
    this._foreign = new Set(); // routing ids whose hello came from outside the job's tree
    this._remote = false; // remoteEnv() was asked: other hosts' ranks may join
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
    // The hang's dump_stacks (its seqs) and the ranks that answered it; the pids the
    // per-rank fallback (rankdumps.js) sent SIGUSR2 already (null: it has not run).
    this._hangSeqs = null;
    this._hangAnswered = new Set();
    this._fallbackPids = null;
    this._stackRequests = new Map(); // command seq -> resolve(reply body)
    this._fatalCapture = false;
    this._internal = false; // failInternal ran: a bug in trainbridge ended the job
    this._errorTaps = new Set(); // events() iterators: they get Python errors without listening to 'error'
    // Facts for the report, gathered as they come (src/job_facts.js, as bridge's).
    this._facts = jobFacts.initial({
      id: this.id, command: this.command, logPath: options.logPath || null, started: t0, startedWall: Date.now() / 1000 - (now() - t0),
    });
    this._facts.ranks = ranks.initial(); // every worker process's own state
    this._unroutedAtStart = hub.unrouted; // the report shows what came meanwhile, for no job
    this._oomBefore = null; // OOM kills in our cgroup when the job started
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
    this._askCancel(grace, reason || 'cancelled by the client');
    return this.done;
  }

  /** cancel(), and who asked (`by`) when not the client. Python: Job._ask_cancel. */
  _askCancel(grace, reason, by = {}) {
    if (this._facts.cancel === null) {
      this._facts.cancel = { reason, accepted: null, refused: null, traceback: null, ...by };
    }
    this._post({ type: 'cancel', ...(grace === undefined ? {} : { grace }) });
  }

  /**
   * The user sent the process `signal` (SIGINT / SIGTERM / SIGHUP) outside cancel(), as the
   * shell adapter's kill() does: no escalation, but the job is cancelled however it then
   * ends; the report's `cancel` says by what (by: 'signal'). Python: Job.note_user_signal.
   */
  noteUserSignal(signal, reason) {
    if (this._facts.cancel === null && this._facts.exit_code === null && this._facts.exit_signal === null) {
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
   * kinds: how many of each event type). See src/job_events.js.
   */
  events() {
    return events(this, EVENT_QUEUE);
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


  /**
   * The TRAINBRIDGE_* variables for this job's ranks on other hosts (torchrun on node 2 and
   * up inherits them from its caller's environment), as bridge's Job.remote_env: the hub
   * listens on tcp://address:port (0: a free port) with CurveZMQ, and a hello that arrives
   * there authenticated with this job's key joins the job although its pid is not in the
   * local process tree. No client pid and no crash file (they name things of this host).
   * Rejects a loopback address, which other hosts cannot reach.
   */
  async remoteEnv(address, port = 0) {
    if (net.isIP(address) === 0 || /^127\.|^::1$/.test(address)) {
      throw new TypeError(`listen address ${address} must be this host's IP address on the other hosts' network, not a name or a loopback address`);
    }
    await checkLocal(address);
    const { endpoint, serverKey } = await this._hub.listen(address, port);
    this._remote = true;
    const env = launcher.childEnv({}, {
      endpoint, jobId: this.id, key: this.key, serverKey,
      ...workerTimings(this._m.config), ...this._workerSettings,
    }, { pythonEnv: false });
    delete env.TRAINBRIDGE_CLIENT_PID;
    return env;
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
    this._oomBefore = oom.oomKillCount(this.pid);
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
    this._publishStatus();
    this._startStatusTick();
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

  _emit(name, value) {
    try {
      this.emit(name, value);
    } catch (err) {
      // A throwing listener must not break supervision; it still surfaces, as Node would.
      queueMicrotask(() => { throw err; });
    }
  }
}

// The rooms (docs/CLIENT.md "Rooms of the Job"): their methods are Job's own.
for (const room of [JobActions, JobMessages, JobOutput, JobEnd]) {
  for (const name of Object.getOwnPropertyNames(room.prototype)) {
    if (name === 'constructor') continue;
    if (Object.prototype.hasOwnProperty.call(Job.prototype, name)) throw new Error(`Job.${name} is defined twice`);
    Object.defineProperty(Job.prototype, name, Object.getOwnPropertyDescriptor(room.prototype, name));
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

module.exports = { Job, LaunchError, JobFailedError, checkOptions, splitTimeouts, workerTimings, DEFAULT_TAIL_LINES };
