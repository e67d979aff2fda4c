'use strict';
/**
 * python-shell's surface, running under trainbridge supervision:
 *
 *   const { PythonShell } = require('trainbridge/shell');   // was: require('python-shell')
 *
 * Same constructor, options (mode text / json / binary, formatter, parser, stderrParser,
 * encoding, pythonPath, pythonOptions, scriptPath, args, cwd, env), events ('message' per
 * stdout line, 'stderr' per stderr line, 'pythonError', 'error', 'close'), send(), end(cb)
 * with python-shell's error fields, kill(), and the statics run / runString / checkSyntax /
 * getVersion. What it adds: `shell.job` (the supervised Job: stages, progress, hangs) and
 * `shell.report` (the final report), also on the error as `err.report`, and the option
 * `rejectOnFailure` (a crash, failure or hang is an error, also without an exit code). What
 * it does differently, and why: docs/CLIENT.md, "python-shell adapter".
 *
 * The child's stdio is kept as it is: stdin is a pipe the script reads, stdout and stderr
 * are the bytes it wrote (raw streams of the job), split into messages here exactly as
 * python-shell splits them (on "\n", the last piece at the end).
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const { EventEmitter } = require('node:events');
const { Transform } = require('node:stream');
const { execFile, execFileSync } = require('node:child_process');
const { fileURLToPath } = require('node:url');
const { promisify } = require('node:util');
const { launch } = require('./index.js');

/** @typedef {import('./feed_job.js').Report} Report */
/** @typedef {import('node:stream').PassThrough} PassThrough */
/** @typedef {import('node:stream').TransformCallback} TransformCallback */
/**
 * A mode's formatter or parser, or the caller's own: python-shell's (param: any) => any (src/shell.d.ts),
 * the caller's data in (a message, a line), the caller's out (a JSON message parsed).
 * @typedef {(data: any) => any} Transcoder
 */
/**
 * python-shell's options (src/shell.d.ts Options): of spawn's own, cwd and env are used; the ones in
 * BRIDGE_OPTIONS are launch()'s, checked there.
 * @typedef {{mode?: string, formatter?: string | Transcoder, parser?: string | Transcoder,
 *   stderrParser?: string | Transcoder, encoding?: BufferEncoding, pythonPath?: string,
 *   pythonOptions?: string | string[], scriptPath?: string, args?: string | string[], cwd?: string | URL,
 *   env?: NodeJS.ProcessEnv, rejectOnFailure?: boolean, [option: string]: unknown}} ShellOptions
 */
/** @typedef {(err: Error | undefined, exitCode: number | null, exitSignal: string | null) => unknown} EndCallback */

/** The error of a script that exited with a non-zero status (python-shell's fields). */
class PythonShellError extends Error {
  /** @param {string} [message] */
  constructor(message) {
    super(message);
    /** @type {string | undefined} the Python traceback, as python-shell gives it */
    this.traceback = undefined;
  }
}
class PythonShellErrorWithLogs extends PythonShellError {}

/** Splits a text stream into "\n"-separated pieces; the rest comes at the end. */
class NewlineTransformer extends Transform {
  constructor() {
    super({ readableObjectMode: true });
    this._rest = '';
  }

  /** @param {Buffer | string} chunk @param {BufferEncoding} encoding @param {TransformCallback} callback */
  _transform(chunk, encoding, callback) {
    const pieces = (this._rest + chunk.toString()).split('\n');
    this._rest = /** @type {string} */ (pieces.pop()); // split() gives one piece at least
    for (const piece of pieces) this.push(piece);
    callback();
  }

  /** @param {TransformCallback} callback */
  _flush(callback) {
    if (this._rest) this.push(this._rest);
    this._rest = '';
    callback();
  }
}

/** @type {(n: number) => string} */
const signalName = (n) => Object.keys(os.constants.signals)
  .find((k) => /** @type {Record<string, number>} */ (os.constants.signals)[k] === n) || `SIG${n}`;
/** @type {<T>(value: T | T[] | undefined | null) => T[]} */
const toArray = (value) => (value === undefined || value === null ? [] : Array.isArray(value) ? value : [value]);

