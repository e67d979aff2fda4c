'use strict';
// src/filelocks.js on real locks, as tests/diagnosis/test_filelocks.py does for the Python twin:
// a process blocked in flock() and one polling with LOCK_NB see who holds the file.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { fileLocks, parseLocks } = require('../src/filelocks.js');
const { PYTHON } = require('../test-support/e2e.js');

test('/proc/locks is read: holders, waiters, hexadecimal devices', () => {
  const text = '1: FLOCK  ADVISORY  WRITE 28502 fe:00:2146408 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 28548 fe:00:2146408 0 EOF\n'
    + '2: OFDLCK ADVISORY  READ  -1 00:2f:99 0 EOF\n3: POSIX  ADVISORY  WRITE 12 08:01:x 0 EOF\nnot a lock\n';
  assert.deepEqual(parseLocks(text), [
    { type: 'FLOCK', access: 'WRITE', pid: 28502, dev: [254, 0], inode: 2146408, waiting: false },
    { type: 'FLOCK', access: 'WRITE', pid: 28548, dev: [254, 0], inode: 2146408, waiting: true },
    { type: 'OFDLCK', access: 'READ', pid: -1, dev: [0, 47], inode: 99, waiting: false },
  ]);
});

async function until(check, what, deadlineMs = 20000) {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    const found = check();
    if (found && found.length) return found;
    await new Promise((resolve) => { setTimeout(resolve, 50); });
  }
  throw new Error(`no ${what} within ${deadlineMs} ms`);
}

test('a blocked and a polling waiter see the holder of the lock', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-locks-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'cache.lock');
  const holder = spawn(PYTHON, ['-c', 'import fcntl,sys,time\nf=open(sys.argv[1],"a")\nfcntl.flock(f,fcntl.LOCK_EX)\nprint("locked",flush=True)\ntime.sleep(600)\n', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => holder.kill('SIGKILL'));
  await new Promise((resolve) => { holder.stdout.on('data', (b) => { if (String(b).includes('locked')) resolve(); }); });
  const blocked = spawn(PYTHON, ['-c', 'import fcntl,sys\nf=open(sys.argv[1],"a")\nfcntl.flock(f,fcntl.LOCK_EX)\n', file]);
  const polling = spawn(PYTHON, ['-c', 'import fcntl,sys,time\nf=open(sys.argv[1],"a")\nwhile True:\n    try:\n        fcntl.flock(f,fcntl.LOCK_EX|fcntl.LOCK_NB); break\n    except BlockingIOError:\n        time.sleep(0.05)\n', file]);
  t.after(() => { blocked.kill('SIGKILL'); polling.kill('SIGKILL'); });
  const b = await until(() => fileLocks(blocked.pid, [], []).filter((x) => x.blocked), 'blocked waiter');
  const p = await until(() => fileLocks(polling.pid, [], []), 'polling waiter');
  for (const [found, queued] of [[b, true], [p, false]]) {
    assert.equal(found[0].path, file);
    assert.equal(found[0].holder_pid, holder.pid);
    assert.equal(found[0].blocked, queued);
    assert.equal(found[0].lock, 'FLOCK');
    assert.match(found[0].holder_cmd, /time\.sleep\(600\)/);
    assert.equal(found[0].holder_state, 'sleeping');
  }
  assert.deepEqual(fileLocks(holder.pid, [], []), []); // its own lock: no wait
});
