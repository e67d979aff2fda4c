'use strict';
/**
 * The facts of one job, as the report needs them: a plain record, the same shape (and the same
 * snake_case keys) as bridge/job_facts.py's, so that buildReport(facts, files) is a pure
 * function pinned by vectors/report.json. The job's shell keeps it up to date and, when the
 * job ends, adds the machine's verdict (`machine`) and the hub's protocol counts, reads the
 * crash and stage files, and calls buildReport(facts, files). Nothing here reads a clock:
 * `started` (the shell's monotonic seconds) and `startedWall` (epoch seconds) are given.
 * The keys are listed in bridge/job_facts.py.
 */

const health = require('./health.js');
const ranks = require('./ranks.js');

const STAGES_KEPT = 1000; // stage records kept for the report (a stage per step must not grow)
const DUMPS_KEPT = 4; // dump_stacks replies kept for the report
const ARTIFACTS_KEPT = 1000; // files listed in the report (a worker says at most 1,000 each)

/** The record of a job that has not started yet. */
function initial({ id, command, logPath = null, started, startedWall }) {
  return {
    id, command: [...command], log_path: logPath, pid: null,
    started, started_wall: startedWall, ended: null, machine: null,
    tail: [], lines: { stdout: 0, stderr: 0 }, bytes: { stdout: 0, stderr: 0 }, fatal_lines: [],
    hellos: {}, // rank (a string) -> hello: every rank's, the lead's wins
    ranks: null, lead_pid: null, leads: [], dump_pids: [], native_dump_pids: [],
    stages: [], stages_dropped: 0, stage_events: 0, progress: null, health: health.initial(), error: null, bye: null, heartbeat: null, stacks: [],
    cancel: null, internal_error: null, signals_sent: [], exit_code: null, exit_signal: null,
    oom_killed: null, oom_kills: null, leftovers: [], snapshot: null,
    rejected: {}, lost: 0, undelivered: {}, unrouted: 0, foreign_hellos: 0,
    log_lines: 0, log_error: null, // lines written to the log file; why it is incomplete
    dropped: {}, // routing id -> the worker's drop counts (heartbeat, bye)
    artifacts: [], // files the job made (any of its processes), in the order said
  };
}

/** What the report reads of the state machine's final state. */
function machineVerdict(m) {
  return {
    outcome: m.outcome ?? null, hang: m.hang ?? null, refused: m.refused ?? null,
    no_worker: m.no_worker ?? null, loaded_t: m.loaded_t ?? null,
    last_activity_t: m.last_activity_t ?? null, // a hang's idle time (report.js hangIdle)
  };
}

/**
 * A record as JSON carries it (vectors/report.json, bridge's record): a copy whose ranks state
 * is as src/ranks.js keeps it (its processes in a Map, in arrival order; bridge/ranks.py keeps
 * a dict and an `order` list).
 */
function fromPlain(record) {
  const out = structuredClone(record);
  if (out.ranks && !(out.ranks.procs instanceof Map)) {
    const { procs = {}, order = Object.keys(procs) } = out.ranks;
    out.ranks = { procs: new Map(order.map((key) => [key, { body: null, stacks: null, ...procs[key] }])) };
  }
  return out;
}

/**
 * Fold one authentic worker message from a process of the job into the record, and return it
 * (updated in place: the job holds the only copy). No I/O, no clock: message is {kind, body,
 * key (the sender's routing id), rank, ts (its clock), lead (it speaks for the job), in_tree
 * (a hello: its pid is in the job's tree), t (the shell's clock when it came)}. As
 * bridge/job_facts.py apply: the lead's stage, progress, error, bye and heartbeat are the
 * job's; every process is listed; any process's dump reply and drop counts count.
 */
