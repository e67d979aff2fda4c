'use strict';
// The Node client and the Python client (bridge) supervise the same child and must write
// the same report: outcome, exit status, stages, progress, error, diagnosis kind and
// summary, log tail, hang, signals sent, and the one-paragraph summary (durations aside).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { launch } = require('../src/index.js');
const { FIXTURE, PYTHON, userEnv, pythonReport, comparable } = require('../test-support/e2e.js');

/** Call `go` once the job saw `what`: a worker message kind, or "stage:NAME" (its begin). */
function onceGo(job, what, go) {
  const [kind, name] = what.split(':');
  const listener = (body) => {
    if (name && body.name !== name) return;
    job.off(kind, listener);
    go();
  };
  job.on(kind, listener);
}

async function both(mode, { timeouts = {}, pyConfig = {}, cancelAfterProgress = false, goOn = null } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-parity-'));
  const [nodeGo, pyGo] = [path.join(dir, 'node-go'), path.join(dir, 'py-go')];
  const job = launch({ command: PYTHON, args: [FIXTURE, mode], env: userEnv({ TB_GO_FILE: nodeGo }), timeouts });
  if (cancelAfterProgress) job.once('progress', () => job.cancel());
  if (goOn) onceGo(job, goOn, () => fs.writeFileSync(nodeGo, ''));
  const extra = { ...(cancelAfterProgress ? { _cancel_after_progress: true } : {}), ...(goOn ? { _go_file: pyGo, _go_on: goOn } : {}) };
  try {
    const [node, py] = await Promise.all([
      job.done,
      pythonReport({ ...pyConfig, ...extra }, [PYTHON, FIXTURE, mode], userEnv({ TB_GO_FILE: pyGo })),
    ]);
    return [comparable(node), comparable(py)];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (const mode of ['succeed', 'raise', 'exit3', 'gbk']) {
  test(`same report as the Python client: ${mode}`, async () => {
    const [node, py] = await both(mode);
    assert.deepEqual(node, py);
  });
}

test('same report as the Python client: segfault', async () => {
  const [node, py] = await both('segfault', { goOn: 'stage:forward' });
  assert.deepEqual(node, py);
});

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

test('same report as the Python client: stage budget', async () => {
  const [node, py] = await both('budget', { timeouts: { killGrace: 1 }, pyConfig: { kill_grace: 1 } });
  assert.deepEqual(node, py);
});

test('same report as the Python client: heartbeat silence (GIL held)', async () => {
  const [node, py] = await both('gil', {
    timeouts: { heartbeatTimeout: 1, killGrace: 1 }, pyConfig: { heartbeat_timeout: 1, kill_grace: 1 }, goOn: 'progress',
  });
  assert.deepEqual(node, py);
});
