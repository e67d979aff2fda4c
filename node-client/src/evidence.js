'use strict';
/**
 * Evidence about a live job from /proc, for the hang diagnosis: bridge/evidence.py's
 * fields (status, alive, main_thread {tid, wchan, syscall, syscall_nr, fd, fd_target, state,
 * runnable_fraction}, cpu_fraction, io_delta, threads, rss_bytes, sockets, children), read
 * from /proc directly instead of through psutil. This module assembles them; the reading
 * is in procfs.js, sockets.js and gpu.js (the OOM count, read around the job, in oom.js).
 * No py-spy here (docs/CLIENT.md, "Rooms"). Never throws: what cannot be read is a note.
 * cpu_fraction needs two looks: sample() at the hang, measure(first, states) when the job
 * is about to be signalled (the machine's dump wait is the window), as bridge/evidence.py's
 * sample() and measure(); its collect() is both in one blocking call, which Node has not.
 */

const { STATE_WORDS, read, parseStat, mainThread, descendants, childEntry, ioCounters, treePids } = require('./procfs.js');
const { inetSockets, unixSocketInodes, localPeer, addLoopbackPeers } = require('./sockets.js');
const gpu = require('./gpu.js');
const childstack = require('./childstack.js');
const { fileLocks } = require('./filelocks.js');

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
  ev.sockets = inetSockets([pid, ...ev.tree.map((k) => k.pid)], []);
  ev.children = ev.tree.map(childEntry);
  ev.main_thread = mainThread(pid, []);
  // Asked now, read by measure(): nvidia-smi answers during the window.
  ev.gpu_query = gpu.start([pid, ...ev.tree.map((k) => k.pid)]);
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
  ev.sockets = inetSockets([pid, ...tree.map((k) => k.pid)], notes);
  addLoopbackPeers(ev.sockets, [pid, ...tree.map((k) => k.pid)], notes);
  ev.children = tree.map((k) => {
    const entry = childEntry(k);
    if (first.tree_cpu[k.pid] !== undefined) {
      entry.cpu_fraction = Math.round(((k.stat.cpu_s - first.tree_cpu[k.pid]) / elapsed) * 1000) / 1000;
    }
    return entry;
  });
  const peer = localPeer(pid, ev.main_thread, ev.children.map((c) => c.pid));
  if (peer) ev.unix_peer = peer;
  const locks = fileLocks(pid, [pid, ...tree.map((k) => k.pid)], notes);
  if (locks.length) ev.file_locks = locks; // the holders of locks on files it has open
  childstack.add(ev.children, peer ? peer.pid : null); // the waited-on child's own stack
  Object.assign(ev, gpu.facts(first.gpu_query));
  return ev;
}

// --- the live look while a job is stalled (issue 12 item 12), as bridge/evidence.py live --

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
    // /proc/PID/task/TID/children is cheap but the kernel does not promise it is complete
    // (proc(5)); a stalled job seen without children is checked by the full scan the final
    // evidence uses, so the live text names the same child the verdict will.
    let kids = treePids(pid);
    if (!kids.length) kids = descendants(pid).map((k) => k.pid);
    for (const kid of kids) {
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
        found = inodes && inodes.has(inode) ? { fd_family: 'unix' } : { sockets: inetSockets([pid], notes) };
        if (found.sockets) addLoopbackPeers(found.sockets, [pid], notes);
      }
      if (found.fd_family) main.fd_family = found.fd_family;
      if (found.sockets) ev.sockets = found.sockets;
      Object.assign(mark, { socket: target, found });
    }
    // The file locks: looked up again only when /proc/locks changed (the mark keeps them)
    const locks = read('/proc/locks');
    const held = locks !== null && prev.locks === locks ? prev.file_locks || []
      : fileLocks(pid, [pid, ...ev.children.map((c) => c.pid)], notes, locks);
    Object.assign(mark, { locks, file_locks: held });
    if (held.length) ev.file_locks = held;
    childstack.add(ev.children, null); // a stopped child's kernel stack: one file read
  } catch (err) {
    notes.push(`live evidence failed: ${err.name}: ${err.message}`);
  }
  return ev;
}

module.exports = { sample, measure, live };