function apply(facts, message) {
  const { kind, body, key, lead } = message;
  ranks.observe(facts.ranks, key, kind, body, message.ts);
  if (kind === 'hello') {
    const rank = String(message.rank);
    // every rank is listed; the lead's hello wins
    if (lead || !Object.prototype.hasOwnProperty.call(facts.hellos, rank)) facts.hellos[rank] = body;
    if (message.in_tree) {
      // SIGUSR1 only to processes that registered faulthandler for it (it kills others).
      if (body.dump_signal === 'SIGUSR1') facts.dump_pids.push(body.pid);
      if (body.native_dump_signal === 'SIGUSR2') facts.native_dump_pids.push(body.pid);
    }
  } else if ((kind === 'heartbeat' || kind === 'bye') && body.dropped && typeof body.dropped === 'object') {
    facts.dropped[key] = body.dropped; // counts only grow: the latest wins
  } else if (kind === 'reply' && body.stacks) {
    facts.stacks = [...facts.stacks, String(body.stacks)].slice(-DUMPS_KEPT);
  } else if (kind === 'artifact' && facts.artifacts.length < ARTIFACTS_KEPT) {
    // any process's (rank 0 saves the checkpoint; a DataLoader worker may write samples)
    const entry = {};
    for (const k of ['path', 'name', 'kind', 'bytes', 'step', 'by']) entry[k] = body[k] ?? null;
    facts.artifacts.push({ ...entry, rank: message.rank });
  }
  if (!lead) return facts;
  if (kind === 'stage') recordStage(facts, body, message.t);
  else if (kind === 'progress') {
    facts.progress = { step: body.step, total: body.total ?? null, metrics: body.metrics || {} };
    observePoints(facts.health, body);
  }
  else if (kind === 'error') {
    if (body.fatal || facts.error === null) facts.error = body;
  } else if (kind === 'bye') facts.bye = body;
  else if (kind === 'heartbeat') facts.heartbeat = body;
  return facts;
}

function recordStage(facts, body, t) {
  const { stages } = facts;
  if (body.event === 'begin') {
    if (stages.length >= STAGES_KEPT) forgetAClosedStage(facts);
    facts.stage_events += 1;
    stages.push({ name: body.name, status: 'running', duration_s: null, depth: body.depth ?? 0,
      budget_s: body.budget_s ?? null, started: t - facts.started, began: facts.stage_events });
    return;
  }
  const depth = body.depth ?? null;
  for (let i = stages.length - 1; i >= 0; i--) {
    const entry = stages[i];
    if (entry.name === body.name && entry.status === 'running' && (depth === null || entry.depth === depth)) {
      entry.status = body.status || 'ok';
      facts.stage_events += 1;
      entry.closed = facts.stage_events; // the order of begins and ends
      entry.duration_s = body.duration_s ?? null;
      if (entry.duration_s === null) entry.duration_s = Math.round((t - facts.started - entry.started) * 1e6) / 1e6;
      return;
    }
  }
}

/** Drop the oldest closed stage record (open ones say where the job is). */
function forgetAClosedStage(facts) {
  const i = facts.stages.findIndex((entry) => entry.status !== 'running');
  if (i >= 0) {
    facts.stages.splice(i, 1);
    facts.stages_dropped += 1;
  }
}

/**
 * Training health from a progress message: each of its `points` in order (a NaN at one step
 * between two sends is seen), then the latest value unless it is the last point. Python:
 * job_facts.observe_points.
 */
function observePoints(record, body) {
  const points = body.points;
  const steps = points && typeof points === 'object' ? points.steps : null;
  const columns = points && typeof points === 'object' ? points.metrics : null;
  if (Array.isArray(steps) && columns && typeof columns === 'object' && !Array.isArray(columns)) {
    steps.forEach((step, i) => {
      const at = {};
      for (const [name, column] of Object.entries(columns)) {
        if (Array.isArray(column) && i < column.length && column[i] !== null && column[i] !== undefined) at[name] = column[i];
      }
      health.observe(record, step, at);
    });
    const last = steps[steps.length - 1];
    // the latest is the last point, or older (a message queued behind a log)
    if (steps.length && !(typeof body.step === 'number' && typeof last === 'number' && body.step > last)) return;
  }
  health.observe(record, body.step, body.metrics);
}

module.exports = { initial, machineVerdict, fromPlain, apply, STAGES_KEPT, DUMPS_KEPT };
