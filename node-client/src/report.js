'use strict';
/**
 * The final report of a job: the JSON contract of the CLI and the API
 * (docs/report.schema.json). A port of bridge/report.py: the same fields, names and values.
 *
 * buildReport(facts, files) turns a job's facts record (src/job_facts.js) and what its files
 * said (readFiles: the crash file's text and the stage box, read by the job's shell when the
 * job ends) into a JSON-ready object, asking diagnosis.js why it ended. It is pure: values in,
 * values out, no I/O and no clock; vectors/report.json pins it for both clients. Its rooms:
 * src/report_text.js (summary, logFooter, toJSON: the report in words) and src/report_files.js
 * (readFiles and the crash file's other readers: the only I/O); their names are exported here
 * too. The Python twins are bridge/report*.py.
 *
 * Stable names (docs/CLIENT.md, "The shell", Report): outcome, exit_code, signal, stage, stages,
 * progress, error, diagnosis, stacks, log_tail, duration_s, pid. Everything else is an extra.
 */

const { diagnoseEnd, diagnoseHang, tracebackInText, stageAtEnd } = require('./diagnosis.js');
const { stripAnsi } = require('./diagnosis_stack.js');
const ranks = require('./ranks.js');
const ranksHang = require('./ranks_hang.js');
// The report's words and its files have rooms of their own; their names stay importable here.
const { readFiles, readCrashFile, crashFileSize, signalDumpedPids, signalDumpedIn } = require('./report_files.js');
const {
  logFooter, losses, reason, summary, toJSON,
} = require('./report_text.js');

const REPORT_VERSION = 1;

const round = (x, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

/** BigInt -> Number where exact, else its decimal string: JSON has no 64-bit integers. */
function plain(value) {
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = plain(v);
    return out;
  }
  return value;
}

/**
 * Whether no Python ran in the job's process when it was asked for its stacks: it got SIGUSR2
 * and its SIGUSR1 dump never came. A dump that came late still proves its main thread ran
 * Python: a process starved of CPU, not one whose GIL native code holds (bridge/report.py).
 */
function pythonSilent(facts, crashText) {
  if (!facts.signals_sent.includes('SIGUSR2')) return false;
  return !signalDumpedIn(crashText).has(facts.lead_pid ?? facts.pid);
}

/** A bug in trainbridge ended the job (Job.failInternal): say so, not the job's fault. */
function internalDiagnosis(error) {
  return {
    kind: 'internal',
    summary: `${error.message} (${error.type}); the job was stopped`,
    hint: 'this is a bug in trainbridge, not in the job: please report it with this report (error.traceback); other jobs of this client were not affected',
    evidence: { traceback: error.traceback.slice(-4000) },
  };
}

