'use strict';
/**
 * Per-process state of a distributed job, and its root cause: the mirror of bridge/ranks.py
 * (pure: values in, values out; vectors/ranks.json pins both). observe() folds one worker
 * message into the state, table() gives the report's `ranks` rows, rootCause() names the
 * rank that failed first by the ranks' own clocks (the envelope's `ts`; torchrun's
 * error-file timestamps, whole seconds, for a rank without a worker) and lists the other
 * failed ranks as consequences.
 */

const { isLauncher } = require('./machine.js');

const PEER_GONE = /connection closed by peer|connection reset by peer|broken pipe|peer.*(closed|gone|disconnect)/i;
const LIBRARY = ['/lib/python', 'site-packages', 'dist-packages', '<frozen', '/worker/', '/bridge/', '<string>'];
const MESSAGE_CHARS = 160;
const nul = (x) => (x === undefined ? null : x);

function initial() {
  return { procs: new Map() };
}

function proc(state, key) {
  if (!state.procs.has(key)) {
    state.procs.set(key, {
      key, rank: null, local_rank: null, world_size: null, host: null, pid: null, ppid: null,
      stages: [], progress: null, last_beat: null, exit: null, error: null, hello: false, failures: [], body: null, stacks: null,
    });
  }
  return state.procs.get(key);
}

function observe(state, key, kind, body, ts) {
  const p = proc(state, key);
  p.last_beat = ts;
  if (kind === 'hello') {
    Object.assign(p, {
      hello: true, rank: nul(body.rank), local_rank: nul(body.local_rank), world_size: nul(body.world_size),
      host: nul(body.host), pid: nul(body.pid), ppid: nul(body.ppid),
      ...(typeof body.addr === 'string' ? { addr: body.addr } : {}), // a worker on tcp: its host's address
    });
  } else if (kind === 'stage') {
    if (body.event === 'begin') p.stages.push(body.name);
    else {
      const i = p.stages.lastIndexOf(body.name);
      if (i >= 0) p.stages.length = i;
    }
  } else if (kind === 'progress') {
    p.progress = { step: nul(body.step), total: nul(body.total) };
  } else if (kind === 'error' && body.fatal && p.error === null) {
    p.error = errorOf(body, ts, 'worker');
    p.body = body; // the full error, should this rank be the root cause
    if (Array.isArray(body.failures)) p.failures = body.failures.filter((f) => f && typeof f === 'object');
  } else if (kind === 'bye') {
    p.exit = { code: nul(body.exit_code), reason: nul(body.reason) };
  } else if (kind === 'reply' && typeof body.stacks === 'string') {
    p.stacks = body.stacks; // its answer to dump_stacks: where it is at hang time
  } else if (kind === 'heartbeat') {
    // Its main thread's stack while it is idle (null once it moves again): what the live
    // diagnosis reads before any deadline (liveCollective).
    p.beat_stack = typeof body.stack === 'string' && body.stack ? body.stack : null;
  } else if (kind === 'signal_dump' && typeof body.stacks === 'string') {
    // Not a wire kind: the client's record of what faulthandler wrote to the crash file for
    // a rank that did not answer dump_stacks (SIGUSR1, then SIGUSR2: its main thread).
    p.stacks = body.stacks;
  }
}

function errorOf(body, t, source) {
  const frames = Array.isArray(body.frames) ? body.frames : [];
  return { type: nul(body.type), message: nul(body.message), stage: nul(body.stage), frame: where(frames), t, source };
}

function where(frames) {
  if (!frames.length) return null;
  let mine = frames[frames.length - 1];
  for (let i = frames.length - 1; i >= 0; i -= 1) {
    const file = String(frames[i].file ?? '').replace(/\\/g, '/');
    if (!LIBRARY.some((m) => file.includes(m))) { mine = frames[i]; break; }
  }
  const parts = String(mine.file ?? '?').replace(/\\/g, '/').split('/');
  const path = parts.length > 1 && parts[parts.length - 2] ? parts.slice(-2).join('/') : parts[parts.length - 1];
  return `${path}:${mine.line ?? '?'} ${mine.function ?? '?'}`;
}

/**
 * Who sent a message, for the events the job emits: rank, local_rank, host, pid and role as
 * known when it arrived (a launcher is "other" until a rank of it says hello).
 */
function sender(state, key) {
  const p = proc(state, key);
  return { rank: p.rank, local_rank: p.local_rank, host: p.host, pid: p.pid, role: role(p, [...state.procs.values()]) };
}

