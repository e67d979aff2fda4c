'use strict';
/**
 * Launcher: spawn the child in its own process group, learn its exit from the OS, and kill
 * its whole tree. The mirror of bridge/launcher.py.
 *
 * - The child gets its own process group (`detached`), stdin from /dev/null, and stdout and
 *   stderr on pipes read as bytes.
 * - Its environment: the caller's (or the given) variables plus PYTHONUNBUFFERED=1,
 *   PYTHONIOENCODING=utf-8, PYTHONUTF8=1, PYTHONFAULTHANDLER=1 and the TRAINBRIDGE_*
 *   variables of docs/PROTOCOL.md section 2 (never argv: argv is visible in `ps`), among
 *   them TRAINBRIDGE_CLIENT_PID (this process: the job's workers end the job when it is
 *   gone) or, for a job launched `detached`, TRAINBRIDGE_DETACHED=1.
 * - Exit comes from Node's 'exit' event (SIGCHLD in libuv: no polling, no thread).
 * - Tree kill: the process group, plus descendants that left it (setsid, a double fork).
 *   Those are found in /proc by parent links while the child lives, and after it died (they
 *   are reparented to init then) by the job id they inherited in their environment.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

// In the repository the package sits in node-client/, beside trainbridge/, worker/ and bridge/.
const REPO = path.resolve(__dirname, '../..');
const IN_REPO = fs.existsSync(path.join(REPO, 'trainbridge', '__init__.py'));
// Installed from its tarball, the package carries the worker and the zero-code hook here
// (copied by scripts/bundle-python.js when it is packed).
const BUNDLED_INJECT = path.resolve(__dirname, '../python/trainbridge/bridge/inject');

/**
 * The Python to run, as python-shell's pythonPath: `python` when given, else
 * $TRAINBRIDGE_PYTHON, else the active venv's ($VIRTUAL_ENV), else (in the repository) its
 * .venv, else python3 from PATH.
 */
function resolvePython({ python } = {}) {
  if (python) return python;
  if (process.env.TRAINBRIDGE_PYTHON) return process.env.TRAINBRIDGE_PYTHON;
  const active = process.env.VIRTUAL_ENV && path.join(process.env.VIRTUAL_ENV, 'bin', 'python');
  if (active && fs.existsSync(active)) return active;
  const repoVenv = path.join(REPO, '.venv', 'bin', 'python');
  if (IN_REPO && fs.existsSync(repoVenv)) return repoVenv;
  return 'python3';
}

/**
 * A private (0700) runtime directory for ipc endpoints and crash files; the caller removes
 * it (removeRuntimeDir) when its last job is over.
 */
const RUNTIME_PREFIX = 'trainbridge-';
const OWNER_FILE = 'client.pid'; // "<pid> <start time in clock ticks>" of the client that made it

/**
 * A private (0700) directory for the ipc socket and per-job files. Directories left by dead
 * clients of this user (SIGKILLed: no exit handler ran) are swept first, as bridge/launcher.py does.
 */
function makeRuntimeDir() {
  const base = process.env.XDG_RUNTIME_DIR && fs.existsSync(process.env.XDG_RUNTIME_DIR)
    ? process.env.XDG_RUNTIME_DIR : os.tmpdir();
  sweepDeadRuntimeDirs(base);
  const dir = fs.mkdtempSync(path.join(base, RUNTIME_PREFIX));
  fs.chmodSync(dir, 0o700); // mkdtemp already makes it 0700; say it, since it is the point
  fs.writeFileSync(path.join(dir, OWNER_FILE), `${process.pid} ${processStart(process.pid)}\n`);
  return dir;
}

/** A process's start time (/proc/<pid>/stat field 22); null when gone or a zombie. */
function processStart(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields.length < 20 || fields[0] === 'Z') return null;
  return fields[19];
}

/**
 * Remove the runtime directories in `base` that this user's dead clients left (Python's or
 * Node's: the same OWNER_FILE). One without an owner file, or of a live client, stays.
 */
function sweepDeadRuntimeDirs(base) {
  let removed = 0;
  let names;
  try {
    names = fs.readdirSync(base);
  } catch {
    return 0;
  }
  const uid = process.getuid ? process.getuid() : null;
  for (const name of names) {
    if (!name.startsWith(RUNTIME_PREFIX)) continue;
    const dir = path.join(base, name);
    let pid;
    let start;
    try {
      const st = fs.lstatSync(dir);
      if (!st.isDirectory() || (uid !== null && st.uid !== uid)) continue;
      [pid, start] = fs.readFileSync(path.join(dir, OWNER_FILE), 'ascii').trim().split(/\s+/);
      pid = Number(pid);
    } catch {
      continue;
    }
    if (!Number.isInteger(pid) || pid === process.pid || processStart(pid) === start) continue;
    removeRuntimeDir(dir);
    removed += 1;
  }
  return removed;
}