/** The report of a finished job from its facts record (machine and ended set) and readFiles()'s answer. */
function buildReport(facts, files) {
  const m = facts.machine;
  const { outcome } = m;
  const { pid } = facts;
  const tail = facts.tail.map((line) => line.text);
  const crashText = files.crash_text ?? null;
  const stacks = joinStacks(facts.stacks, crashText, facts.fatal_lines);
  let error = errorOf(facts.error, tail);
  const cancel = cancelOf(outcome, facts.cancel, error);
  if (cancel && cancel.traceback !== null) error = null; // the user's own stop is not an error
  if (m.refused && error === null) {
    error = { type: 'UnsupportedProtocol', message: `the client refused the worker: ${m.refused}`, traceback: '', kind: 'internal' };
  }
  const [rows, cause, causeError] = ranksOf(facts);
  if (causeError !== null && outcome === 'failed') error = errorOf(causeError, tail); // the rank that failed first
  let stage = stageAtEnd(facts.stages, facts.error);
  const stages = facts.stages.map((s) => ({ name: s.name, status: s.status, duration_s: s.duration_s, depth: s.depth }));
  if (facts.bye === null) { // no last words: the stage box may know stages the messages missed
    const boxed = files.stage_box ?? null; // the lead's, or with no hello yet the launched one's
    if (boxed && boxed.length) {
      stage = boxed[boxed.length - 1];
      stages.push(...boxedOnly(stages, boxed));
    }
  }
  const { hang } = m;
  const factsEnd = {
    outcome, exit_code: facts.exit_code, signal: facts.exit_signal, error: facts.error,
    saw_bye: facts.bye !== null, crash_text: crashText, log_tail: tail, stage, pid,
    oom_killed: facts.oom_killed, oom_kills: facts.oom_kills ?? null, hang_reason: hang && hang.reason,
    heartbeat_stack: (facts.heartbeat || {}).stack ?? null,
  };
  if (causeError !== null && outcome === 'failed') {
    factsEnd.error = causeError;
    factsEnd.stage = causeError.stage || stage;
  }
  let [diagnosis, diagnosisError] = diagnose(outcome, factsEnd, facts, m, stacks, stage, pid, crashText);
  if (cause !== null && outcome === 'failed' && diagnosis) {
    diagnosis = { ...diagnosis, summary: cause.summary };
    // a rank killed, with no error of its own (ranks.js rootCause)
    if (cause.error.source === 'signal') Object.assign(diagnosis, { kind: 'killed', hint: ranks.killedHint(cause) });
  }
  const waiting = rendezvousOf(m, facts, outcome, stacks);
  if (waiting !== null) diagnosis = waiting;
  const stuck = outcome === 'hung' && facts.ranks ? ranksHang.hungRank(facts.ranks) : null;
  if (stuck !== null) {
    diagnosis = {
      kind: 'collective_wait', summary: stuck.summary, hint: stuck.hint,
      evidence: { ...((diagnosis && diagnosis.evidence) || {}), hung_rank: stuck },
    };
  }
  if (facts.internal_error) diagnosis = internalDiagnosis(facts.internal_error);
  const hellos = Object.keys(facts.hellos);
  const report = {
    outcome,
    exit_code: facts.exit_code,
    signal: facts.exit_signal,
    stage,
    stages,
    progress: facts.progress,
    health: facts.health.entries.map((entry) => ({ ...entry })),
    error,
    diagnosis,
    stacks,
    log_tail: tail,
    duration_s: round(facts.ended - facts.started),
    pid,
    // extras
    report_version: REPORT_VERSION,
    job_id: facts.id,
    command: [...facts.command],
    started_at: iso(facts.started_wall),
    // as diagnoseHang read them: the idle time the machine measured, the last heartbeat's stack
    hang: hang && {
      reason: hang.reason, stage: hang.stage, after_s: round(hang.t - facts.started),
      idle_s: hangIdle(m, facts.heartbeat || {}), stack: (facts.heartbeat || {}).stack ?? null,
    },
    signals_sent: [...facts.signals_sent],
    environment: environment(facts.hellos),
    worker: {
      hello: hellos.length > 0, bye: facts.bye, lead_pid: facts.lead_pid, leads: [...facts.leads], ranks: hellos.map(Number).sort((a, b) => a - b),
      dump_signal: facts.dump_pids.length > 0, off: m.no_worker ?? null,
    },
    output: { lines: { ...facts.lines }, bytes: { ...facts.bytes } },
    protocol: { rejected: { ...facts.rejected }, lost: facts.lost, foreign_hello: facts.foreign_hellos, unrouted: facts.unrouted, undelivered: { ...facts.undelivered }, unsent: Number(files.unsent || 0) },
    leftovers: [...facts.leftovers],
    stages_dropped: facts.stages_dropped,
    cancel,
    log_path: facts.log_path,
    log_error: facts.log_error ?? null,
    dropped: droppedTotal(Object.values(facts.dropped)),
    artifacts: (facts.artifacts || []).map((a) => ({ ...a })),
    evidence: facts.snapshot,
    ranks: rows,
    root_cause: cause,
  };
  if (diagnosisError) report.diagnosis_error = diagnosisError;
  report.summary = summary(report);
  report.reason = reason(report);
  return plain(report);
}

