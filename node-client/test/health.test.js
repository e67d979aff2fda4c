'use strict';
// Training health as the Node face shows it (the rule is bridge/health.py's, pinned by
// vectors/health.json in tests/client/test_health.py), and src/jsonform.js (NaN and the
// infinities on every JSON face).

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const jsonform = require('../src/jsonform.js');
const { toJSON } = require('../src/jsonform.js');
const { launch } = require('../src/index.js');
const { PYTHON } = require('../test-support/python.js');
const { userEnv, liveProcesses } = require('../test-support/e2e.js');

test('strict JSON keeps NaN and the infinities apart from null', () => {
  const event = { event: 'status', metrics: { loss: NaN, lr: Infinity, neg: -Infinity, never: null }, text: 'NaN' };
  const line = jsonform.stringify(event);
  assert.strictEqual(line, '{"event":"status","metrics":{"loss":"NaN","lr":"Infinity","neg":"-Infinity","never":null},"text":"NaN"}');
  const back = jsonform.parse(line);
  assert.ok(Number.isNaN(back.metrics.loss));
  assert.strictEqual(back.metrics.lr, Infinity);
  assert.strictEqual(back.metrics.neg, -Infinity);
  assert.strictEqual(back.metrics.never, null);
  assert.strictEqual(back.text, 'NaN'); // a string outside a number's place stays text
});

test('health entries and the health event are read back as numbers', () => {
  const entry = { metric: 'loss', value: NaN, last_finite: 2.5, text: 'NaN' };
  const end = jsonform.parse(jsonform.stringify({ event: 'end', report: { health: [entry] } }));
  assert.ok(Number.isNaN(end.report.health[0].value));
  const event = jsonform.parse(jsonform.stringify({ ...entry, event: 'health' }));
  assert.ok(Number.isNaN(event.value));
  assert.strictEqual(event.text, 'NaN');
});

test('a report file is strict JSON, as the Python client writes it', () => {
  assert.strictEqual(toJSON({ progress: { metrics: { loss: -Infinity } } }, 0), '{"progress":{"metrics":{"loss":"-Infinity"}}}');
  assert.strictEqual(toJSON({ progress: { metrics: { loss: NaN } } }, 0), '{"progress":{"metrics":{"loss":"NaN"}}}');
});

test('a feed line with NaN in it is read, not skipped', () => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'tb-health-'));
  try {
    const file = path.join(dir, 'events.jsonl');
    fs.writeFileSync(file, '{"seq": 1, "event": "status", "state": "running", "metrics": {"loss": "NaN"}}\n');
    const { status } = require('../src/feed.js').lastStatus(file);
    assert.ok(status && Number.isNaN(status.metrics.loss));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// As tests/client/test_training_health.py: steps 1-5 finite; the gate opens once the supervisor
// has seen step 5, so step 6 is the first report of NaN; the second gate opens on the health
// event; then infinity (the same metric: not said again) and a finite loss, and it ends 0.
const DIVERGES = `
import os, sys, threading, time
from trainbridge import worker
def wait_go(path):
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit("the test's gate never opened")
        time.sleep(0.005)
for step in range(1, 6):
    worker.progress(step, 8, loss=1.0 / step)
wait_go(os.environ["TB_TEST_GO"])
worker.progress(6, 8, loss=float("nan"), lr=0.5)
wait_go(os.environ["TB_TEST_GO"] + ".health")
if os.environ.get("TB_HOLD"):
    threading.Event().wait(120)  # only a cancel ends it
worker.progress(7, 8, loss=float("inf"))
worker.progress(8, 8, loss=0.5)
`;

function divergingJob(t, options = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-health-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const go = path.join(dir, 'go');
  const job = launch({ python: PYTHON, args: ['-c', DIVERGES], env: userEnv({ TB_TEST_GO: go, ...(options.env || {}) }), ...options.launch });
  const said = [];
  job.on('status', (s) => { if (s.step === 5 && !fs.existsSync(go)) fs.writeFileSync(go, ''); });
  job.on('health', (entry) => { said.push(entry); fs.writeFileSync(`${go}.health`, ''); });
  return { job, said };
}

test('launch(): a loss that becomes NaN is said once, in the event and the report, and the job goes on', async (t) => {
  const { job, said } = divergingJob(t);
  const report = await job.done;
  assert.strictEqual(report.outcome, 'succeeded', report.summary);
  assert.strictEqual(said.length, 1);
  const [entry] = said;
  assert.strictEqual(entry.text, 'loss became NaN at step 6 (it was 0.2 at step 5)');
  assert.ok(Number.isNaN(entry.value));
  assert.strictEqual(entry.sender.lead, true);
  assert.deepStrictEqual(report.health.map((h) => h.text), [entry.text]);
  assert.ok(report.summary.includes('Training health: loss became NaN at step 6 (it was 0.2 at step 5).'), report.summary);
  assert.strictEqual(report.progress.metrics.loss, 0.5);
  assert.strictEqual(report.cancel, null);
  assert.strictEqual(JSON.parse(toJSON(report)).health[0].value, 'NaN');
  assert.deepStrictEqual(liveProcesses([report.pid]), []);
});

test('launch(): a NaN of one step between two sends is said (the worker sends every call\'s points)', async () => {
  // Python: test_training_health.py. 3,000 steps in about 3 s; the latest value alone missed it.
  const code = [
    'import time',
    'from trainbridge import worker',
    'for step in range(1, 3001):',
    '    worker.progress(step, 3000, loss=float("nan") if step == 1500 else 1.0 / step)',
    '    time.sleep(0.001)', // a beacon may wait a second for a CPU before calls are only counted
  ].join('\n');
  const report = await launch({ python: PYTHON, args: ['-c', code], env: userEnv() }).done;
  assert.strictEqual(report.outcome, 'succeeded', report.summary);
  assert.strictEqual(report.health.length, 1);
  const [entry] = report.health;
  assert.strictEqual(entry.step, 1500);
  // "by step" when the steps just before were thinned away (a message keeps 512 points)
  assert.match(entry.text, /^loss became NaN (at|by) step 1500 \(/);
  assert.deepStrictEqual(liveProcesses([report.pid]), []);
});

test('launch({stopOnNan}): the job is cancelled and says why; a bad stopOnNan is refused', async (t) => {
  assert.throws(() => launch({ python: PYTHON, args: ['-c', 'pass'], stopOnNan: ['loss', 1] }), /stopOnNan must be a metric name/);
  const { job } = divergingJob(t, { env: { TB_HOLD: '1' }, launch: { stopOnNan: ['acc', 'loss'] } });
  const report = await job.done;
  assert.strictEqual(report.outcome, 'cancelled', report.summary);
  assert.strictEqual(report.cancel.by, 'health');
  assert.strictEqual(report.cancel.reason, 'loss became NaN at step 6 (it was 0.2 at step 5): stopped, as stop_on_nan asks');
  assert.deepStrictEqual(liveProcesses([report.pid]), []);
});
