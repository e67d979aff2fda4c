'use strict';
// vectors/intake.json: the hub's verdict on each incoming message and how it is counted
// (src/intake.js); tests/client/test_intake.py runs the same file against bridge/intake.py.

const test = require('node:test');
const assert = require('node:assert/strict');
const intake = require('../src/intake.js');
const { loadVectors } = require('../test-support/vectors.js');

test('intake follows vectors/intake.json', () => {
  const v = loadVectors('intake.json');
  const keys = new Map(Object.entries(v.keys_hex).map(([job, hex]) => [job, Buffer.from(hex, 'hex')]));
  const lastSeq = new Map();
  const counts = { jobs: {}, unrouted: 0 };
  for (const job of keys.keys()) counts.jobs[job] = { rejected: {}, lost: 0, delivered: 0 };
  for (const step of v.steps) {
    const frames = step.frames_hex.map((hex) => Buffer.from(hex, 'hex'));
    const before = JSON.stringify([...lastSeq]);
    const verdict = intake.judge(step.routing_id, frames, keys, lastSeq);
    assert.equal(JSON.stringify([...lastSeq]), before, 'judge must not change its input');
    const got = {
      job: verdict.job, reject: verdict.reject, kind: verdict.message ? verdict.message.kind : null,
      lost: verdict.lost, ack: verdict.ack === null ? null : Number(verdict.ack), refuse: verdict.refuse !== null,
    };
    assert.deepEqual(got, step.verdict, step.name);
    if (verdict.job === null) counts.unrouted += 1;
    else if (verdict.reject !== null) {
      const r = counts.jobs[verdict.job].rejected;
      r[verdict.reject] = (r[verdict.reject] || 0) + 1;
    } else {
      counts.jobs[verdict.job].delivered += 1;
      counts.jobs[verdict.job].lost += verdict.lost;
      lastSeq.set(step.routing_id, verdict.lastSeq);
    }
  }
  assert.deepEqual(counts, v.counts);
});

test('the budget for unauthenticated input follows vectors/intake.json', () => {
  const v = loadVectors('intake.json');
  const budget = intake.budgetInitial();
  for (const step of v.budget) {
    if (step[0] === 'reject') {
      const [, sender, size, reason, t] = step;
      intake.noteRejected(budget, sender, size, reason, t);
    } else {
      const [, sender, t, expected] = step;
      assert.equal(intake.overBudget(budget, sender, t), expected, JSON.stringify(step));
    }
  }
});

test('a message replayed through another routing id is refused (real processes)', async () => {
  const path = require('node:path');
  const { launch } = require('../src/index.js');
  const { PYTHON, processesOfJob } = require('../test-support/e2e.js');
  const job = launch({ command: PYTHON, args: [path.join(__dirname, 'fixtures', 'replay_peer.py')], zeroCode: false });
  const steps = [];
  job.on('progress', (p) => steps.push(p));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', report.summary);
  assert.deepEqual(report.log_tail, ['ack']);
  assert.deepEqual(report.protocol.rejected, { bad_sender: 2, bad_frames: 1 });
  assert.equal(steps.length, 1);
  assert.deepEqual(report.worker.leads, [report.pid]);
  assert.deepEqual(processesOfJob(report.job_id), []);
});
