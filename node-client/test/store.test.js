'use strict';
// The job store from Node, with real keepers and real Python children: a job submitted from
// Node runs under its keeper and is seen with a launched Job's events; a job submitted by
// Python (another process) is listed and attached from Node; cancel reaches a running job.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { openStore } = require('../src/index.js');
const { FIXTURE, PYTHON, userEnv, liveProcesses } = require('../test-support/e2e.js');

const CHILD = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');

/** Until the judge's status (the keeper's, in the feed) has a step: the job is under way. */
function untilProgress(job) {
  return new Promise((resolve) => {
    const on = (s) => { if (s.step) { job.off('status', on); resolve(); } };
    job.on('status', on);
  });
}

/** A store in a temporary folder with a job of tests/scheduler/child.py 'forever' under way. */
async function runningJob(t) {
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const id = await store.submit({ command: PYTHON, args: [CHILD, 'forever'], env: userEnv() });
  const job = store.attach(id);
  await untilProgress(job);
  return { store, id, job };
}

/**
 * A store's path in a temporary folder. After the test (a test that failed part way too), its
 * jobs still queued or running are cancelled and waited for, and then the folder goes: no keeper
 * or child of a test is left behind. One hook, so that order holds (node:test runs a test's after
 * hooks in the order they were added, so this one runs before the test's own store.close()).
 */
