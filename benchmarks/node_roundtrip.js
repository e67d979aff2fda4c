'use strict';
// node benchmarks/node_roundtrip.js PYTHON CODE PINGS: ping round trips in seconds as JSON.
const path = require('path');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const [python, code, pings] = process.argv.slice(2);
const job = launch({ command: python, args: ['-c', code], cwd: path.join(__dirname, '..') });
job.once('hello', async () => {
  const rtts = [];
  for (let i = 0; i < Number(pings); i += 1) {
    const rtt = await job.ping({ timeout: 5 });
    if (rtt === null) { console.error('ping went unanswered'); process.exit(1); }
    rtts.push(rtt);
  }
  job.cancel({ grace: 0.2 });
  await job.done;
  console.log(JSON.stringify({ rtts_s: rtts }));
  process.exit(0);
});