function role(p, procs) {
  if (p.rank !== null && p.world_size !== null) return 'rank';
  if (p.pid !== null && procs.some((q) => q.ppid === p.pid && q.world_size !== null)) return 'launcher';
  return 'other';
}

function table(state) {
  const procs = [...state.procs.values()];
  const rows = procs.map((p) => ({
    rank: p.rank, local_rank: p.local_rank, host: p.host, pid: p.pid, role: role(p, procs),
    stage: p.stages.length ? p.stages[p.stages.length - 1] : null, progress: p.progress,
    last_beat: p.last_beat, exit: p.exit, error: p.error,
    ...(p.addr ? { addr: p.addr } : {}), // a rank of another host: its address
  }));
  for (const launcher of procs.filter((p) => p.failures.length)) {
    for (const f of launcher.failures) {
      let row = rows.find((r) => r.role === 'rank' && (r.addr ?? null) === (launcher.addr ?? null) && ( // pids repeat across hosts
        (nul(f.pid) !== null && r.pid === f.pid) || (r.rank === nul(f.rank) && r.host === launcher.host)));
      if (!row) { // a rank that never said hello: torchrun's word is all we have
        row = {
          rank: nul(f.rank), local_rank: nul(f.local_rank), host: launcher.host, pid: nul(f.pid), role: 'rank',
          stage: null, progress: null, last_beat: null, exit: null, error: null,
        };
        rows.push(row);
      }
      if (row.exit === null || row.exit.code === null) row.exit = { code: nul(f.exit_code), reason: 'torchrun' };
      if (row.error === null && f.traceback) row.error = fileError(f);
    }
  }
  for (const row of rows) row.state = stateOf(row);
  const order = { rank: 0, launcher: 1, other: 2 };
  rows.sort((a, b) => (order[a.role] - order[b.role]) || ((a.rank ?? 0) - (b.rank ?? 0)) || ((a.pid || 0) - (b.pid || 0)));
  return rows;
}

function fileError(f) {
  const message = String(f.message || '');
  const at = message.indexOf(': ');
  const frames = [...String(f.traceback || '').matchAll(/File "([^"]+)", line (\d+), in (\S+)/g)]
    .map((m) => ({ file: m[1], line: Number(m[2]), function: m[3] }));
  return {
    type: at >= 0 ? message.slice(0, at) : null, message: at >= 0 ? message.slice(at + 2) : message,
    stage: null, frame: where(frames), t: nul(f.time), source: 'error_file', traceback: nul(f.traceback), frames,
  };
}

function stateOf(row) {
  const code = row.exit ? row.exit.code : null;
  if (row.error !== null || (code !== null && code !== 0)) return 'failed';
  return row.exit !== null ? 'exited' : 'running';
}

function errorBody(state, cause) {
  if (!cause) return null;
  for (const p of state.procs.values()) {
    if (p.body !== null && p.pid === cause.pid && p.host === cause.host) return p.body;
  }
  const err = cause.error;
  if (err.source === 'error_file' && err.traceback) { // a rank without a worker
    return {
      type: err.type || 'Error', message: err.message || '', traceback: err.traceback, frames: err.frames || [], chain: [],
      stage: null, fatal: true, thread: 'MainThread', kind: 'exception',
    };
  }
  return null;
}

const SIGNAL_NAMES = { 6: 'SIGABRT', 7: 'SIGBUS', 9: 'SIGKILL', 11: 'SIGSEGV', 15: 'SIGTERM' };

/** The signal a rank died of with no error of its own (torchrun's negative exit code), else null. */
function killed(row) {
  const code = row.exit ? row.exit.code : null;
  if (row.role !== 'rank' || row.error !== null || !Number.isInteger(code) || code >= 0) return null;
  return SIGNAL_NAMES[-code] || `signal ${-code}`;
}

/**
 * The rank that failed first by its own clock (ties: the lower rank), with the other failed
 * ranks as consequences; null when no rank failed. A rank killed by a signal with no error of
 * its own failed before the peers that only lost it (bridge/ranks.py root_cause).
 */
