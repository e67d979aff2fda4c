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
const { compileAsInstalled } = require('../test-support/typescript.js');

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
  const source = [
    "import { PythonShell, Options } from 'trainbridge/shell';",
    "import { launch } from 'trainbridge';",
    "const options: Options = { pythonPath: 'python3' };",
    "const shell: PythonShell = new PythonShell('train.py', options);",
    'void shell; void launch;',
    '',
  ].join('\n');
  for (const [module, resolution] of [['commonjs', null], ['node16', 'node16'], ['esnext', 'bundler']]) {
    const done = compileAsInstalled(t, source, { module, ...(resolution ? { moduleResolution: resolution } : {}) });
    assert.strictEqual(done.status, 0, `module ${module}, moduleResolution ${resolution || 'default'}:\n${done.output}`);
  }
});
