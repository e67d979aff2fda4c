'use strict';
// Which process speaks for a job, with real processes: the job's structure
// decides, not a hello's claim. tests/zerocode/test_lead.py runs the same through Python;
// vectors/lead.json pins the rule itself (tests/client/test_machine.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv, processesOfJob } = require('../test-support/e2e.js');

const SCRIPTS = path.resolve(__dirname, '../../tests/zerocode/scripts');
const names = (report) => report.stages.map((s) => s.name).filter((n) => !n.startsWith('import '));

test('lead: a torchrun eval subprocess does not take over the job', async () => {
  const job = launch({ command: PYTHON, args: ['with_torchrun_eval.py'], cwd: SCRIPTS,
    env: userEnv({ OMP_NUM_THREADS: '1' }), timeouts: { startupTimeout: 60, heartbeatTimeout: 5 } });
  const hellos = [];
  job.on('hello', (h) => hellos.push(h));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', JSON.stringify(report.diagnosis));
  assert.deepEqual(names(report).slice(-3), ['train', 'eval', 'train more']);
  assert.deepEqual([report.progress.step, report.progress.total], [6, 6]);
  assert.ok(hellos.some((h) => h.world_size === 1), 'the eval rank never said hello: nothing was tested');
  assert.deepEqual(report.worker.leads, [report.pid]); // the script only
  assert.ok(report.log_tail.includes('eval: world 1 sum 1'));
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('lead: a real 2-rank torchrun job is led by rank 0, then by torchrun again', async () => {
  const torchrun = path.join(path.dirname(PYTHON), 'torchrun');
  const job = launch({ command: torchrun, args: ['--standalone', '--nproc_per_node=2', 'ddp.py'], cwd: SCRIPTS,
    env: userEnv({ OMP_NUM_THREADS: '1' }), timeouts: { startupTimeout: 60 } });
  const hellos = [];
  job.on('hello', (h) => hellos.push(h));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  const rank0 = hellos.find((h) => h.rank === 0 && h.world_size === 2);
  assert.deepEqual(report.worker.leads.slice(-2), [rank0.pid, report.pid]);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('lead: a rank 0 hello from outside the job tree is ignored and counted', async (t) => {
  const fs = require('node:fs');
  const os = require('node:os');
  const { spawnSync } = require('node:child_process');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-foreign-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gate = path.join(dir, 'go');
  const script = path.join(dir, 'child.py');
  fs.writeFileSync(script, [
    'import os, time',
    'from trainbridge import worker',
    'worker.progress(1, total=2)',
    'while not os.path.exists(os.environ["TB_TEST_GO"]):',
    '    time.sleep(0.005)',
    'worker.progress(2, total=2)',
  ].join('\n'));
  const job = launch({ command: PYTHON, args: [script], env: { ...process.env, TB_TEST_GO: gate },
    zeroCode: false, timeouts: { heartbeatTimeout: 10 } });
  await new Promise((resolve) => job.once('progress', resolve));
  // What a same-user process can read: the job's variables, from /proc.
  const env = {};
  for (const item of fs.readFileSync(`/proc/${job.pid}/environ`, 'latin1').split('\0')) {
    const i = item.indexOf('=');
    if (i > 0) env[item.slice(0, i)] = item.slice(i + 1);
  }
  delete env.TRAINBRIDGE_CLIENT_PID;
  Object.assign(env, { RANK: '0', LOCAL_RANK: '0', WORLD_SIZE: '1' });
  const foreign = spawnSync(PYTHON, ['-c', 'from trainbridge import worker\nworker.progress(99, total=99)'],
    { env, encoding: 'utf8', timeout: 30000 });
  assert.equal(foreign.status, 0, foreign.stderr);
  fs.writeFileSync(gate, '');
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', report.summary);
  assert.deepEqual([report.progress.step, report.progress.total], [2, 2]);
  assert.equal(report.protocol.foreign_hello, 1);
  assert.ok((report.protocol.rejected.foreign || 0) >= 1, JSON.stringify(report.protocol));
  assert.deepEqual(report.worker.leads, [report.pid]);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('lead: a child\'s hello read before the launched process\'s does not keep the lead', async (t) => {
  // The pure election is pinned by vectors/lead.json; this forces the order with real
  // processes, as tests/client/test_lead.py does: the script's Python child says hello, and
  // the script imports the worker only after this client has read that hello.
  const fs = require('node:fs');
  const os = require('node:os');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-order-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gate = path.join(dir, 'go');
  const script = path.join(dir, 'main.py');
  fs.writeFileSync(script, [
    'import os, subprocess, sys, time',
    'child = subprocess.Popen([sys.executable, "-c", "import sys\\nfrom trainbridge import worker\\n"',
    '    "worker.progress(7, total=99)\\nsys.stdin.read()"], stdin=subprocess.PIPE)',
    'while not os.path.exists(os.environ["TB_TEST_GO"]):',
    '    time.sleep(0.005)',
    'from trainbridge import worker',
    'worker.progress(1, total=2)',
    'child.stdin.close()',
    'child.wait()',
    'worker.progress(2, total=2)',
  ].join('\n'));
  const job = launch({ command: PYTHON, args: [script], env: { ...process.env, TB_TEST_GO: gate },
    zeroCode: false, timeouts: { heartbeatTimeout: 10 } });
  await new Promise((resolve) => job.once('hello', resolve)); // before the gate: the child's
  fs.writeFileSync(gate, '');
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', report.summary);
  assert.equal(report.worker.lead_pid, report.pid, JSON.stringify(report.worker));
  assert.equal(report.worker.leads.at(-1), report.pid);
  assert.notEqual(report.worker.leads[0], report.pid, 'the child\'s hello was not read first');
  assert.deepEqual([report.progress.step, report.progress.total], [2, 2]);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('lead: when the lead rank dies, the lead passes back to the launcher', async (t) => {
  const fs = require('node:fs');
  const os = require('node:os');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-lead-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const [gate, rankGate] = [path.join(dir, 'back'), path.join(dir, 'rank0')];
  const job = launch({ command: PYTHON, args: [path.join(SCRIPTS, 'launcher', 'torchrun')],
    env: userEnv({ TB_GATE: gate, TB_GATE_RANK: rankGate }), timeouts: { startupTimeout: 60, heartbeatTimeout: 5 } });
  const leads = [];
  job.on('lead', ({ pid }) => {
    leads.push(pid);
    if (pid !== job.pid) fs.writeFileSync(rankGate, ''); // rank 0 leads: now it may die
    else if (fs.existsSync(rankGate)) fs.writeFileSync(gate, ''); // the launcher again, after rank 0
  });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', `${report.summary} ${JSON.stringify(leads)}`);
  // The launcher leads first when its hello is read first; when its rank's is, nobody leads
  // until the launcher's is read, and then rank 0 does (vectors/lead.json).
  const inTurn = report.worker.leads;
  assert.equal(inTurn[inTurn.length - 1], report.pid, JSON.stringify(inTurn));
  assert.notEqual(inTurn[inTurn.length - 2], report.pid, JSON.stringify(inTurn));
  assert.ok(inTurn.length === 2 || (inTurn.length === 3 && inTurn[0] === report.pid), JSON.stringify(inTurn));
  assert.equal(report.progress.step, 3);
  assert.ok(report.log_tail.includes('rank 0 ended with -9'));
  assert.deepEqual(processesOfJob(report.job_id), []);
});
