'use strict';
// Every event names its sender (issue 16 item 1): a GUI tells the processes of a job apart
// by rank, host and pid, and shows only the lead's stages and progress as the job's.
const test = require('node:test');
const assert = require('node:assert/strict');
const { launch } = require('../src/index.js');
const { FIXTURE, PYTHON, userEnv } = require('../test-support/e2e.js');

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
