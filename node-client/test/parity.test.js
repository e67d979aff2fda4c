'use strict';
// The Node client and the Python client (bridge) supervise the same child and must write
// the same report: outcome, exit status, stages, progress, error, diagnosis kind and
// summary, log tail, hang, signals sent, and the one-paragraph summary (durations aside).
//
// Both run the one Python judge (the Node client through bridge/jobserve.py). Only verdicts
// that are stable by construction are compared between the two live runs: a hang's diagnosis
// rests on evidence sampled from each run's own child (CPU share and thread states over a
// window, one read of the kernel wait), so two runs may honestly see different things. For
// hangs, the judge is run again on the facts each report recorded: the same evidence must give
// the same verdict, and the verdict each face shows.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { launch } = require('../src/index.js');
const { FIXTURE, PYTHON, userEnv, pythonReport, comparable } = require('../test-support/e2e.js');

/** The facts a client's hang rules read, as its report recorded them. */
function hangFacts(r) {
  return {
    reason: r.hang.reason, stage: r.hang.stage || r.stage,
    stages: r.stages.filter((s) => s.status === 'running').map((s) => s.name),
    idle_s: r.hang.idle_s, stack: r.hang.stack, stacks: r.stacks, saw_hello: r.worker.hello,
    evidence: r.evidence || {}, pid: r.pid, progress: r.progress,
  };
}

