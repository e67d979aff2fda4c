'use strict';
// A client process for test/flood.test.js (as tests/client/flood_client.py): it supervises a
// child that waits for a gate file, prints {endpoint, job, pid} once the child said hello,
// then the job's report, then stays until its stdin ends (so the test can read its peak RSS).
// The test writes the number of frames it sent as a line on stdin; this client opens the gate
// (ending the job) once its job has counted that many rejections, or after 60 s: a frame the
// sender queued can still be in flight when the test is done sending (seen 4,992 of 5,000).

const fs = require('node:fs');
const readline = require('node:readline');
const { launch } = require('../src/index.js');
const { getDefaultHub } = require('../src/hub.js');

const [python, gate] = process.argv.slice(2);
const child = `import os, time\nfrom trainbridge import worker\nworker.progress(1, 2)\n`
  + `while not os.path.exists(${JSON.stringify(gate)}):\n    time.sleep(0.01)\nworker.progress(2, 2)\n`;
const job = launch({ command: python, args: ['-c', child], zeroCode: false });
job.once('hello', () => {
  console.log(JSON.stringify({ endpoint: getDefaultHub().endpoint, job: job.id, pid: process.pid }));
});
readline.createInterface({ input: process.stdin }).once('line', (line) => {
  const expected = Number(line);
  const deadline = Date.now() + 60_000;
  const counted = () => Object.values(job._facts.rejected).reduce((a, b) => a + b, 0);
  const poll = setInterval(() => { // a counter the hub fills, with a deadline
    if (counted() < expected && Date.now() < deadline) return;
    clearInterval(poll);
    fs.writeFileSync(gate, '');
  }, 10);
});
job.done.then((report) => {
  console.log(JSON.stringify(report));
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
});
