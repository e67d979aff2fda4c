'use strict';
/**
 * Files only their owner can read, written where nobody else can redirect them
 * (docs/SECURITY.md). The twin of bridge/private_files.py: created 0600 (directories 0700) by
 * the mode given to open(2), never through a symbolic link someone could have planted, never
 * into a file another account owns.
 */

const fs = require('node:fs');

const FILE_MODE = 0o600;
const DIR_MODE = 0o700;
const { O_WRONLY, O_APPEND, O_CREAT, O_NOFOLLOW } = fs.constants;

class PrivateFileError extends Error {
  /**
   * @param {string} file
   * @param {string} why
   * @param {string} whatToDo
   */
  constructor(file, why, whatToDo) {
    super(`${file}: ${why}; ${whatToDo}`);
    this.name = 'PrivateFileError';
    this.code = 'EPERM';
    this.path = file;
  }
}

/**
 * Refuse a file or directory that another account owns.
 * @param {string} file
 * @param {import('node:fs').Stats} st
 */
function checkOwned(file, st) {
  const uid = /** @type {() => number} */ (process.geteuid)(); // POSIX only, as the package (package.json "os")
  if (st.uid !== uid) {
    throw new PrivateFileError(file, `it belongs to uid ${st.uid}, not to this user (uid ${uid}), who would be able to read `
      + 'what trainbridge writes there', 'choose a path of your own');
  }
}

/**
 * An fd appending to `file` (a log), created 0600 if new. Refuses a symbolic link and a file
 * another account owns.
 * @param {string} file
 * @returns {number}
 */
function openAppend(file) {
  let fd;
  try {
    fd = fs.openSync(file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, FILE_MODE);
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ELOOP') {
      throw new PrivateFileError(file, 'it is a symbolic link, which trainbridge does not write through',
        'give the path of the file itself');
    }
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    checkOwned(file, st);
    if (!st.isFile() && !st.isFIFO() && !st.isCharacterDevice()) {
      throw new PrivateFileError(file, 'it is not a regular file', 'give the path of a file');
    }
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  return fd;
}

/**
 * Make `dir` (and missing parents) with mode 0700.
 * @param {string} dir
 */
function privateDir(dir) {
  fs.mkdirSync(dir, { recursive: true, mode: DIR_MODE });
}

module.exports = { PrivateFileError, checkOwned, openAppend, privateDir };