function tempStore(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-store-'));
  const file = path.join(dir, 'jobs.db');
  t.after(async () => {
    try {
      if (fs.existsSync(file)) await endJobs(file);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  return file;
}

/** Cancel every active job of the store at `file` and wait until each has ended (30 s each). */
async function endJobs(file) {
  const store = openStore(file, { python: PYTHON });
  try {
    const active = await store.jobs({ state: 'active' });
    await Promise.all(active.map((row) => store.cancel(row.id, { grace: 0 })));
    const deadline = performance.now() + 30000;
    for (const row of active) {
      for (;;) {
        const now = await store.get(row.id);
        if (!now || now.state === 'ended') break;
        if (performance.now() > deadline) throw new Error(`test cleanup: job ${row.id} did not end in 30 s`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  } finally {
    await store.close();
  }
}

test('submit from Node, attach: the events and the report of a launched job', async (t) => {
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const id = await store.submit({ command: PYTHON, args: [FIXTURE, 'succeed'], env: userEnv() });
  const job = store.attach(id);
  const seen = { stage: [], progress: [], state: [], log: [] };
  for (const name of Object.keys(seen)) job.on(name, (v) => seen[name].push(v));
  const types = [];
  const times = [];
  const iterating = (async () => {
    for await (const event of job) { types.push(event.type); times.push(event.t); }
  })();
  const progressTimes = [];
  job.on('progress', (_body, time) => progressTimes.push(time));
  const report = await job.done;
  await iterating;
  assert.equal(types.at(-1), 'end');
  assert.ok(types.includes('progress') && types.includes('hello'));
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.exit_code, 0);
  assert.deepEqual(report.log_tail.slice(-2), ['step 5/5', 'done']);
  assert.ok(seen.stage.some((s) => s.name === 'train' && s.event === 'end'));
  assert.equal(seen.progress.at(-1).step, 5);
  const status = job.status();
  assert.deepEqual([status.state, status.step, status.total], ['ended', 5, 5]);
  assert.deepEqual(seen.state.slice(-2), ['running', 'ended']);
  assert.ok(seen.log.some((l) => l.stream === 'stdout' && l.text === 'done'));
  const row = await store.get(id);
  assert.equal(row.state, 'ended');
  assert.equal(row.outcome, 'succeeded');
  assert.equal(row.attempts.length, 1);
  // Each event carries its own time from the events file (the keeper's wall clock, seconds).
  assert.ok(times.every((time) => typeof time === 'number' && time >= row.submitted_at && time <= row.ended_at + 1),
    `event times ${times} outside ${row.submitted_at}..${row.ended_at}`);
  assert.equal(progressTimes.length, seen.progress.length);
  assert.ok(progressTimes.every((time, i) => i === 0 || time >= progressTimes[i - 1]), 'progress times in order');
  const listed = await store.jobs({ limit: 10 });
  assert.deepEqual(listed.map((r) => r.id), [id]);
});

test('a job submitted by Python is listed and attached from Node; cancel stops it', async (t) => {
  const storePath = tempStore(t);
  const code = [
    'import sys',
    'from trainbridge import bridge',
    's = bridge.Scheduler(store=sys.argv[1], tick=None)',
    'print(s.submit([sys.argv[2], sys.argv[3], "stall"]))',
  ].join('\n');
  const made = spawnSync(PYTHON, ['-c', code, storePath, PYTHON, FIXTURE], { env: userEnv(), encoding: 'utf8' });
  assert.equal(made.status, 0, made.stderr);
  const id = made.stdout.trim();
  const store = openStore(storePath, { python: PYTHON });
  t.after(() => store.close());
  const job = store.attach(id);
  const running = new Promise((resolve) => job.on('progress', resolve));
  await running;
  const rows = await store.jobs({ state: 'active' });
  assert.deepEqual(rows.map((r) => r.id), [id]);
  const pid = rows[0].job_pid;
  assert.ok(pid > 0);
  const started = performance.now();
  const report = await job.cancel();
  assert.equal(report.outcome, 'cancelled');
  assert.ok(performance.now() - started < 10000, `cancel took ${performance.now() - started} ms`);
  assert.deepEqual(liveProcesses([pid]), []);
  assert.equal((await store.get(id)).outcome, 'cancelled');
});

test('a Node GUI SIGKILLed mid-job: the job runs on, a new openStore sees it running and attaches', async (t) => {
  const storePath = tempStore(t);
  const INDEX = path.resolve(__dirname, '../src/index.js');
  // The "GUI": submits a job and follows it until it is killed.
  const gui = spawn(process.execPath, ['-e', `
    const { openStore } = require(${JSON.stringify(INDEX)});
    const store = openStore(process.argv[1], { python: process.argv[2] });
    store.submit({ command: process.argv[2], args: [process.argv[3], 'stall'] }).then((id) => {
      console.log(id);
      store.attach(id).on('progress', () => console.log('progress'));
    });`, storePath, PYTHON, FIXTURE], { env: userEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  let text = '';
  gui.stdout.setEncoding('utf8');
  const progressed = new Promise((resolve) => gui.stdout.on('data', (chunk) => {
    text += chunk;
    lines.push(...text.split('\n').slice(0, -1));
    text = text.slice(text.lastIndexOf('\n') + 1);
    if (lines.includes('progress')) resolve();
  }));
  await progressed;
  const id = lines[0];
  gui.kill('SIGKILL');
  await new Promise((resolve) => gui.on('close', resolve));
  const store = openStore(storePath, { python: PYTHON });
  t.after(() => store.close());
  const row = await store.get(id);
  assert.equal(row.state, 'running');
  const started = performance.now();
  const job = store.attach(id);
  const progress = await new Promise((resolve) => job.on('progress', resolve));
  assert.ok(performance.now() - started < 1000, `attached in ${performance.now() - started} ms`);
  assert.equal(progress.step, 1);
  assert.deepEqual(liveProcesses([row.job_pid]), [row.job_pid]); // it ran on, unharmed
  const report = await job.cancel();
  assert.equal(report.outcome, 'cancelled');
  assert.deepEqual(liveProcesses([row.job_pid]), []);
});

test('a stopped keeper is said not answering; after SIGCONT it answers again and the job ends as it would have', async (t) => {
  // As tests/scheduler/test_one_feed.py: the keeper's 'status' events are its heartbeat.
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const child = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');
  const id = await store.submit({ command: PYTHON, args: [child, 'steps', '120'], env: userEnv(), timeouts: { heartbeatTimeout: 5 } });
  const job = store.attach(id);
  await untilProgress(job);
  const keeper = (await store.get(id)).keeper_pid;
  process.kill(keeper, 'SIGSTOP');
  const stopped = performance.now();
  let said;
  let knownMs;
  try {
    said = await new Promise((resolve) => job.once('supervisor', resolve));
    knownMs = performance.now() - stopped;
    // The scenario: 8 s stopped, well past the job's 5 s heartbeat deadline.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 8000 - (performance.now() - stopped))));
  } finally {
    process.kill(keeper, 'SIGCONT');
  }
  assert.equal(said.answering, false);
  assert.equal(said.keeper_pid, keeper);
  assert.ok(said.silent_s >= 5 && knownMs < 8000, `${said.silent_s} s silent, known after ${knownMs} ms`);
  const again = await new Promise((resolve) => job.once('supervisor', resolve));
  assert.equal(again.answering, true);
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', report.summary);
});

test('the wall clock set forward an hour does not make a running supervisor look silent (its waits are monotonic)', async (t) => {
  // A laptop waking, a VM restored from a snapshot, NTP: the wall clock steps while a job runs.
  const { store, id, job } = await runningJob(t);
  const said = [];
  job.on('supervisor', (s) => said.push(s));
  const wall = Date.now;
  Date.now = () => wall() + 3600 * 1000;
  try {
    const steps = [];
    await new Promise((resolve) => {
      const on = (s) => { steps.push(s.step); if (steps.length >= 4) { job.off('status', on); resolve(); } };
      job.on('status', on);
    });
  } finally {
    Date.now = wall;
  }
  assert.deepEqual(said, [], 'no "not answering" from a clock step');
  await store.cancel(id);
  assert.equal((await job.done).outcome, 'cancelled');
});

test('attach since now to a job that printed 200,000 lines: the state and last status first, reading only the end of the file', async (t) => {
  // As tests/scheduler/test_one_feed.py: attaching replayed the whole 35 MB events file.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-store-now-'));
  const gate = path.join(dir, 'go');
  const store = openStore(path.join(dir, 'jobs.db'), { python: PYTHON });
  t.after(async () => { // in this order: the job ends, the store closes, the files go
    if (fs.existsSync(dir)) fs.writeFileSync(gate, '');
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const code = 'import os, sys, time\nfrom trainbridge import worker\nfor i in range(200000):\n    print("line", i)\n'
    + `sys.stdout.flush(); worker.progress(7, 10)\nwhile not os.path.exists(${JSON.stringify(gate)}):\n    time.sleep(0.05)\n`;
  const id = await store.submit({ command: PYTHON, args: ['-c', code], env: userEnv() });
  const deadline = performance.now() + 60000;
  for (;;) {
    const row = await store.get(id);
    const file = row && row.events_path;
    if (file && fs.existsSync(file) && fs.statSync(file).size > 20e6) {
      const fd = fs.openSync(file, 'r');
      const size = fs.fstatSync(fd).size;
      const end = Buffer.alloc(100000);
      fs.readSync(fd, end, 0, end.length, size - end.length);
      fs.closeSync(fd);
      // the keeper writes a status about once a second: wait for the one with step 7
      if (end.toString('latin1').split('\n').some((l) => l.includes('"event": "status"') && l.includes('"step": 7'))) break;
    }
    if (performance.now() > deadline) throw new Error('timed out waiting for the lines and the progress');
    await new Promise((r) => setTimeout(r, 50));
  }
  const size = fs.statSync((await store.get(id)).events_path).size;
  const readChars = () => Number(/rchar: (\d+)/.exec(fs.readFileSync('/proc/self/io', 'ascii'))[1]);
  const rss = process.memoryUsage().rss;
  const read = readChars();
  const job = store.attach(id, { since: 'now' });
  const seen = [];
  await new Promise((resolve) => job.on('status', (s) => { seen.push(s); resolve(); }));
  const wasRead = readChars() - read;
  const grown = process.memoryUsage().rss - rss;
  assert.equal(job.state, 'running');
  assert.equal(seen[0].step, 7);
  assert.equal(job.status().step, 7);
  // What makes it quick on any machine (timed in the note, not here): the file's end is read.
  assert.ok(wasRead < size / 4, `${wasRead} of ${size} bytes read`);
  assert.ok(grown < 50 * 1024 * 1024, `${grown} bytes`);
  const lines = [];
  job.on('log', (l) => lines.push(l.text));
  fs.writeFileSync(gate, '');
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.ok(!lines.includes('line 0'), 'what came before the attach is not replayed');
  assert.throws(() => store.attach(id, { since: 'yesterday' }), /since must be 'start', 'now' or an event number from 1/);
});

test('an attached job is as thick as a launched one: stalled with its diagnosis, hang with its stage', async (t) => {
  // An attached job's 'stalled' once had no diagnosis and its 'hang' no stage.
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const child = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');
  const id = await store.submit({ command: PYTHON, args: [child, 'stall'], env: userEnv(), timeouts: { stalledAfter: 1, stallTimeout: 4 } });
  const job = store.attach(id);
  const stalled = new Promise((resolve) => job.once('stalled', resolve));
  const hang = new Promise((resolve) => job.once('hang', resolve));
  const [s, h, report] = await Promise.all([stalled, hang, job.done]);
  assert.equal(s.stage, 'train');
  assert.ok(s.diagnosis && s.diagnosis.kind && s.diagnosis.summary, JSON.stringify(s));
  assert.deepEqual(h, { reason: 'stall', stage: 'train' });
  assert.equal(report.outcome, 'hung');
});

test('an attached cancel takes a reason and a grace, as a launched Job\'s', async (t) => {
  const { job } = await runningJob(t);
  await assert.rejects(job.cancel({ grace: -1 }), /grace must be None or seconds >= 0/);
  const report = await job.cancel({ grace: 0, reason: 'the user pressed Stop' });
  assert.equal(report.outcome, 'cancelled');
  assert.equal(report.cancel.reason, 'the user pressed Stop');
  assert.equal(report.signals_sent[0], 'SIGTERM');
});

test('a face rejoins the feed from event N with nothing missed or repeated (attach {since: position + 1})', async (t) => {
  // Every line of a job's feed carries its number; a GUI that stops following at
  // job.position and attaches again with {since: position + 1} gets exactly what came after.
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const child = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');
  const id = await store.submit({ command: PYTHON, args: [child, 'steps', '40'], env: userEnv() });
  const first = store.attach(id);
  const seen = [];
  for await (const event of first) {
    if (event.seq !== null) seen.push(event);
    if (event.type === 'log' && /^step 5/.test(event.data.text)) break;
  }
  first.close(); // the GUI goes away mid-job
  // position: the last event read from the feed; a `for await` consumer may not have taken all
  // of those yet (a loaded hunt run read one more): it rejoins after its own last event.
  assert.ok(first.position >= seen.at(-1).seq, `${first.position} < ${seen.at(-1).seq}`);
  const again = store.attach(id, { since: seen.at(-1).seq + 1 });
  const rest = [];
  for await (const event of again) if (event.seq !== null) rest.push(event);
  const numbers = [...seen, ...rest].map((e) => e.seq);
  assert.ok(rest.length && rest[0].seq === seen.at(-1).seq + 1, 'nothing repeated or missed at the rejoin');
  assert.equal(again.position, numbers.at(-1));
  assert.equal((await again.done).outcome, 'succeeded');
  // After the end, read whole: the same events with the same numbers (nothing missed at the
  // rejoin). Lines a launched Job emits nothing for (another process's progress) have no event.
  const whole = [];
  for await (const event of store.attach(id)) if (event.seq !== null) whole.push(event.seq);
  assert.deepEqual(numbers, whole);
  assert.equal(whole[0], 1);
  assert.throws(() => store.attach(id, { since: 0 }), /an event number from 1/);
});

test('an attached job pings and sends as a launched one and hears the script\'s messages', async (t) => {
  // An attached job once had no ping(), no send() and no 'message' (worker.send()).
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const child = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');
  const id = await store.submit({ command: PYTHON, args: [child, 'echo'], env: userEnv() });
  const job = store.attach(id);
  const echoed = [];
  job.on('message', (data) => echoed.push(data.echo));
  await new Promise((resolve) => job.once('hello', resolve));
  const rtt = await job.ping();
  assert.ok(rtt !== null && rtt > 0 && rtt < 2, String(rtt));
  // The keeper waits at most 60 s for a worker: a longer ping is refused, not cut short.
  for (const bad of [61, 0, '2']) {
    await assert.rejects(job.ping({ timeout: bad }), (err) => err instanceof RangeError && /ping: timeout must be/.test(err.message));
  }
  for (let i = 0; i < 5; i += 1) await job.send({ n: i });
  await assert.rejects(job.send('x'.repeat(10_000_000)), (err) => err instanceof RangeError && /cannot send this message/.test(err.message));
  await job.send('stop');
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual(echoed, [{ n: 0 }, { n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }, 'stop']);
  assert.equal(await job.ping(), null); // ended: nobody to ask
  await assert.rejects(job.send('late'), /has ended/);
  // A launched Job's timeout unit: seconds.
  assert.equal(await job.dumpStacks({ timeout: 1 }), null);
});

test('dumpStacks() through the keeper waits as long as asked (the GIL held for 4 s), as Python\'s', async (t) => {
  // The keeper gave the worker 2 s of its own, whatever the asker said: a busy machine's
  // worker that answered later was "no answer" (bridge/keeper.py, test_scheduler.py's twin).
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const id = await store.submit({ command: PYTHON, args: [CHILD, 'hold', '4'], env: userEnv() });
  const job = store.attach(id);
  const holding = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the script never said it holds the GIL (30 s)')), 30000);
    job.on('log', (line) => { if (line.text === 'holding the GIL') { clearTimeout(timer); resolve(); } });
  });
  await untilProgress(job);
  await job.send('hold');
  await holding;
  const asked = performance.now();
  const stacks = await job.dumpStacks({ timeout: 20 });
  const answered = (performance.now() - asked) / 1000;
  assert.match(stacks || '', /child\.py/, `no stacks after ${answered} s`);
  assert.ok(answered > 2, `answered in ${answered} s while the GIL was held for 4`);
  await assert.rejects(job.dumpStacks({ timeout: 61 }), (err) => err instanceof RangeError && /dump_stacks: timeout must be/.test(err.message));
  await job.send('stop');
  assert.equal((await job.done).outcome, 'succeeded');
});

test('from event N of a queued job: its events from N on once it runs, not the ones before', async (t) => {
  const store = openStore(tempStore(t), { python: PYTHON, slots: { jobs: 1, gpus: [] } });
  t.after(() => store.close());
  const child = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');
  const first = await store.submit({ command: PYTHON, args: [child, 'forever'], env: userEnv() });
  const running = store.attach(first);
  await untilProgress(running);
  running.close();
  const queued = await store.submit({ command: PYTHON, args: [child, 'steps', '3'], env: userEnv() });
  assert.equal((await store.get(queued)).state, 'queued');
  const job = store.attach(queued, { since: 4 });
  await store.cancel(first);
  const numbers = [];
  for await (const event of job) if (event.seq !== null) numbers.push(event.seq);
  assert.ok(numbers.length && numbers[0] >= 4, JSON.stringify(numbers.slice(0, 3)));
  assert.equal((await job.done).outcome, 'succeeded');
});

test('submit({zeroCode: false}) leaves the worker out, as launch()\'s zeroCode and Python\'s submit(zero_code=False)', async (t) => {
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const code = "import sys; print('worker' if 'trainbridge.worker' in sys.modules else 'none')";
  const off = await store.submit({ command: PYTHON, args: ['-c', code], env: userEnv(), zeroCode: false });
  const on = await store.submit({ command: PYTHON, args: ['-c', code], env: userEnv() });
  assert.deepEqual((await store.attach(off).done).log_tail, ['none']);
  assert.deepEqual((await store.attach(on).done).log_tail, ['worker']);
  assert.deepEqual((await store.get(off)).config, { zero_code: false });
});

test('a send whose keeper is lost while it waits says the job ended, not that the keeper is starved', async (t) => {
  // As tests/scheduler/test_one_feed.py: the keeper answers every request before its end; a
  // keeper killed first answers none, and the reconciled end tells the asker why.
  const { store, id, job } = await runningJob(t);
  const row = await store.get(id);
  process.kill(row.keeper_pid, 'SIGSTOP');
  const sent = job.send('hello', { timeout: 30 });
  const requests = path.join(row.dir, 'requests');
  const deadline = performance.now() + 30000;
  while (!(fs.existsSync(requests) && fs.readdirSync(requests).length)) {
    assert.ok(performance.now() < deadline, 'no request file within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 20)); // polling interval, not a synchronisation
  }
  process.kill(row.keeper_pid, 'SIGKILL');
  // Killed before the request's own signal reached it (a busy machine), the asker hears so
  // at once; else the reconciled end says it. Never "stopped or starved".
  await assert.rejects(sent, /ended \(lost\) before its keeper answered|its keeper ended while it was asked/);
  assert.equal((await job.done).outcome, 'lost');
});

test('submit with a name, tags, meta and a log path of its own; jobs({tag}) lists by tag', async (t) => {
  // As Python's submit(name=, tags=, meta=, log_path=): the GUI keeps no id mapping of its own.
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-log-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const logPath = path.join(dir, 'log.txt');
  const id = await store.submit({
    command: PYTHON, args: [CHILD, 'steps', '2'], env: userEnv(),
    name: 'lora-1', tags: ['lora', 'sdxl'], meta: { guiId: 7 }, logPath,
  });
  assert.equal((await store.attach(id).done).outcome, 'succeeded');
  const row = await store.get(id);
  assert.deepEqual([row.name, row.tags, row.meta, row.log_path], ['lora-1', ['lora', 'sdxl'], { guiId: 7 }, logPath]);
  assert.deepEqual((await store.jobs({ tag: 'sdxl' })).map((r) => r.id), [id]);
  assert.deepEqual(await store.jobs({ tag: 'none' }), []);
  assert.deepEqual(fs.readFileSync(logPath, 'utf8').split('\n').slice(0, 2), ['step 1', 'step 2']);
  await assert.rejects(store.submit({ command: 'true', tags: 'lora' }), /tags must be a list/);
});

test('openStore({keepEnded}) sets the retention, as Python\'s Scheduler(keep_ended=)', async (t) => {
  const file = tempStore(t);
  const store = openStore(file, { python: PYTHON, keepEnded: 1 });
  t.after(() => store.close());
  const first = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '1'], env: userEnv() });
  await store.attach(first).done;
  const firstDir = (await store.get(first)).dir;
  const second = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '1'], env: userEnv() });
  await store.attach(second).done;
  const deadline = performance.now() + 30000;
  let rows = await store.jobs();
  while (rows.length > 1) { // the helper's next tick applies it
    assert.ok(performance.now() < deadline, `still ${rows.length} jobs after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // polling interval, not a synchronisation
    rows = await store.jobs();
  }
  assert.deepEqual(rows.map((r) => r.id), [second]);
  assert.equal(fs.existsSync(firstDir), false, 'the forgotten job\'s files went with it');
  // Said: how many retention forgot, as Python's Scheduler.forgotten() and `trainbridge jobs`.
  const forgotten = await store.forgotten();
  assert.deepEqual([forgotten.count, forgotten.keep_ended, forgotten.last], [1, 1, [first]]);
  // The store's retention, for every process: a second openStore without keepEnded keeps it.
  const other = openStore(file, { python: PYTHON });
  t.after(() => other.close());
  assert.equal(await other.keepEnded(), 1);
  assert.throws(() => openStore(file, { keepEnded: -1 }), /keepEnded must be a whole number >= 0/);
});

test('pause, resume and rerun from Node, as Python\'s Scheduler has them', async (t) => {
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const first = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '1'], env: userEnv(), name: 'one' });
  await store.attach(first).done;
  await store.pause();
  const again = await store.rerun(first, { env: userEnv() });
  assert.equal((await store.get(again)).state, 'queued');
  await store.resume();
  assert.equal((await store.attach(again).done).outcome, 'succeeded');
  const row = await store.get(again);
  assert.deepEqual([row.name, row.command], ['one', (await store.get(first)).command]);
  await assert.rejects(store.rerun('j-nope'), /no job 'j-nope'/);
});

test('store.close() stops every attached job\'s following, so a GUI process can exit', async () => {
  // A failed test once left an attached job polling a closed store: the process never ended.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-store-close-'));
  const script = [
    "const { openStore } = require(process.argv[1]);",
    "(async () => { const store = openStore(process.argv[2], { python: process.argv[3] });",
    "const id = await store.submit({ command: process.argv[3], args: ['-c', 'import time; time.sleep(30)'] });",
    // 'at once': closed before the attacher's first read of its row (the README's example does this)
    "const job = store.attach(id); if (process.argv[4] === 'later') await store.get(id);",
    "await store.close(); console.log(id); })();",
  ].join('\n');
  for (const when of ['later', 'at once']) {
    const db = path.join(dir, `${when.replace(' ', '-')}.db`);
    const done = spawnSync(process.execPath, ['-e', script, path.join(__dirname, '..', 'src', 'index.js'), db, PYTHON, when],
      { timeout: 30000, encoding: 'utf8' });
    // the sleeping job is cancelled here: close() leaves jobs running by design
    const id = (done.stdout || '').trim();
    if (id) spawnSync(PYTHON, ['-m', 'trainbridge.bridge.cli', 'cancel', '--store', db, '--wait', id], { encoding: 'utf8', timeout: 30000 });
    assert.equal(done.error, undefined, `closed ${when}: the process did not exit within 30 s of close()`);
    assert.equal(done.status, 0, done.stderr);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('store.watch(): the job list as changes, as Python\'s Scheduler.watch()', async (t) => {
  // A GUI's list without polling jobs(): every row first, then each change any process makes.
  const storePath = tempStore(t);
  const store = openStore(storePath, { python: PYTHON });
  t.after(() => store.close());
  const first = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '1'], env: userEnv() });
  await store.attach(first).done;
  const changes = [];
  const waiters = [];
  const watch = store.watch();
  watch.on('job', (change) => {
    changes.push(change);
    for (const w of [...waiters]) if (w.ok(change)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(change); }
  });
  const next = (what, ok) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no change for 30 s waiting for ${what}`)), 30000);
    waiters.push({ ok, resolve: (c) => { clearTimeout(timer); resolve(c); } });
  });
  assert.equal(await watch.ready, watch);
  assert.deepEqual(changes.map((c) => [c.change, c.id, c.initial, c.row.state]), [['added', first, true, 'ended']]);
  // Submitted by Python (another process): added, then its states, to the end.
  const ended = next('the second job to end', (c) => c.id !== first && c.row && c.row.state === 'ended');
  const py = spawnSync(PYTHON, ['-c', 'import sys; from trainbridge import bridge; s = bridge.Scheduler(store=sys.argv[1], tick=None); print(s.submit(sys.argv[2:])); s.close()',
    storePath, PYTHON, CHILD, 'steps', '2'], { encoding: 'utf8', env: userEnv() });
  assert.equal(py.status, 0, py.stderr);
  const second = py.stdout.trim();
  assert.equal((await ended).id, second);
  const ofSecond = changes.filter((c) => c.id === second);
  assert.equal(ofSecond[0].change, 'added');
  assert.ok(ofSecond.some((c) => c.row.state === 'running'), ofSecond.map((c) => c.row.state).join(' '));
  assert.equal(ofSecond.at(-1).row.outcome, 'succeeded');
  // Forgotten: removed, with why.
  const removed = next('the removal', (c) => c.change === 'removed');
  assert.equal(await store.forget(first), true);
  assert.deepEqual(await removed, { ...(await removed), event: 'job', change: 'removed', id: first, row: null, why: 'forgotten' });
  await watch.close();
});