/** bridge.diagnosis.diagnose_hang(facts), run by the Python client's own code. */
function pythonDiagnoseHang(facts) {
  const script = path.join(__dirname, '../test-support/python_diagnose.py');
  return new Promise((resolve, reject) => {
    const child = execFile(PYTHON, [script], { env: userEnv(), maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`python diagnose_hang failed: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
    child.stdin.end(JSON.stringify(facts));
  });
}

const verdict = (d) => d && { kind: d.kind, summary: d.summary, hint: d.hint };

/**
 * Everything comparable() holds, less what a hang's sampled evidence decides (the diagnosis
 * and its sentences in the summary): sameVerdictOnSameEvidence checks those.
 */
function live(report) {
  const c = comparable(report);
  if (report.outcome !== 'hung') return c;
  return { ...c, diagnosis: null, summary: c.summary.replace(/ Diagnosis \(.*$/s, '') };
}

/** The judge's hang rules, on the facts each client's report recorded, give that report's verdict. */
async function sameVerdictOnSameEvidence(node, py) {
  assert.equal(node.outcome, 'hung');
  assert.equal(py.outcome, 'hung');
  assert.deepEqual(verdict(await pythonDiagnoseHang(hangFacts(py))), verdict(py.diagnosis),
    'the rules on the Python client\'s recorded facts');
  assert.deepEqual(verdict(await pythonDiagnoseHang(hangFacts(node))), verdict(node.diagnosis),
    'the rules on the Node client\'s recorded facts');
}

/**
 * Call `go` once the job saw `what`: worker message kinds in order, comma-separated, each a
 * kind or "stage:NAME" (e.g. "progress,heartbeat": a heartbeat after the progress).
 */
function onceGo(job, what, go) {
  const [first, ...rest] = what.split(',');
  const [kind, name] = first.split(':');
  const listener = (body) => {
    if (name && body.name !== name) return;
    job.off(kind, listener);
    if (rest.length) onceGo(job, rest.join(','), go);
    else go();
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
    if (node.outcome === 'hung' || py.outcome === 'hung') await sameVerdictOnSameEvidence(node, py);
    return [live(node), live(py)];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// The fixtures mostly wait (deadlines, sleeps): run them side by side to keep the suite short.
test('same report as the Python client', { concurrency: 4 }, async (t) => {
  const running = [];
  for (const mode of ['succeed', 'raise', 'exit3', 'gbk']) {
    running.push(t.test(`${mode}`, async () => {
      const [node, py] = await both(mode);
      assert.deepEqual(node, py);
    }));
  }

  running.push(t.test('segfault', async () => {
    const [node, py] = await both('segfault', { goOn: 'stage:forward' });
    assert.deepEqual(node, py);
  }));

  running.push(t.test('stall -> hung', async () => {
    const [node, py] = await both('stall', {
      timeouts: { stallTimeout: 1, killGrace: 1 }, pyConfig: { stall_timeout: 1, kill_grace: 1 },
    });
    assert.deepEqual(node, py);
  }));

  running.push(t.test('cancel', async () => {
    const [node, py] = await both('grandchildren', {
      // The in-band cancel must win on both sides for the reports to match: node --test runs
      // files in parallel (torch imports next door), and 0.5 s was once not enough in CI.
      timeouts: { cancelGrace: 3, killGrace: 0.5 }, pyConfig: { cancel_grace: 3, kill_grace: 0.5 },
      cancelAfterProgress: true,
    });
    assert.deepEqual(node, py);
  }));

  running.push(t.test('network wait', async () => {
    const [node, py] = await both('socket', {
      timeouts: { stallTimeout: 1, killGrace: 1 }, pyConfig: { stall_timeout: 1, kill_grace: 1 },
    });
    // each run has its own port: the diagnosis names it, the rest must be equal
    const port = (r) => JSON.parse(JSON.stringify(r).replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:PORT'));
    assert.deepEqual(port(node), port(py));
  }));

  running.push(t.test('stage budget', async () => {
    const [node, py] = await both('budget', { timeouts: { killGrace: 1 }, pyConfig: { kill_grace: 1 } });
    assert.deepEqual(node, py);
  }));

  running.push(t.test('heartbeat silence (GIL held)', async () => {
    const [node, py] = await both('gil', {
      timeouts: { heartbeatTimeout: 1, killGrace: 1 }, pyConfig: { heartbeat_timeout: 1, kill_grace: 1 }, goOn: 'progress,heartbeat',
    });
    assert.deepEqual(node, py);
  }));
  await Promise.all(running);
});

// The demo training script (examples/demo_train.py, torch on the CPU) under both clients.
const DEMO = require('node:path').resolve(__dirname, '../../examples/demo_train.py');

async function bothDemo(demoArgs, { timeouts = {}, pyConfig = {} } = {}) {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-demo-'));
  try {
    const job = launch({ command: PYTHON, args: [DEMO, '--steps', '30', ...demoArgs], cwd, env: userEnv(), timeouts });
    const [node, py] = await Promise.all([
      job.done,
      pythonReport(pyConfig, [PYTHON, DEMO, '--steps', '30', ...demoArgs], userEnv(), cwd),
    ]);
    if (node.outcome === 'hung' || py.outcome === 'hung') await sameVerdictOnSameEvidence(node, py);
    return [live(node), live(py)];
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
}

test('the demo: same report from both clients when it succeeds, fails or crashes', async () => {
  // Three runs at once under each client: the suite stays short on a 2-core machine.
  const [[okNode, okPy], [failNode, failPy], [crashNode, crashPy]] = await Promise.all([
    bothDemo([]), bothDemo(['--fail-at', 'train']), bothDemo(['--crash-at', 'model']),
  ]);
  assert.equal(okNode.outcome, 'succeeded');
  assert.deepEqual(okNode, okPy);
  assert.equal(failNode.outcome, 'failed');
  assert.deepEqual(failNode, failPy);
  // The crash follows the stage begin at once: whether the beacon sent that begin before the
  // process died is the child's race, not the client's, so stages are not compared here
  // (the fixture's segfault case above compares everything).
  const essentials = (r) => ({ outcome: r.outcome, signal: r.signal, exit_code: r.exit_code,
    diagnosis: r.diagnosis.kind, stacks: r.stacks, error: r.error, signals_sent: r.signals_sent });
  assert.equal(crashNode.outcome, 'crashed');
  assert.deepEqual(essentials(crashNode), essentials(crashPy));
});

test('the demo: same report from both clients when it hangs', async () => {
  // A budget on the stage that hangs, not a stall timeout: under load (test files run side
  // by side, each importing torch) a 5 s stall timeout once fired during `import torch` in
  // one client and in 'optimizer' in the other. The budget can only run out in 'save'.
  const [node, py] = await bothDemo(['--hang-at', 'save', '--hang-budget', '1'], {
    timeouts: { killGrace: 1 }, pyConfig: { kill_grace: 1 },
  });
  assert.equal(node.outcome, 'hung');
  assert.deepEqual(node.hang, { reason: 'stage_budget', stage: 'save' });
  // It once died of SIGSEGV here: the worker's SIGUSR1 dump (now fixed). The
  // signal that ended it is compared like everything else.
  assert.equal(node.signal, 'SIGTERM');
  assert.deepEqual(node, py);
});