// Options that are trainbridge's, not spawn's.
const BRIDGE_OPTIONS = ['timeouts', 'logPath', 'tailLines', 'zeroCode', 'pythonEnv'];
// With rejectOnFailure these outcomes give end()'s callback an error: launch()'s rule, from its one home.
const { FAILED_OUTCOMES, STOP_SIGNALS } = require('./job.js');

/**
 * A folder as spawn() would take it now: python-shell spawns in its constructor, so a relative
 * cwd (and the script path, relative to the cwd) means the current folder at construction.
 * @type {(value: string | URL | undefined) => string}
 */
const folderNow = (value) => path.resolve(value instanceof URL ? fileURLToPath(value) : value ?? '.');

class PythonShell extends EventEmitter {
  /**
   * @param {unknown} scriptPath checked here
   * @param {ShellOptions | null} [options]
   * @param {import('node:stream').Transform | null} [stdoutSplitter]
   * @param {import('node:stream').Transform | null} [stderrSplitter]
   */
  constructor(scriptPath, options, stdoutSplitter = null, stderrSplitter = null) {
    super();
    if (typeof scriptPath !== 'string' || scriptPath.trim().length === 0) {
      throw new Error('scriptPath cannot be empty! You must give a script for python to run');
    }
    options = { ...PythonShell.defaultOptions, ...(options || {}) };
    /** @type {(table: 'format' | 'parse', value: string | Transcoder) => Transcoder | undefined} */
    const resolve = (table, value) => (typeof value === 'string' ? PythonShell[table][value] : typeof value === 'function' ? value : undefined);
    const pythonPath = options.pythonPath || PythonShell.defaultPythonPath;
    const pythonOptions = toArray(options.pythonOptions);
    const scriptArgs = toArray(options.args);
    this.scriptPath = path.join(options.scriptPath || '', scriptPath);
    this.command = pythonOptions.concat(this.scriptPath, scriptArgs);
    this.mode = options.mode || 'text';
    this.formatter = resolve('format', options.formatter || this.mode);
    this.parser = resolve('parse', options.parser || this.mode);
    this.stderrParser = resolve('parse', options.stderrParser || 'text');
    this.terminated = false;
    /** @type {number | null} */
    this.exitCode = null;
    /** @type {string | null} */
    this.exitSignal = null;
    /** @type {Report | null} */
    this.report = null;
    /** @type {EndCallback | null} */
    this._endCallback = null;
    this._closed = false; // 'close' was emitted (or the launch failed): the shell is over
    this._rejectOnFailure = Boolean(options.rejectOnFailure);
    /** @type {(string | number)[]} */
    this._pendingSignals = []; // kill() before the child existed: sent once it does

    /** @type {Record<string, unknown>} */
    const bridge = {};
    for (const name of BRIDGE_OPTIONS) if (options[name] !== undefined) bridge[name] = options[name];
    if (typeof bridge.logPath === 'string') bridge.logPath = path.resolve(bridge.logPath);
    // python-shell passes the caller's environment as it is: so do we (pythonEnv: false).
    // The spawn comes later (by the job server): the folders are fixed now, as python-shell's.
    this.job = launch({
      pythonEnv: false, ...bridge, command: pythonPath, args: this.command, cwd: folderNow(options.cwd), env: options.env,
      stdin: 'pipe', raw: true,
    });
    this.job.once('spawn', ({ pid }) => {
      for (const signal of this._pendingSignals.splice(0)) signalProcess(pid, signal);
    });
    this.stdin = this.job.stdin;
    // raw: true: the job's stdout and stderr are streams, never null
    this.stdout = /** @type {PassThrough} */ (this.job.stdout);
    this.stderr = /** @type {PassThrough} */ (this.job.stderr);
    this._errorData = '';
    this._ended = { stdout: false, stderr: false, exit: false };
    this._errorFields = {
      executable: pythonPath, options: pythonOptions.length ? pythonOptions : null, script: this.scriptPath,
      args: scriptArgs.length ? scriptArgs : null,
    };
    this._split(options.encoding || 'utf8', stdoutSplitter, stderrSplitter);
    this.job.done.then((report) => this._exited(report), (err) => this._launchFailed(err));
  }