test('a scheduled job whose loss becomes NaN: health on every face, NaN read back, stopOnNan cancels it (Python: test_training_health)', async (t) => {
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  assert.throws(() => store.submit({ command: PYTHON, args: [CHILD, 'steps', '1'], stopOnNan: 3 }), /stopOnNan must be a metric name/);
  const id = await store.submit({ command: PYTHON, args: [CHILD, 'diverge', '3'], env: userEnv(), stopOnNan: ['loss'] });
  const job = store.attach(id);
  const said = [];
  job.on('health', (entry) => said.push(entry));
  const report = await job.done;
  // Before strict JSON, the keeper's lines with a bare NaN were skipped here: no health, no end.
  assert.equal(said.length, 1);
  assert.equal(said[0].metric, 'loss');
  assert.ok(Number.isNaN(said[0].value));
  assert.match(said[0].text, /^loss became NaN /);
  assert.equal(report.outcome, 'cancelled', report.summary);
  assert.equal(report.cancel.by, 'health');
  assert.ok(report.cancel.reason.startsWith(said[0].text));
  assert.ok(Number.isNaN(report.health[0].value));
  assert.ok(Number.isNaN(job.status().metrics.loss));
  const row = await store.get(id);
  assert.ok(Number.isNaN(row.progress.metrics.loss));
  assert.deepEqual(liveProcesses([row.job_pid]), []);
  // for await gets it too (the attached job's hand-kept list of events lacked it)
  const iterated = [];
  for await (const event of store.attach(id)) if (event.type === 'health') iterated.push(event.data.metric);
  assert.deepEqual(iterated, ['loss']);
});

