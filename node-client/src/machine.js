'use strict';
/**
 * The job state machine: step(state, event) -> [state, actions]. Pure and I/O-free.
 *
 * A line-by-line port of bridge/machine.py (same names in camelCase for the functions, the
 * same JSON vocabulary for states, events and actions); vectors/machine.json holds the
 * trace tables both clients run, and docs/CLIENT.md documents the vocabulary. There is no
 * clock in here: every event carries its time `t` (seconds on the shell's monotonic clock)
 * and deadlines are judged only on "timer" events. Nothing here mutates its arguments.
 *
 * States: starting -> running <-> stalled -> ended.
 * Outcomes: succeeded | failed | crashed | hung | cancelled, decided in one place: outcome().
 *
 * Its length (about 490 lines) is bridge/machine.py's, for the same reason: one handler per
 * event over one state, pinned as a whole by vectors/machine.json.
 *
 * Events ({type, t} plus): hello {dump_signal, native_dump}, stage {event, name, depth?,
 * budget_s?}, progress, beat {work?} (work: the lead's heartbeat counted more backward()
 * calls: activity for the stall deadlines), error {fatal, kind, exit_code?}, bye {reason, exit_code?}, dumped,
 * signal_dumped (the lead's SIGUSR1 handler wrote its stacks: Python ran), snapshotted
 * (the hang evidence asked for by "snapshot" is collected), refused {reason}, no_worker
 * {reason} (a process said it cannot load the worker: the startup deadline is off),
 * cancel {grace?}, user_signal {signal} (the user sent SIGINT/SIGTERM/SIGHUP outside cancel():
 * no escalation, but the job is cancelled however it then ends; ignored after the exit or
 * during another ending), exit {code, signal}, drained, timer, lead {present} (the process that spoke
 * for the job left while the job goes on: another one speaks for it now, or none does and
 * no heartbeat is watched until one says hello; the leaver's bye and open stages are
 * forgotten and the new lead's clocks start now), looked {reason: startup | heartbeat |
 * stall, working, since?} (the shell's answer to a look; machine.py documents each).
 * Actions ({do} plus): state {state}, snapshot {reason} (collect hang evidence now, then
 * send "snapshotted"; SIGTERM waits for it, up to snapshot_timeout), dump_stacks, cancel,
 * signal {signal: SIGUSR1 | SIGUSR2 (the process only) | SIGTERM | SIGKILL (the whole tree);
 * SIGUSR2 only when neither dump_stacks nor SIGUSR1 was answered: no Python runs, so
 * faulthandler's C handler reads the main thread's frames without racing anything}, drain,
 * finish {outcome}.
 */

// Seconds; null disables a deadline. launch()'s `timeouts` override these.
const DEFAULTS = Object.freeze({
  startup_timeout: 120.0, // spawn -> hello
  heartbeat_timeout: 30.0, // last worker message -> hung, while the process lives
  stall_timeout: null, // last progress/stage change -> hung (off unless asked for)
  stalled_after: 30.0, // last progress/stage change -> state "stalled" (reversible)
  kill_grace: 5.0, // SIGTERM -> SIGKILL
  cancel_grace: 5.0, // in-band cancel -> SIGTERM, unless the cancel event says
  dump_timeout: 1.0, // dump_stacks command -> give up on the reply
  signal_dump_wait: 0.2, // SIGUSR1 -> SIGTERM: faulthandler writes synchronously
  snapshot_timeout: 2.0, // hang -> SIGTERM at the latest while evidence is collected
  drain_timeout: 1.0, // exit -> outcome, at the latest, if "drained" never comes
});

// The deadlines null may switch off; the other settings are always a number of seconds.
const OPTIONAL = Object.freeze(['startup_timeout', 'heartbeat_timeout', 'stall_timeout', 'stalled_after']);

/**
 * The first bad setting in `config` as [key, problem], or null when all are good; problem:
 * unknown, type (not a number of seconds, or null where that is not allowed), not_finite,
 * negative. Mirrors bridge/machine.py config_problem; vectors/config.json pins both.
 */
