'use strict';
/**
 * A second local account for the tests of docs/SECURITY.md (the twin of
 * tests/security/conftest.py): made on first use with useradd; each of its attempts runs under
 * it with setpriv (its uid and gid, no groups, no capabilities). The tests run as root, the user
 * under attack. Off root they skip and say why; under CI they fail instead.
 */

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const OTHER = 'tbother';

/** Why the tests cannot run here, or false. */
function unavailable() {
  if (process.geteuid() !== 0) return 'these tests make a second local account and switch to it: they need root';
  return false;
}

/** {uid, gid} of the other account, made if missing. */
function account() {
  const look = () => {
    const r = spawnSync('id', ['-u', OTHER], { encoding: 'utf8' });
    if (r.status !== 0) return null;
    return { uid: Number(r.stdout.trim()), gid: Number(spawnSync('id', ['-g', OTHER], { encoding: 'utf8' }).stdout.trim()) };
  };
  const found = look();
  if (found) return found;
  const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', OTHER], { encoding: 'utf8' });
  if (made.status !== 0 && made.status !== 9) throw new Error(`useradd ${OTHER} failed: ${made.stderr}`);
  return look();
}

/** Run argv as the other account; {status, stdout, stderr}. */
function asOther(who, argv, options = {}) {
  return spawnSync('setpriv', [`--reuid=${who.uid}`, `--regid=${who.gid}`, '--clear-groups', '--inh-caps=-all', '--', ...argv],
    { encoding: 'utf8', cwd: '/', timeout: 60000, ...options });
}

/** A directory outside the test runner's own temp dirs, with `mode` (0755: a home; 0777: a shared dir). */
function openDir(mode) {
  const dir = fs.mkdtempSync(path.join('/tmp', 'tb-sec-'));
  fs.chmodSync(dir, mode);
  return dir;
}

/** Whether the other account can read the file (or list the directory) at `p`. */
function canRead(who, p) {
  const r = asOther(who, [process.execPath, '-e',
    'const fs=require("fs");const p=process.argv[1];try{fs.statSync(p).isDirectory()?fs.readdirSync(p):fs.readFileSync(p);console.log("read")}catch(e){console.log(e.code);process.exit(3)}', p]);
  if (r.status !== 0 && r.status !== 3) throw new Error(`the read probe failed: ${r.stderr}`);
  return r.status === 0;
}

module.exports = { OTHER, unavailable, account, asOther, openDir, canRead };
