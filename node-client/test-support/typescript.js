'use strict';
/** TypeScript as a GUI project compiles against the package: node_modules/trainbridge is a link here. */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const PACKAGE = path.join(__dirname, '..');

/**
 * Compile `source` (use.ts) in a scratch project where `trainbridge` is installed, with
 * strict settings and `compilerOptions` on top (module, moduleResolution). Returns tsc's
 * {status, output}; the project is removed when the test `t` ends.
 */
function compileAsInstalled(t, source, compilerOptions = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PACKAGE, path.join(dir, 'node_modules', 'trainbridge'));
  fs.writeFileSync(path.join(dir, 'use.ts'), source);
  const options = { strict: true, noEmit: true, target: 'ES2022', module: 'commonjs', types: ['node'],
    typeRoots: [path.join(PACKAGE, 'node_modules', '@types')], ...compilerOptions };
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, files: ['use.ts'] }));
  const done = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')],
    { encoding: 'utf8', timeout: 120000 });
  return { status: done.status, output: `${done.stdout}${done.stderr}` };
}

module.exports = { compileAsInstalled };
