'use strict';
/**
 * Evidence about a live job from /proc, for the hang diagnosis: bridge/evidence.py's
 * fields (status, alive, main_thread {tid, wchan, syscall, syscall_nr, fd, fd_target, state,
 * runnable_fraction}, cpu_fraction, io_delta, threads, rss_bytes, sockets, children), read
 * from /proc directly instead of through psutil. No GPU or py-spy here. Never throws: what
 * cannot be read is a note.
 * cpu_fraction needs two samples: sample() at the hang, measure(first) when the job is
 * about to be signalled (the machine's dump wait is the window).
 */

const fs = require('node:fs');
const childstack = require('./childstack.js');
const os = require('node:os');
const { execFileSync } = require('node:child_process');

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
  // fields after the name: state ppid pgrp ... utime(11) stime(12) ... num_threads(17)
  // starttime(19) ... rss(21)
  return { state: f[0], ppid: Number(f[1]), cpu_s: (Number(f[11]) + Number(f[12])) / TICKS,
    threads: Number(f[17]), started: Number(f[19]), rss_bytes: Number(f[21]) * PAGE };
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

function childEntry({ pid, stat }) {
  const entry = { pid, name: (read(`/proc/${pid}/comm`) || '').trim() || null,
    status: STATE_WORDS[stat.state] || stat.state, ppid: stat.ppid, started: stat.started,
    cmdline: (read(`/proc/${pid}/cmdline`) || '').split('\0').filter(Boolean).join(' ').slice(0, 200) };
  const wchan = read(`/proc/${pid}/wchan`);
  if (wchan) entry.wchan = wchan.trim() || null;
  return entry;
}

function ioCounters(pid) {
  const text = read(`/proc/${pid}/io`);
  if (!text) return null;
  const f = Object.fromEntries(text.trim().split('\n').map((l) => l.split(':').map((x) => x.trim())));
  return { read_bytes: Number(f.read_bytes), write_bytes: Number(f.write_bytes), rchar: Number(f.rchar || 0), wchar: Number(f.wchar || 0) };
}

// --- sockets (psutil's net_connections(kind="inet"), from /proc/<pid>/net and fd links) ---
const TCP_STATES = { '01': 'ESTABLISHED', '02': 'SYN_SENT', '03': 'SYN_RECV', '04': 'FIN_WAIT1', '05': 'FIN_WAIT2',
  '06': 'TIME_WAIT', '07': 'CLOSE', '08': 'CLOSE_WAIT', '09': 'LAST_ACK', '0A': 'LISTEN', '0B': 'CLOSING' };

function ipv4(hex) {
  const n = parseInt(hex, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join('.');
}

/** An IPv6 address from /proc's 4 little-endian words, written as inet_ntop writes it. */
function ipv6(hex) {
  const bytes = [];
  for (let w = 0; w < 4; w++) {
    const word = hex.slice(w * 8, w * 8 + 8);
    for (let b = 3; b >= 0; b--) bytes.push(parseInt(word.slice(b * 2, b * 2 + 2), 16));
  }
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i] << 8) | bytes[i + 1]);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `::ffff:${bytes.slice(12).join('.')}`;
  }
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) { i += 1; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j += 1;
    if (j - i > bestLen && j - i >= 2) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const hexes = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hexes.join(':');
  return `${hexes.slice(0, bestStart).join(':')}::${hexes.slice(bestStart + bestLen).join(':')}`;
}

function parseAddress(text, v6) {
  const [host, port] = text.split(':');
  return [v6 ? ipv6(host) : ipv4(host), parseInt(port, 16)];
}

function socketTable(pid) {
  const rows = new Map(); // inode -> {type, laddr, raddr, status}
  for (const [name, type, v6] of [['tcp', 'tcp', false], ['tcp6', 'tcp', true], ['udp', 'udp', false], ['udp6', 'udp', true]]) {
    const text = read(`/proc/${pid}/net/${name}`);
    if (!text) continue;
    for (const line of text.trim().split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const laddr = parseAddress(f[1], v6);
      const raddr = parseAddress(f[2], v6);
      const empty = raddr[1] === 0 && /^[0:.]*$/.test(raddr[0].replace('::', ''));
      rows.set(f[9], { type, laddr, raddr: empty ? null : raddr, status: type === 'tcp' ? (TCP_STATES[f[3]] || f[3]) : 'NONE' });
    }
  }
  return rows;
}

