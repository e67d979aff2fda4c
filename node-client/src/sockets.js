'use strict';
/**
 * The sockets a job's processes hold, for the evidence about a wait (Linux): TCP and UDP
 * sockets with their remote ends, and for a wait on an AF_UNIX socket the process at its
 * other end. Never throws: what cannot be read is null or a note.
 *
 * The Python twin is bridge/sockets.py (which asks psutil for the inet sockets and the
 * kernel's sock_diag for a unix peer; here /proc/<pid>/net and `ss -x`).
 */

const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const { processFacts, read } = require('./procfs.js');

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

/** The TCP and UDP sockets `pids` hold: {pid, fd, type, laddr, raddr, status} each. */
function inetSockets(pids, notes) {
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

// --- local (AF_UNIX) sockets, as bridge/sockets.py local_peer ---------------------------
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

// --- the other end of a loopback TCP connection (bridge/sockets.py add_loopback_peers) ---
const loopback = (host) => String(host).startsWith('127.') || host === '::1' || String(host).startsWith('::ffff:127.');

/**
 * For each connected TCP socket of the job whose other end is on this machine, the process
 * that holds that end: sock.peer = {pid, cmd, state, in_job}. The peer's row is in the same
 * network namespace's table (/proc/<pid>/net/tcp); its holder is found through /proc/<pid>/fd.
 */
function addLoopbackPeers(sockets, jobPids, notes) {
  const local = sockets.filter((s) => s.type === 'tcp' && s.raddr && s.laddr && loopback(s.raddr[0]));
  if (!local.length) return;
  let pids;
  try { pids = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number); } catch (err) {
    notes.push(`the machine's processes not readable (${err.code})`);
    return;
  }
  for (const sock of local) {
    const table = socketTable(sock.pid);
    let inode = null;
    for (const [ino, row] of table) {
      if (row.type === 'tcp' && row.raddr && row.laddr[0] === sock.raddr[0] && row.laddr[1] === sock.raddr[1]
        && row.raddr[0] === sock.laddr[0] && row.raddr[1] === sock.laddr[1]) { inode = ino; break; }
    }
    const owner = inode ? socketOwner(inode, pids) : null;
    if (owner) sock.peer = { pid: owner.pid, ...processFacts(owner.pid), in_job: jobPids.includes(owner.pid) };
    else if (inode) notes.push(`the process at the other end of ${JSON.stringify(sock.raddr)} is not readable`); // another user's
  }
}

module.exports = { ipv6, inetSockets, unixSocketInodes, unixPeerInode, socketOwner, localPeer, addLoopbackPeers };
