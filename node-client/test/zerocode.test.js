'use strict';
// Zero-code mode through the Node client: the unmodified scripts of tests/zerocode/scripts
// (none imports worker) get stages, progress and a named import hang, as with Python.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv, processesOfJob } = require('../test-support/e2e.js');

const SCRIPTS = path.resolve(__dirname, '../../tests/zerocode/scripts');
const run = (args, options = {}) => launch({ command: PYTHON, args, cwd: SCRIPTS, env: userEnv(), ...options });
const names = (report) => report.stages.map((s) => s.name);

test('zero-code: a plain torch loop shows its stages and counts optimizer steps', async () => {
  const job = run(['torch_loop.py'], { timeouts: { startupTimeout: 60 } });
  const live = [];
  job.on('stage', (s) => { if (s.event === 'begin') live.push(s.name); });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  for (const name of ['startup', 'main', 'import torch', 'first batch', 'train']) {
    assert.ok(names(report).includes(name), `${name} in ${names(report)}`);
    assert.ok(live.includes(name), `${name} seen live`);
  }
  assert.equal(report.progress.step, 24);
  assert.equal(report.progress.metrics.source, 'optimizer');
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('zero-code: a tqdm bar becomes progress with its description', async () => {
  const job = run(['tqdm_loop.py', '150']);
  const steps = [];
  job.on('progress', (p) => steps.push(p.step));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual([report.progress.step, report.progress.total], [150, 150]);
  assert.equal(report.progress.metrics.bar, 'shard-00042.tar');
  assert.ok(new Set(steps).size > 1, `live progress, got ${steps}`);
});

test('zero-code: a hang importing a heavy module is named', async () => {
  const job = run(['import_hang.py'], {
    env: userEnv({ PYTHONPATH: path.join(SCRIPTS, 'slowpkgs') }),
    timeouts: { stallTimeout: 2, killGrace: 1, startupTimeout: 60 },
  });
  const report = await job.done;
  assert.equal(report.outcome, 'hung');
  assert.equal(report.stage, 'import transformers');
  assert.equal(report.diagnosis.kind, 'import_hang');
  assert.match(report.diagnosis.summary, /transformers/);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('zero-code: python -m runs as main', async () => {
  const report = await run(['-m', 'trainpkg']).done;
  assert.equal(report.outcome, 'succeeded');
  assert.ok(names(report).includes('main'));
  assert.equal(report.progress.metrics.bar, 'pkg');
});

test('zero-code: DataLoader workers stay silent', async () => {
  const job = run(['torch_loop.py', '2'], { timeouts: { startupTimeout: 60 } });
  const hellos = [];
  job.on('hello', (h) => hellos.push(h.pid));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.equal(hellos.length, 1, `forked workers never say hello: ${hellos}`);
  assert.equal(report.progress.step, 24);
});

test('zero-code: torchrun ranks each say hello with their rank', async () => {
  const torchrun = path.join(path.dirname(PYTHON), 'torchrun'); // installed with torch
  const job = launch({ command: torchrun, args: ['--standalone', '--nproc_per_node=2', 'ddp.py'], cwd: SCRIPTS,
    env: userEnv({ OMP_NUM_THREADS: '1' }), timeouts: { startupTimeout: 60 } });
  const hellos = [];
  job.on('hello', (h) => hellos.push(h));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  const ranks = hellos.filter((h) => h.world_size === 2).map((h) => h.rank).sort();
  assert.deepEqual(ranks, [0, 1]);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('zero-code: a download stuck at 0 B/s is a stall that names the file', async () => {
  const report = await run(['stuck_download.py'], { timeouts: { stallTimeout: 2, killGrace: 1, startupTimeout: 60 } }).done;
  assert.equal(report.outcome, 'hung');
  assert.equal(report.progress.metrics.bar, 'model.safetensors');
  assert.match(report.diagnosis.summary, /'model\.safetensors' stopped at 1048576\/4000000 B/);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('zero-code: a loop that updates its weights by hand trains past the stall deadline', async () => {
  // As word_language_model's manual SGD: no optimizer, no output for 14 s, a
  // 10 s stall deadline (one that `import torch` meets beside two CPU loops). Each heartbeat
  // counts more backward() calls: that is activity.
  const job = run(['manual_sgd.py', '14'], { timeouts: { stallTimeout: 10, startupTimeout: 60 } });
  const beats = [];
  const looked = [];
  job.on('heartbeat', (b) => beats.push(b));
  job.on('computing', (c) => looked.push(c));
  job.on('hang', (h) => looked.push(h));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', JSON.stringify(report.diagnosis));
  assert.ok(report.log_tail.some((l) => l.startsWith('trained ')), report.log_tail.join('\n'));
  assert.deepEqual(looked, []);
  // the heartbeats that counted more work name the script's loop (the last may come from the
  // interpreter's shutdown, where only the worker's atexit frames are left)
  const training = beats.filter((b, i) => i > 0 && (b.work ?? 0) > (beats[i - 1].work ?? 0));
  assert.ok(training.length > 1, JSON.stringify(beats.slice(-3)));
  assert.deepEqual([...new Set(training.slice(0, -1).map((b) => b.where))], ['manual_sgd.py:<module>']);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('zero-code: a busy main thread moving through the script\'s functions is computing, not hung', async () => {
  // No progress, no backward(), no output for 12 s, a 5 s stall deadline: the stall look sees
  // a busy lead whose heartbeats name load_batch, forward and score in turn.
  const job = run(['busy_phases.py', '12', '1.5'], { timeouts: { stallTimeout: 5, heartbeatTimeout: 2, startupTimeout: 60 } });
  const computing = [];
  job.on('computing', (c) => computing.push(c));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', JSON.stringify(report.diagnosis));
  assert.ok(computing.length, 'a computing event');
  assert.match(computing[0].why, /busy_phases\.py:/);
  assert.equal(computing[0].for_s, 5);
  assert.deepEqual(processesOfJob(report.job_id), []);
});