/** rendezvous_wait when the start-up deadline passed with only a launcher's hello (bridge/report.py). */
function rendezvousOf(m, facts, outcome, stacks) {
  const { hang } = m;
  const hellos = Object.values(facts.hellos);
  if (outcome !== 'hung' || !hang || hang.reason !== 'startup' || !hellos.length) return null;
  const launcher = hellos.find((h) => ranks.awaitsRanks(h));
  if (!launcher) return null;
  const anyRank = hellos.some((h) => (h.world_size ?? null) !== null);
  return ranksHang.rendezvousWait(launcher, anyRank, hang.t - facts.started, stacks);
}

/**
 * What the job's worker processes dropped, per kind, summed over the processes (each reports
 * its own running totals in heartbeats and, when not zero, in its bye); bridge/report.py's.
 */
function droppedTotal(counts) {
  const total = {};
  for (const perProcess of counts) {
    for (const [kind, count] of Object.entries(perProcess)) {
      if (typeof count === 'number' || typeof count === 'bigint') total[kind] = (total[kind] || 0) + Number(count);
    }
  }
  return total;
}

/**
 * The per-process rows, and for a distributed job (two ranks or more) the root cause and
 * its rank's own error body (null when torchrun's error file is all there is), as
 * bridge/report.py's _ranks().
 */
function ranksOf(facts) {
  if (!facts.ranks) return [[], null, null];
  const rows = ranks.table(facts.ranks);
  if (rows.filter((r) => r.role === 'rank').length < 2) return [rows, null, null];
  const cause = ranks.rootCause(rows);
  return [rows, cause, ranks.errorBody(facts.ranks, cause)];
}

/**
 * What the job ran on, from rank 0's hello (the lowest rank's), or null when no worker said
 * hello; fields an older worker does not send are null (bridge/report.py's environment()).
 */
function environment(hellos) {
  const keys = Object.keys(hellos);
  if (!keys.length) return null;
  const hello = hellos[String(Math.min(...keys.map(Number)))];
  const map = (value) => (value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {});
  const python = map(hello.python);
  const encoding = map(hello.encoding);
  const stdout = map(hello.stdout);
  return {
    host: hello.host ?? null,
    platform: hello.platform ?? null,
    python: python.version ?? null,
    python_executable: python.executable ?? null,
    venv: python.venv ?? null,
    cpu_count: hello.cpu_count ?? null,
    torch: map(hello.packages).torch ?? null,
    gpu_driver: map(hello.nvidia).driver ?? null,
    cuda_visible_devices: map(hello.env).CUDA_VISIBLE_DEVICES ?? null,
    stdout_encoding: encoding.stdout ?? null,
    locale_encoding: encoding.locale ?? null,
    utf8_mode: encoding.utf8_mode ?? null,
    stdout_buffered: stdout.buffered ?? null,
  };
}

/** The contract's fields only, when buildReport itself failed (a bug): never leave a waiter without a report. */
function minimalReport(facts, err) {
  const { pid } = facts;
  const report = {
    outcome: (facts.machine || {}).outcome ?? null, exit_code: facts.exit_code, signal: facts.exit_signal, stage: null, stages: [],
    progress: null, error: null, diagnosis: null, stacks: null, log_tail: facts.tail.map((l) => l.text),
    duration_s: round(facts.ended - facts.started), pid,
    report_version: REPORT_VERSION, report_error: `${err.name}: ${err.message}`,
  };
  report.summary = summary(report);
  report.reason = reason(report);
  return plain(report);
}

/**
 * The stages open in the stage box that no stage message brought (a native crash right after
 * they began): records that never ended, at the box's depth (Python: report._boxed_only).
 */
function boxedOnly(stages, boxed) {
  const open = stages.filter((s) => s.status === 'running').map((s) => s.name);
  const out = [];
  boxed.forEach((name, depth) => {
    const i = open.indexOf(name);
    if (i >= 0) open.splice(i, 1);
    else out.push({ name, status: 'running', duration_s: null, depth });
  });
  return out;
}

/**
 * How long the job had done nothing when it was declared hung: from the machine's last
 * activity, else the last heartbeat's idle_s (bridge/report.py hang_idle).
 */