function configProblem(config) {
  for (const key of Object.keys(config).sort()) {
    if (!(key in DEFAULTS)) return [key, 'unknown'];
  }
  for (const key of Object.keys(DEFAULTS)) {
    if (!(key in config)) continue;
    const value = config[key];
    if (value === null && OPTIONAL.includes(key)) continue;
    if (typeof value !== 'number') return [key, 'type'];
    if (!Number.isFinite(value)) return [key, 'not_finite'];
    if (value < 0) return [key, 'negative'];
  }
  return null;
}

const HANG_REASONS = Object.freeze(['startup', 'stage_budget', 'stall', 'heartbeat', 'after_bye']);
// The look at the startup deadline (bridge/machine.py LOOK_S, LOOK_TIMEOUT_S).
const LOOK_S = 1.0;
const LOOK_TIMEOUT_S = 5.0;
const LOOKED_AT = ['startup', 'heartbeat', 'stall']; // the deadlines that look before they judge

/** The state of a job spawned at time t. */
function initial(config = null, t = 0.0) {
  const unknown = Object.keys(config || {}).filter((k) => !(k in DEFAULTS)).sort();
  if (unknown.length) throw new RangeError(`unknown machine config keys: ${JSON.stringify(unknown)}`);
  return {
    state: 'starting',
    outcome: null,
    config: { ...DEFAULTS, ...(config || {}) },
    t0: t,
    hello: false,
    dump_signal: false,
    native_dump: false,
    answered: false, // a dump (in-band or SIGUSR1) was answered: Python runs
    last_msg_t: null, // beacon: last authentic worker message
    last_activity_t: null, // work: last progress or stage change; null = stall unarmed
    progress_seen: false, // a progress source exists: output no longer counts as work
    stages: [], // open stages, outermost first: {name, t, budget_s}
    error: null, // the last fatal error: {kind, exit_code}
    bye: null, // {reason, exit_code}
    exit: null, // {code, signal}
    hang: null, // {reason, t, stage}
    snapshot: null, // null | "pending" | "done" | "timed_out": hang evidence
    ending: null, // {reason: hang|cancel|refused, step, deadline}
    drain_deadline: null,
    refused: null,
    no_worker: null, // why no hello will come (the startup deadline is off)
    startup_from: t, // the startup deadline runs from here (a look that saw work moves it)
    look: null, // {reason, deadline}: a look asked for and not answered yet
    loaded_t: null, // the worker loaded (stage box) before any hello
    awaiting_ranks: false, // only a distributed launcher said hello: still starting
    lead_gone: false, // the lead left and no other process speaks for the job
    user_signal: null, // the signal the user sent outside cancel(): a cancel
  };
}

/**
 * A copy the handlers may change without touching `state`. The state is two levels deep
 * (records and arrays of flat records) and config is never written, so this is a full copy
 * (bridge/machine.py _copy): 2.0 us a step where structuredClone took 4.4, a tenth of the
 * client's CPU time with 200 jobs.
 */
function copyState(state) {
  const out = { ...state };
  for (const [key, value] of Object.entries(out)) {
    if (Array.isArray(value)) out[key] = value.map((v) => (isRecord(v) ? { ...v } : v));
    else if (isRecord(value) && key !== 'config') out[key] = { ...value };
  }
  return out;
}

const isRecord = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Apply one event. Returns [newState, actions] with the actions for the shell, in order. */
function step(state, event) {
  const s = copyState(state);
  const actions = [];
  if (s.state === 'ended') return [s, actions];
  const t = Number(event.t);
  const handler = HANDLERS[event.type];
  if (handler === undefined) throw new RangeError(`unknown event type ${JSON.stringify(event.type)}`);
  handler(s, event, t, actions);
  return [s, actions];
}

/**
 * Whether a live diagnosis is wanted now: the job is stalled and no verdict is being made (a
 * hang's ending signals the tree: a look then sees it half gone), nor has it exited.
 */
function liveLookDue(state) {
  return state.state === 'stalled' && state.ending === null && state.exit === null;
}

// The drain after the exit (drainWait), as bridge/machine.py; vectors/drain.json pins both.
const PIPE_LINGER_S = 0.2;
const DRAIN_QUIET_S = 0.005;
const DRAIN_NOTICE_WAIT_S = 0.025;

