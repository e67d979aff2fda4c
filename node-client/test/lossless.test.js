'use strict';
// Nothing is lost silently, as in tests/client/test_lossless.py: 200,000
// unpaced worker.log() calls all reach this client's 'log' listeners; what the worker had to
// drop past its stated bound is counted in the report's `dropped` and said in its summary.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { launch } = require('../src/index.js');
const { PYTHON, REPO, userEnv } = require('../test-support/e2e.js');

/**
 * Block this process's event loop (the scenario, not a synchronisation) until the process
 * `pid` has ended (a zombie or gone), at most 60 s.
 */
function blockUntilEnded(pid) {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = performance.now() + 60000;
  const ended = () => {
    try { return fs.readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1][0] === 'Z'; } catch { return true; }
  };
  while (!ended()) {
    assert.ok(performance.now() < deadline, 'the child did not end');
    Atomics.wait(pause, 0, 0, 50);
  }
}

function run(code, env = {}) {
  const job = launch({ command: PYTHON, args: ['-c', code], env: userEnv(env), cwd: REPO, zeroCode: false });
  const seen = [];
  job.on('log', (rec) => { if (rec.stream === 'worker') seen.push(rec.text); });
  return job.done.then((report) => ({ report, seen }));
}

test('200,000 unpaced worker.log() calls all reach the listener, in order', async () => {
  // log() waits up to TRAINBRIDGE_LOG_WAIT_S (5 s) for room, then drops and counts (below);
  // this test is about losing nothing while that bound holds: one a loaded machine meets (as
  // the Python twin, tests/client/test_lossless.py).
  const { report, seen } = await run('from trainbridge import worker\nfor i in range(200000): worker.log(str(i))\n',
    { TRAINBRIDGE_LOG_WAIT_S: '120' });
  assert.equal(report.outcome, 'succeeded');
  assert.equal(seen.length, 200000);
  assert.ok(seen.every((text, i) => text === String(i)), 'in order, none missing');
  assert.deepEqual(report.dropped, { log: 0 });
  assert.ok(!report.summary.includes('dropped'));
});

test('drops past the bound are counted in the report and its summary', async () => {
  const { report, seen } = await run(
    'import sys; from trainbridge import worker\nsys.setswitchinterval(30)\nfor i in range(30000): worker.log(str(i))\n',
    { TRAINBRIDGE_LOG_WAIT_S: '0' },
  );
  assert.equal(report.outcome, 'succeeded');
  const dropped = report.dropped.log;
  assert.ok(dropped > 0, 'the beacon could not run: the queue stayed full');
  assert.equal(dropped + seen.length, 30000, 'every record delivered or counted');
  assert.ok(report.summary.includes(`The worker dropped ${dropped} log records`), report.summary);
});

test('a slow client that still reads gets every record at exit (its last words wait for it)', async () => {
  // As tests/client/test_lossless.py: the script ends long before this client has read its
  // logs (about 8 s); the worker's last words wait while the client reads, not a fixed 5 s.
  const job = launch({
    command: PYTHON,
    args: ['-c', 'from trainbridge import worker\nfor i in range(100000): worker.log(str(i))\n'],
    env: userEnv({ TRAINBRIDGE_LOG_WAIT_S: '120' }),
    cwd: REPO,
    zeroCode: false,
  });
  const seen = [];
  const pause = new Int32Array(new SharedArrayBuffer(4));
  job.on('log', (rec) => {
    if (rec.stream !== 'worker') return;
    seen.push(rec.text);
    if (seen.length % 256 === 0) Atomics.wait(pause, 0, 0, 20); // a listener doing real work
  });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.equal(seen.length, 100000, `${seen.length} of 100000 arrived`);
  assert.ok(seen.every((text, i) => text === String(i)), 'in order, none missing');
  assert.ok(report.worker.bye && !report.summary.includes('last words'), report.summary);
});

