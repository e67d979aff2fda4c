'use strict';
// Bad arguments and bugs stay with their own job (issue 11 item 2), as tests/client/test_arguments.py:
// launch() refuses bad options with a clear LaunchError before a hub or a job exists, and a
// bug while handling one job fails that job alone (internal diagnosis); the others go on.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { launch, LaunchError } = require('../src/index.js');
const machine = require('../src/machine.js');
const hubModule = require('../src/hub.js');
const { loadVectors, untag } = require('../test-support/vectors.js');
const { PYTHON, processesOfJob } = require('../test-support/e2e.js');

/** This process's live children, from /proc. */
function children() {
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === process.pid && fields[0] !== 'Z') out.push(Number(name));
    } catch { /* gone */ }
  }
  return out;
}

test('configProblem follows vectors/config.json', () => {
  for (const c of loadVectors('config.json').cases) {
    assert.deepEqual(machine.configProblem(untag(c.config)), c.problem, c.name);
  }
});

const BAD = [
  [{ command: 'w -h' }, /one program, not a shell line: got "w -h"; write \{command: "w", args: \["-h"\]\}/],
  [{ command: 'true', timeouts: { startupTimeout: '30' } }, /timeouts\.startupTimeout must be a number of seconds or null \(off\), got "30"/],
  [{ command: 'true', timeouts: { killGrace: NaN } }, /timeouts\.killGrace must be a finite number of seconds, got NaN/],
  [{ command: 'true', timeouts: { heartbeatTimeout: Infinity } }, /heartbeatTimeout must be a finite number/],
  [{ command: 'true', timeouts: { stallTimeout: -1 } }, /timeouts\.stallTimeout must be >= 0 seconds, got -1/],
  [{ command: 'true', timeouts: { cancel_grace: null } }, /cancel_grace must be a number of seconds, got null/],
  [{ command: 'true', timeouts: { heartbeat_s: NaN } }, /heartbeat_s must be a finite number of seconds > 0/],
  [{ command: 'true', timeouts: { stalldAfter: 1 } }, /unknown timeout "stalldAfter"/],
  [{ command: 'true', args: ['a', null] }, /args\[1\] must be a string, got null/],
  [{ command: 'true', args: [3] }, /args\[0\] must be a string, got 3/],
  [{ command: 'true', args: 'x' }, /args must be an array of strings/],
  [{ command: '' }, /command must be the program to run/],
  [{ command: 5 }, /command must be the program to run \(a non-empty string\), got 5/],
  [{ command: 'true', env: { A: null } }, /env\["A"\] must be a string, got null/],
  [{ command: 'true', env: { A: 1 } }, /env\["A"\] must be a string, got 1/],
  [{ command: 'true', cwd: 3 }, /cwd must be a path/],
  [{ command: 'true', tailLines: -1 }, /tailLines must be a whole number >= 0/],
  [undefined, /launch\(\) needs options/],
];

test('launch() refuses bad options before a hub or a job exists', () => {
  const before = new Set(children());
  for (const [options, message] of BAD) {
    const hubs = [];
    const original = hubModule.Hub.prototype.register;
    hubModule.Hub.prototype.register = function register(job) { hubs.push(job); return original.call(this, job); };
    try {
      assert.throws(() => launch(options), (err) => err instanceof LaunchError && message.test(err.message) && /^[\x20-\x7e]*$/.test(err.message),
        `${JSON.stringify(options)} -> ${message}`);
    } finally {
      hubModule.Hub.prototype.register = original;
    }
    assert.equal(hubs.length, 0, 'a job was registered');
  }
  const after = children().filter((pid) => !before.has(pid));
  assert.deepEqual(after, [], 'nothing was spawned');
});

test('a bug while handling one job fails it alone; the others go on', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-bug-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'child.py');
  fs.writeFileSync(script, [
    'import os, time',
    'from trainbridge import worker',
    'worker.progress(1, total=2)',
    'while not os.path.exists(os.environ["TB_GATE"]):',
    '    time.sleep(0.005)',
    'worker.progress(2, total=2)',
  ].join('\n'));
  const start = (gate) => launch({ command: PYTHON, args: [script], zeroCode: false,
    env: { ...process.env, TB_GATE: path.join(dir, gate) } });
  const a = start('a');
  const b = start('b');
  // Injected bug: job A's handling of worker messages throws from its first progress on.
  const receive = a.receive.bind(a);
  a.receive = (msg, peer) => {
    if (msg.kind === 'progress') throw new Error('injected bug');
    receive(msg, peer);
  };
  const reportA = await a.done;
  assert.equal(reportA.outcome, 'failed');
  assert.equal(reportA.diagnosis.kind, 'internal');
  assert.match(reportA.diagnosis.summary, /injected bug/);
  assert.match(reportA.error.traceback, /injected bug/);
  assert.deepEqual(processesOfJob(reportA.job_id), []);
  fs.writeFileSync(path.join(dir, 'b'), '');
  const reportB = await b.done;
  assert.equal(reportB.outcome, 'succeeded', reportB.summary);
  assert.equal(reportB.progress.step, 2);
  assert.deepEqual(processesOfJob(reportB.job_id), []);
});
