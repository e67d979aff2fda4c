'use strict';
// The Node client and the Python client (bridge) supervise the same child and must write
// the same report: outcome, exit status, stages, progress, error, diagnosis kind and
// summary, log tail, hang, signals sent, and the one-paragraph summary (durations aside).

const test = require('node:test');
const assert = require('node:assert/strict');
const { launch } = require('../src/index.js');
const { FIXTURE, PYTHON, userEnv, pythonReport, comparable } = require('../test-support/e2e.js');

async function both(mode, { timeouts = {}, pyConfig = {}, cancelAfterProgress = false } = {}) {
  const job = launch({ command: PYTHON, args: [FIXTURE, mode], env: userEnv(), timeouts });
  if (cancelAfterProgress) job.once('progress', () => job.cancel());
  const [node, py] = await Promise.all([
    job.done,
    pythonReport({ ...pyConfig, ...(cancelAfterProgress ? { _cancel_after_progress: true } : {}) }, [PYTHON, FIXTURE, mode]),
  ]);
  return [comparable(node), comparable(py)];
}

for (const mode of ['succeed', 'raise', 'segfault', 'exit3', 'gbk']) {
  test(`same report as the Python client: ${mode}`, async () => {
    const [node, py] = await both(mode);
    assert.deepEqual(node, py);
  });
}

test('same report as the Python client: stall -> hung', async () => {
  const [node, py] = await both('stall', {
    timeouts: { stallTimeout: 1, killGrace: 1 }, pyConfig: { stall_timeout: 1, kill_grace: 1 },
  });
  assert.deepEqual(node, py);
});

test('same report as the Python client: cancel', async () => {
  const [node, py] = await both('grandchildren', {
    timeouts: { cancelGrace: 0.5, killGrace: 0.5 }, pyConfig: { cancel_grace: 0.5, kill_grace: 0.5 },
    cancelAfterProgress: true,
  });
  assert.deepEqual(node, py);
});
