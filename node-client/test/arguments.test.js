'use strict';
// Bad arguments stay with their own job, as tests/client/test_arguments.py:
// launch() refuses bad options with a clear LaunchError before a supervisor or a job exists
// (a bug while handling one job fails it alone: the supervisor's, tests/client/test_arguments.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { launch, LaunchError } = require('../src/index.js');
const settings = require('../src/settings.js');
const { loadVectors, untag } = require('../test-support/vectors.js');

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
    assert.deepEqual(settings.configProblem(untag(c.config)), c.problem, c.name);
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
  [{ command: 'true', sampleResources: 'yes' }, /sampleResources must be true or false, got "yes"/],
  [{ command: 'true', raw: 1 }, /raw must be true or false, got 1/],
  [undefined, /launch\(\) needs options/],
];

test('launch() refuses bad options before a supervisor or a job exists', () => {
  const before = new Set(children());
  for (const [options, message] of BAD) {
    assert.throws(() => launch(options), (err) => err instanceof LaunchError && message.test(err.message) && /^[\x20-\x7e]*$/.test(err.message),
      `${JSON.stringify(options)} -> ${message}`);
  }
  const after = children().filter((pid) => !before.has(pid));
  assert.deepEqual(after, [], 'nothing was spawned');
});

