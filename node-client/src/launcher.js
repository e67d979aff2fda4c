'use strict';
/**
 * Which Python runs a helper (the job server, the store's, doctor's), and where it imports
 * trainbridge from: the checkout in the repository, else the package's own copy
 * (scripts/bundle-python.js), so a training venv with only pyzmq and msgpack runs the supervisor.
 */

const fs = require('node:fs');
const path = require('node:path');

// In the repository the package sits in node-client/, beside trainbridge/, worker/ and bridge/.
const REPO = path.resolve(__dirname, '../..');
const IN_REPO = fs.existsSync(path.join(REPO, 'trainbridge', '__init__.py'));
const BUNDLED_PYTHON = path.resolve(__dirname, '../python');

/**
 * Where a Python helper (the job server, the store's) imports trainbridge from: the checkout (in
 * the repository), else the package's own copy, so a training venv with only pyzmq and msgpack
 * runs the supervisor. null when neither is there.
 */
function trainbridgeRoot() {
  for (const dir of [REPO, BUNDLED_PYTHON]) {
    if (fs.existsSync(path.join(dir, 'trainbridge', '__init__.py'))) return dir;
  }
  return null;
}

/** `env` with trainbridgeRoot() first on PYTHONPATH (a copy). */
function helperEnv(env = process.env) {
  const out = { ...env };
  const root = trainbridgeRoot();
  if (root) out.PYTHONPATH = root + (out.PYTHONPATH ? path.delimiter + out.PYTHONPATH : '');
  return out;
}

/**
 * A helper's stderr as one sentence when it could not import (what to install where), else all of it.
 * @param {string} stderr
 */
function helperFailure(stderr) {
  const lines = stderr.trim().split('\n');
  const last = lines[lines.length - 1] || '';
  const missing = /^(?:ImportError|ModuleNotFoundError): (.*)$/.exec(last);
  return missing ? missing[1] : stderr.trim();
}

/**
 * The Python to run, as python-shell's pythonPath: `python` when given, else
 * $TRAINBRIDGE_PYTHON, else the active venv's ($VIRTUAL_ENV), else (in the repository) its
 * .venv, else python3 from PATH.
 */
/** @param {{python?: string}} [options] */
function resolvePython({ python } = {}) {
  if (python) return python;
  if (process.env.TRAINBRIDGE_PYTHON) return process.env.TRAINBRIDGE_PYTHON;
  const active = process.env.VIRTUAL_ENV && path.join(process.env.VIRTUAL_ENV, 'bin', 'python');
  if (active && fs.existsSync(active)) return active;
  const repoVenv = path.join(REPO, '.venv', 'bin', 'python');
  if (IN_REPO && fs.existsSync(repoVenv)) return repoVenv;
  return 'python3';
}

/**
 * onLine(line) for each whole, non-blank line a helper writes on `stream` (a Readable); a line
 * still being written waits for its newline. Returns what is left unread (a last line without
 * one), for the helper's end.
 * @param {import('node:stream').Readable} stream
 * @param {BufferEncoding} encoding
 * @param {(line: string) => void} onLine
 * @returns {() => string}
 */
function readLines(stream, encoding, onLine) {
  let buf = '';
  stream.setEncoding(encoding);
  stream.on('data', (/** @type {string} */ text) => {
    buf += text;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.trim()) onLine(line);
    }
  });
  return () => buf;
}

module.exports = { resolvePython, trainbridgeRoot, helperEnv, helperFailure, readLines };
