'use strict';
// job.status() on a real job: the supervisor's judged snapshot (bridge/status.py, whose vectors
// tests/client/test_status.py runs), as the Node face renders it.

const test = require('node:test');
const assert = require('node:assert/strict');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv } = require('../test-support/e2e.js');

test('job.status() while the job runs and after', async () => {
  // Ten steps over a second: progress leaves the worker at most 4 times a second, so at least
  // two messages arrive, which a rate needs (over 0.2 s they could be one: the Python twin failed 3 in 5).
  const code = 'import time\nfrom trainbridge import worker\nwith worker.stage("fit"):\n'
    + '    for i in range(1, 11):\n        worker.progress(i, 10); time.sleep(0.1)\n    time.sleep(30)\n';
  const job = launch({ python: PYTHON, args: ['-c', code], env: userEnv() });
  const before = Date.now() / 1000;
  const last = await new Promise((resolve) => job.on('progress', (p) => { if (p.step === 10) resolve(p); }));
  // A progress event carries the time the supervisor published it (seconds since the epoch),
  // as in Python. Date.now() counts whole milliseconds and time.time() does not: an event read
  // within the millisecond it was published is up to 1 ms "later" than Date.now() (hunt 88dc3a9).
  const ms = 0.001;
  assert.ok(last.t >= before - ms && last.t <= Date.now() / 1000 + ms, `${last.t} ${before} ${Date.now()}`);
  const status = job.status();
  assert.equal(status.state, 'running');
  assert.equal(status.pid, job.pid);
  assert.deepEqual(status.stages, ['main', 'fit']);
  assert.deepEqual(status.script_stages, ['fit']);
  assert.equal(status.step, 10);
  assert.equal(status.total, 10);
  assert.ok(status.rate > 1, String(status.rate));
  assert.equal(status.eta_s, 0);
  assert.ok(status.progress_age_s >= 0 && status.progress_age_s < 10);
  await job.cancel({ grace: 0 });
  assert.equal(job.status().state, 'ended');
});

test('a backlog read at once keeps the job\'s rate (the judge times progress by when it was sent)', async () => {
  // As tests/client/test_status.py: the client reads nothing for 7 s (here its event loop is
  // blocked), then reads about 28 progress messages at once; the rate stayed a burst's 10,000.
  const code = 'import time\nfrom trainbridge import worker\n'
    + 'for i in range(1, 100000):\n    worker.progress(i, None); time.sleep(0.05)\n';
  const job = launch({ python: PYTHON, args: ['-c', code], env: userEnv(), zeroCode: false });
  await new Promise((resolve) => { const on = (s) => { if (s.rate !== null) { job.off('status', on); resolve(); } }; job.on('status', on); });
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 7000); // reads nothing for 7 s
  const released = performance.now();
  const rates = await new Promise((resolve) => {
    const got = [];
    const on = (s) => {
      if (performance.now() - released > 1000) { job.off('status', on); resolve(got); } else got.push(s.rate);
    };
    job.on('status', on);
  });
  await job.cancel({ grace: 0 });
  assert.ok(rates.length && !rates.includes(null), JSON.stringify(rates));
  assert.ok(Math.max(...rates) < 40 && rates.at(-1) > 10, JSON.stringify(rates));
});
