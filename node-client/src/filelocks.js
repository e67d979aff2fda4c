'use strict';
/**
 * Who holds the file lock a job waits for (issue 32 item 4: follow the wait chain to its end):
 * bridge/filelocks.py's twin. Only procfs is read, never the filesystem itself: /proc/locks for
 * the locks and their holders, /proc/<pid>/fdinfo/<fd> (mnt_id, ino) and
 * /proc/<pid>/mountinfo (mnt_id -> device) for the files the job has open, /proc/<pid>/fd/<fd>
 * for their names. The verdict's words are diagnosis_hang.js's.
 */

const fs = require('node:fs');
const { processFacts, read } = require('./procfs.js');

const LOCKS_SAID = 4; // locks named in the evidence, at most
const FDS_READ = 4096; // open files looked at, at most

/** /proc/locks -> [{type, access, pid, dev: [major, minor], inode, waiting}] (the device is hexadecimal there). */
function parseLocks(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const parts = line.split(/\s+/).filter(Boolean);
    const waiting = parts.length > 1 && parts[1] === '->';
    const rest = parts.slice(waiting ? 2 : 1);
    if (rest.length < 5) continue;
    const [type, , access, pid, ident] = rest;
    const m = /^([0-9a-f]+):([0-9a-f]+):(\d+)$/i.exec(ident);
    if (!m || !/^-?\d+$/.test(pid)) continue;
    out.push({ type, access, pid: Number(pid), dev: [parseInt(m[1], 16), parseInt(m[2], 16)], inode: Number(m[3]), waiting });
  }
  return out;
}

/** /proc/<pid>/mountinfo -> Map(mnt_id -> [major, minor]). */
function parseMounts(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    const parts = line.split(/\s+/).filter(Boolean);
    const m = /^(\d+):(\d+)$/.exec(parts[2] || '');
    if (m && /^\d+$/.test(parts[0])) out.set(Number(parts[0]), [Number(m[1]), Number(m[2])]);
  }
  return out;
}

/** /proc/<pid>/fdinfo/<fd> -> [mnt_id, ino], or null (a kernel before 5.13 has no ino). */
function parseFdinfo(text) {
  const fields = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return /^\d+$/.test(fields.mnt_id || '') && /^\d+$/.test(fields.ino || '') ? [Number(fields.mnt_id), Number(fields.ino)] : null;
}

const NO_INO = 'file locks not matched: /proc/<pid>/fdinfo has no ino (a kernel before 5.13)';

function openFiles(pid, mounts, notes) {
  let fds;
  try { fds = fs.readdirSync(`/proc/${pid}/fd`).slice(0, FDS_READ); } catch { return new Map(); }
  const out = new Map();
  for (const fd of fds) {
    let file;
    try { file = fs.readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
    const info = parseFdinfo(read(`/proc/${pid}/fdinfo/${fd}`) || '');
    if (file.startsWith('/') && info === null && !notes.includes(NO_INO)) notes.push(NO_INO); // a kernel before 5.13
    if (!file.startsWith('/') || info === null || !mounts.has(info[0])) continue;
    const [major, minor] = mounts.get(info[0]);
    out.set(`${major}:${minor}:${info[1]}`, file);
  }
  return out;
}

function holderFacts(pid) {
  const { cmd, state } = processFacts(pid);
  return { holder_cmd: cmd, holder_state: state };
}

/**
 * The locks other processes hold on files `pid` has open: [{path, lock, access, holder_pid
 * (null for an open file description's lock), holder_cmd, holder_state, in_job, blocked}],
 * those it is blocked on first. `text`: /proc/locks, read already.
 */
function fileLocks(pid, own, notes, text = undefined) {
  if (text === undefined) text = read('/proc/locks');
  if (text === null) {
    notes.push('/proc/locks not readable');
    return [];
  }
  const locks = parseLocks(text);
  if (!locks.length) return [];
  const files = openFiles(pid, parseMounts(read(`/proc/${pid}/mountinfo`) || ''), notes);
  const key = (l) => `${l.dev[0]}:${l.dev[1]}:${l.inode}`;
  const queued = new Set(locks.filter((l) => l.waiting && l.pid === pid).map(key));
  const out = [];
  const seen = new Set();
  for (const l of locks) {
    if (l.waiting || l.pid === pid || !files.has(key(l))) continue;
    const holder = l.pid > 0 ? l.pid : null;
    const entry = {
      path: files.get(key(l)), lock: l.type, access: l.access, holder_pid: holder, in_job: own.includes(holder),
      blocked: queued.has(key(l)), ...(holder ? holderFacts(holder) : { holder_cmd: null, holder_state: null }),
    };
    const id = JSON.stringify(entry);
    if (!seen.has(id)) { seen.add(id); out.push(entry); }
  }
  out.sort((a, b) => Number(!a.blocked) - Number(!b.blocked));
  return out.slice(0, LOCKS_SAID);
}

module.exports = { LOCKS_SAID, fileLocks, parseFdinfo, parseLocks, parseMounts };
