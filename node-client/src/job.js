'use strict';
/**
 * Job: a launched job, judged by the Python supervisor and rendered here. launch() checks the
 * options, asks this process's job server (src/job_server.js, bridge/jobserve.py) to start the
 * command under bridge's Job, and renders the feed it publishes (src/feed_job.js): the state,
 * the verdicts, the diagnosis and the report are the Python client's, decided once.
 *
 *   const job = launch({ command: 'python', args: ['train.py'] });
 *   job.on('progress', (p) => bar.update(p.step / p.total));
 *   const report = await job.done;
 *
 * What stays in Node is the API in Node's idiom: an EventEmitter, `done`, events() and
 * `for await`, cancel(), send(), ping(), dumpStacks(), remoteEnv(), an AbortSignal, job.stdin
 * (stdin: 'pipe') and job.stdout / job.stderr (raw: true).
 */

const crypto = require('node:crypto');
const path = require('node:path');
const { PassThrough } = require('node:stream');
const { FeedJob } = require('./feed_job.js');
const { JobServer } = require('./job_server.js');
const launcher = require('./launcher.js');
const { checkOptions, splitTimeouts, LaunchError } = require('./job_arguments.js');
const { MAX_MESSAGE_BYTES, MAX_DEPTH } = require('./limits.js');

const OUTBOX_LIMIT = 1000; // job.send() messages held until the worker says hello (bridge/job.py's)
const STDIN_MODES = { ignore: 'devnull', devnull: 'devnull', pipe: 'pipe', inherit: 'inherit' };
const FAILED_OUTCOMES = ['failed', 'crashed', 'hung', 'lost'];
// The signals a user stops a job with (bridge/jobserve.py USER_SIGNALS): noted as a cancel.
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGKILL'];
const PYTHON = /^(python|pypy)[0-9.]*$/;
// Worker settings given as timeouts reach the worker as these variables (docs/PROTOCOL.md 2).
/** @type {Record<string, string>} */
const WORKER_ENV = {
  heartbeat_s: 'TRAINBRIDGE_HEARTBEAT_S', stall_s: 'TRAINBRIDGE_STALL_S', freeze_s: 'TRAINBRIDGE_FREEZE_S',
  ack_timeout_s: 'TRAINBRIDGE_ACK_TIMEOUT_S',
};
const DETACHED_REMOVED = 'launch({detached: true}) was removed: its output went into this process\'s pipes, so the job '
  + 'died of a broken pipe soon after this process. Use openStore(path).submit({...}): the job runs under its own '
  + 'keeper, outlives this process, and any process can attach to it (docs/STORE.md)';

/** @typedef {import('./feed_job.js').FeedLine} FeedLine */
/** @typedef {import('./feed_job.js').Report} Report */
/**
 * What launch() uses of an AbortSignal (index.d.ts AbortSignalLike).
 * @typedef {object} AbortSignalLike
 * @property {boolean} aborted
 * @property {(type: 'abort', listener: () => void, options?: {once?: boolean}) => void} addEventListener
 * @property {(type: 'abort', listener: () => void) => void} removeEventListener
 */
/**
 * launch()'s options (index.d.ts LaunchOptions): checkOptions() refuses a value of another
 * type, the constructor a `stdin` it does not know and `detached`.
 * @typedef {object} LaunchOptions
 * @property {string} [command]
 * @property {string[]} [args]
 * @property {string} [python]
 * @property {string} [pythonPath]
 * @property {string} [cwd]
 * @property {NodeJS.ProcessEnv} [env]
 * @property {Record<string, number | null>} [timeouts]
 * @property {string} [logPath]
 * @property {number} [tailLines]
 * @property {boolean} [zeroCode]
 * @property {AbortSignalLike} [signal]
 * @property {boolean} [rejectOnFailure]
 * @property {'ignore' | 'devnull' | 'pipe' | 'inherit'} [stdin]
 * @property {boolean} [raw]
 * @property {boolean} [pythonEnv]
 * @property {string | string[]} [stopOnNan]
 * @property {boolean} [logTimestamps]
 * @property {boolean} [sampleResources]
 * @property {unknown} [detached] removed: refused with a TypeError
 */

