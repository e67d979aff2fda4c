'use strict';
// Every event names its sender: a GUI tells the processes of a job apart
// by rank, host and pid, and shows only the lead's stages and progress as the job's.
const test = require('node:test');
const assert = require('node:assert/strict');
const { launch } = require('../src/index.js');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { FIXTURE, PYTHON, userEnv } = require('../test-support/e2e.js');

const SCENARIOS = path.resolve(__dirname, '../../tests/faults/scenarios');

test('stage, progress and hello events carry their sender; the report lists the process', async () => {
  const job = launch({ command: PYTHON, args: [FIXTURE, 'succeed'], env: userEnv() });
  const senders = [];
  let hello = null;
  job.on('hello', (b) => { hello = b; });
  job.on('stage', (b) => senders.push(b.sender));
  job.on('progress', (b) => senders.push(b.sender));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.ok(senders.length > 0);
  for (const s of senders) {
    assert.deepEqual(s, { rank: null, local_rank: null, host: hello.host, pid: report.pid, role: 'other', lead: true });
  }
  assert.deepEqual(report.ranks.map((r) => [r.pid, r.role, r.state]), [[report.pid, 'other', 'exited']]);
  assert.equal(report.root_cause, null);
});

test("another rank's error is an 'error' event with its sender, as in the Python client", async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ranks-e2e-'));
  try {
    const job = launch({
      command: PYTHON, args: ['-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', 'torchrun_rank_fails.py'],
      cwd: SCENARIOS, env: userEnv({ TMPDIR: tmp, OMP_NUM_THREADS: '1' }),
      timeouts: { startup_timeout: 60, heartbeat_timeout: 30, stall_timeout: 60 },
    });
    const errors = [];
    job.on('error', (err) => errors.push(err));
    const report = await job.done;
    assert.equal(report.outcome, 'failed');
    const one = errors.find((e) => e.sender && e.sender.rank === 1);
    assert.ok(one, `no error event from rank 1: ${JSON.stringify(errors.map((e) => [e.name, e.sender]))}`);
    assert.equal(one.sender.role, 'rank');
    assert.equal(one.sender.lead, false);
    assert.match(String(one.message), /shard 3 is corrupt/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('a rank whose beacon cannot answer is named from its faulthandler dump (SIGUSR2 to it alone)', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ranks-e2e-'));
  try {
    const job = launch({
      command: PYTHON, args: ['-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', 'rank_native.py'],
      cwd: path.resolve(__dirname, '../../tests/distributed/scenarios'), env: userEnv({ TMPDIR: tmp, OMP_NUM_THREADS: '1' }),
      timeouts: { startup_timeout: 60, heartbeat_timeout: 60, stall_timeout: 8, kill_grace: 2 },
    });
    const report = await job.done;
    assert.equal(report.outcome, 'hung');
    assert.equal(report.diagnosis.kind, 'collective_wait', JSON.stringify(report.diagnosis));
    const { summary } = report.diagnosis;
    assert.ok(summary.startsWith('rank 1 (host '), summary);
    assert.ok(summary.includes('is not in the collective: it is at scenarios/rank_native.py:'), summary);
    assert.ok(summary.includes('read_shard'), summary);
    // rank 1's SIGUSR2 dump is in the crash file, at read_shard. (Once that signal wakes its
    // C call, rank 1 runs Python for a moment and its beacon may answer the hang's
    // dump_stacks late: the in-band part may show read_shard too.)
    const native = String(report.stacks).split('--- faulthandler (crash file) ---')[1];
    const dumps = native.split('Stack (most recent call first):').slice(1);
    assert.ok(dumps.some((d) => d.split('\n\n')[0].includes('in read_shard')), native);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