/**
 * Seconds until the drain may end, 0 when it has: the pipes are done (closed, or the linger is
 * over) and the socket holds nothing more from the lead (bye, every connection's end notice, or
 * quiet since the later of its last message and the exit). As bridge/machine.py drain_wait.
 */
function drainWait({ pipes_open, since_drain_s, bye, connections_ended, notice_due, quiet_s }) {
  const waits = pipes_open ? [PIPE_LINGER_S - since_drain_s] : [];
  if (!(bye || connections_ended)) waits.push((notice_due ? DRAIN_NOTICE_WAIT_S : DRAIN_QUIET_S) - quiet_s);
  return waits.length ? Math.round(Math.max(0, ...waits) * 1e6) / 1e6 : 0;
}

/** The earliest time at which a "timer" event may change something; null if none. */
function nextDeadline(state) {
  if (state.state === 'ended') return null;
  if (state.exit !== null) return state.drain_deadline;
  if (state.ending !== null) return state.ending.deadline;
  const deadlines = watchDeadlines(state).map(([, d]) => d);
  return deadlines.length ? Math.min(...deadlines) : null;
}

// --- event handlers -------------------------------------------------------------------
const get = (e, k) => (e[k] === undefined ? null : e[k]);

function onHello(s, e, t, actions) {
  s.hello = true;
  s.lead_gone = false;
  s.dump_signal = Boolean(e.dump_signal);
  s.native_dump = Boolean(e.native_dump);
  s.last_msg_t = t;
  // A distributed launcher's hello (torchrun) does not end start-up: its ranks have not
  // started, and may never (a rendezvous waiting for nodes). The first rank's hello does.
  s.awaiting_ranks = Boolean(e.awaits_ranks);
  const { look } = s;
  if (look && (look.reason === 'heartbeat' || !s.awaiting_ranks)) s.look = null; // it spoke, or started
  if (s.awaiting_ranks) return;
  if (s.state === 'starting' && s.ending === null) setState(s, 'running', actions);
}

function onStage(s, e, t, actions) {
  beacon(s, t);
  const depth = get(e, 'depth');
  if (e.event === 'begin') {
    s.stages.push({ name: e.name, t, budget_s: get(e, 'budget_s'), depth });
  } else {
    // The innermost open stage with this name (and depth, when given) closes, and with it
    // every stage opened inside it.
    for (let i = s.stages.length - 1; i >= 0; i--) {
      const st = s.stages[i];
      const stDepth = st.depth === undefined ? null : st.depth;
      if (st.name === e.name && (depth === null || stDepth === null || stDepth === depth)) {
        s.stages.splice(i);
        break;
      }
    }
  }
  activity(s, t, actions);
}

function onProgress(s, e, t, actions) {
  beacon(s, t);
  s.progress_seen = true;
  activity(s, t, actions);
}

// Issue 12: a script with no progress source that prints a line every few seconds is
// working, not stalled. Output never arms the stall deadlines and is not a beacon message.
function onOutput(s, e, t, actions) {
  if (!s.progress_seen && armed(s)) activity(s, t, actions);
}

/** The stall deadlines run: a stage or progress armed them, and no ending or bye came. */
function armed(s) {
  return s.last_activity_t !== null && s.bye === null && s.ending === null;
}

function onBeat(s, e, t, actions) {
  beacon(s, t);
  if (e.work && armed(s)) activity(s, t, actions); // training work the script reports to nobody
}

function onError(s, e, t) {
  beacon(s, t);
  if (e.fatal) s.error = { kind: get(e, 'kind'), exit_code: get(e, 'exit_code') };
}

function onBye(s, e, t) {
  beacon(s, t);
  s.bye = { reason: get(e, 'reason'), exit_code: get(e, 'exit_code') };
  const ending = s.ending;
  if (ending !== null && ending.step === 'cancel') {
    // The script heard the cancel and is in Python's shutdown (machine.py _on_bye): its
    // teardown gets cancel_grace of its own before SIGTERM (a shorter cancel grace was for
    // stopping the script, which it did).
    Object.assign(ending, { step: 'exiting', deadline: Math.max(ending.deadline, t + s.config.cancel_grace) });
  }
}

