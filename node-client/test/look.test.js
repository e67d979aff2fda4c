'use strict';
// The look before a hang is declared, the pure part: vectors/look.json, which
// tests/client/test_look.py runs too (real processes: e2e.test.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { heard, judge, stallWheres } = require('../src/look.js');
const { processSample, threads, treeSample } = require('../src/procfs.js');
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
const states = (s) => (s.threads || []).map((t) => t[1]);
for (const [name, code, ok] of [
  ['a spinning process is runnable', 'while True: pass', (s) => states(s).includes('R') && s.cpu_s >= 0.2],
  ['a sleeping one is not', 'import time; time.sleep(60)', (s) => !states(s).includes('R')],
]) {
  test(`a sample has each thread's state, wait and timeslices: ${name}`, async () => {
    const child = spawn(PYTHON, ['-c', code], { stdio: 'ignore' });
    try {
      const deadline = Date.now() + 30000;
      let sample = null;
      while (Date.now() < deadline) {
        sample = processSample(child.pid);
        if (sample && ok(sample)) break;
        await new Promise((resolve) => setTimeout(resolve, 50)); // polling /proc: nothing to wait on
      }
      assert.ok(sample && ok(sample), `threads as the process's state says: ${JSON.stringify(sample)}`);
      assert.match(sample.name, /^python/);
      const tids = fs.readdirSync(`/proc/${child.pid}/task`);
      assert.ok(sample.threads.every(([tid, , waited, slices]) => tids.includes(String(tid)) && waited >= 0 && slices >= 0), JSON.stringify(sample.threads));
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
    assert.equal(threads(child.pid), null); // gone: nothing to count
  });
}

const GIL_HELD = `
import ctypes, sys, threading, time
threading.Thread(target=lambda: [time.sleep(0.2) for _ in iter(int, 1)], daemon=True).start()
time.sleep(0.3)
print("holding", flush=True)
ctypes.PyDLL(None).sleep(60)  # native code with the GIL held: the thread above waits for it
`;

test('a GIL held on a loaded machine is silent, not starved', async () => {
  // The waiter wakes every 5 ms and queues a little each time beside CPU hogs: short waits,
  // which summed to 0.4-0.9 s of a second on 2 cores (and judged it starved, CI on 55044f2)
  const hogs = Array.from({ length: 2 * os.availableParallelism() }, () => spawn(PYTHON, ['-c', 'while True: pass'], { stdio: 'ignore' }));
  const child = spawn(PYTHON, ['-c', GIL_HELD], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [first] = await once(child.stdout, 'data');
    assert.equal(first.toString(), 'holding\n');
    const before = treeSample(child.pid, 1, performance.now() / 1000);
    await new Promise((resolve) => setTimeout(resolve, 1000)); // the look's window
    const after = treeSample(child.pid, 1, performance.now() / 1000);
    const verdict = judge('heartbeat', before, after);
    assert.equal(verdict.working, false, JSON.stringify({ verdict, before, after }));
    assert.match(verdict.why, /^silent, and not for want of a CPU/);
  } finally {
    for (const p of [child, ...hogs]) {
      p.kill('SIGKILL');
      if (p.exitCode === null && p.signalCode === null) await once(p, 'exit');
    }
  }
});
