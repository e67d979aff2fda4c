'use strict';
/**
 * index.d.ts is what a TypeScript GUI author compiles against: test/types/usage.ts uses the
 * API as one would (launch with python/signal/rejectOnFailure, the spawn and no_worker
 * events, doctor() and DoctorError) and marks with @ts-expect-error what must not compile
 * (a misspelt timeout, a string step). tsc fails on either kind of mistake.
 */

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

test('index.d.ts: the typed usage compiles, and what must not compile does not', () => {
  const tsc = require.resolve('typescript/bin/tsc');
  const done = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'tsconfig.json')], {
    encoding: 'utf8', timeout: 120000,
  });
  assert.strictEqual(done.status, 0, `tsc:\n${done.stdout}${done.stderr}`);
});

test('an installed package\'s types resolve, trainbridge/shell included, under each moduleResolution', (t) => {
  // As in a GUI project: node_modules/trainbridge (here a link to this package), compiled
  // with TypeScript's default resolution for CommonJS (node10, which ignores "exports": it
  // gave TS2307 for trainbridge/shell) and with node16 and bundler.
  const fs = require('node:fs');
  const os = require('node:os');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'trainbridge'));
  fs.writeFileSync(path.join(dir, 'use.ts'), [
    "import { PythonShell, Options } from 'trainbridge/shell';",
    "import { launch } from 'trainbridge';",
    "const options: Options = { pythonPath: 'python3' };",
    "const shell: PythonShell = new PythonShell('train.py', options);",
    'void shell; void launch;',
    '',
  ].join('\n'));
  const tsc = require.resolve('typescript/bin/tsc');
  for (const [module, resolution] of [['commonjs', null], ['node16', 'node16'], ['esnext', 'bundler']]) {
    const compilerOptions = { strict: true, noEmit: true, target: 'ES2022', module, types: ['node'],
      typeRoots: [path.join(__dirname, '..', 'node_modules', '@types')], ...(resolution ? { moduleResolution: resolution } : {}) };
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['use.ts'] }));
    const done = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8', timeout: 120000 });
    assert.strictEqual(done.status, 0, `module ${module}, moduleResolution ${resolution || 'default'}:\n${done.stdout}${done.stderr}`);
  }
});
