'use strict';
/**
 * The kernel's OOM killer, seen through the job's memory cgroup (v2 memory.events, v1
 * memory.oom_control): read the kill count before launch and after exit; a rise while the
 * job died of SIGKILL means the kernel killed it for memory.
 *
 * The Python twin is bridge/oom.py.
 */

const { read } = require('./procfs.js');

/** Candidate memory cgroup directories of `pid` (v2 unified first, then v1). */
function cgroupDirs(pid) {
  const text = read(`/proc/${pid || 'self'}/cgroup`) || '';
  const v2 = [];
  const v1 = [];
  for (const line of text.split('\n')) {
    const parts = line.split(':');
    if (parts.length < 3) continue;
    const [, controllers] = parts;
    const p = parts.slice(2).join(':');
    if (controllers === '') v2.push(`/sys/fs/cgroup${p}`, `/sys/fs/cgroup/unified${p}`);
    else if (controllers.split(',').includes('memory')) v1.push(`/sys/fs/cgroup/memory${p}`);
  }
  return [...v2, ...v1];
}

/**
 * The cgroup's count of processes the OOM killer has killed, or null if unreadable. Read
 * it before launch and after exit: a rise while the job died of SIGKILL means the kernel
 * killed it for memory.
 */
function oomKillCount(pid = null) {
  for (const dir of cgroupDirs(pid)) {
    for (const name of ['memory.events', 'memory.oom_control']) {
      const text = read(`${dir}/${name}`);
      if (!text) continue;
      for (const line of text.split('\n')) {
        const [key, value] = line.split(' ');
        if (key === 'oom_kill') return Number.isInteger(Number(value)) ? Number(value) : null;
      }
    }
  }
  return null;
}

/** Pure: did the OOM killer act between two readings? null when either is unknown. */
function oomKilled(before, after) {
  if (before === null || after === null) return null;
  return after > before;
}

module.exports = { cgroupDirs, oomKillCount, oomKilled };
