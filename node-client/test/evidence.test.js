'use strict';
// The evidence rooms' pure parts, case for case with tests/faults/test_evidence.py: the
// syscall line of /proc, the OOM verdict, and the cgroup read on this machine. The whole
// look at a blocked process (sample + measure) is exercised by e2e.test.js and parity.test.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const procfs = require('../src/procfs.js');
const oom = require('../src/oom.js');
const evidence = require('../src/evidence.js');

const SYSCALL_LINES = [
  ['230 0x0 0x0 0x7ffe 0x7ffe 0x0 0x0 0x7ffe 0x7f9c', { syscall: 'clock_nanosleep' }],
  ['45 0x5 0x7f 0x1 0x0 0x0 0x0 0x7ffe 0x7f9c', { syscall: 'recvfrom', fd: 5 }],
  ['0 0x1a 0x7f 0x1 0x0 0x0 0x0 0x7ffe 0x7f9c', { syscall: 'read', fd: 26 }],
  ['running', { syscall: 'running' }],
  ['-1 0x7ffe 0x7f9c', { syscall: 'none' }],
  ['', {}],
];

for (const [line, expect] of SYSCALL_LINES) {
  test(`parseSyscallLine x64: ${JSON.stringify(line)}`, () => {
    const got = procfs.parseSyscallLine(line, 'x64');
    assert.deepEqual(Object.fromEntries(Object.keys(expect).map((k) => [k, got[k]])), expect);
  });
}

test('an unknown syscall number is named by its number', () => {
  assert.equal(procfs.syscallName(9999, 'x64'), 'syscall_9999');
  assert.equal(procfs.parseSyscallLine('63 0x3 0 0 0 0 0 0 0', 'arm64').syscall, 'read');
});

test('oomKillCount reads the cgroup; oomKilled compares two readings', () => {
  const count = oom.oomKillCount();
  assert.ok(count === null || (Number.isInteger(count) && count >= 0), String(count));
  assert.equal(oom.oomKilled(0, 1), true);
  assert.equal(oom.oomKilled(2, 2), false);
  assert.equal(oom.oomKilled(null, 1), null);
});

test('this process, looked at: its main thread waits in a syscall the table names', () => {
  const first = evidence.sample(process.pid);
  assert.equal(first.alive, true);
  assert.equal(first.main_thread.tid, process.pid);
  const ev = evidence.measure(first, [procfs.mainThreadSample(process.pid)]);
  assert.equal(ev.alive, true);
  assert.equal(ev.main_thread.runnable_fraction, 1); // it is running this test
  assert.deepEqual(ev.main_thread.wait_samples, { running: 1 });
  assert.ok(ev.gpu === null ? typeof ev.gpu_note === 'string' : Array.isArray(ev.gpu), JSON.stringify(ev.gpu_note));
  const gone = evidence.live(2 ** 22 + 1); // above pid_max's default: no such process
  assert.equal(gone.alive, false);
});

test('measure counts the states sampled in the window as bridge/evidence.py does', () => {
  const states = [
    { state: 'R', wait: 'running' },
    { state: 'S', wait: 'do_epoll_wait' },
    null,
    { state: 'R', wait: 'running' },
  ];
  const ev = evidence.measure(evidence.sample(process.pid), states);
  assert.equal(ev.main_thread.runnable_fraction, 0.667);
  assert.deepEqual(ev.main_thread.wait_samples, { running: 2, do_epoll_wait: 1 });
  assert.equal(evidence.measure(evidence.sample(process.pid)).main_thread.runnable_fraction, undefined);
});