function removeRuntimeDir(dir) {
  removeTree(dir); // best effort: a leftover empty directory in the runtime dir harms nobody
}

/**
 * Remove a directory of our own making (a job's or the hub's: a few files) and what it holds.
 * Best effort, never throws. Not fs.rmSync: its first recursive call loads Node's rimraf
 * (~0.5 ms), which a job's end would pay on the way from a death to its report.
 */
function removeTree(dir) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return; // gone already
  }
  for (const entry of entries) {
    const where = path.join(dir, entry.name);
    if (entry.isDirectory()) removeTree(where); // a link is unlinked, never followed
    else {
      try { fs.unlinkSync(where); } catch { /* gone already */ }
    }
  }
  try { fs.rmdirSync(dir); } catch { /* not empty (written meanwhile) or gone */ }
}

const TIMEOUT_ENV = {
  heartbeat_s: 'TRAINBRIDGE_HEARTBEAT_S',
  stall_s: 'TRAINBRIDGE_STALL_S',
  freeze_s: 'TRAINBRIDGE_FREEZE_S',
  ack_timeout_s: 'TRAINBRIDGE_ACK_TIMEOUT_S',
  kill_grace_s: 'TRAINBRIDGE_KILL_GRACE_S',
};

/**
 * The child's environment. `base` is the caller's env (default process.env); `worker`
 * holds endpoint, jobId, key (Buffer), crashFile, detached (bool), serverKey (z85, on tcp)
 * and optional heartbeat_s,
 * stall_s, freeze_s, ack_timeout_s, kill_grace_s.
 */
function childEnv(base, worker, { pythonEnv = true } = {}) {
  const env = { ...(base || process.env) };
  if (pythonEnv) {
    Object.assign(env, {
      PYTHONUNBUFFERED: '1', // the pipe must not hold lines back: stalls are judged on output too
      PYTHONIOENCODING: 'utf-8',
      PYTHONUTF8: '1',
      PYTHONFAULTHANDLER: '1', // a native crash prints a stack even without the worker
    });
  }
  Object.assign(env, {
    TRAINBRIDGE_ENDPOINT: worker.endpoint,
    TRAINBRIDGE_JOB_ID: worker.jobId,
    TRAINBRIDGE_KEY: worker.key.toString('hex'),
  });
  if (worker.crashFile) env.TRAINBRIDGE_CRASH_FILE = worker.crashFile;
  // The tcp fallback's CurveZMQ key (hub.js); an outer job's must not reach this one's worker.
  if (worker.serverKey) env.TRAINBRIDGE_SERVER_KEY = worker.serverKey;
  else delete env.TRAINBRIDGE_SERVER_KEY;
  // The worker ends the job's process group when this process is gone, unless the job is
  // meant to outlive us; an outer job's setting inherited through `base` must not decide.
  if (worker.detached) {
    env.TRAINBRIDGE_DETACHED = '1';
    delete env.TRAINBRIDGE_CLIENT_PID;
  } else {
    env.TRAINBRIDGE_CLIENT_PID = String(process.pid);
    delete env.TRAINBRIDGE_DETACHED;
  }
  for (const [name, variable] of Object.entries(TIMEOUT_ENV)) {
    if (worker[name] !== undefined && worker[name] !== null) env[variable] = String(worker[name]);
  }
  return env;
}

/**
 * The directory whose sitecustomize.py loads the worker in zero-code mode (bridge/inject):
 * `explicit`, else $TRAINBRIDGE_INJECT_DIR, else the repository's bridge/inject (in a
 * checkout), else the copy shipped in the package; null when none exists (zero-code mode is
 * then off, and the job says so).
 */
function injectDir(explicit) {
  const candidates = [explicit, process.env.TRAINBRIDGE_INJECT_DIR,
    IN_REPO ? path.join(REPO, 'bridge', 'inject') : null, BUNDLED_INJECT];
  for (const dir of candidates) {
    if (dir && fs.existsSync(path.join(dir, 'sitecustomize.py'))) return dir;
  }
  return null;
}

/** Put the zero-code hook first on PYTHONPATH (as bridge.launcher.add_zero_code_hook). */
function addZeroCodeHook(env, dir) {
  const rest = env.PYTHONPATH;
  env.PYTHONPATH = dir + (rest ? path.delimiter + rest : '');
}

/** Spawn `command args` in its own process group; stdin 'ignore' (/dev/null), 'pipe' or 'inherit'. */
function spawnChild({ command, args = [], cwd, env, stdin = 'ignore' }) {
  return spawn(command, args, {
    cwd,
    env,
    detached: true, // setsid(): its own session and process group, so the tree can be signalled
    stdio: [stdin, 'pipe', 'pipe'],
    windowsHide: true,
  });
}

