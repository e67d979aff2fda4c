'use strict';
/**
 * Why a distributed job hangs: the mirror of bridge/ranks_hang.py (pure; vectors/ranks.json
 * pins both). rendezvousWait: the launcher waits in its rendezvous for nodes that never
 * come; hungRank: the ranks wait in a collective for one that is elsewhere (from their
 * dump_stacks replies or faulthandler dumps, read by mainThreadFrames); liveCollective: the
 * same while the job is only stalled, from the heartbeats' idle stacks. The per-process
 * state these read is ranks.js's.
 */

const { awaitsRanks, where, who } = require('./ranks.js');

function option(argv, ...names) {
  for (let i = 0; i < argv.length; i += 1) {
    for (const name of names) {
      if (argv[i] === name && i + 1 < argv.length) return argv[i + 1];
      if (argv[i].startsWith(`${name}=`)) return argv[i].slice(name.length + 1);
    }
  }
  return null;
}

/**
 * The verdict for a job whose launcher waits in its rendezvous for nodes that never come
 * (bridge/ranks.py rendezvous_wait): null unless no rank said hello and the launcher's own
 * stack is in torch.distributed.elastic's rendezvous.
 */
function rendezvousWait(launcher, ranksSaidHello, waitedS, stacks) {
  if (ranksSaidHello || !awaitsRanks(launcher) || !String(stacks || '').includes('rendezvous')) return null;
  const argv = (launcher.argv || []).map(String);
  const nnodes = option(argv, '--nnodes') || '1';
  const needed = nnodes.split(':')[0];
  let endpoint = option(argv, '--rdzv-endpoint', '--rdzv_endpoint');
  if (endpoint === null) {
    endpoint = `${option(argv, '--master-addr', '--master_addr') || '127.0.0.1'}:${option(argv, '--master-port', '--master_port') || '29500'}`;
  }
  const backend = option(argv, '--rdzv-backend', '--rdzv_backend') || 'static';
  const host = launcher.host || '?';
  const waited = waitedS >= 10 ? `${waitedS.toFixed(0)} s` : `${waitedS.toFixed(1)} s`;
  return {
    kind: 'rendezvous_wait',
    summary: `torchrun on host ${host} waited ${waited} for nodes that never came: its ${backend} rendezvous at ${endpoint} needs ${needed} node(s) (--nnodes=${nnodes}) and only this one is known to have joined; no rank started`,
    hint: `start torchrun on the other node(s) with the same --rdzv-endpoint=${endpoint} and --rdzv-id, check that they can reach ${endpoint}, or lower --nnodes`,
    evidence: {
      endpoint, backend, nnodes, nnodes_expected: /^\d+$/.test(needed) ? Number(needed) : null,
      nnodes_joined: 1, waited_s: Math.round(waitedS * 10) / 10, host,
    },
  };
}

// --- the hung rank (bridge/ranks.py hung_rank) ---
const THREAD = /^Thread 0x[0-9a-f]+ "([^"]*)"/gm;
const FRAME = /^\s*File "([^"]+)", line (\d+), in (\S+)/gm;
const COLLECTIVE_FILE = 'torch/distributed/distributed_c10d.py';

// faulthandler's own format: "Current thread 0x... (most recent call first):" and
// '  File "x.py", line 3 in f', innermost first.
// "Stack": faulthandler.register(all_threads=False), the SIGUSR2 dump.
const FH_CURRENT = /^(?:Current thread 0x[0-9a-f]+|Stack) \(most recent call first\):/m;
const FH_THREAD = /^(?:Current thread 0x|Thread 0x|Stack \()/m;
const FH_FRAME = /^\s*File "([^"]+)", line (\d+) in (\S+)/gm;

/**
 * The main thread's frames (outermost first) from a worker's dump_stacks text, or from a
 * faulthandler dump (the fallback): its "Current thread" is the thread the signal ran on,
 * the main one, listed innermost first (as bridge/ranks.py).
 */
