'use strict';
/**
 * `npm pack` / `npm publish` run this first (prepack): it copies the pure-Python side that a
 * supervised process needs into python/trainbridge/ so the package works outside the
 * repository: the worker (trainbridge.worker) and the wire protocol it imports
 * (trainbridge.protocol), the package's __init__, and the zero-code
 * hook (bridge/inject/sitecustomize.py). The client (trainbridge.bridge's other modules) is
 * not needed by a Node GUI and is left out. `node scripts/bundle-python.js --clean` (postpack)
 * removes the copies (and LICENSE, copied from the repository's root) again, so the checkout never holds two versions.
 *
 * The training environment still needs pyzmq and msgpack; without them the job runs
 * supervised without a worker, and the report and a 'no_worker' event say why.
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
  for (const name of ['__init__.py', 'py.typed']) copy(path.join(REPO, 'trainbridge', name), path.join(dest, name));
  for (const pkg of ['protocol', 'worker']) { // the worker imports the protocol package
    for (const name of fs.readdirSync(path.join(REPO, pkg)).sort()) {
      if (name.endsWith('.py')) copy(path.join(REPO, pkg, name), path.join(dest, pkg, name));
    }
  }
  copy(path.join(REPO, 'bridge', 'inject', 'sitecustomize.py'), path.join(dest, 'bridge', 'inject', 'sitecustomize.py'));
  copy(path.join(REPO, 'LICENSE'), LICENSE);
}

function clean() {
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.rmSync(LICENSE, { force: true });
}

if (process.argv.includes('--clean')) clean();
else bundle();
