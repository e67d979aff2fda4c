'use strict';
// node benchmarks/node_time_to_know.js PYTHON CODE TIMEOUTS_JSON   one job in a fresh process
// node benchmarks/node_time_to_know.js --serve PYTHON              one client, many jobs
// Runs CODE under the Node client; prints {"known_after_s": ...}: from the child's
// CLOCK_MONOTONIC stamp ("T=...") to the first 'hang' or 'end' event. Node's
// performance.timeOrigin + now() is wall time, so the child's monotonic stamp is compared
// with process.hrtime (CLOCK_MONOTONIC on Linux). With --serve, each stdin line
// {"code": ..., "timeouts": {...}} runs one job in this same process (a GUI's long-lived
// client) and answers one line.
const path = require('path');
const readline = require('readline');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const monotonic = () => Number(process.hrtime.bigint()) / 1e9;

function runOne(python, code, timeouts) {
  let known = null;
  const mark = () => { if (known === null) known = monotonic(); };
  const job = launch({ command: python, args: ['-c', code], cwd: path.join(__dirname, '..'),
    timeouts: { killGrace: 0.5, ...timeouts } });
  job.on('hang', mark);
  job.on('end', mark);
  return job.done.then((report) => {
    const line = report.log_tail.find((l) => l.startsWith('T='));
    if (!line) throw new Error(`no stamp in ${JSON.stringify(report.log_tail)}`);
    return { known_after_s: known - Number(line.slice(2)), outcome: report.outcome };
  });
}

function fail(err) {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
}

if (process.argv[2] === '--serve') {
  const python = process.argv[3];
  const lines = readline.createInterface({ input: process.stdin });
  let chain = Promise.resolve();
  lines.on('line', (text) => {
    const { code, timeouts } = JSON.parse(text);
    chain = chain.then(() => runOne(python, code, timeouts || {}))
      .then((out) => process.stdout.write(`${JSON.stringify(out)}\n`), fail);
  });
  lines.on('close', () => chain.then(() => process.exit(0)));
} else {
  const [python, code, timeoutsJson] = process.argv.slice(2);
  runOne(python, code, JSON.parse(timeoutsJson)).then((out) => {
    console.log(JSON.stringify(out));
    process.exit(0);
  }, fail);
}
