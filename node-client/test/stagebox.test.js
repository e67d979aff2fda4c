'use strict';
// The stage box (PROTOCOL.md section 2): a native crash right after a stage began is placed
// in it, as the Python client does (tests/worker/test_stage_box.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv, processesOfJob } = require('../test-support/e2e.js');

const CRASH_AT_STAGE_START = [
  'import ctypes; from trainbridge import worker',
  "with worker.stage('data'):",
  '    pass',
  "with worker.stage('model \\u6a21\\u578b'):",
  "    with worker.stage('load'):",
  '        ctypes.string_at(0)',
].join('\n');

test('a crash right after a stage began is placed in that stage', async () => {
  const job = launch({ command: PYTHON, args: ['-c', CRASH_AT_STAGE_START], env: userEnv(), zeroCode: false });
  const report = await job.done;
  assert.equal(report.outcome, 'crashed');
  assert.equal(report.signal, 'SIGSEGV');
  assert.equal(report.stage, 'load');
  assert.deepEqual(processesOfJob(report.job_id), []);
});
