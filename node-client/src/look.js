'use strict';
/**
 * The look before a hang is declared, at the startup, heartbeat and stall deadlines: is the job
 * hung, or starting, or waiting for a free core, or computing? Pure: two samples of the job's process tree in,
 * a verdict out; the twin of bridge/look.py (vectors/look.json). A sample: {t, lines, lead,
 * procs: [{pid, name, cpu_s, io_bytes, threads}]} (procfs.js treeSample). threads: each [tid,
 * state, run_delay_s, timeslices]. How long a thread waited for a CPU: its run_delay (the kernel
 * adds a wait when it ends), or the whole window when it was runnable in both samples with the
 * same timeslices: it never ran, so it was queued throughout (under a CPU quota it has no
 * run_delay yet). A long wait: LONG_WAIT_S or more per timeslice it then ran, or queued
 * throughout; short waits are a thread given a CPU every few ms (a GIL waiter on a loaded
 * machine wakes every 5 ms), which could have beaten.
 *
 * startup (no hello yet), starting: no process left; no Python in the tree (a shell script,
 * make, a downloader: a Python it starts later says hello); or CPU (BUSY_CPU of a core), I/O
 * or output over the window. Otherwise a Python process started and does nothing: hung.
 * heartbeat (the beacon went silent), waiting: the lead's threads waited STARVED of the window
 * for a CPU in long waits (a CPU quota, a busy machine: slow, not hung). Otherwise hung.
 * stall (no progress for stall_timeout), computing: the lead ran or queued for a CPU BUSY_LEAD
 * of the window and its main thread moved (MOVES; the after-sample's `wheres`, [t, place] each time
 * the heartbeats' `where` changed, the first being the place at `from`); `since` is when it
 * last moved. Otherwise hung (one place: cpu_bound; not busy: the wait the diagnosis names).
 */

const { size } = require('./diagnosis_end.js');

const REASONS = ['startup', 'heartbeat', 'stall'];
const BUSY_CPU = 0.10;
const STARVED = 0.25; // of the window, spent waiting for a CPU in long waits
const LONG_WAIT_S = 0.1; // a thread's waits in the window, per timeslice it ran: a long wait
const BUSY_LEAD = 0.5; // of the window, the lead ran or waited for a CPU: a busy process
const PLACES_SAID = 4; // places named in a verdict
const MOVES = 1; // changes of place in the window that make a busy main thread one that computes
const WHERES_KEPT = 64; // changes of place a shell keeps of its lead's heartbeats
const PYTHON = /^(python|pypy)[0-9.]*(-dbg)?$/;

const isPython = (name) => typeof name === 'string' && PYTHON.test(name);
const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);
const span = (window) => `${(Math.floor(window * 10 + 0.5) / 10).toFixed(1)} s`;

function names(procs) {
  const out = [];
  for (const p of procs) if (p.name && !out.includes(p.name)) out.push(String(p.name));
  return out.slice(0, 4).join(', ') + (out.length > 4 ? ', ...' : '');
}

function delta(procs, old, key) {
  let total = 0;
  for (const p of procs) {
    const now = p[key];
    const was = (old.get(p.pid) || {})[key];
    if (isNumber(now) && isNumber(was)) total += Math.max(0, now - was);
    else if (key === 'cpu_s' && isNumber(now)) total += now; // born in the window: all its CPU is in it
  }
  return total;
}

const isThread = (t) => Array.isArray(t) && t.length === 4 && isNumber(t[2]) && Number.isInteger(t[3]);

/**
 * Seconds the lead's threads waited for a CPU over the window, as [in long waits, in short
 * ones]; a thread queued the whole window counts the window (bridge/look.py _waited).
 */
function waitedFor(lead, old, window) {
  let long = 0;
  let short = 0;
  for (const p of lead) {
    const was = new Map(((old.get(p.pid) || {}).threads || []).filter(isThread).map((t) => [t[0], t]));
    for (const t of (Array.isArray(p.threads) ? p.threads : []).filter(isThread)) {
      const [tid, state, delay, slices] = t;
      const before = was.get(tid);
      let waited = delay;
      let ran = slices;
      if (before) {
        waited = Math.max(0, delay - before[2]);
        ran = Math.max(0, slices - before[3]);
        if (state === 'R' && before[1] === 'R' && ran === 0) { long += window; continue; }
      }
      if (waited && waited / Math.max(ran, 1) >= LONG_WAIT_S) long += waited;
      else short += waited;
    }
  }
  return [long, short];
}