/**
 * The Python that runs the supervisor: the job's own when its command is a Python (the
 * training venv's), else `python` / `pythonPath`, else resolvePython()'s.
 * @param {LaunchOptions} options
 * @returns {string}
 */
function supervisorPython(options) {
  if (options.command && PYTHON.test(path.basename(String(options.command)))) return String(options.command);
  return launcher.resolvePython({ python: options.python || options.pythonPath });
}

class Job extends FeedJob {
  /**
   * Use launch() (src/index.js).
   * @param {LaunchOptions} options
   */
  constructor(options) {
    checkOptions(options); // bad options fail here, before anything is started
    if (options.detached) throw new TypeError(DETACHED_REMOVED);
    const { config, worker } = splitTimeouts(options.timeouts);
    super(`job-${crypto.randomBytes(6).toString('hex')}`);
    const stdin = options.stdin ?? 'ignore';
    if (!Object.prototype.hasOwnProperty.call(STDIN_MODES, stdin)) {
      throw new TypeError(`stdin must be one of ${Object.keys(STDIN_MODES).join(', ')}, not ${JSON.stringify(stdin)}`);
    }
    // No command: the Python of `python` (python-shell's `pythonPath`), else resolvePython().
    const program = options.command || launcher.resolvePython({ python: options.python || options.pythonPath });
    this.command = [program, ...(options.args || [])].map(String);
    this._options = options;
    this._helloed = false; // the lead said hello: send() holds nothing back from here
    this._held = 0; // sends made before it
    this.stdin = STDIN_MODES[stdin] === 'pipe' ? new PassThrough() : null;
    this.stdout = options.raw ? new PassThrough() : null;
    this.stderr = options.raw ? new PassThrough() : null;
    const env = { ...(options.env || process.env) };
    for (const [name, value] of Object.entries(worker)) env[WORKER_ENV[name]] = String(value);
    this._server = JobServer.for(supervisorPython(options));
    this._server.launch(this, {
      key: crypto.randomBytes(32).toString('hex'),
      command: this.command,
      cwd: options.cwd ?? null,
      env,
      config,
      log_path: options.logPath ?? null,
      tail_lines: options.tailLines ?? null,
      zero_code: options.zeroCode !== false,
      stdin: STDIN_MODES[stdin] === 'inherit' ? 'pipe' : STDIN_MODES[stdin],
      raw: Boolean(options.raw),
      python_env: options.pythonEnv !== false,
      log_timestamps: Boolean(options.logTimestamps),
      stop_on_nan: options.stopOnNan ?? null,
      sample_resources: Boolean(options.sampleResources),
      lines: true, // read a run of output events as one `lines` line (bridge/jobserve.py)
    });
    // 'inherit': this process's stdin, passed on through the job server (its own stdin is its
    // request pipe), and let go at the end
    const input = this.stdin || (STDIN_MODES[stdin] === 'inherit' ? process.stdin : null);
    if (input) {
      const onData = (/** @type {Buffer} */ chunk) => this._server.send({ op: 'stdin', job: this.id, data: Buffer.from(chunk).toString('base64') });
      const onEnd = () => this._server.send({ op: 'stdin_end', job: this.id });
      input.on('data', onData);
      input.once('end', onEnd);
      this._releaseInput = () => {
        input.off('data', onData);
        input.off('end', onEnd);
        if (input === process.stdin) process.stdin.pause();
      };
    }
    if (options.signal) this._followAbortSignal(options.signal);
  }

  // --- public API -------------------------------------------------------------------
  /**
   * Ask the job to stop: in-band cancel, then SIGTERM to the tree, then SIGKILL. `reason` is
   * echoed in the report's `cancel`. Resolves to the report.
   */
  /** @param {{grace?: number | null, reason?: string | null}} [options] */
  cancel({ grace, reason } = {}) {
    this._server.send({ op: 'cancel', job: this.id, grace: grace ?? null, reason: reason || 'cancelled by the client' });
    return this.done;
  }

  /**
   * The user sent the process `signal` (SIGINT / SIGTERM / SIGHUP) outside cancel(), as the
   * shell adapter's kill() does: the report's `cancel` says by what (by: 'signal').
   * @param {string} signal
   * @param {string} reason
   */
  noteUserSignal(signal, reason) {
    this._server.send({ op: 'user_signal', job: this.id, signal, reason });
  }