function sockets(pids, notes) {
  const out = [];
  for (const pid of pids) {
    let fds;
    try { fds = fs.readdirSync(`/proc/${pid}/fd`); } catch (err) {
      notes.push(`sockets of ${pid} not readable (${err.code})`);
      continue;
    }
    let table = null;
    for (const fd of fds) {
      let target;
      try { target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (!m) continue;
      table = table || socketTable(pid);
      const row = table.get(m[1]);
      if (row) out.push({ pid, fd: Number(fd), type: row.type, laddr: row.laddr, raddr: row.raddr, status: row.status });
    }
  }
  return out;
}

// --- local (AF_UNIX) sockets, as bridge/evidence.py local_peer --------------------------
// /proc/<pid>/net/unix tells the family; the peer's inode comes from `ss -x` (the kernel's
// sock_diag, which Node cannot ask directly); without ss the peer stays unknown and the rule
// falls back on the job's children. The holder of the peer is found through /proc/<pid>/fd.

function unixSocketInodes(pid) {
  const text = read(`/proc/${pid}/net/unix`);
  if (text === null) return null;
  const out = new Set();
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 7 && /^\d+$/.test(f[6])) out.add(Number(f[6]));
  }
  return out;
}

function unixPeerInode(inode) {
  let text;
  try {
    text = execFileSync('ss', ['-xnH'], { encoding: 'latin1', timeout: 500, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch { return null; }
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 4 && Number(f[f.length - 3]) === inode) {
      const peer = Number(f[f.length - 1]);
      return Number.isInteger(peer) && peer > 0 ? peer : null;
    }
  }
  return null;
}

function socketOwner(inode, pids) {
  const target = `socket:[${inode}]`;
  for (const pid of pids) {
    let fds;
    try { fds = fs.readdirSync(`/proc/${pid}/fd`); } catch { continue; }
    for (const fd of fds) {
      try { if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === target) return { pid, fd: Number(fd) }; } catch { /* gone */ }
    }
  }
  return null;
}

/** Marks main.fd_family = 'unix' and returns {inode, peer_inode, pid, fd} for a wait on an AF_UNIX socket. */
function localPeer(pid, main, jobPids) {
  const m = /^socket:\[(\d+)\]$/.exec(String(main.fd_target || ''));
  if (!m) return null;
  const inode = Number(m[1]);
  const inodes = unixSocketInodes(pid);
  if (!inodes || !inodes.has(inode)) return null;
  main.fd_family = 'unix';
  const peer = unixPeerInode(inode);
  const owner = peer ? socketOwner(peer, [...jobPids.filter((p) => p !== pid), pid]) : null;
  return { inode, peer_inode: peer, pid: owner ? owner.pid : null, fd: owner ? owner.fd : null };
}

/** One look at the job's main process and its tree (no waiting). */
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
  ev.name = (read(`/proc/${pid}/comm`) || '').trim() || null;
  ev.alive = stat.state !== 'Z';
  ev.cpu_s = stat.cpu_s;
  ev.io = ioCounters(pid);
  ev.tree = descendants(pid);
  ev.tree_cpu = Object.fromEntries(ev.tree.map((k) => [k.pid, k.stat.cpu_s]));
  // Read now too: if the window cannot finish (a loaded machine delays the timer past the
  // snapshot deadline, or the process ends), what it waits on is still known.
  ev.sockets = sockets([pid, ...ev.tree.map((k) => k.pid)], []);
  ev.children = ev.tree.map(childEntry);
  ev.main_thread = mainThread(pid, []);
  return ev;
}

/**
 * The evidence over the window since `first` (a sample()): CPU fraction, I/O delta, the
 * main thread's kernel wait now, sockets and children. `states` are the main thread's
 * states sampled during the window (on a loaded machine a spinning process gets little
 * CPU but is always runnable, which a sleeping one never is).
 */
