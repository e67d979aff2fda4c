'use strict';
/**
 * Evidence about a live job from /proc, for the hang diagnosis: a subset of
 * bridge/evidence.py with the same field names (status, alive, main_thread {tid, wchan,
 * syscall, syscall_nr, fd, fd_target, state}, cpu_fraction, threads, rss_bytes, children).
 * No sockets, I/O counters, GPU or py-spy here. Never throws: what cannot be read is a note.
 * cpu_fraction needs two samples: sample() at the hang, measure(first) when the job is
 * about to be signalled (the machine's dump wait is the window).
 */

const fs = require('node:fs');
const os = require('node:os');

const SYSCALLS = {
  x64: { 0: 'read', 1: 'write', 7: 'poll', 17: 'pread64', 18: 'pwrite64', 19: 'readv', 20: 'writev', 23: 'select',
    34: 'pause', 35: 'nanosleep', 42: 'connect', 43: 'accept', 44: 'sendto', 45: 'recvfrom', 46: 'sendmsg',
    47: 'recvmsg', 61: 'wait4', 74: 'fsync', 75: 'fdatasync', 202: 'futex', 230: 'clock_nanosleep',
    232: 'epoll_wait', 247: 'waitid', 270: 'pselect6', 271: 'ppoll', 281: 'epoll_pwait', 288: 'accept4',
    299: 'recvmmsg', 441: 'epoll_pwait2', 449: 'futex_waitv' },
  arm64: { 22: 'epoll_pwait', 63: 'read', 64: 'write', 65: 'readv', 66: 'writev', 67: 'pread64', 68: 'pwrite64',
    72: 'pselect6', 73: 'ppoll', 82: 'fsync', 83: 'fdatasync', 95: 'waitid', 98: 'futex', 101: 'nanosleep',
    115: 'clock_nanosleep', 202: 'accept', 203: 'connect', 206: 'sendto', 207: 'recvfrom', 211: 'sendmsg',
    212: 'recvmsg', 242: 'accept4', 243: 'recvmmsg', 260: 'wait4', 441: 'epoll_pwait2', 449: 'futex_waitv' },
};
const FD_SYSCALLS = new Set(['read', 'write', 'pread64', 'pwrite64', 'readv', 'writev', 'connect', 'accept',
  'accept4', 'sendto', 'recvfrom', 'sendmsg', 'recvmsg', 'recvmmsg', 'fsync', 'fdatasync']);
const STATE_WORDS = { R: 'running', S: 'sleeping', D: 'disk-sleep', T: 'stopped', t: 'tracing-stop', Z: 'zombie', X: 'dead', I: 'idle' };
const TICKS = 100; // USER_HZ
const PAGE = 4096;

const read = (p) => { try { return fs.readFileSync(p, 'latin1'); } catch { return null; } };

function parseStat(text) {
  if (!text || !text.includes(')')) return null;
  const f = text.slice(text.lastIndexOf(')') + 2).trim().split(' ');
  // fields after the name: state ppid pgrp ... utime(11) stime(12) ... num_threads(17) ... rss(21)
  return { state: f[0], ppid: Number(f[1]), cpu_s: (Number(f[11]) + Number(f[12])) / TICKS,
    threads: Number(f[17]), rss_bytes: Number(f[21]) * PAGE };
}

function parseSyscallLine(text) {
  if (!text || !text.trim()) return {};
  const parts = text.trim().split(/\s+/);
  if (parts[0] === 'running') return { syscall: 'running' };
  const number = Number(parts[0]);
  if (!Number.isInteger(number)) return { syscall: parts[0] };
  if (number < 0) return { syscall: 'none' };
  const name = (SYSCALLS[os.arch()] || {})[number] || `syscall_${number}`;
  const out = { syscall: name, syscall_nr: number };
  if (FD_SYSCALLS.has(name) && parts.length > 1) out.fd = parseInt(parts[1], 16);
  return out;
}

function mainThread(pid, notes) {
  const base = `/proc/${pid}/task/${pid}`;
  const info = { tid: pid };
  const wchan = read(`${base}/wchan`);
  if (wchan === null) notes.push('wchan not readable');
  else info.wchan = ['', '0'].includes(wchan.trim()) ? null : wchan.trim();
  const syscall = read(`${base}/syscall`);
  if (syscall === null) notes.push('syscall not readable (needs ptrace access to the process)');
  else Object.assign(info, parseSyscallLine(syscall));
  const stat = parseStat(read(`${base}/stat`));
  if (stat) info.state = stat.state;
  if (info.fd !== undefined) {
    try { info.fd_target = fs.readlinkSync(`/proc/${pid}/fd/${info.fd}`); } catch { /* gone */ }
  }
  return info;
}

function children(pid) {
  const out = [];
  let names = [];
  try { names = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)); } catch { return out; }
  for (const name of names) {
    const stat = parseStat(read(`/proc/${name}/stat`));
    if (stat && stat.ppid === pid) {
      const comm = (read(`/proc/${name}/comm`) || '').trim() || null;
      out.push({ pid: Number(name), name: comm, status: STATE_WORDS[stat.state] || stat.state });
    }
  }
  return out;
}

/** One look at the job's main process (no waiting). */
function sample(pid) {
  const notes = [];
  const ev = { pid, notes, t: performance.now() / 1000 };
  const stat = parseStat(read(`/proc/${pid}/stat`));
  if (!stat) {
    ev.alive = false;
    notes.push('process is gone');
    return ev;
  }
  ev.status = STATE_WORDS[stat.state] || stat.state;
  ev.alive = stat.state !== 'Z';
  ev.name = (read(`/proc/${pid}/comm`) || '').trim() || null;
  ev.cpu_s = stat.cpu_s;
  ev.threads = stat.threads;
  ev.rss_bytes = stat.rss_bytes;
  ev.main_thread = mainThread(pid, notes);
  ev.children = children(pid);
  return ev;
}

/** The main thread's state letter now (R, S, D, ...), or null. */
function mainThreadState(pid) {
  const stat = parseStat(read(`/proc/${pid}/task/${pid}/stat`));
  return stat ? stat.state : null;
}

/**
 * A second look, with the CPU fraction over the window since `first`; `states` are the
 * main thread's states sampled during the window (on a loaded machine a spinning process
 * gets little CPU but is always runnable, which a sleeping one never is).
 */
function measure(first, states = []) {
  const second = sample(first.pid);
  if (first.alive !== false && second.alive !== false && first.cpu_s !== undefined) {
    const elapsed = Math.max(1e-6, second.t - first.t);
    second.window_s = Math.round(elapsed * 1000) / 1000;
    second.cpu_fraction = Math.round(((second.cpu_s - first.cpu_s) / elapsed) * 1000) / 1000;
    const seen = states.filter((x) => x !== null);
    if (seen.length && second.main_thread) {
      second.main_thread.runnable_fraction = Math.round((seen.filter((x) => x === 'R').length / seen.length) * 1000) / 1000;
    }
  }
  delete second.t;
  delete second.cpu_s;
  return second;
}

// --- the kernel's OOM killer ------------------------------------------------------------
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

function oomKilled(before, after) {
  if (before === null || after === null) return null;
  return after > before;
}

module.exports = { sample, measure, mainThreadState, parseSyscallLine, oomKillCount, oomKilled };