test('a line of the feed that is not an event is said, not skipped (an \'unreadable\' event in its place)', async (t) => {
  // A keeper killed mid-line leaves a torn line (bridge: test_one_feed.py). What it held is
  // lost to every face; the attacher says so, where it was, and iterators get it too.
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const id = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '3'], env: userEnv() });
  assert.equal((await store.attach(id).done).outcome, 'succeeded');
  const file = (await store.get(id)).events_path;
  const lines = fs.readFileSync(file, 'latin1').split('\n');
  lines.splice(3, 0, '{"seq": 4, "event": "output", "text": "half a li');
  fs.writeFileSync(file, lines.join('\n'), 'latin1');
  const job = store.attach(id);
  const events = [];
  for await (const event of job) events.push(event);
  const said = events.filter((e) => e.type === 'unreadable');
  assert.equal(said.length, 1, JSON.stringify(said));
  assert.deepEqual({ ...said[0].data, error: typeof said[0].data.error }, { count: 1, after_seq: 3, bytes: lines[3].length, error: 'string' });
  assert.match(said[0].data.error, /^[\x20-\x7e]+$/);
  assert.equal(said[0].seq, null); // made by the reader, not a line's event
  assert.equal(job.unreadable, 1);
  const before = events.indexOf(said[0]);
  assert.ok(events.slice(0, before).every((e) => e.seq === null || e.seq <= 3), 'said in its place, after event 3');
  assert.ok(events.slice(before + 1).every((e) => e.seq === null || e.seq > 3), 'and before the ones after it');
  assert.equal(events.at(-1).type, 'end');
});

