'use strict';
// Worker -> Node client throughput: node benchmarks/node_throughput.js PYTHON N MESSAGE CODE
// Prints {"per_s": records per second} once the client holds the last worker log record.
const path = require('path');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const [python, n, message, code] = process.argv.slice(2);
const total = Number(n);
let received = 0;
let doneAt = null;
const t0 = process.hrtime.bigint();
const job = launch({ command: python, args: ['-c', code, n, message], cwd: path.join(__dirname, '..') });
job.on('log', (rec) => {
  if (rec.stream !== 'worker') return;
  received += 1;
  if (received === total) doneAt = process.hrtime.bigint();
});
job.done.then((report) => {
  if (received !== total || report.outcome !== 'succeeded') {
    console.error(`received ${received} of ${total}, outcome ${report.outcome}`);
    process.exit(1);
  }
  const seconds = Number(doneAt - t0) / 1e9;
  console.log(JSON.stringify({ per_s: total / seconds }));
  process.exit(0);
});
