'use strict';
// A client process for test/flood.test.js (as tests/client/flood_client.py): it supervises a
// child that waits for a gate file, prints {endpoint, job, pid} once the child said hello,
// then the job's report, then stays until its stdin ends (so the test can read its peak RSS).

const { launch } = require('../src/index.js');
const { getDefaultHub } = require('../src/hub.js');

const [python, gate] = process.argv.slice(2);
const child = `import os, time\nfrom trainbridge import worker\nworker.progress(1, 2)\n`
  + `while not os.path.exists(${JSON.stringify(gate)}):\n    time.sleep(0.01)\nworker.progress(2, 2)\n`;
const job = launch({ command: python, args: ['-c', child], zeroCode: false });
job.once('hello', () => {
  console.log(JSON.stringify({ endpoint: getDefaultHub().endpoint, job: job.id, pid: process.pid }));
});
job.done.then((report) => {
  console.log(JSON.stringify(report));
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
});