test('a row that says ended before its end line is written waits for the line; a keeper killed between has it written by the store', async (t) => {
  // The keeper writes the row's end (end_pending set), answers what was asked before, then the
  // feed's end line (bridge: test_one_feed.py). A reader that made up an end from the row
  // meanwhile missed the line's number and what came ahead of it. A keeper killed between the
  // two writes has its line written by the store's reconcile, numbered.
  const storePath = tempStore(t);
  const store = openStore(storePath, { python: PYTHON });
  t.after(() => store.close());
  const keeper = spawn('sleep', ['120'], { stdio: 'ignore' }); // a keeper still ending the job
  t.after(() => keeper.kill('SIGKILL'));
  const id = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '3'], env: userEnv() });
  assert.equal((await store.attach(id).done).outcome, 'succeeded');
  const file = (await store.get(id)).events_path;
  const lines = fs.readFileSync(file, 'latin1').replace(/\n$/, '').split('\n');
  const endLine = lines.pop();
  assert.match(endLine, /"event": ?"end"/);
  fs.writeFileSync(file, lines.join('\n') + '\n', 'latin1'); // after the row's end, before the line's
  const set = spawnSync(PYTHON, ['-c', [
    'import sys; from trainbridge.bridge import procs; from trainbridge.bridge.store import Store',
    'pid = int(sys.argv[3]); s = Store(sys.argv[1])',
    's.update(sys.argv[2], keeper_pid=pid, keeper_start=procs.process_start(pid), end_pending=1); s.close()',
  ].join('\n'), storePath, id, String(keeper.pid)], { encoding: 'utf8' });
  assert.equal(set.status, 0, set.stderr);
  const collect = (/** @type {AsyncIterable<any>} */ job) => (async () => {
    const out = [];
    for await (const event of job) out.push(event);
    return out;
  })();
  const job = store.attach(id);
  const events = collect(job);
  // No end made up while the line is pending (it came within a row read, 0.5 s, before).
  const early = await Promise.race([job.done.then(() => 'ended'), new Promise((r) => setTimeout(r, 3000, 'waiting'))]);
  assert.equal(early, 'waiting');
  fs.appendFileSync(file, endLine + '\n', 'latin1');
  assert.equal((await job.done).outcome, 'succeeded');
  const end = (await events).at(-1);
  assert.equal(end.type, 'end');
  assert.equal(end.seq, lines.length + 1, JSON.stringify(end));
  // The keeper killed between the two writes: the store's helper writes the line, numbered.
  fs.writeFileSync(file, lines.join('\n') + '\n', 'latin1');
  const again = store.attach(id);
  const seen = collect(again);
  keeper.kill('SIGKILL');
  await new Promise((r) => keeper.once('exit', r));
  assert.equal((await again.done).outcome, 'succeeded');
  const written = (await seen).at(-1);
  assert.equal(written.type, 'end');
  assert.equal(written.seq, lines.length + 1, JSON.stringify(written));
  assert.equal((await store.get(id)).end_pending, null);
});