function mainThreadFrames(stacks) {
  const starts = [...stacks.matchAll(THREAD)].map((m) => [m.index, m[1]]);
  for (let i = 0; i < starts.length; i += 1) {
    if (starts[i][1] !== 'MainThread') continue;
    const end = i + 1 < starts.length ? starts[i + 1][0] : stacks.length;
    return [...stacks.slice(starts[i][0], end).matchAll(FRAME)].map((m) => ({ file: m[1], line: Number(m[2]), function: m[3] }));
  }
  const current = FH_CURRENT.exec(stacks);
  if (!current) return [];
  let block = stacks.slice(current.index + current[0].length);
  const following = FH_THREAD.exec(block);
  if (following) block = block.slice(0, following.index);
  block = block.split('\n\n')[0];
  return [...block.matchAll(FH_FRAME)].map((m) => ({ file: m[1], line: Number(m[2]), function: m[3] })).reverse();
}

function collective(frames) {
  const frame = frames.find((f) => String(f.file).replace(/\\/g, '/').endsWith(COLLECTIVE_FILE));
  return frame ? frame.function : null;
}

/** The frames (outermost first) of a heartbeat's main-thread stack (no thread header). */
function beatFrames(stack) {
  return [...stack.matchAll(FRAME)].map((m) => ({ file: m[1], line: Number(m[2]), function: m[3] }));
}

/** With live, from the ranks' last heartbeat stacks instead of their dump_stacks replies. */
function hungRank(state, live = false) {
  const field = live ? 'beat_stack' : 'stacks';
  const answered = [...state.procs.values()]
    .filter((p) => p.rank !== null && p.world_size !== null && p[field])
    .sort((a, b) => a.rank - b.rank);
  if (answered.length < 2) return null;
  const waiting = [];
  const away = [];
  for (const p of answered) {
    const frames = live ? beatFrames(p[field]) : mainThreadFrames(p[field]);
    if (!frames.length) continue; // a dump cut short, say: where this rank is is not known
    const op = collective(frames);
    (op ? waiting : away).push([p, frames, op]);
  }
  if (!waiting.length || !away.length) return null;
  const ops = [...new Set(waiting.map(([, , op]) => op))].sort();
  const missing = away.map(([p, frames]) => ({ rank: p.rank, host: p.host, pid: p.pid, frame: where(frames) }));
  const waiters = waiting.map(([p, frames, op]) => ({ rank: p.rank, host: p.host, pid: p.pid, collective: op, frame: where(frames) }));
  const first = away[0][0];
  let text = `rank ${first.rank} (${who(first)}) is not in the collective: it is at ${missing[0].frame || 'an unknown frame'}`;
  if (missing.length > 1) text += `; nor are rank(s) ${missing.slice(1).map((m) => m.rank).join(', ')}`;
  text += `; rank(s) ${waiters.map((w) => w.rank).join(', ')} wait in ${ops.join(' / ')} for it`;
  return {
    rank: first.rank, host: first.host, ...(first.addr ? { addr: first.addr } : {}), pid: first.pid,
    missing, waiting: waiters, summary: text,
    hint: `see why rank ${first.rank} is at ${missing[0].frame || 'an unknown frame'} and not in ${ops[0]}: every rank must reach the same collectives in the same order`,
  };
}

/** The live (stalled, before any deadline) form of hungRank: a diagnosis whose summary says
 * "waiting in all_reduce for rank 1 ..." (issue 12 item 12), or null (bridge/ranks.py). */
function liveCollective(state) {
  const stuck = hungRank(state, true);
  if (stuck === null) return null;
  const first = stuck.missing[0];
  const ops = [...new Set(stuck.waiting.map((w) => w.collective))].sort().join(' / ');
  const summary = `rank(s) ${stuck.waiting.map((w) => w.rank).join(', ')} waiting in ${ops} for rank `
    + `${stuck.rank} (${who(stuck)}), which is at ${first.frame || 'an unknown frame'}`;
  return { kind: 'collective_wait', summary, hint: stuck.hint, evidence: { frame: first.frame, hung_rank: stuck } };
}

module.exports = { rendezvousWait, hungRank, liveCollective, mainThreadFrames };