function rootCause(rows) {
  const failed = rows.filter((r) => r.role === 'rank' && r.error !== null && r.error.t !== null && r.error.t !== undefined);
  const dead = rows.map((r) => [r, killed(r)]).filter(([, sig]) => sig !== null);
  const own = failed.filter((r) => why(r) === 'later');
  let first;
  if (dead.length && !own.length) {
    let [row, signal] = dead[0];
    for (const [r, sig] of dead.slice(1)) {
      const a = [sig === 'SIGTERM' ? 1 : 0, r.rank ?? 0];
      const b = [signal === 'SIGTERM' ? 1 : 0, row.rank ?? 0];
      if (a[0] < b[0] || (a[0] === b[0] && a[1] < b[1])) [row, signal] = [r, sig];
    }
    first = { ...row, error: { type: signal, message: '', stage: row.stage, frame: null, t: null, source: 'signal' } };
  } else if (failed.length) {
    first = failed[0];
    for (const r of failed.slice(1)) {
      if (r.error.t < first.error.t || (r.error.t === first.error.t && (r.rank ?? 0) < (first.rank ?? 0))) first = r;
    }
  } else {
    return null;
  }
  const same = (r) => r.pid === first.pid && r.host === first.host && r.rank === first.rank;
  const consequences = rows
    .filter((r) => !same(r) && r.role === 'rank' && r.state === 'failed')
    .map((r) => ({ rank: r.rank, host: r.host, pid: r.pid, why: why(r), error: r.error }));
  return {
    rank: first.rank, local_rank: first.local_rank, host: first.host, ...(first.addr ? { addr: first.addr } : {}),
    pid: first.pid, error: first.error, consequences, summary: sentence(first, consequences),
  };
}

function why(row) {
  const err = row.error || {};
  const code = row.exit ? row.exit.code : null;
  if (PEER_GONE.test(String(err.message ?? ''))) return 'peer_gone';
  if (String(err.type ?? '').endsWith('SignalException') || (code !== null && code < 0)) return 'stopped';
  return 'later';
}

const WHY_TEXT = { stopped: 'stopped by the launcher', peer_gone: 'lost its peer', later: 'failed later' };

function sentence(first, consequences) {
  const err = first.error;
  let text = `rank ${first.rank} (${who(first)}) failed first: ${short(err)}`;
  if (err.source === 'signal') {
    text = `rank ${first.rank} (${who(first)}) failed first: killed by ${err.type}, with no error of its own (a kill from outside the job, or the kernel's OOM killer)`;
  }
  if (err.stage) text += ` in stage '${err.stage}'`;
  if (err.frame) text += ` at ${err.frame}`;
  if (consequences.length) {
    text += '; then ' + consequences.map((c) => `rank ${c.rank} ${WHY_TEXT[c.why]}`
      + (c.error && c.why !== 'stopped' ? ` (${brief(c.error)})` : '')).join(', ');
    text += ' (consequences, not the cause)';
  }
  return text;
}

/** What to try when the root cause is a rank killed by a signal (Python: ranks.killed_hint). */
function killedHint(cause) {
  return `rank ${cause.rank} was killed by ${cause.error.type} from outside the job: check dmesg for the kernel's OOM killer `
    + "(dmesg | grep -i 'killed process') and who else stops processes here (a scheduler, a user); the other ranks' errors "
    + 'follow from its death';
}

const who = (row) => `host ${row.host || '?'}${row.addr ? ` at ${row.addr}` : ''}, pid ${row.pid ?? '?'}`;

function brief(err) {
  const kind = String(err.type || 'Error').split('.').pop();
  return err.frame ? `${kind} at ${err.frame}` : kind;
}

function short(err) {
  let message = String(err.message ?? '').split(/\s+/).filter(Boolean).join(' ');
  if (message.length > MESSAGE_CHARS) message = `${message.slice(0, MESSAGE_CHARS - 3)}...`;
  return message ? `${err.type || 'Error'}: ${message}` : String(err.type || 'Error');
}


/**
 * Whether a hello is a distributed launcher's (torchrun, python -m torch.distributed.run /
 * launch), whose job has not started until a rank says hello (bridge/ranks.py awaits_ranks).
 */
/** As bridge/ranks.py: no rank itself, and a launcher by machine.isLauncher (the one argv reading). */
function awaitsRanks(hello) {
  return (hello.world_size ?? null) === null && isLauncher(hello);
}

/** {pid: its dump_stacks answer} of every process that answered one (bridge/ranks.py). */
function processStacks(state) {
  const out = {};
  for (const p of state.procs.values()) if (p.pid !== null && typeof p.stacks === 'string') out[String(p.pid)] = p.stacks;
  return out;
}

module.exports = { processStacks, initial, observe, sender, table, rootCause, killedHint, errorBody, awaitsRanks, where, who };