/** machine.py _on_paused: the supervisor's own pause is not the worker's silence. */
function onPaused(s, e) {
  const gap = get(e, 'paused_s');
  if (s.exit !== null || s.ending !== null || !gap || gap <= 0) return;
  for (const key of ['t0', 'startup_from', 'loaded_t', 'last_msg_t', 'last_activity_t']) if (s[key] !== null && s[key] !== undefined) s[key] += gap;
  if (s.look) s.look.deadline += gap;
  for (const st of s.stages) st.t += gap;
}

function onLead(s, e, t, actions) {
  s.bye = null;
  s.stages = []; // the leaver's open stages (and their budgets) went with it
  s.lead_gone = !e.present;
  if (!s.lead_gone) {
    s.last_msg_t = t;
    if (s.look && (s.look.reason === 'heartbeat' || s.look.reason === 'stall')) s.look = null; // a look at the leaver
    if (s.last_activity_t !== null) {
      s.last_activity_t = t;
      if (s.state === 'stalled' && s.ending === null) setState(s, 'running', actions);
    }
  }
}

function onDumped(s, e, t, actions) {
  s.answered = true;
  const { ending } = s;
  if (ending !== null && ending.step === 'dump' && s.exit === null) afterDump(s, t, actions);
}

function onSignalDumped(s) {
  s.answered = true;
}

function onSnapshotted(s, e, t, actions) {
  if (s.snapshot === 'pending') {
    s.snapshot = 'done';
    const { ending } = s;
    if (ending !== null && ending.step === 'snapshot' && s.exit === null) terminate(s, t, actions);
  }
}

// The worker was imported (its stage box exists) but has not said hello: the heartbeat
// deadline applies from then (issue 12 item 4).
function onWorkerLoaded(s, e, t) {
  if (!s.hello && (s.loaded_t ?? null) === null) {
    s.loaded_t = t;
    s.dump_signal = Boolean(get(e, 'dump_signal'));
    s.native_dump = Boolean(get(e, 'native_dump'));
  }
}

function onLooked(s, e, t, actions) {
  const { look } = s;
  if (look === null || look === undefined || look.reason !== e.reason || s.exit !== null) return;
  s.look = null;
  const { reason } = look;
  if (s.ending !== null || (reason === 'startup' && s.hello)) return; // a hello (or another ending) came meanwhile
  let since = typeof e.since === 'number' ? e.since : null;
  if (reason === 'stall' && since !== null && s.config.stall_timeout !== null && since + s.config.stall_timeout <= t) {
    since = null; // it last moved a whole stall_timeout ago: no evidence of now
  }
  if (!e.working || (reason === 'stall' && since === null)) {
    hang(s, reason, t, actions);
    return;
  }
  if (reason === 'stall') {
    // Activity at `since`, in the past: running again only if that is recent enough
    s.last_activity_t = Math.max(s.last_activity_t ?? since, since);
    const after = s.config.stalled_after;
    if (s.state === 'stalled' && (after === null || s.last_activity_t + after > t)) setState(s, 'running', actions);
  } else if (reason === 'startup') s.startup_from = t;
  else if (s.hello) s.last_msg_t = t; // the heartbeat deadline runs again from now
  else if ((s.loaded_t ?? null) !== null) s.loaded_t = t;
}

function onNoWorker(s, e) {
  if (s.no_worker === null) s.no_worker = e.reason || 'the worker cannot be loaded';
}

function onRefused(s, e, t, actions) {
  s.refused = e.reason || 'unsupported protocol version';
  if (s.ending === null && s.exit === null) {
    s.ending = { reason: 'refused', step: null, deadline: null };
    terminate(s, t, actions);
  }
}

function onCancelRefused(s, e, t, actions) {
  const { ending } = s;
  if (ending !== null && ending.reason === 'cancel' && ending.step === 'cancel') terminate(s, t, actions);
}

function onCancel(s, e, t, actions) {
  if (s.ending !== null || s.exit !== null) return; // already ending: that sequence finishes the job
  let grace = get(e, 'grace');
  grace = grace === null ? s.config.cancel_grace : grace;
  s.ending = { reason: 'cancel', step: null, deadline: null };
  if (s.hello && grace > 0) {
    Object.assign(s.ending, { step: 'cancel', deadline: t + grace });
    actions.push({ do: 'cancel' });
  } else {
    terminate(s, t, actions);
  }
}

