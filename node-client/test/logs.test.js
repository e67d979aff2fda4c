'use strict';
// The worker batches log records (`logs`, PROTOCOL.md): this client emits each record as its
// own worker 'log', in order, as if it had come alone, and hands over the same records as
// the Python client does.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const { launch } = require('../src/index.js');
const { PYTHON, REPO, userEnv } = require('../test-support/e2e.js');

const CHILD = `
from trainbridge import worker
for i in range(2000):
    worker.log(f"record {i} \\u4e2d", i=i)
with worker.stage("after"):
    worker.log("last", level="warning")
`;

const PY_CLIENT = `
import json, sys; from trainbridge import bridge
seen = []
def on_event(e):
    if e["event"] == "message" and e["kind"] == "log":
        seen.append(e["body"])
    elif e["event"] == "message" and e["kind"] == "stage":
        seen.append({"stage": e["body"]["event"]})
job = bridge.launch([sys.executable, "-c", sys.argv[1]], on_event=on_event, zero_code=False)
report = job.wait(60)
print(json.dumps({"outcome": report["outcome"], "seen": seen}))
`;

function nodeRecords() {
  const job = launch({ command: PYTHON, args: ['-c', CHILD], env: userEnv(), cwd: REPO, zeroCode: false });
  const seen = [];
  job.on('log', (rec) => { if (rec.stream === 'worker') seen.push(rec); });
  job.on('stage', (body) => seen.push({ stage: body.event }));
  return job.done.then((report) => ({ outcome: report.outcome, seen }));
}

function pythonRecords() {
  return new Promise((resolve, reject) => {
    execFile(PYTHON, ['-c', PY_CLIENT, CHILD], { env: userEnv(), cwd: REPO, maxBuffer: 1 << 26 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout))));
  });
}

test('batched records arrive one by one, in order, with their level, text and fields', async () => {
  const { outcome, seen } = await nodeRecords();
  assert.equal(outcome, 'succeeded');
  const texts = seen.map((r) => (r.stage ? `stage ${r.stage}` : r.text));
  const expected = [];
  for (let i = 0; i < 2000; i += 1) expected.push(`record ${i} \u4e2d`);
  assert.deepEqual(texts, [...expected, 'stage begin', 'last', 'stage end']);
  assert.equal(seen[7].level, 'info');
  assert.deepEqual(seen[7].record.fields, { i: 7 });
  assert.equal(seen[2001].level, 'warning');
});

test('parity: the Node and the Python client hand over the same records', async () => {
  const [node, py] = await Promise.all([nodeRecords(), pythonRecords()]);
  assert.equal(node.outcome, 'succeeded');
  assert.equal(py.outcome, 'succeeded');
  const strip = (r) => (r.stage ? r : { level: r.level, message: r.message, fields: r.fields ?? null, logger: r.logger ?? null });
  assert.deepEqual(node.seen.map((r) => (r.stage ? r : strip(r.record))), py.seen.map(strip));
});
