'use strict';
// The look before a hang is declared, the pure part: vectors/look.json, which
// tests/client/test_look.py runs too (real processes: e2e.test.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { heard, judge, stallWheres } = require('../src/look.js');
const { processSample, runnable } = require('../src/procfs.js');
const { PYTHON } = require('../test-support/e2e.js');

const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'look.json'), 'ascii'));
const { cases } = vectors;

for (const c of cases) {
  test(`look vector (${c.reason}): ${c.name}`, () => {
    assert.deepEqual(judge(c.reason, c.before, c.after), c.verdict);
  });
}

test('an unknown look reason is refused', () => {
  assert.throws(() => judge('stage_budget', { t: 0 }, { t: 1, procs: [] }), /unknown look reason "stage_budget"/);
});

for (const c of vectors.heard) {
  test(`the lead's heartbeats folded in: ${c.name}`, () => {
    let track = {};
    const worked = [];
    for (const [t, body] of c.beats) {
      const [next, w] = heard(track, body, t);
      track = next;
      worked.push(w);
    }
    assert.deepEqual(worked, c.worked);
    assert.deepEqual(track, c.track);
  });
}

for (const c of vectors.stall_wheres) {
  test(`the places of a stall window: ${c.name}`, () => {
    assert.deepEqual(stallWheres(c.wheres, c.start), c.out);
  });
}

// A thread queued for a CPU past the look's window shows no run_delay yet: its state says it
// wants one (look.js waitedFor). Python twin: tests/client/test_look.py.
for (const [name, code, ok] of [
  ['a spinning process is runnable', 'while True: pass', (s) => s.runnable.length >= 1 && s.cpu_s >= 0.2],
  ['a sleeping one is not', 'import time; time.sleep(60)', (s) => s.runnable.length === 0],
]) {
  test(`a sample counts the threads that are runnable now: ${name}`, async () => {
    const child = spawn(PYTHON, ['-c', code], { stdio: 'ignore' });
    try {
      const deadline = Date.now() + 30000;
      let sample = null;
      while (Date.now() < deadline) {
        sample = processSample(child.pid);
        if (sample && ok(sample)) break;
        await new Promise((resolve) => setTimeout(resolve, 50)); // polling /proc: nothing to wait on
      }
      assert.ok(sample && ok(sample), `runnable threads as the process's state says: ${JSON.stringify(sample)}`);
      assert.match(sample.name, /^python/);
      const tids = fs.readdirSync(`/proc/${child.pid}/task`);
      assert.ok(sample.runnable.every(([tid, slices]) => tids.includes(String(tid)) && slices >= 0), JSON.stringify(sample.runnable));
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
    assert.equal(runnable(child.pid), null); // gone: nothing to count
  });
}