test('a Node process whose event loop is blocked loses nothing: the supervisor reads for it', async () => {
  // The Python supervisor (bridge/jobserve.py) reads the worker and keeps the feed while this
  // process takes nothing; once the loop is free every record arrives, in order. (The worker's
  // own give-up at exit, when its client takes nothing, is tests/client/test_lossless.py's.)
  const job = launch({
    command: PYTHON,
    args: ['-c', 'from trainbridge import worker\nfor i in range(100000): worker.log(str(i))\n'],
    // log() may wait as long as a loaded machine needs (the bound's drops are the test above's)
    env: userEnv({ TRAINBRIDGE_LOG_WAIT_S: '120' }),
    cwd: REPO,
    zeroCode: false,
  });
  const seen = [];
  let blocked = false;
  job.on('log', (rec) => {
    if (rec.stream !== 'worker') return;
    seen.push(rec.text);
    if (blocked) return;
    blocked = true;
    blockUntilEnded(job.pid);
  });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.protocol.unsent, 0);
  assert.deepEqual(report.dropped, { log: 0 });
  assert.equal(seen.length, 100000, `${seen.length} of 100000 arrived`);
  assert.ok(seen.every((text, i) => text === String(i)), 'in order, none missing');
});

test('a blocked event loop and a flood of printed lines: the supervisor counts what it cannot hold, and says so', async () => {
  // Printed lines (not worker.log records) are not paced by the worker: with this loop blocked,
  // the job server held every line for it, without a bound. Past its bound (OUT_BACKLOG_MAX,
  // bridge/jobserve.py) the lines are counted: 'dropped' events say how many, and each line is
  // either a 'log' event or counted; logPath and the report's tail have them all.
  const lines = 60000;
  const job = launch({
    command: PYTHON,
    args: ['-c', `import sys\nfor i in range(${lines}): sys.stdout.write(f"line {i}\\n")\n`],
    env: userEnv(),
    cwd: REPO,
    zeroCode: false,
  });
  const texts = [];
  const dropped = [];
  let blocked = false;
  job.on('dropped', (d) => dropped.push(d));
  job.on('log', (rec) => {
    if (rec.stream !== 'stdout') return;
    texts.push(rec.text);
    if (blocked) return;
    blocked = true;
    blockUntilEnded(job.pid); // until the child has printed everything
  });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.ok(dropped.length > 0, 'a flood past the bound is said');
  assert.ok(dropped.every((d) => d.kinds.output === d.count && d.count > 0), JSON.stringify(dropped));
  assert.equal(texts.length + dropped.reduce((n, d) => n + d.count, 0), lines, 'every line is delivered or counted');
  assert.equal(job.droppedOutput, lines - texts.length, 'the sum, for whoever only awaits done');
  assert.ok(texts.every((t, i) => i === 0 || Number(t.split(' ')[1]) > Number(texts[i - 1].split(' ')[1])), 'in order');
  assert.equal(report.log_tail.at(-1), `line ${lines - 1}`);
});

test('a printed flood: every line reaches the listener in order or is counted, and events() numbers each one', async (t) => {
  // The job server writes a run of output events as one `lines` line (one encode for a
  // flood's lines); the client gives each its own 'log' event and feed number, as before.
  // A client slower than the flood (a full run's listener heard 45,961 of 50,000 lines
  // here) gets the rest counted (OUT_BACKLOG_MAX, bridge/jobserve.py), never lost unsaid.
  const job = launch({ command: PYTHON, args: ['-c', 'for i in range(50000): print(i)\n'], env: userEnv(), cwd: REPO });
  const texts = [];
  job.on('log', (rec) => { if (rec.stream === 'stdout') texts.push(rec.text); });
  const seqs = [];
  let lines = 0;
  let dropped = 0; // events() keeps EVENT_QUEUE for a consumer that lags; the rest it counts
  for await (const event of job.events()) {
    if (event.seq !== null) seqs.push(event.seq);
    if (event.type === 'log' && event.data.stream === 'stdout') lines += 1;
    // this consumer's own drops (log), and the job server's for this process (output)
    if (event.type === 'dropped') dropped += (event.data.kinds.log || 0) + (event.data.kinds.output || 0);
  }
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  t.diagnostic(`${texts.length} lines heard, ${job.droppedOutput} counted by the job server`);
  assert.equal(texts.length + job.droppedOutput, 50000, 'every line heard or counted');
  assert.ok(texts.every((text, i) => (i === 0 ? Number(text) >= 0 : Number(text) > Number(texts[i - 1]))), 'in order');
  if (!job.droppedOutput) assert.ok(texts.every((text, i) => text === String(i)), 'none missing');
  assert.equal(lines + dropped, 50000, `${lines} lines read, ${dropped} counted as dropped`);
  const back = seqs.findIndex((seq, i) => i > 0 && seq <= seqs[i - 1]);
  assert.equal(back, -1, `each event its own feed number, increasing (at ${back}: ${seqs.slice(back - 2, back + 2)})`);
});