function onUserSignal(s, e) {
  if (s.exit === null && s.ending === null && (s.user_signal ?? null) === null) s.user_signal = String(get(e, 'signal') || 'SIGTERM');
}

function onExit(s, e, t, actions) {
  if (s.exit !== null) return;
  s.exit = { code: get(e, 'code'), signal: get(e, 'signal') };
  s.drain_deadline = t + (s.config.drain_timeout || 0.0);
  actions.push({ do: 'drain' });
}

function onDrained(s, e, t, actions) {
  if (s.exit !== null) finish(s, actions);
}

function onTimer(s, e, t, actions) {
  if (s.exit !== null) {
    if (t >= s.drain_deadline) finish(s, actions);
    return;
  }
  const { ending } = s;
  if (ending !== null) {
    if (ending.deadline !== null && t >= ending.deadline) advanceEnding(s, t, actions);
    return;
  }
  for (const [what, deadline] of watchDeadlines(s)) {
    if (t < deadline) continue;
    if (what === 'stalled') {
      setState(s, 'stalled', actions);
      continue;
    }
    if (LOOKED_AT.includes(what) && s.look) continue; // the other look's answer comes first
    if (LOOKED_AT.includes(what) && (what !== 'startup' || !s.hello)) {
      // Evidence first (look.js): a tree with no Python yet, or one that works, is starting; a
      // beacon silent because its machine gives it no CPU is starved. A launcher's hello keeps
      // the plain startup deadline (its rendezvous).
      s.look = { reason: what, deadline: t + LOOK_TIMEOUT_S };
      actions.push({ do: 'look', reason: what });
      return;
    }
    let reason = what;
    if (what === 'look') {
      reason = s.look.reason;
      s.look = null;
    }
    hang(s, reason, t, actions);
    return;
  }
}

const HANDLERS = {
  hello: onHello, stage: onStage, progress: onProgress, beat: onBeat, paused: onPaused, output: onOutput, error: onError,
  bye: onBye, lead: onLead, dumped: onDumped, signal_dumped: onSignalDumped, snapshotted: onSnapshotted, refused: onRefused, no_worker: onNoWorker, looked: onLooked, worker_loaded: onWorkerLoaded, cancel: onCancel, cancel_refused: onCancelRefused, user_signal: onUserSignal, exit: onExit,
  drained: onDrained, timer: onTimer,
};

// --- helpers --------------------------------------------------------------------------
function setState(s, name, actions) {
  if (s.state !== name) {
    s.state = name;
    actions.push({ do: 'state', state: name });
  }
}

function beacon(s, t) {
  s.last_msg_t = t;
  if (s.look && s.look.reason === 'heartbeat') s.look = null; // the beacon spoke: its silence is over
}

function activity(s, t, actions) {
  // Progress or a stage change: work moves, so a stalled job is running again.
  s.last_activity_t = t;
  if (s.look && s.look.reason === 'stall') s.look = null; // work moved while the shell looked
  if (s.state === 'stalled' && s.ending === null) setState(s, 'running', actions);
}

/** The deadlines watched while the job runs normally, in the order they are judged. */
function watchDeadlines(s) {
  const c = s.config;
  const out = [];
  if (s.exit !== null || s.ending !== null || s.state === 'ended') return out;
  if (!s.hello || s.awaiting_ranks) {
    if (c.startup_timeout !== null && s.no_worker === null) out.push(orLook(s, 'startup', s.startup_from + c.startup_timeout));
    // (a launcher's hello while its ranks start ends this: the launcher beats)
    if (!s.hello && (s.loaded_t ?? null) !== null && c.heartbeat_timeout !== null) out.push(orLook(s, 'heartbeat', s.loaded_t + c.heartbeat_timeout));
    return out;
  }
  if (s.lead_gone) return out; // nobody speaks for the job: its exit decides
  const budgets = s.stages.filter((st) => st.budget_s !== null && st.budget_s !== undefined)
    .map((st) => st.t + st.budget_s);
  if (budgets.length) out.push(['stage_budget', Math.min(...budgets)]);
  if (c.heartbeat_timeout !== null && s.last_msg_t !== null) {
    const reason = s.bye !== null ? 'after_bye' : 'heartbeat';
    out.push(orLook(s, reason, s.last_msg_t + c.heartbeat_timeout));
  }
  if (s.last_activity_t !== null && s.bye === null) {
    if (c.stalled_after !== null && s.state === 'running') out.push(['stalled', s.last_activity_t + c.stalled_after]);
    if (c.stall_timeout !== null) out.push(orLook(s, 'stall', s.last_activity_t + c.stall_timeout));
  }
  return out;
}