  /**
   * noteUserSignal(), and the supervisor sends the job's process `signal` right after noting
   * it, so its exit is judged as the user's stop (the shell adapter's kill()). Sent by this
   * process on hearing of the spawn, it could come before the note did, and the job was
   * called crashed. For SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGKILL.
   * @param {string} signal
   * @param {string} reason
   */
  _stopWith(signal, reason) {
    this._server.send({ op: 'user_signal', job: this.id, signal, reason, send: true });
  }

  /**
   * Send a message (any JSON-like value) to the training script (worker.on_message() /
   * worker.receive()), in order; held until the worker says hello. Throws a RangeError for a
   * value that cannot be sent, an Error once the job ended.
   * @param {unknown} data
   */
  send(data) {
    const problem = messageProblem(data);
    if (problem) throw new RangeError(`job.send: cannot send this message (${problem})`);
    if (this.report) throw new Error(`job.send: job ${this.id} has ended`);
    if (!this._helloed && this._held >= OUTBOX_LIMIT) {
      throw new Error(`job.send: ${OUTBOX_LIMIT} messages wait for the worker's hello; does the script import trainbridge.worker?`);
    }
    if (!this._helloed) this._held += 1;
    const request = this._server.requestId();
    this._server.send({ op: 'send', job: this.id, data, request });
    this._reply(request, 60000).then((reply) => { // the supervisor's own check is the last word
      if (reply && !reply.ok) this._emitError(new Error(`job.send: ${reply.error}`));
    });
  }

  /**
   * Every thread's Python stack, from the worker (null: no worker, or no answer in time).
   * @returns {Promise<string | null>}
   */
  async dumpStacks({ timeout = 2 } = {}) {
    const reply = await this._ask('dump_stacks', { timeout }, timeout);
    return reply && typeof reply.stacks === 'string' ? reply.stacks : null;
  }

  /**
   * Round trip to the worker's beacon in seconds (null: no worker, or no answer in time).
   * @returns {Promise<number | null>}
   */
  async ping({ timeout = 2 } = {}) {
    const reply = await this._ask('ping', { timeout }, timeout);
    return reply && reply.ok && typeof reply.rtt_s === 'number' ? reply.rtt_s : null;
  }

  /**
   * The TRAINBRIDGE_* variables for this job's ranks on other hosts (bridge's Job.remote_env):
   * the supervisor listens on tcp://address:port with CurveZMQ. Rejects a loopback address.
   * @param {string} address
   * @returns {Promise<Record<string, string>>}
   */
  async remoteEnv(address, port = 0) {
    const reply = await this._ask('remote_env', { address, port }, 10);
    if (!reply) throw new Error(`remoteEnv: the supervisor did not answer (job ${this.id} ${this.report ? 'ended' : 'is not running'})`);
    if (!reply.ok) throw new TypeError(String(reply.error).replace(/^[A-Za-z]+Error: /, ''));
    return reply.env;
  }

  /**
   * A request to the supervisor about the job: its reply, or null (ended, gone, no answer in time).
   * @param {string} op
   * @param {Record<string, unknown>} fields
   * @param {number} timeout seconds
   * @returns {Promise<FeedLine | null>}
   */
  _ask(op, fields, timeout) {
    if (this.report) return Promise.resolve(null);
    const request = this._server.requestId();
    if (!this._server.send({ op, job: this.id, request, ...fields })) return Promise.resolve(null);
    return this._reply(request, (Number(timeout) + 1) * 1000);
  }

  /**
   * An AbortSignal (as execa's and child_process's): its abort cancels the job.
   * @param {AbortSignalLike} signal
   */
  _followAbortSignal(signal) {
    const onAbort = () => this.cancel();
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    this._unfollowAbort = () => signal.removeEventListener('abort', onAbort);
  }