function measure(first, states = []) {
  const { pid } = first;
  const notes = [...first.notes];
  const ev = { pid, window_s: null, notes };
  if (first.alive === false) return { ...ev, alive: false };
  const stat = parseStat(read(`/proc/${pid}/stat`));
  const elapsed = Math.max(1e-6, performance.now() / 1000 - first.t);
  ev.window_s = Math.round(elapsed * 1000) / 1000;
  ev.status = stat ? STATE_WORDS[stat.state] || stat.state : first.status;
  ev.name = first.name;
  ev.alive = Boolean(stat) && stat.state !== 'Z';
  if (!stat) notes.push('process ended during the window');
  if (stat) ev.cpu_fraction = Math.round(((stat.cpu_s - first.cpu_s) / elapsed) * 1000) / 1000;
  const io = ioCounters(pid);
  if (first.io && io) ev.io_delta = Object.fromEntries(Object.keys(first.io).map((k) => [k, io[k] - first.io[k]]));
  else if (!first.io) notes.push('I/O counters not readable');
  ev.main_thread = mainThread(pid, notes);
  const seen = states.filter((x) => x !== null).map((x) => (typeof x === 'string' ? { state: x, wait: null } : x));
  if (seen.length) {
    ev.main_thread.runnable_fraction = Math.round((seen.filter((x) => x.state === 'R').length / seen.length) * 1000) / 1000;
    const waits = {};
    for (const x of seen) if (x.wait !== null) waits[x.wait] = (waits[x.wait] || 0) + 1;
    if (Object.keys(waits).length) ev.main_thread.wait_samples = waits;
  }
  if (stat) {
    ev.threads = stat.threads;
    ev.rss_bytes = stat.rss_bytes;
  }
  const tree = descendants(pid);
  ev.sockets = sockets([pid, ...tree.map((k) => k.pid)], notes);
  ev.children = tree.map((k) => {
    const entry = childEntry(k);
    if (first.tree_cpu[k.pid] !== undefined) {
      entry.cpu_fraction = Math.round(((k.stat.cpu_s - first.tree_cpu[k.pid]) / elapsed) * 1000) / 1000;
    }
    return entry;
  });
  const peer = localPeer(pid, ev.main_thread, ev.children.map((c) => c.pid));
  if (peer) ev.unix_peer = peer;
  childstack.add(ev.children, peer ? peer.pid : null); // the waited-on child's own stack
  return ev;
}

// --- the live look while a job is stalled (issue 12 item 12), as bridge/evidence.py live --

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

/**
 * A cheap look at a live job for the diagnosis shown while it is stalled: no window (CPU is
 * measured since `previous`, the mark of the last look), and the socket the main thread
 * waits on is looked up once per socket. The AF_UNIX peer is not asked for here (`ss` is a
 * process spawn): the rule then names the likeliest child. Never throws.
 */
function live(pid, previous = null) {
  const notes = [];
  const ev = { pid, notes, live: true };
  const prev = previous || {};
  try {
    const stat = parseStat(read(`/proc/${pid}/stat`));
    if (!stat) return { ...ev, alive: false };
    const t = performance.now() / 1000;
    ev.status = STATE_WORDS[stat.state] || stat.state;
    ev.alive = stat.state !== 'Z';
    const mark = { t, cpu_s: stat.cpu_s };
    ev.mark = mark;
    if (prev.t !== undefined && t - prev.t >= 0.2) {
      ev.cpu_fraction = Math.round(((stat.cpu_s - prev.cpu_s) / (t - prev.t)) * 1000) / 1000;
      ev.window_s = Math.round((t - prev.t) * 1000) / 1000;
    }
    const main = mainThread(pid, notes);
    ev.main_thread = main;
    ev.children = [];
    for (const kid of treePids(pid)) {
      const ks = parseStat(read(`/proc/${kid}/stat`));
      if (!ks) continue;
      ev.children.push({ pid: kid, name: (read(`/proc/${kid}/comm`) || '').trim(), status: STATE_WORDS[ks.state] || ks.state,
        ppid: ks.ppid, started: ks.started });
    }
    const target = String(main.fd_target || '');
    if (target.startsWith('socket:')) {
      let found;
      if (prev.socket === target) {
        found = prev.found || {};
      } else {
        const inodes = unixSocketInodes(pid);
        const inode = Number(target.slice(8, -1));
        found = inodes && inodes.has(inode) ? { fd_family: 'unix' } : { sockets: sockets([pid], notes) };
      }
      if (found.fd_family) main.fd_family = found.fd_family;
      if (found.sockets) ev.sockets = found.sockets;
      Object.assign(mark, { socket: target, found });
    }
    childstack.add(ev.children, null); // a stopped child's kernel stack: one file read
  } catch (err) {
    notes.push(`live evidence failed: ${err.name}: ${err.message}`);
  }
  return ev;
}

/** The main thread's state letter now (R, S, D, ...), or null. */
function mainThreadState(pid) {
  const stat = parseStat(read(`/proc/${pid}/task/${pid}/stat`));
  return stat ? stat.state : null;
}

/**
 * The main thread's state letter and kernel wait now ({state, wait}, wait "running" for R),
 * or null: measure() counts the waits over the window (as bridge/evidence.py _sample_main).
 */
function mainThreadSample(pid) {
  const state = mainThreadState(pid);
  if (state === null) return null;
  const wchan = state === 'R' ? 'running' : ((read(`/proc/${pid}/task/${pid}/wchan`) || '').trim() || 'unknown');
  return { state, wait: wchan };
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

module.exports = { sample, measure, live, mainThreadState, mainThreadSample, parseSyscallLine, sockets, ipv6, oomKillCount, oomKilled, localPeer };