function hangIdle(m, heartbeat) {
  const { hang } = m;
  const last = m.last_activity_t;
  if (hang && typeof last === 'number' && hang.t >= last) return round(hang.t - last, 1);
  return typeof heartbeat.idle_s === 'number' ? heartbeat.idle_s : null;
}

function diagnose(outcome, factsEnd, facts, m, stacks, stage, pid, crashText = null) {
  try {
    if (outcome === 'hung') {
      const { hang } = m;
      return [diagnoseHang({
        reason: hang.reason, stage: hang.stage || stage,
        stages: facts.stages.filter((s) => s.status === 'running').map((s) => s.name),
        idle_s: hangIdle(m, facts.heartbeat || {}), stack: (facts.heartbeat || {}).stack ?? null,
        stacks, saw_hello: Object.keys(facts.hellos).length > 0, evidence: facts.snapshot || {}, pid,
        worker_loaded: (m.loaded_t ?? null) !== null,
        progress: facts.progress, python_silent: pythonSilent(facts, crashText),
        process_stacks: facts.ranks ? ranks.processStacks(facts.ranks) : {},
      }), null];
    }
    return [diagnoseEnd(factsEnd), null];
  } catch (err) {
    return [null, `${err.name}: ${err.message}`];
  }
}

const ERROR_KEYS = ['type', 'message', 'traceback', 'kind', 'stage', 'fatal', 'thread', 'frames', 'chain', 'exit_code', 'resources'];

/** The worker's error, or the last traceback printed on stderr by a plain command. */
function errorOf(workerError, tail) {
  if (workerError) {
    const out = {};
    for (const k of ERROR_KEYS) if (k in workerError) out[k] = workerError[k];
    return forPeople(out);
  }
  let start = null;
  for (let i = tail.length - 1; i >= 0; i--) {
    if (tail[i].startsWith('Traceback (most recent call last)')) { start = i; break; }
  }
  if (start === null) return null;
  const parsed = tracebackInText(tail.slice(start));
  if (!parsed) return null;
  return forPeople({ type: parsed.type, message: parsed.message, traceback: tail.slice(start).join('\n'),
    frames: parsed.frames, kind: 'exception', source: 'stderr' });
}

/** The error's text fields without terminal escapes, as bridge/report.py _for_people. */
function forPeople(error) {
  for (const key of ['message', 'traceback']) if (typeof error[key] === 'string') error[key] = stripAnsi(error[key]);
  if (Array.isArray(error.chain)) {
    error.chain = error.chain.map((c) => (c && typeof c === 'object' && typeof c.message === 'string' ? { ...c, message: stripAnsi(c.message) } : c));
  }
  return error;
}

/** All the stack text we got, each part under a header saying where it came from. */
function joinStacks(dumps, crashText, fatalLines) {
  const parts = dumps.map((text) => `--- in-band dump_stacks (worker) ---\n${text.trimEnd()}`);
  if (crashText) parts.push(`--- faulthandler (crash file) ---\n${crashText}`);
  if (fatalLines.length && !crashText) parts.push(`--- faulthandler (stderr) ---\n${fatalLines.join('\n')}`);
  return parts.length ? parts.join('\n\n') : null;
}

function iso(wall) {
  return `${new Date(Math.floor(wall) * 1000).toISOString().slice(0, 19)}Z`;
}

/**
 * The user's cancel: reason, the worker's answer (accepted, or refused and why), the
 * KeyboardInterrupt traceback that shows where the script was stopped, and by what: cancel()
 * ('client') or a signal the user sent the process ('signal') (bridge: _cancel).
 */
function cancelOf(outcome, info, error) {
  if (!info) return null;
  const out = { reason: info.reason ?? null, accepted: info.accepted ?? null, refused: info.refused ?? null, traceback: null, by: info.by || 'client', signal: info.signal ?? null };
  if (outcome === 'cancelled' && error && error.type === 'KeyboardInterrupt') out.traceback = error.traceback || '';
  return out;
}

module.exports = {
  REPORT_VERSION, buildReport, readFiles, logFooter, minimalReport, summary, toJSON, readCrashFile, joinStacks,
  crashFileSize, signalDumpedPids, losses,
};