  /**
   * Messages per stdout line and 'stderr' events per stderr line (not in binary mode).
   * @param {BufferEncoding} encoding
   * @param {import('node:stream').Transform | null} stdoutSplitter
   * @param {import('node:stream').Transform | null} stderrSplitter
   */
  _split(encoding, stdoutSplitter, stderrSplitter) {
    if (this.parser) {
      this.stdout.setEncoding(encoding);
      const splitter = stdoutSplitter || new NewlineTransformer();
      splitter.setEncoding(encoding);
      this.stdout.pipe(splitter).on('data', (line) => this.emit('message', /** @type {Transcoder} */ (this.parser)(line)));
    } // binary: the bytes are the caller's to read from shell.stdout
    this.stdout.on('end', () => this._streamEnded('stdout'));
    if (this.stderrParser) {
      this.stderr.setEncoding(encoding);
      const splitter = stderrSplitter || new NewlineTransformer();
      splitter.setEncoding(encoding);
      this.stderr.pipe(splitter).on('data', (line) => this.emit('stderr', /** @type {Transcoder} */ (this.stderrParser)(line)));
    }
    this.stderr.on('data', (data) => { this._errorData += String(data); });
    this.stderr.on('end', () => this._streamEnded('stderr'));
  }

  /** @param {'stdout' | 'stderr'} name */
  _streamEnded(name) {
    this._ended[name] = true;
    this._terminateIfNeeded();
  }

  /** @param {Report} report */
  _exited(report) {
    this.report = report;
    this.exitCode = report.exit_code ?? null;
    this.exitSignal = report.signal ?? null;
    this.emit('report', report);
    this._ended.exit = true;
    // Unread stdout (binary mode, nobody reading) is drained, as Node does for a child's
    // stdio at its exit, so that it ends and the shell closes (python-shell's behaviour).
    if (this.stdout.readableFlowing === null) this.stdout.resume();
    this._terminateIfNeeded();
  }

  /** The command could not be started (python-shell: the child process's 'error'). @param {Error} err */
  _launchFailed(err) {
    this._closed = true;
    this.terminated = true;
    this.emit('error', err);
    if (this._endCallback) this._endCallback(err, null, null);
  }

  /** Once both streams ended and the job is over: the error (if any), 'close', end's callback. */
  _terminateIfNeeded() {
    const { stdout, stderr, exit } = this._ended;
    if (!stdout || !stderr || !exit || this._closed) return;
    this._closed = true;
    let err;
    if (this.exitCode) {
      err = this._errorData ? this._parseError(this._errorData) : new PythonShellError(`process exited with code ${this.exitCode}`);
    } else if (this._rejectOnFailure && FAILED_OUTCOMES.includes(/** @type {Report} */ (this.report).outcome)) { // exit: _exited() set it
      err = new PythonShellError(`trainbridge: ${/** @type {Report} */ (this.report).summary
        || `the script ${/** @type {Report} */ (this.report).outcome}`}`);
    }
    if (err) {
      Object.assign(err, this._errorFields, { exitCode: this.exitCode, report: this.report });
      if (this._rejectOnFailure) Object.assign(err, { exitSignal: this.exitSignal, outcome: /** @type {Report} */ (this.report).outcome });
      if (this.listenerCount('pythonError') > 0 || !this._endCallback) this.emit('pythonError', err);
    }
    this.terminated = true;
    this.emit('close');
    if (this._endCallback) this._endCallback(err, this.exitCode, this.exitSignal);
  }

  /** Send a message to the script's stdin: formatted per mode, then a newline (not in binary). @param {unknown} message */
  send(message) {
    if (!this.stdin) throw new Error('stdin not open for writing');
    let data = this.formatter ? this.formatter(message) : message;
    if (this.mode !== 'binary') data += os.EOL;
    this.stdin.write(data);
    return this;
  }

  /** Close stdin; callback(err, exitCode, exitSignal) once the script ended. @param {EndCallback} callback */
  end(callback) {
    if (this.stdin) this.stdin.end();
    this._endCallback = callback;
    return this;
  }

