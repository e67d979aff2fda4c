'use strict';
// 200,000 records from a Python child to a Node parent, unpaced, end to end (spawn to the
// last record held): node benchmarks/node_unpaced.js shell|client PYTHON N MESSAGE
//   shell:  python-shell (mode 'json'), the child printing NDJSON: the peer's own code
//   client: trainbridge's Node client, the child calling worker.log() N times, unpaced
// Prints {"per_s", "delivered", "dropped"}.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const [mode, python, n, message] = process.argv.slice(2);
const total = Number(n);
const NDJSON_CHILD = `import json, sys
body = {"level": "info", "message": sys.argv[2]}
w = sys.stdout.write
for i in range(int(sys.argv[1])):
    w(json.dumps(body) + "\\n")
sys.stdout.flush()
`;
const WORKER_CHILD = `import sys
from trainbridge import worker
msg = sys.argv[2]
for i in range(int(sys.argv[1])):
    worker.log(msg)
`;

function finish(t0, doneAt, delivered, dropped) {
  const seconds = Number((doneAt || process.hrtime.bigint()) - t0) / 1e9;
  console.log(JSON.stringify({ per_s: delivered / seconds, delivered, dropped }));
}

if (mode === 'shell') {
  const { PythonShell } = require(path.join(__dirname, 'node_modules', 'python-shell'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-bench-'));
  const script = path.join(dir, 'ndjson_child.py');
  fs.writeFileSync(script, NDJSON_CHILD);
  let delivered = 0;
  let doneAt = null;
  const t0 = process.hrtime.bigint();
  const shell = new PythonShell(script, { mode: 'json', pythonPath: python, args: [n, message] });
  shell.on('message', () => {
    delivered += 1;
    if (delivered === total) doneAt = process.hrtime.bigint();
  });
  shell.end((err) => {
    fs.rmSync(dir, { recursive: true, force: true });
    if (err) throw err;
    finish(t0, doneAt, delivered, 0);
  });
} else {
  const { launch } = require(path.join(__dirname, '..', 'node-client'));
  let delivered = 0;
  let doneAt = null;
  const t0 = process.hrtime.bigint();
  const job = launch({ command: python, args: ['-c', WORKER_CHILD, n, message], cwd: path.join(__dirname, '..') });
  job.on('log', (rec) => {
    if (rec.stream !== 'worker') return;
    delivered += 1;
    if (delivered === total) doneAt = process.hrtime.bigint();
  });
  job.done.then((report) => {
    if (report.outcome !== 'succeeded') throw new Error(`outcome ${report.outcome}`);
    finish(t0, doneAt, delivered, (report.dropped || {}).log || 0);
  });
}