test('openStore() with a Python that lacks pyzmq says what to install where, and a later call says it again', async (t) => {
  // A venv of its own without pip or packages: what a GUI's bare training venv is
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-bare-venv-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const made = spawnSync('python3', ['-m', 'venv', '--without-pip', dir], { encoding: 'utf8' });
  assert.equal(made.status, 0, made.stderr);
  const bare = path.join(dir, 'bin', 'python');
  const store = openStore(tempStore(t), { python: bare });
  const said = `the trainbridge supervisor needs pyzmq and msgpack, not installed for ${bare}; run \`${bare} -m pip install pyzmq msgpack\``;
  await assert.rejects(store.jobs(), (err) => err.message.endsWith(`exited (1): ${said}`) && !err.message.includes('Traceback'));
  await assert.rejects(store.get('j-1'), (err) => err.message.endsWith(said));
  await store.close();
});

test('submit: options left out or null get Python\'s defaults (one place), given ones land in the row', async (t) => {
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  await store.pause(); // nothing starts: only the rows are looked at
  const base = { command: PYTHON, args: [CHILD, 'forever'], env: userEnv() };
  const plain = await store.get(await store.submit({ ...base, priority: null, name: null, slurm: null }));
  assert.deepEqual(
    [plain.priority, plain.max_restarts, plain.restart_backoff, plain.name, plain.tags, plain.config],
    [0, 0, 1, null, null, {}],
  );
  const given = await store.get(await store.submit({
    ...base, priority: 3, maxRestarts: 2, restartBackoff: 0.5, zeroCode: false, name: 'lora', tags: ['a'],
  }));
  assert.deepEqual(
    [given.priority, given.max_restarts, given.restart_backoff, given.name, given.tags, given.config],
    [3, 2, 0.5, 'lora', ['a'], { zero_code: false }],
  );
  await assert.rejects(store.submit({ ...base, maxRestarts: -1 }), /max_restarts and restart_backoff must be >= 0/);
  assert.equal((await store.jobs()).length, 2);
});

