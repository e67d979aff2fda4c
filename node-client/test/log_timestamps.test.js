'use strict';
// As tests/client/test_log_timestamps.py: logTimestamps stamps every output
// line of the log file; the verdict still closes it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv } = require('../test-support/e2e.js');

const SCRIPT = `
import time
from trainbridge import worker
with worker.stage("train"):
    worker.progress(1, 10)
    print("epoch 1", flush=True)
    print("epoch 2", flush=True)
    time.sleep(60)
`;
const STAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /;

test('the log ends with the verdict and stamps every line', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-log-'));
  try {
    const logPath = path.join(dir, 'job.log');
    const job = launch({ command: PYTHON, args: ['-c', SCRIPT], env: userEnv(), zeroCode: false, logPath,
      logTimestamps: true, timeouts: { stallTimeout: 1.5 } });
    const report = await job.done;
    assert.equal(report.outcome, 'hung');
    const lines = fs.readFileSync(logPath, 'utf8').trimEnd().split('\n');
    for (const line of lines.slice(0, 2)) assert.match(line, STAMP);
    assert.deepEqual(lines.slice(0, 2).map((l) => l.replace(STAMP, '')), ['epoch 1', 'epoch 2']);
    assert.ok(lines.includes(`[trainbridge] ${report.summary}`), lines.join('\n')); // the verdict, as without stamps
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