// --- the process tree -----------------------------------------------------------------
function readProcStat(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    const close = stat.lastIndexOf(')'); // the command name may hold spaces and parentheses
    const fields = stat.slice(close + 2).split(' ');
    return { pid, state: fields[0], ppid: Number(fields[1]), pgid: Number(fields[2]) };
  } catch {
    return null; // gone, or not Linux
  }
}

function listPids() {
  try {
    return fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name)).map(Number);
  } catch {
    return [];
  }
}

const environBuf = Buffer.alloc(64 * 1024); // reused by hasJobMarker: one scan reads many

/** Whether /proc/PID/environ holds `entry` (NAME=value\0) as one of its variables. */
function hasJobMarker(pid, entry) {
  let fd;
  try {
    fd = fs.openSync(`/proc/${pid}/environ`, 'r');
  } catch {
    return false; // gone, or another user's process
  }
  try {
    // Read in pieces, keeping the tail of the last one: a match may straddle two reads.
    const needle = Buffer.concat([Buffer.from([0]), entry]); // a variable after the first
    let kept = 0;
    let first = true;
    for (;;) {
      const n = fs.readSync(fd, environBuf, kept, environBuf.length - kept, null);
      if (n === 0) return false;
      const view = environBuf.subarray(0, kept + n);
      if (first && view.subarray(0, entry.length).equals(entry)) return true;
      if (view.indexOf(needle) !== -1) return true;
      first = false;
      kept = Math.min(needle.length, view.length);
      view.copy(environBuf, 0, view.length - kept);
    }
  } catch {
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * What of the job outlived its main process (the drain, right after its exit): as
 * jobProcesses, but cheap when nothing did, which is the common case on the path from a
 * death to its report. No live process in the group (one kill(-pgid, 0)) and none other
 * carrying the job's id (one read of each environment, no stat) means nothing is left;
 * otherwise jobProcesses says what is.
 */
function jobLeftovers({ rootPid, pgid, jobId }) {
  const tree = { rootPid, pgid, jobId };
  const others = (list) => list.filter((s) => s.pid !== rootPid).map((s) => s.pid);
  if (pgid) {
    try {
      process.kill(-pgid, 0);
      return others(jobProcesses(tree)); // something of the group lives (or is a zombie)
    } catch (err) {
      if (err.code !== 'ESRCH') return others(jobProcesses(tree));
    }
  }
  if (!jobId) return others(jobProcesses(tree));
  const entry = Buffer.from(`TRAINBRIDGE_JOB_ID=${jobId}\0`);
  for (const pid of listPids()) {
    if (pid !== process.pid && pid !== rootPid && hasJobMarker(pid, entry)) return others(jobProcesses(tree));
  }
  return [];
}

/**
 * Every live process that belongs to the job: in the process group `pgid`, a descendant of
 * `rootPid`, or carrying TRAINBRIDGE_JOB_ID=<jobId> in its environment. Zombies are left
 * out (they are dead; their parent reaps them). Never includes this process.
 */
function jobProcesses({ rootPid, pgid, jobId }) {
  const stats = listPids().map(readProcStat).filter((s) => s !== null && s.pid !== process.pid);
  const children = new Map();
  for (const s of stats) {
    if (!children.has(s.ppid)) children.set(s.ppid, []);
    children.get(s.ppid).push(s);
  }
  const found = new Map();
  const visit = (s) => {
    if (found.has(s.pid)) return;
    found.set(s.pid, s);
    for (const c of children.get(s.pid) || []) visit(c);
  };
  const marker = jobId ? Buffer.from(`TRAINBRIDGE_JOB_ID=${jobId}\0`) : null;
  for (const s of stats) {
    if (s.pid === rootPid || (pgid && s.pgid === pgid)) visit(s);
  }
  if (marker) {
    for (const s of stats) {
      if (!found.has(s.pid) && hasJobMarker(s.pid, marker)) visit(s);
    }
  }
  return [...found.values()].filter((s) => s.state !== 'Z');
}

function kill(pid, signal) {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false; // already gone
  }
}

/**
 * Send `signal` to the whole job: the process group, then every member found in /proc
 * (descendants that escaped the group). `includeRoot: false` spares the main process (it
 * has exited; its pid may be reused). Returns the pids signalled individually.
 */
function signalTree({ rootPid, pgid, jobId }, signal, { includeRoot = true } = {}) {
  if (pgid) kill(-pgid, signal);
  const members = jobProcesses({ rootPid, pgid, jobId }).filter((s) => includeRoot || s.pid !== rootPid);
  for (const s of members) kill(s.pid, signal);
  return members.map((s) => s.pid);
}

/** Signal one process only (SIGUSR1 for a faulthandler dump). */
function signalProcess(pid, signal) {
  return kill(pid, signal);
}

module.exports = {
  resolvePython, makeRuntimeDir, removeRuntimeDir, removeTree, sweepDeadRuntimeDirs, childEnv, injectDir, addZeroCodeHook, spawnChild, jobProcesses, jobLeftovers,
  signalTree, signalProcess,
};