test('a stopped keeper is said not answering within 5 s + 3 s (the store helper judges it), and answering again after SIGCONT', async (t) => {
  // As tests/scheduler/test_one_feed.py for Python's attach(): the same rule, judged once
  // (bridge/feed_judge.py), here by the store helper for this face.
  const { store, id, job } = await runningJob(t);
  const keeper = (await store.get(id)).keeper_pid;
  const said = [];
  job.on('supervisor', (info, at) => said.push({ ...info, at }));
  const answering = (value) => new Promise((resolve) => {
    const on = (info) => { if (info.answering === value) { job.off('supervisor', on); resolve(); } };
    job.on('supervisor', on);
  });
  const silent = answering(false);
  process.kill(keeper, 'SIGSTOP');
  const stopped = performance.now();
  try {
    await silent;
  } finally {
    process.kill(keeper, 'SIGCONT');
  }
  const knownMs = performance.now() - stopped;
  await answering(true);
  assert.equal(said[0].answering, false);
  assert.equal(said[0].keeper_pid, keeper);
  assert.ok(said[0].silent_s >= 5, JSON.stringify(said[0]));
  assert.equal(typeof said[0].at, 'number', 'the time it was said, as every event has');
  assert.ok(knownMs < 5000 + 3000, `known in ${knownMs} ms`);
  assert.equal(job.answering, true);
  await store.cancel(id, { grace: 0 });
  assert.equal((await job.done).outcome, 'cancelled');
});

