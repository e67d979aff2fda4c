'use strict';
/**
 * doctor(): the hang-proof environment preflight, from Node. It runs the Python side
 * (`python -m trainbridge.bridge.doctor --json`, or `trainbridge doctor --json`) and resolves to its
 * report (schema in docs/DOCTOR.md). A report whose verdicts say "do not train" (exit 1) still
 * resolves: that is an answer, not an error. It rejects only when the Python side could not
 * answer (not found, crashed, no JSON) or ran past a deadline of its own.
 */

const { spawn } = require('node:child_process');
const path = require('node:path');
const { resolvePython } = require('./launcher.js');

const DEFAULT_TIMEOUT_S = 20; // bridge.doctor.DEFAULT_TIMEOUT: each check's deadline
const PROBE_CHECKS = 11; // worst case: every check of the probe hangs to its deadline
const STDERR_KEEP = 16 * 1024;

/** @typedef {import('node:stream').Readable} Readable */
/**
 * The Python side's report (docs/DOCTOR.md "Report", index.d.ts DoctorReport): parsed JSON,
 * resolved as it is; only its exit_code is read here (it must be the process's exit status).
 * @typedef {{exit_code: number, [field: string]: any}} DoctorReport
 */

class DoctorError extends Error {
  /**
   * @param {string} message
   * @param {{exitCode?: number | null, signal?: NodeJS.Signals | null, stderr?: string}} [facts]
   */
  constructor(message, { exitCode = null, signal = null, stderr = '' } = {}) {
    super(message);
    this.name = 'DoctorError';
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderr = stderr;
  }
}

/**
 * The command that runs the Python side: a `trainbridge` script, or a Python with trainbridge.
 * @param {{python?: string, timeoutS?: number, trainbridge?: string, hosts?: string[], connectTimeoutS?: number}} [options]
 */
function doctorCommand({ python, timeoutS, trainbridge, hosts, connectTimeoutS } = {}) {
  const runner = trainbridge || resolvePython();
  const isScript = path.basename(runner).toLowerCase().replace(/\.exe$/, '') === 'trainbridge';
  const args = isScript ? ['doctor', '--json'] : ['-m', 'trainbridge.bridge.doctor', '--json'];
  if (python) args.push('--python', python);
  if (timeoutS != null) args.push('--timeout', String(timeoutS));
  if (connectTimeoutS != null) args.push('--connect-timeout', String(connectTimeoutS));
  for (const host of hosts || []) args.push('--host', String(host));
  return { file: runner, args };
}

/**
 * @param {{python?: string, timeoutS?: number, trainbridge?: string, hosts?: string[],
 *          connectTimeoutS?: number, env?: NodeJS.ProcessEnv, cwd?: string}} [options]
 *   python: the training venv's interpreter to check (default: the runner's own);
 *   timeoutS: each check's deadline; trainbridge: a Python that has trainbridge installed, or
 *   the `trainbridge` script (default: the repo venv, $TRAINBRIDGE_PYTHON, python3).
 * @returns {Promise<DoctorReport>} the parsed JSON report
 */
function doctor(options = {}) {
  const { file, args } = doctorCommand(options);
  const perCheck = options.timeoutS ?? DEFAULT_TIMEOUT_S;
  // The Python side bounds itself; this guard is for a Python side that cannot even start.
  const limitMs = (perCheck * (PROBE_CHECKS + 1) + (options.connectTimeoutS ?? 3) + 15) * 1000;
  return new Promise((resolve, reject) => {
    /** @type {import('node:child_process').ChildProcessByStdio<null, Readable, Readable>} */
    let child;
    try {
      child = spawn(file, args, {
        stdio: ['ignore', 'pipe', 'pipe'], env: options.env || process.env, cwd: options.cwd,
        windowsHide: true,
      });
    } catch (err) {
      reject(new DoctorError(`cannot start ${file}: ${/** @type {NodeJS.ErrnoException} */ (err).message}`));
      return;
    }
    /** @type {Buffer[]} */
    const out = [];
    let err = '';
    let timedOut = false;
    child.stdout.on('data', (/** @type {Buffer} */ chunk) => out.push(chunk));
    child.stderr.on('data', (/** @type {Buffer} */ chunk) => { err = (err + chunk.toString('utf8')).slice(-STDERR_KEEP); });
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL'); }, limitMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new DoctorError(`cannot start ${file}: ${e.message}`, { stderr: err }));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const facts = { exitCode: code, signal, stderr: err };
      if (timedOut) {
        reject(new DoctorError(`trainbridge doctor (${file}) did not finish within ${limitMs / 1000} s`, facts));
        return;
      }
      /** @type {DoctorReport} */
      let report;
      try {
        report = JSON.parse(Buffer.concat(out).toString('ascii'));
      } catch {
        const why = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        reject(new DoctorError(`trainbridge doctor (${file}) ${why} without a JSON report: `
          + `${err.trim().split('\n').slice(-3).join(' | ') || 'no output'}`, facts));
        return;
      }
      if (code !== report.exit_code) {
        reject(new DoctorError(`trainbridge doctor exited with ${code} but its report says ${report.exit_code}`,
          facts));
        return;
      }
      resolve(report);
    });
  });
}

module.exports = { doctor, doctorCommand, DoctorError };
