'use strict';
/**
 * `npm pack` / `npm publish` run this first (prepack): it copies the pure-Python package into
 * python/trainbridge/ so the package works outside the repository with nothing of trainbridge
 * installed in the training venv: the worker (trainbridge.worker), the wire protocol
 * (trainbridge.protocol), the package's __init__ and __main__, and the supervisor
 * (trainbridge.bridge: the job store's helper that openStore() runs, the keepers it starts,
 * doctor, the zero-code hook in bridge/inject). `node scripts/bundle-python.js --clean`
 * (postpack) removes the copies (and LICENSE, copied from the repository's root) again, so
 * the checkout never holds two versions.
 *
 * The training environment needs pyzmq and msgpack (what the worker needs is all the
 * supervisor needs); without them a launched job runs supervised without a worker (the report
 * and a 'no_worker' event say why), and openStore() says what to install where.
 */

const fs = require('node:fs');
const path = require('node:path');

const PACKAGE = path.resolve(__dirname, '..');
const REPO = path.resolve(PACKAGE, '..');
const OUT = path.join(PACKAGE, 'python');
const LICENSE = path.join(PACKAGE, 'LICENSE'); // the repository's, copied for the tarball

function copy(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}

function bundle() {
  fs.rmSync(OUT, { recursive: true, force: true });
  const dest = path.join(OUT, 'trainbridge');
  for (const name of ['__init__.py', '__main__.py', 'py.typed']) copy(path.join(REPO, 'trainbridge', name), path.join(dest, name));
  // The packages as pyproject.toml installs them: each folder's .py files, no caches
  for (const pkg of ['protocol', 'worker', 'bridge', 'bridge/inject', 'bridge/doctor']) {
    for (const name of fs.readdirSync(path.join(REPO, pkg)).sort()) {
      if (name.endsWith('.py')) copy(path.join(REPO, pkg, name), path.join(dest, pkg, name));
    }
  }
  copy(path.join(REPO, 'LICENSE'), LICENSE);
}

function clean() {
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.rmSync(LICENSE, { force: true });
}

if (process.argv.includes('--clean')) clean();
else bundle();
