'use strict';
/**
 * The look before a hang is declared, at the startup and heartbeat deadlines: is the job hung,
 * or starting, or only waiting for a free core? Pure: two samples of the job's process tree in,
 * a verdict out; the twin of bridge/look.py (vectors/look.json). A sample: {t, lines, lead,
 * procs: [{pid, name, cpu_s, io_bytes, run_delay_s}]} (procfs.js treeSample).
 *
 * startup (no hello yet), starting: no process left; no Python in the tree (a shell script,
 * make, a downloader: a Python it starts later says hello); or CPU (BUSY_CPU of a core), I/O
 * or output over the window. Otherwise a Python process started and does nothing: hung.
 * heartbeat (the beacon went silent), waiting: the lead's threads waited STARVED of the window
 * for a CPU (a busy machine: slow, not hung). Otherwise hung.
 */

const { size } = require('./diagnosis_end.js');

const REASONS = ['startup', 'heartbeat'];
const BUSY_CPU = 0.10;
const STARVED = 0.25;
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

/** {working, why} for the window from `before` to `after`. */
function judge(reason, before, after) {
  if (!REASONS.includes(reason)) throw new RangeError(`unknown look reason ${JSON.stringify(reason)}; known: ${REASONS.join(', ')}`);
  const procs = after.procs || [];
  const window = Math.max(0.001, Number(after.t) - Number(before.t));
  const old = new Map((before.procs || []).map((p) => [p.pid, p]));
  if (!procs.length) return { working: true, why: 'no process of the job is left: its exit decides' };
  if (reason === 'heartbeat') {
    const leads = procs.filter((p) => p.pid === after.lead);
    const waited = delta(leads.length ? leads : procs.slice(0, 1), old, 'run_delay_s');
    const share = Math.floor((waited / window) * 100 + 0.5);
    if (waited / window >= STARVED) {
      return { working: true, why: `waiting for a free core: its threads waited ${share}% of the last ${span(window)} for a CPU (the machine is busy, the job is not hung)` };
    }
    return { working: false, why: `silent, and not for want of a CPU: its threads waited ${share}% of ${span(window)} for one` };
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

module.exports = { BUSY_CPU, REASONS, STARVED, isPython, judge };
