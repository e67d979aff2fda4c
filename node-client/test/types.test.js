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
