'use strict';
/**
 * Reading /proc (Linux) for the evidence about a job: the main thread's kernel wait, a
 * process's state, CPU time, I/O counters and descendants. Plain reads, nothing cached; a
 * file that cannot be read gives null (or a note), never an exception.
 *
 * The Python twin is bridge/procfs.py (which leaves CPU times, I/O counters and children to
 * psutil). The sockets a thread waits on are in sockets.js, the assembly in evidence.js.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

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

/** A /proc file's text, or null when it cannot be read. */
const read = (p) => { try { return fs.readFileSync(p, 'latin1'); } catch { return null; } };

/** /proc/<pid>/stat's text -> {state, ppid, cpu_s, threads, started, rss_bytes}, or null. */
function parseStat(text) {
  if (!text || !text.includes(')')) return null;
  const f = text.slice(text.lastIndexOf(')') + 2).trim().split(' ');
  // fields after the name: state ppid pgrp ... utime(11) stime(12) ... num_threads(17)
  // starttime(19) ... rss(21)
  return { state: f[0], ppid: Number(f[1]), cpu_s: (Number(f[11]) + Number(f[12])) / TICKS,
    threads: Number(f[17]), started: Number(f[19]), rss_bytes: Number(f[21]) * PAGE };
}

/** A syscall's name from its number on this machine's architecture, else `syscall_<n>`. */
function syscallName(number, arch = os.arch()) {
  return (SYSCALLS[arch] || {})[number] || `syscall_${number}`;
}

/**
 * /proc/<pid>/task/<tid>/syscall: 'nr arg0 .. arg5 sp pc', 'running' or '-1 sp pc'.
 * `arch` (os.arch()'s names) picks the syscall table; it defaults to this machine's.
 */
function parseSyscallLine(text, arch = os.arch()) {
  if (!text || !text.trim()) return {};
  const parts = text.trim().split(/\s+/);
  if (parts[0] === 'running') return { syscall: 'running' };
  const number = Number(parts[0]);
  if (!Number.isInteger(number)) return { syscall: parts[0] };
  if (number < 0) return { syscall: 'none' };
  const name = syscallName(number, arch);
  const out = { syscall: name, syscall_nr: number };
  if (FD_SYSCALLS.has(name) && parts.length > 1) out.fd = parseInt(parts[1], 16);
  return out;
}

/**
 * The main thread's kernel wait now: {tid, wchan, syscall, syscall_nr, fd, fd_target, state},
 * each as far as readable; what is not readable becomes a note.
 */
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

function listPids() {
  try { return fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number); } catch { return []; }
}

/** Every descendant of `pid` (children first, then theirs), with its parent. */
function descendants(pid) {
  const byParent = new Map();
  for (const p of listPids()) {
    const stat = parseStat(read(`/proc/${p}/stat`));
    if (!stat) continue;
    if (!byParent.has(stat.ppid)) byParent.set(stat.ppid, []);
    byParent.get(stat.ppid).push({ pid: p, stat });
  }
  const out = [];
  const queue = [pid];
  while (queue.length) {
    for (const kid of byParent.get(queue.shift()) || []) {
      out.push(kid);
      queue.push(kid.pid);
    }
  }
  return out;
}

/** One child of the job as the evidence lists it (psutil's fields in bridge/evidence.py). */
function childEntry({ pid, stat }) {
  const entry = { pid, name: (read(`/proc/${pid}/comm`) || '').trim() || null,
    status: STATE_WORDS[stat.state] || stat.state, ppid: stat.ppid, started: stat.started,
    cmdline: (read(`/proc/${pid}/cmdline`) || '').split('\0').filter(Boolean).join(' ').slice(0, 200) };
  const wchan = read(`/proc/${pid}/wchan`);
  if (wchan) entry.wchan = wchan.trim() || null;
  return entry;
}

/** /proc/<pid>/io's byte counters, or null (psutil's io_counters() in bridge/evidence.py). */
function ioCounters(pid) {
  const text = read(`/proc/${pid}/io`);
  if (!text) return null;
  const f = Object.fromEntries(text.trim().split('\n').map((l) => l.split(':').map((x) => x.trim())));
  return { read_bytes: Number(f.read_bytes), write_bytes: Number(f.write_bytes), rchar: Number(f.rchar || 0), wchar: Number(f.wchar || 0) };
}

