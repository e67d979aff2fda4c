'use strict';
// What a GUI author needs from launch() besides the report: the interpreter by
// name, a spawn event, an AbortSignal, an opt-in `done` that rejects on failure, a no_worker
// event when zero-code mode cannot load, and DoctorError among the exports.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const index = require('../src/index.js');
const { launch, JobFailedError, LaunchError, resolvePython } = index;
const { FIXTURE, PYTHON, REPO, userEnv, processesOfJob } = require('../test-support/e2e.js');

test('python: the interpreter to run when no command is given; spawn names pid and command', async () => {
  const job = launch({ python: PYTHON, args: [FIXTURE, 'succeed'], env: userEnv() });
  const order = [];
  let spawned = null;
  job.on('spawn', (info) => { spawned = info; order.push('spawn'); });
  job.on('hello', () => order.push('hello'));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual(spawned, { pid: report.pid, command: [PYTHON, FIXTURE, 'succeed'] });
  assert.equal(order[0], 'spawn');
  assert.ok(order.includes('hello'));
  const named = launch({ pythonPath: PYTHON, args: ['-c', 'pass'] });
  assert.equal(named.command[0], PYTHON);
  assert.equal((await named.done).outcome, 'succeeded');
  assert.equal(resolvePython({ python: '/x/bin/python' }), '/x/bin/python');
});

test('signal: aborting cancels the job (a user stop, so rejectOnFailure still resolves)', async () => {
  const controller = new AbortController();
  const job = launch({ command: PYTHON, args: [FIXTURE, 'stall'], env: userEnv(), signal: controller.signal,
    rejectOnFailure: true, timeouts: { cancelGrace: 2 } });
  job.once('progress', () => controller.abort());
  const report = await job.done;
  assert.equal(report.outcome, 'cancelled');
  assert.deepEqual(processesOfJob(report.job_id), []);
  // Aborted before the launch: the job is cancelled as soon as it starts.
  const early = await launch({ command: PYTHON, args: [FIXTURE, 'stall'], env: userEnv(), signal: AbortSignal.abort() }).done;
  assert.equal(early.outcome, 'cancelled');
});

test('rejectOnFailure: done rejects with JobFailedError carrying the report', async () => {
  const job = launch({ command: PYTHON, args: [FIXTURE, 'raise'], env: userEnv(), rejectOnFailure: true });
  const err = await job.done.then(() => null, (e) => e);
  assert.ok(err instanceof JobFailedError, String(err));
  assert.equal(err.outcome, 'failed');
  assert.equal(err.report.error.type, 'ValueError');
  assert.match(err.message, /ValueError: bad layer size: 0/);
  assert.equal(job.report, err.report);
  // Without the option the same job resolves to its report.
  const report = await launch({ command: PYTHON, args: [FIXTURE, 'raise'], env: userEnv() }).done;
  assert.equal(report.outcome, 'failed');
});

