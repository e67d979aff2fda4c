'use strict';
/**
 * The final report: the JSON contract of ../shared/DESIGN.md, with the same field names
 * and values as the Python client's (bridge/report.py): outcome, exit_code, signal, stage,
 * stages, progress, error, diagnosis, stacks, log_tail, duration_s, pid, plus extras
 * (job_id, command, hang, rejected, lost, log_path, started_at, ended_at).
 *
 * buildReport is pure: it takes what the job gathered and returns a plain JSON value.
 * toJSON(report) gives the ASCII JSON text the CLI writes with --report.
 */

const { diagnoseEnd, diagnoseHang } = require('./diagnosis.js');

const round = (x, digits = 3) => (typeof x === 'number' ? Math.round(x * 10 ** digits) / 10 ** digits : x);

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

function stagesOf(stages) {
  return stages.map((s) => ({ name: s.name, depth: s.depth ?? 0, status: s.status, duration_s: s.duration_s }));
}

/** The stage the job was in when it ended: the innermost open one, else the last begun. */
function currentStage(stages, error) {
  for (let i = stages.length - 1; i >= 0; i--) if (stages[i].status === 'open') return stages[i].name;
  if (error && error.stage) return error.stage;
  return stages.length ? stages[stages.length - 1].name : null;
}

function errorOf(body, spawnError) {
  if (body) {
    return {
      type: body.type, message: body.message, traceback: body.traceback, kind: body.kind ?? null,
      stage: body.stage ?? null, thread: body.thread ?? null, frames: body.frames || [], chain: body.chain || [],
    };
  }
  if (spawnError) {
    return { type: 'SpawnError', message: `could not start the command: ${spawnError.message}`, traceback: '', kind: 'internal', stage: null, thread: null, frames: [], chain: [] };
  }
  return null;
}

function stacksOf(facts, crashText) {
  const parts = [];
  if (facts.dumpText) parts.push(`# Python stacks from the worker (dump_stacks)\n${facts.dumpText.trimEnd()}`);
  if (crashText) parts.push(`# faulthandler output (crash file)\n${crashText.trimEnd()}`);
  if (!parts.length && facts.heartbeat && facts.heartbeat.stack) {
    parts.push(`# main thread stack from the last heartbeat\n${String(facts.heartbeat.stack).trimEnd()}`);
  }
  return parts.length ? `${parts.join('\n\n')}\n` : null;
}

/**
 * facts: outcome, machine (final state), facts (the job's gathered facts), crashText,
 * logTail (strings), pid, jobId, command, logPath.
 */
function buildReport({ outcome, machine, facts, crashText, logTail, pid, jobId, command, logPath }) {
  const exit = machine.exit || { code: null, signal: null };
  const stage = currentStage(facts.stages, facts.fatalError);
  const error = errorOf(facts.fatalError, facts.spawnError);
  const stacks = stacksOf(facts, crashText);
  const progress = facts.progress
    ? { step: facts.progress.step, total: facts.progress.total ?? null, metrics: facts.progress.metrics || {} }
    : null;
  let diagnosis;
  if (outcome === 'hung') {
    const hang = machine.hang || {};
    const snap = facts.snapshot || {};
    const ev = snap.evidence || snap.first || {};
    const hb = facts.heartbeat || {};
    diagnosis = diagnoseHang({
      reason: hang.reason, stage: hang.stage ?? stage, stages: hb.stages ?? null,
      idle_s: hb.idle_s ?? (machine.last_activity_t !== null && hang.t !== undefined ? hang.t - machine.last_activity_t : null),
      stack: hb.stack ?? null, stacks, saw_hello: machine.hello, evidence: ev,
    });
  } else {
    diagnosis = diagnoseEnd({
      outcome, exit_code: exit.code, signal: exit.signal, error: facts.fatalError || null,
      saw_bye: facts.bye !== null, crash_text: crashText, log_tail: logTail, stage, pid,
    });
  }
  const durationS = facts.startedAt !== null && facts.endedAt !== null ? facts.endedAt - facts.startedAt : null;
  return plain({
    outcome,
    exit_code: exit.code,
    signal: exit.signal,
    stage,
    stages: stagesOf(facts.stages),
    progress,
    error,
    diagnosis,
    stacks,
    log_tail: logTail,
    duration_s: round(durationS),
    pid,
    job_id: jobId,
    command,
    hang: machine.hang,
    rejected: facts.rejected,
    lost: facts.lost,
    log_path: logPath,
  });
}

/** The report as ASCII JSON (non-ASCII as \u escapes, lone surrogates included). */
function toJSON(report, indent = 2) {
  return JSON.stringify(report, null, indent).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

module.exports = { buildReport, toJSON };
