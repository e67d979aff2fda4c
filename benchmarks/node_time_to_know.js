'use strict';
// node benchmarks/node_time_to_know.js PYTHON CODE TIMEOUTS_JSON
// Runs CODE under the Node client; prints {"known_after_s": ...}: from the child's
// CLOCK_MONOTONIC stamp ("T=...") to the first 'hang' or 'end' event. Node's
// performance.timeOrigin + now() is wall time, so the child's monotonic stamp is compared
// with process.hrtime (CLOCK_MONOTONIC on Linux).
const path = require('path');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const [python, code, timeoutsJson] = process.argv.slice(2);
const monotonic = () => Number(process.hrtime.bigint()) / 1e9;
let known = null;
const mark = () => { if (known === null) known = monotonic(); };
const job = launch({ command: python, args: ['-c', code], cwd: path.join(__dirname, '..'),
  timeouts: { killGrace: 0.5, ...JSON.parse(timeoutsJson) } });
job.on('hang', mark);
job.on('end', mark);
job.done.then((report) => {
  const line = report.log_tail.find((l) => l.startsWith('T='));
  if (!line) { console.error('no stamp in', report.log_tail); process.exit(1); }
  console.log(JSON.stringify({ known_after_s: known - Number(line.slice(2)), outcome: report.outcome }));
  process.exit(0);
});