test('a training venv without pyzmq and msgpack: launch() says what to install where; the script alone still runs', async () => {
  // A fresh venv with nothing installed. The supervisor runs under the job's own Python.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-bare-venv-'));
  try {
    execFileSync(PYTHON, ['-m', 'venv', '--without-pip', dir]);
    const bare = path.join(dir, 'bin', 'python');
    // The README's own usage: the worker API imports and its calls do nothing (it
    // once failed with "No module named 'trainbridge'" and the diagnosis blamed line 1).
    const script = 'from trainbridge import worker\nwith worker.stage("fit"):\n    worker.progress(1, 1)\nprint("trained")';
    const job = launch({ python: bare, args: ['-c', script], env: userEnv() });
    const errors = [];
    job.on('error', (err) => errors.push(err));
    await assert.rejects(job.done, (err) => err instanceof LaunchError
      && err.message === `cannot run the trainbridge supervisor with ${bare}: the trainbridge supervisor needs pyzmq and `
        + `msgpack, not installed for ${bare}; run \`${bare} -m pip install pyzmq msgpack\``);
    assert.deepEqual(errors.map((e) => e.name), ['LaunchError']);
    const alone = execFileSync(bare, ['-c', script], { env: { ...userEnv(), PYTHONPATH: REPO } }).toString();
    assert.equal(alone, 'trained\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the package exports DoctorError (doctor() rejects with it)', () => {
  assert.equal(index.DoctorError, require('../src/doctor.js').DoctorError);
  assert.ok(new index.DoctorError('x') instanceof Error);
});

test('off Linux the package refuses at require with one sentence', () => {
  const pretend = "Object.defineProperty(process, 'platform', { value: 'darwin' });";
  const done = spawnSync(process.execPath, ['-e', `${pretend} require(${JSON.stringify(require.resolve('../src/index.js'))})`],
    { encoding: 'utf8' });
  assert.notEqual(done.status, 0);
  assert.match(done.stderr, /Error: trainbridge's Node client supports Linux only and this is darwin; the Python worker does run here/);
});

test('the log file: a bar is one line per second at most, then the verdict and the stacks', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-log-'));
  try {
    const bar = 'import sys, time\nprint("start", flush=True)\nfor i in range(41):\n'
      + '    sys.stderr.write(f"\\rbar {i}/40"); sys.stderr.flush(); time.sleep(0.005)\n'
      + 'sys.stderr.write("\\n")\nprint("end", flush=True)\n';
    const logPath = path.join(dir, 'bar.log');
    const report = await launch({ python: PYTHON, args: ['-c', bar], env: userEnv(), logPath }).done;
    assert.equal(report.outcome, 'succeeded');
    assert.equal(report.output.lines.stderr, 41);
    const lines = fs.readFileSync(logPath, 'utf8').split('\n').slice(0, -1);
    assert.equal(lines.at(-1), `[trainbridge] ${report.summary}`);
    assert.deepEqual(lines.filter((l) => !l.startsWith('bar')).slice(0, -1), ['start', 'end']);
    const bars = lines.filter((l) => l.startsWith('bar'));
    assert.equal(bars[0], 'bar 0/40');
    assert.equal(bars.at(-1), 'bar 40/40');
    assert.ok(bars.length <= 2 + Math.floor(report.duration_s), bars.join(' | '));

    const crashPath = path.join(dir, 'crash.log');
    const crashed = await launch({ python: PYTHON, args: ['-c', "import ctypes\nprint('before', flush=True)\nctypes.string_at(0)"],
      env: userEnv(), logPath: crashPath }).done;
    assert.equal(crashed.outcome, 'crashed');
    const text = fs.readFileSync(crashPath, 'utf8');
    assert.ok(text.startsWith(`before\n[trainbridge] ${crashed.summary}\n[trainbridge] stacks:\n`), text.slice(0, 300));
    assert.ok(text.endsWith(`${crashed.stacks.replace(/\n+$/, '')}\n`));
    assert.match(text, /Fatal Python error: Segmentation fault/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

const LOOP = 'import time\nfrom trainbridge import worker\nfor i in range(100000):\n'
  + '    worker.progress(i + 1)\n    time.sleep(0.02)\n';

async function cancelAfterProgress(code, options) {
  const job = launch({ python: PYTHON, args: ['-c', code], env: userEnv() });
  const answers = [];
  job.on('cancel', (answer) => answers.push(answer));
  await new Promise((resolve) => job.once('progress', resolve));
  const asked = performance.now();
  const report = await job.cancel(options);
  const took = (performance.now() - asked) / 1000;
  assert.deepEqual(processesOfJob(report.job_id), []);
  return { report, answers, took };
}

test('cancel({reason}): echoed in the report, answered by the worker, not an error', async () => {
  const { report, answers, took } = await cancelAfterProgress(LOOP, { reason: 'user pressed Stop' });
  assert.equal(report.outcome, 'cancelled');
  assert.equal(report.error, null);
  assert.doesNotMatch(report.summary, /Error/);
  assert.equal(report.cancel.reason, 'user pressed Stop');
  assert.equal(report.cancel.accepted, true);
  assert.equal(report.cancel.refused, null);
  assert.match(report.cancel.traceback, /KeyboardInterrupt/);
  assert.deepEqual(answers, [{ reason: 'user pressed Stop', accepted: true, refused: null }]);
  assert.deepEqual(report.signals_sent, []);
  assert.ok(took < 5, `${took} s`);
});

test('the stages a cancel ended say cancelled, not error, as in Python', async () => {
  const staged = "import time\nfrom trainbridge import worker\nwith worker.stage('train'):\n"
    + '    for i in range(100000):\n        worker.progress(i + 1)\n        time.sleep(0.02)\n';
  const { report } = await cancelAfterProgress(staged, { reason: 'user pressed Stop' });
  const statuses = Object.fromEntries(report.stages.map((s) => [s.name, s.status]));
  assert.equal(statuses.train, 'cancelled', JSON.stringify(report.stages));
  assert.equal(statuses.main, 'cancelled', JSON.stringify(report.stages));
});

test('a refused cancel (SIGINT ignored) says why, and SIGTERM follows at once', async () => {
  const ignores = 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n' + LOOP;
  const { report, answers, took } = await cancelAfterProgress(ignores);
  assert.equal(report.outcome, 'cancelled');
  assert.equal(report.error, null);
  assert.equal(report.cancel.accepted, false);
  assert.match(report.cancel.refused, /SIGINT is not handled by Python/);
  assert.equal(report.cancel.reason, 'cancelled by the client');
  assert.equal(report.signals_sent[0], 'SIGTERM');
  assert.deepEqual(answers.map((a) => a.accepted), [false]);
  assert.ok(took < 3, `${took} s: the 5 s grace was waited out`);
});

test('remoteEnv() refuses, in words, an address this host does not have (as the Python client)', async () => {
  const job = launch({ command: PYTHON, args: ['-c', 'import time; time.sleep(30)'] });
  try {
    await assert.rejects(job.remoteEnv('192.0.2.7'), /listen address 192\.0\.2\.7 is not an address of this host/);
  } finally {
    job.cancel({ grace: 0 });
    await job.done.catch(() => undefined);
  }
});

test('prepare(): the supervisor starts before the first launch, which then finds it; it keeps nobody alive; a Python that cannot run it is refused', async () => {
  // A GUI calls prepare() at start-up so that its first launch() is not a cold one.
  const script = `
    const { prepare, launch } = require(${JSON.stringify(path.join(__dirname, '..', 'src', 'index.js'))});
    const { jobServers: servers } = require(${JSON.stringify(path.join(__dirname, '..', 'test-support', 'e2e.js'))});
    (async () => {
      const ready = await prepare({ python: process.argv[1] });
      const before = servers();
      const job = launch({ python: process.argv[1], args: ['-c', 'print("hi")'] });
      const report = await job.done;
      console.log(JSON.stringify({ ready, before, after: servers(), outcome: report.outcome }));
    })();`;
  const out = spawnSync(process.execPath, ['-e', script, PYTHON], { env: userEnv(), encoding: 'utf8', timeout: 60000 });
  assert.equal(out.status, 0, `it exits by itself once its job is done: ${out.stderr}`);
  const got = JSON.parse(out.stdout.trim().split('\n').at(-1));
  assert.equal(got.outcome, 'succeeded');
  assert.equal(got.ready.python, PYTHON);
  assert.deepEqual(got.before, [got.ready.pid], 'prepare() started the one server');
  assert.deepEqual(got.after, [got.ready.pid], 'the launch used it: no second server');
  await assert.rejects(index.prepare({ python: '/nonexistent/bin/python' }),
    (err) => err instanceof LaunchError && /\/nonexistent\/bin\/python/.test(err.message));
  await assert.rejects(index.prepare({ python: 3 }), (err) => err instanceof LaunchError && /python must be a path/.test(err.message));
});