/** The job's descendants from /proc/<pid>/task/<tid>/children (no scan of all of /proc). */
function treePids(pid, limit = 200) {
  const out = [];
  const queue = [pid];
  while (queue.length && out.length < limit) {
    const parent = queue.shift();
    let tasks;
    try { tasks = fs.readdirSync(`/proc/${parent}/task`); } catch { continue; }
    for (const tid of tasks) {
      for (const child of (read(`/proc/${parent}/task/${tid}/children`) || '').split(/\s+/)) {
        if (/^\d+$/.test(child) && !out.includes(Number(child))) {
          out.push(Number(child));
          queue.push(Number(child));
        }
      }
    }
  }
  return out.slice(0, limit);
}

/** The main thread's state letter now (R, S, D, ...), or null. */
function mainThreadState(pid) {
  const stat = parseStat(read(`/proc/${pid}/task/${pid}/stat`));
  return stat ? stat.state : null;
}

/**
 * The main thread's state letter and kernel wait now ({state, wait}, wait "running" for R),
 * or null: measure() counts the waits over the window (bridge/procfs.py main_thread_sample).
 */
function mainThreadSample(pid) {
  const state = mainThreadState(pid);
  if (state === null) return null;
  const wchan = state === 'R' ? 'running' : ((read(`/proc/${pid}/task/${pid}/wchan`) || '').trim() || 'unknown');
  return { state, wait: wchan };
}

const CLK_TCK = 100; // USER_HZ: 100 on every Linux architecture Node runs on

/**
 * The process's threads as look.js weighs their waits for a CPU, each [tid, state,
 * run_delay_s, timeslices]: its state letter now (R: on a CPU or queued for one), the seconds it
 * has waited on a CPU run queue and the timeslices it has run (/proc/<pid>/task/*\/stat and
 * schedstat's second and third fields). null once it is gone or where the kernel has no
 * schedstat (bridge/procfs.py threads).
 */
function threads(pid) {
  let tids;
  try { tids = fs.readdirSync(`/proc/${pid}/task`); } catch { return null; }
  const out = [];
  for (const tid of tids) {
    const stat = parseStat(read(`/proc/${pid}/task/${tid}/stat`));
    const fields = (read(`/proc/${pid}/task/${tid}/schedstat`) || '').trim().split(/\s+/);
    if (!stat) continue; // the thread ended between the listing and the read
    if (fields.length < 3 || !/^\d+$/.test(fields[1]) || !/^\d+$/.test(fields[2])) return null;
    out.push([Number(tid), stat.state, Math.round(Number(fields[1]) / 1e3) / 1e6, Number(fields[2])]);
  }
  return out;
}

/**
 * One process for look.js (bridge/procfs.py process_sample): its program's name (the
 * executable's, else comm), CPU seconds, bytes read and written (rchar + wchar; null when
 * /proc/<pid>/io cannot be read), and its threads' states, waits for a CPU and timeslices.
 * null once it is gone.
 */
function processSample(pid) {
  const text = read(`/proc/${pid}/stat`);
  if (!text || !text.includes(')')) return null;
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return null;
  let name;
  try { name = path.basename(fs.readlinkSync(`/proc/${pid}/exe`)); } catch { name = (read(`/proc/${pid}/comm`) || '').trim(); }
  const io = ioCounters(pid);
  return {
    pid, name: name.replace(/ \(deleted\)$/, ''),
    cpu_s: Math.round(((Number(fields[11]) + Number(fields[12])) / CLK_TCK) * 1000) / 1000,
    io_bytes: io && Number.isFinite(io.rchar) && Number.isFinite(io.wchar) ? io.rchar + io.wchar : null,
    threads: threads(pid),
  };
}

/** The job's tree now, as look.js judges it: {t, lines, lead, procs}. */
function treeSample(pid, lines, t, lead = pid) {
  return { t, lines, lead, procs: [pid, ...treePids(pid)].map(processSample).filter((p) => p !== null) };
}

/** {cmd: its command line (300 characters at most), state: its state word}: who a process is (bridge/procfs.py process_facts). */
function processFacts(pid) {
  const raw = read(`/proc/${pid}/cmdline`);
  const stat = read(`/proc/${pid}/stat`);
  const state = stat && stat.includes(')') ? stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/)[0] : null;
  return {
    cmd: raw ? raw.replace(/\0+$/, '').split('\0').join(' ').slice(0, 300) : null,
    state: state ? STATE_WORDS[state] || state : null,
  };
}

module.exports = {
  processFacts,
  processSample, threads, treeSample,
  SYSCALLS, FD_SYSCALLS, STATE_WORDS, read, syscallName, parseSyscallLine, parseStat, mainThread,
  mainThreadState, mainThreadSample, descendants, childEntry, ioCounters, treePids,
};