/** A watched deadline, or the deadline of the look it is waiting on. */
function orLook(s, reason, deadline) {
  return s.look && s.look.reason === reason ? ['look', s.look.deadline] : [reason, deadline];
}

function hang(s, reason, t, actions) {
  const stage = s.stages.length ? s.stages[s.stages.length - 1].name : null;
  s.hang = { reason, t, stage };
  s.ending = { reason: 'hang', step: null, deadline: null };
  s.snapshot = 'pending';
  actions.push({ do: 'snapshot', reason });
  // In-band dump needs a live beacon; a silent one (GIL held, say) will not answer.
  if (s.hello && reason !== 'heartbeat' && reason !== 'after_bye') {
    Object.assign(s.ending, { step: 'dump', deadline: t + s.config.dump_timeout });
    actions.push({ do: 'dump_stacks' });
  } else {
    afterDump(s, t, actions);
  }
}

function afterDump(s, t, actions) {
  if (s.dump_signal) {
    Object.assign(s.ending, { step: 'signal_dump', deadline: t + s.config.signal_dump_wait });
    actions.push({ do: 'signal', signal: 'SIGUSR1' });
  } else {
    terminate(s, t, actions);
  }
}

function terminate(s, t, actions) {
  // The evidence of a hang is read from the live process: do not kill it mid-snapshot.
  if (s.snapshot === 'pending') {
    const limit = s.hang.t + s.config.snapshot_timeout;
    if (t < limit) {
      Object.assign(s.ending, { step: 'snapshot', deadline: limit });
      return;
    }
  }
  Object.assign(s.ending, { step: 'term', deadline: t + s.config.kill_grace });
  actions.push({ do: 'signal', signal: 'SIGTERM' });
}

function advanceEnding(s, t, actions) {
  const stepName = s.ending.step;
  if (stepName === 'dump') {
    afterDump(s, t, actions);
  } else if (stepName === 'signal_dump' && s.native_dump && !s.answered) {
    // Neither the beacon nor the main thread ran Python: native code holds the GIL.
    Object.assign(s.ending, { step: 'native_dump', deadline: t + s.config.signal_dump_wait });
    actions.push({ do: 'signal', signal: 'SIGUSR2' });
  } else if (stepName === 'signal_dump' || stepName === 'native_dump' || stepName === 'cancel' || stepName === 'exiting') {
    terminate(s, t, actions);
  } else if (stepName === 'snapshot') {
    s.snapshot = 'timed_out';
    terminate(s, t, actions);
  } else if (stepName === 'term') {
    Object.assign(s.ending, { step: 'kill', deadline: null }); // the OS will report the exit
    actions.push({ do: 'signal', signal: 'SIGKILL' });
  }
}

function finish(s, actions) {
  s.outcome = outcome(s);
  s.ending = s.ending && { ...s.ending, deadline: null };
  setState(s, 'ended', actions);
  actions.push({ do: 'finish', outcome: s.outcome });
}

// The launchers whose ranks are their own children; a hello says what a process runs in argv.
const LAUNCHER_SCRIPTS = ['torchrun'];
const LAUNCHER_MODULES = ['torch.distributed.run', 'torch.distributed.launch'];
const LAUNCHER_PATHS = ['torch/distributed/run.py', 'torch/distributed/launch.py'];
const OPTIONS_WITH_VALUE = ['-W', '-X', '-Q'];
const basename = (p) => p.replace(/\\/g, '/').split('/').pop();