test('the store helper dies under an attached job: its done rejects with why, nothing waits forever', async (t) => {
  // The helper judges what the feed's lines do not say (bridge/feed_judge.py): with it gone,
  // a lost keeper's end would never come.
  const { store, job } = await runningJob(t);
  const errors = [];
  job.on('error', (err) => errors.push(err));
  process.kill(store._helper.pid, 'SIGKILL');
  await assert.rejects(job.done, /the store helper \(python -m trainbridge\.bridge\.storeserve\) exited \(SIGKILL\)/);
  assert.equal(errors.length, 1);
});

test('a row that says ended with no end line in the feed: the helper\'s judge ends the attached job with the row\'s end, at its time', async (t) => {
  // A keeper killed between the row's end and the feed's end line, on a store nobody
  // reconciles: the line never comes, and the judge (bridge/feed_judge.py) ends it from the row.
  const store = openStore(tempStore(t), { python: PYTHON });
  t.after(() => store.close());
  const id = await store.submit({ command: PYTHON, args: [CHILD, 'steps', '3'], env: userEnv() });
  assert.equal((await store.attach(id).done).outcome, 'succeeded');
  const row = await store.get(id);
  const lines = fs.readFileSync(row.events_path, 'ascii').split('\n').filter(Boolean);
  assert.match(lines.at(-1), /"event": "end"/);
  fs.writeFileSync(row.events_path, lines.slice(0, -1).join('\n') + '\n');
  const job = store.attach(id);
  const ended = new Promise((resolve) => job.on('end', (report, at) => resolve({ report, at })));
  const { report, at } = await ended;
  assert.equal(report.outcome, 'succeeded');
  assert.equal(at, row.ended_at, 'the row\'s ended_at, not when it was read');
  assert.equal((await job.done).outcome, 'succeeded');
  assert.ok(job.position < JSON.parse(lines.at(-1)).seq, 'every line before it was read, the end was not');
});