  /**
   * Send `signal` to the script's process (default SIGTERM) and set `terminated`, as
   * python-shell. Before the child exists (right after the constructor), the signal is sent
   * the moment it is spawned. The report says cancelled, by that signal (cancel.by 'signal').
   * For a clean stop with escalation: job.cancel().
   * @param {string | number} [signal]
   */
  kill(signal) {
    signal = signal || 'SIGTERM';
    if (!this._closed && !this.job.report) {
      const name = typeof signal === 'number' ? signalName(signal) : signal;
      if (STOP_SIGNALS.includes(name)) {
        // the supervisor notes it, then sends it: the exit is the user's stop, not a crash
        this.job._stopWith(name, `${name} sent by kill() to the script`);
      } else if (this.job.pid) signalProcess(this.job.pid, signal);
      else this._pendingSignals.push(signal);
    }
    this.terminated = true;
    return this;
  }

  /** @deprecated python-shell's alias for kill(). @param {string | number} [signal] */
  terminate(signal) {
    return this.kill(signal);
  }

  /** @param {string} data */
  _parseError(data) {
    const text = String(data);
    if (/^Traceback/.test(text)) {
      const lines = text.trim().split(os.EOL);
      const error = new PythonShellError(lines.pop());
      error.traceback = data;
      error.stack += `${os.EOL}    ----- Python Traceback -----${os.EOL}  ${lines.slice(1).join(`${os.EOL}  `)}`;
      return error;
    }
    return new PythonShellError(text);
  }

  /**
   * Run a script; resolves to its messages, rejects with the error (err.logs: the messages).
   * @param {string} scriptPath
   * @param {ShellOptions} [options]
   * @returns {Promise<unknown[]>}
   */
  static run(scriptPath, options) {
    return new Promise((resolve, reject) => {
      const shell = new PythonShell(scriptPath, options);
      /** @type {unknown[]} */
      const output = [];
      shell.on('message', (message) => output.push(message));
      shell.end((err) => {
        if (err) {
          /** @type {Error & {logs?: unknown[]}} */ (err).logs = output;
          reject(err);
        } else {
          resolve(output);
        }
      });
    });
  }

  /**
   * Run Python code given as a string (written to a temporary file, removed afterwards).
   * @param {string} code
   * @param {ShellOptions} [options]
   */
  static async runString(code, options) {
    const file = path.join(os.tmpdir(), `trainbridgeShell${crypto.randomBytes(6).toString('hex')}.py`);
    fs.writeFileSync(file, code);
    try {
      return await PythonShell.run(file, options);
    } finally {
      fs.rmSync(file, { force: true });
    }
  }

  static getPythonPath() {
    return PythonShell.defaultOptions.pythonPath || PythonShell.defaultPythonPath;
  }

  /** Compile `code` without running it; rejects with the compiler's output. @param {string} code */
  static async checkSyntax(code) {
    const file = path.join(os.tmpdir(), `trainbridgeSyntax${crypto.randomBytes(6).toString('hex')}.py`);
    fs.writeFileSync(file, code);
    try {
      return await PythonShell.checkSyntaxFile(file);
    } finally {
      fs.rmSync(file, { force: true });
    }
  }

  /** @param {string} filePath */
  static checkSyntaxFile(filePath) {
    return execPromise(PythonShell.getPythonPath(), ['-m', 'py_compile', filePath]);
  }

  /** @param {string} [pythonPath] */
  static getVersion(pythonPath) {
    return execPromise(pythonPath || PythonShell.getPythonPath(), ['--version']);
  }

  /** @param {string} [pythonPath] */
  static getVersionSync(pythonPath) {
    return execFileSync(pythonPath || PythonShell.getPythonPath(), ['--version']).toString();
  }
}

/** @param {number} pid @param {string | number} signal */
function signalProcess(pid, signal) {
  try { process.kill(pid, signal); } catch { /* already gone */ }
}

// As python-shell's exec: resolves to {stdout, stderr}, rejects with the Error (code, stdout, stderr).
const execPromise = promisify(execFile);

PythonShell.defaultPythonPath = process.platform !== 'win32' ? 'python3' : 'python';
/** @type {ShellOptions} */
PythonShell.defaultOptions = {};
/** @type {Record<string, Transcoder>} */
PythonShell.format = {
  text: (data) => (data ? String(data) : ''),
  json: (data) => JSON.stringify(data),
};
/** @type {Record<string, Transcoder>} */
PythonShell.parse = {
  text: (data) => String(data),
  json: (data) => JSON.parse(data),
};

module.exports = { PythonShell, PythonShellError, PythonShellErrorWithLogs, NewlineTransformer };