/**
 * Whether a hello's process runs a distributed launcher (torchrun, python -m
 * torch.distributed.run/launch); only the interpreter's own arguments count. Mirrors
 * bridge/machine.py is_launcher; vectors/lead.json pins both.
 */
function isLauncher(hello) {
  const argv = hello.argv;
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string')) return false;
  if (LAUNCHER_SCRIPTS.includes(basename(argv[0]))) return true;
  let i = 1;
  while (i < argv.length) {
    const arg = argv[i];
    if (arg === '-m') return i + 1 < argv.length && LAUNCHER_MODULES.includes(argv[i + 1]);
    if (arg === '-c' || arg === '-') return false;
    if (OPTIONS_WITH_VALUE.includes(arg)) { i += 2; continue; }
    if (arg.startsWith('-')) { i += 1; continue; }
    const p = arg.replace(/\\/g, '/');
    return LAUNCHER_SCRIPTS.includes(basename(p)) || LAUNCHER_PATHS.some((end) => p.endsWith(end));
  }
  return false;
}

const isRank0 = (h) => h.rank === 0 && h.world_size !== null && h.world_size !== undefined;
const pidOf = (h) => (h.pid === undefined ? null : h.pid);
const ppidOf = (h) => (h.ppid === undefined ? null : h.ppid);

/**
 * Which of a job's worker processes speaks for it: its pid, or null when none is left
 * (docs/CLIENT.md, "The lead process"); mirrors bridge/machine.py choose_lead, pinned by
 * vectors/lead.json. `present`: the hellos of the processes that said hello and have not
 * left, in arrival order. The launched process leads unless it is a launcher and one of its
 * own children is distributed rank 0; a launched process without a worker is stood in for
 * by the top workers (rank 0 if they are all ranks of one parent, else the first).
 * `launchedLoaded`: the launched process has loaded the worker (its stage box exists) but its
 * hello is not read yet; then nobody stands in for it (null), since a child it started can be
 * read first.
 */
function chooseLead(present, launchedPid, launchedLoaded = false) {
  const byPid = new Map(present.map((h) => [pidOf(h), h]));
  let top = launchedPid !== null && launchedPid !== undefined ? byPid.get(launchedPid) : undefined;
  if (top === undefined && launchedLoaded) return null;
  if (top === undefined) {
    const roots = present.filter((h) => !byPid.has(ppidOf(h)));
    if (roots.length === 0) return null;
    const parents = new Set(roots.map(ppidOf));
    if (parents.size === 1 && roots.every((h) => h.world_size !== null && h.world_size !== undefined)) {
      const rank0 = roots.find(isRank0);
      if (rank0) return pidOf(rank0);
    }
    [top] = roots;
  }
  if (isLauncher(top)) {
    const rank0 = present.find((h) => ppidOf(h) === pidOf(top) && isRank0(h));
    if (rank0) return pidOf(rank0);
  }
  return pidOf(top);
}

/** The one place that decides how a job ended (docs/CLIENT.md, "Outcomes"). */
function outcome(s) {
  const { ending, error } = s;
  if (ending !== null && ending.reason === 'cancel') return 'cancelled';
  if (ending !== null && ending.reason === 'hang') return 'hung';
  if ((s.user_signal ?? null) !== null) return 'cancelled'; // the user's own signal stopped it
  if (s.refused !== null) return 'failed';
  if (error !== null && !(error.kind === 'system_exit' && !error.exit_code)) {
    return 'failed'; // a fatal error is the cause, whatever the exit code says
  }
  const exit = s.exit || {};
  if (exit.signal) return 'crashed';
  if (exit.code === 0) return 'succeeded';
  if (s.bye !== null || error !== null) return 'failed'; // sys.exit(n): the worker said goodbye with a code
  if (s.hello) return 'crashed'; // a worker that said hello ended with no last words: os._exit(n)
  return 'failed'; // a plain command's non-zero exit
}

module.exports = {
  DEFAULTS, OPTIONAL, configProblem, HANG_REASONS, initial, step, nextDeadline, liveLookDue, outcome, chooseLead, isLauncher,
  drainWait, PIPE_LINGER_S, LOOK_S, LOOK_TIMEOUT_S, LOOKED_AT,
};