  // --- from the server ------------------------------------------------------------------
  /**
   * A line of the server's feed for this job.
   * @param {FeedLine} event
   */
  _fromServer(event) {
    if (event.event === 'raw') {
      const stream = this[/** @type {'stdout' | 'stderr'} */ (event.stream)];
      if (stream) stream.write(Buffer.from(event.data, 'base64'));
    } else if (event.event === 'raw_end') {
      const stream = this[/** @type {'stdout' | 'stderr'} */ (event.stream)];
      if (stream) stream.end();
    } else if (event.event === 'launch_failed') {
      this._launchFailed(event);
    } else {
      const { job: _job, ...rest } = event; // the server's routing, not the job's event
      if (rest.event === 'message' && rest.kind === 'hello' && rest.sender?.lead !== false) this._helloed = true;
      this._deliver(rest);
    }
  }

  /**
   * The command could not be started (not found, not executable, bad cwd): no report.
   * @param {FeedLine} event the server's launch_failed line, or the server's own {message}
   */
  _launchFailed(event) {
    this._server.forget(this);
    const error = new LaunchError(String(event.message));
    this.state = 'ended';
    this._emitError(error);
    this._rejectDone(error);
  }

  /**
   * The supervisor died before the job's end: the job is lost (its workers end its tree). The
   * report says what was last known, in the fields a scheduled job's lost report has
   * (bridge/scheduler.py _short_report): the judge's last stage and progress, the note, and
   * the note as the reason. No verdict is made here: the judge is gone.
   * @param {string} why
   */
  _lost(why) {
    if (this.report) return;
    const last = this.status();
    const stage = last.stages.length ? last.stages[last.stages.length - 1] : null;
    const progress = last.step === null ? null : { step: last.step, total: last.total };
    const known = [`state ${last.state}`];
    if (stage) known.push(`stage '${stage}'`);
    if (progress) known.push(`step ${progress.step}${progress.total ? ` of ${progress.total}` : ''}`);
    const note = `${why}; the job's end was not seen. Last known: ${known.join(', ')}. `
      + 'Its processes end themselves when their supervisor is gone';
    this._end({
      outcome: 'lost', job_id: this.id, command: this.command, pid: this.pid, exit_code: null, signal: null,
      stage, progress, note, summary: `Job lost: ${note}.`, reason: note,
    });
  }

  _ended() {
    this._server.forget(this);
    if (this._unfollowAbort) this._unfollowAbort();
    if (this._releaseInput) this._releaseInput();
    for (const stream of [this.stdout, this.stderr]) if (stream && !stream.writableEnded) stream.end();
  }

  /** @param {Report} report */
  _settle(report) {
    if (this._options.rejectOnFailure && FAILED_OUTCOMES.includes(report.outcome)) {
      this._rejectDone(new JobFailedError(report));
    } else {
      this._resolveDone(report);
    }
  }
}

/**
 * Why `data` cannot go to the worker as a message (docs/PROTOCOL.md "Limits"), or null: a value
 * JSON cannot carry, one deeper than MAX_DEPTH, or more than MAX_MESSAGE_BYTES. The supervisor
 * checks it again with the codec (its refusal reaches 'error').
 * @param {unknown} data
 * @returns {string | null}
 */
function messageProblem(data) {
  let text;
  try {
    text = JSON.stringify(data, (key, value) => (typeof value === 'bigint' ? value.toString() : value));
  } catch (err) {
    return /** @type {Error} */ (err).message;
  }
  if (text === undefined) return `a ${typeof data} is not a JSON value`;
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_MESSAGE_BYTES) return `it takes ${bytes} bytes; at most ${MAX_MESSAGE_BYTES} go in one message`;
  let depth = 0;
  let most = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '\\') i += 1;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '[' || c === '{') most = Math.max(most, ++depth);
    else if (c === ']' || c === '}') depth -= 1;
  }
  return most > MAX_DEPTH ? `it nests ${most} deep; at most ${MAX_DEPTH}` : null;
}

/** `done`'s rejection with rejectOnFailure: the job failed, crashed or hung; `report` says how. */
class JobFailedError extends Error {
  /** @param {Report} report */
  constructor(report) {
    super(`trainbridge: ${report.summary || `the job ${report.outcome}`}`);
    this.name = 'JobFailedError';
    this.outcome = report.outcome;
    this.report = report;
  }
}

module.exports = { Job, JobFailedError, LaunchError, FAILED_OUTCOMES, STOP_SIGNALS };