/** {working, why, since?} for the window from `before` to `after`. */
function judge(reason, before, after) {
  if (!REASONS.includes(reason)) throw new RangeError(`unknown look reason ${JSON.stringify(reason)}; known: ${REASONS.join(', ')}`);
  const procs = after.procs || [];
  const window = Math.max(0.001, Number(after.t) - Number(before.t));
  const old = new Map((before.procs || []).map((p) => [p.pid, p]));
  if (!procs.length) {
    return { working: true, why: 'no process of the job is left: its exit decides', ...(reason === 'stall' ? { since: Number(after.t) } : {}) };
  }
  if (reason === 'stall') return stall(after, window, old);
  if (reason === 'heartbeat') {
    const leads = procs.filter((p) => p.pid === after.lead);
    const [waited, short] = waitedFor(leads.length ? leads : procs.slice(0, 1), old, window);
    // Seconds, summed over its threads (three threads queued the whole window: 3.0 s)
    if (waited / window >= STARVED) {
      return { working: true, why: `waiting for a free core: its threads waited ${span(waited)} for a CPU in the last ${span(window)} (the machine is busy, the job is not hung)` };
    }
    const given = short >= 0.05 ? `, and ${span(short)} in short waits: given a CPU that often, it could have beaten` : '';
    return { working: false, why: `silent, and not for want of a CPU: its threads waited ${span(waited)} for one in ${span(window)}${given}` };
  }
  if (!procs.some((p) => isPython(p.name))) {
    return { working: true, why: `no Python in the job's process tree yet (${names(procs)}): it is starting, not hung; a Python it starts later says hello` };
  }
  const cpu = delta(procs, old, 'cpu_s');
  const moved = delta(procs.filter((p) => old.has(p.pid)), old, 'io_bytes');
  const share = Math.floor((cpu / window) * 100 + 0.5);
  if (cpu / window >= BUSY_CPU) return { working: true, why: `its processes used ${share}% of a core over ${span(window)}` };
  if (moved > 0) return { working: true, why: `its processes read or wrote ${size(Math.trunc(moved))} in ${span(window)}` };
  const lines = Number(after.lines || 0) - Number(before.lines || 0);
  if (lines > 0) return { working: true, why: `it printed ${lines} line${lines !== 1 ? 's' : ''} in ${span(window)}` };
  const python = procs.find((p) => isPython(p.name));
  return { working: false, why: `${python.name} (pid ${python.pid}) started and then did nothing in ${span(window)}: ${share}% of a core, no bytes read or written, no output` };
}

/**
 * The lead's heartbeat `body`, heard at `t`, folded into what the shell keeps of its heartbeats
 * ({work, wheres: [t, place] at each change of place, the last WHERES_KEPT}; {} for a new
 * lead): [the new track, whether it counted more work than the last one did].
 */
function heard(track, body, t) {
  const { work, where } = body;
  const last = track.work ?? null;
  const worked = Number.isInteger(work) && Number.isInteger(last) && work > last;
  let wheres = track.wheres || [];
  if (typeof where === 'string' && (!wheres.length || wheres[wheres.length - 1][1] !== where)) {
    wheres = [...wheres, [t, where]].slice(-WHERES_KEPT);
  }
  return [{ work: Number.isInteger(work) ? work : last, wheres }, worked];
}

/** The places of a stall window that began at `start`: the one in effect then, and each change after. */
function stallWheres(wheres, start) {
  let first = 0;
  wheres.forEach(([t], i) => { if (t <= start) first = i; });
  return wheres.slice(first).map((w) => [...w]);
}

function stall(after, window, old) {
  const procs = after.procs || [];
  const leads = procs.filter((p) => p.pid === after.lead);
  const lead = leads.length ? leads : procs.slice(0, 1);
  const busy = delta(lead, old, 'cpu_s') + waitedFor(lead, old, window).reduce((a, b) => a + b, 0);
  const share = Math.floor((busy / window) * 100 + 0.5);
  const start = isNumber(after.from) ? after.from : null;
  const wheres = (after.wheres || []).filter((w) => Array.isArray(w) && w.length === 2);
  const moves = [];
  for (let i = 1; i < wheres.length; i += 1) {
    if (wheres[i][1] !== wheres[i - 1][1] && (start === null || wheres[i][0] > start)) moves.push(wheres[i][0]);
  }
  const places = [];
  for (const [, place] of wheres) if (typeof place === 'string' && !places.includes(place)) places.push(place);
  const over = start !== null ? ` over the last ${span(Number(after.t) - start)}` : '';
  if (busy / window < BUSY_LEAD) {
    return { working: false, why: `no progress${over}, and it is not busy (${share}% of a core over ${span(window)}, running or waiting for one)` };
  }
  if (moves.length < MOVES) {
    const at = (places.length ? `in ${places[places.length - 1]}` : 'in one place (no heartbeat said where)') + (moves.length ? ' after it moved there' : '');
    return { working: false, why: `busy (${share}% of a core, running or waiting for one) but its main thread stayed ${at}${over}` };
  }
  const said = places.slice(-PLACES_SAID).join(', ') + (places.length > PLACES_SAID ? ', ...' : '');
  return {
    working: true,
    since: Number(moves[moves.length - 1]),
    why: `computing, not hung: busy (${share}% of a core, running or waiting for one), its main thread moved through ${places.length} of the script's functions${over} without progress (${said})`,
  };
}

module.exports = { BUSY_CPU, BUSY_LEAD, LONG_WAIT_S, REASONS, STARVED, WHERES_KEPT, heard, isPython, judge, stallWheres };
