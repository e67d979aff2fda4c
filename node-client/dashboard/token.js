'use strict';
/**
 * The dashboard's token (docs/SECURITY.md): what a request must carry to list, start, cancel
 * or read jobs. Like Jupyter's: made at random, kept in a file only this user can read, shown
 * once as part of the address the server prints, never in argv (every account reads argv in
 * `ps`). Where it comes from, first match:
 *   1. $TRAINBRIDGE_DASHBOARD_TOKEN;
 *   2. --token-file FILE;
 *   3. the per-user file: $XDG_CONFIG_HOME/trainbridge/dashboard-token (~/.config/...),
 *      made on first use (0600 in a 0700 directory). Kept, so a bookmarked address and an
 *      open page still work after the dashboard restarts.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PrivateFileError, checkOwned, privateDir } = require('../src/private_files.js');

const MIN_LENGTH = 16;

/** A fresh random token: 32 bytes, URL-safe. */
function newToken() {
  return crypto.randomBytes(32).toString('base64url');
}

/** The per-user token file (XDG config dir on Linux). */
function defaultTokenFile(env = process.env) {
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'trainbridge', 'dashboard-token');
}

/**
 * @param {unknown} token
 * @param {string} where
 * @returns {string}
 */
function checkToken(token, where) {
  if (typeof token !== 'string' || token.length < MIN_LENGTH || !/^[\x21-\x7e]+$/.test(token)) {
    throw new Error(`the dashboard token in ${where} must be at least ${MIN_LENGTH} printable ASCII characters `
      + '(no spaces); a short one can be guessed');
  }
  return token;
}

/**
 * The token in `file`, which must be a regular file of this user's that only it can read.
 * @param {string} file
 * @returns {string}
 */
function readTokenFile(file) {
  let fd;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ELOOP') throw new PrivateFileError(file, 'it is a symbolic link', 'give the path of the token file itself');
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new PrivateFileError(file, 'it is not a regular file', 'give the path of the token file');
    checkOwned(file, st);
    if (st.mode & 0o077) {
      throw new PrivateFileError(file, `other users may read it (mode ${(st.mode & 0o777).toString(8)})`,
        `run: chmod 600 ${file}`);
    }
    return checkToken(fs.readFileSync(fd, 'ascii').trim(), file);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Make the token file with a new token (0600, O_EXCL); if another process just made it, read theirs.
 * @param {string} file
 * @returns {string}
 */
function createTokenFile(file) {
  privateDir(path.dirname(file));
  const token = newToken();
  let fd;
  try {
    fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'EEXIST') return readTokenFile(file);
    throw err;
  }
  try {
    fs.writeSync(fd, `${token}\n`);
  } finally {
    fs.closeSync(fd);
  }
  return token;
}

/**
 * Resolve the token: {token, source} where source says where it came from (for the message
 * the server prints). file: --token-file; env: the environment to read.
 * @param {{file?: string | null, env?: NodeJS.ProcessEnv}} [options]
 */
function loadToken({ file = null, env = process.env } = {}) {
  if (env.TRAINBRIDGE_DASHBOARD_TOKEN) {
    return { token: checkToken(env.TRAINBRIDGE_DASHBOARD_TOKEN, '$TRAINBRIDGE_DASHBOARD_TOKEN'), source: '$TRAINBRIDGE_DASHBOARD_TOKEN' };
  }
  const where = file || defaultTokenFile(env);
  try {
    return { token: readTokenFile(where), source: where };
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code !== 'ENOENT') throw err;
  }
  if (file) throw new Error(`--token-file ${file}: no such file (leave it out to use ${defaultTokenFile(env)}, made on first use)`);
  return { token: createTokenFile(where), source: where };
}

module.exports = { loadToken, newToken, defaultTokenFile, readTokenFile, MIN_LENGTH };
