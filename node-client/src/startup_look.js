'use strict';
/**
 * The look at the startup deadline: is a job that has not said hello hung, or still starting?
 * Pure: two samples of the job's process tree in, a verdict out; the twin of
 * bridge/startup_look.py (vectors/startup_look.json). A sample: {t, lines, procs: [{pid,
 * name, cpu_s, io_bytes}]} (procfs.js treeSample). Starting: no process left; no Python in
 * the tree (a shell script, make, a downloader: a Python it starts later says hello); or CPU
 * (BUSY_CPU of a core), I/O or output over the window. Otherwise a Python process started and
 * does nothing: the startup hang.
 */

const { size } = require('./diagnosis_end.js');

const BUSY_CPU = 0.10;
const PYTHON = /^(python|pypy)[0-9.]*(-dbg)?$/;

const isPython = (name) => typeof name === 'string' && PYTHON.test(name);

function names(procs) {
  const out = [];
  for (const p of procs) if (p.name && !out.includes(p.name)) out.push(String(p.name));
  return out.slice(0, 4).join(', ') + (out.length > 4 ? ', ...' : '');
}

/** {working, why} for the window from `before` to `after`. */
function judge(before, after) {
  const procs = after.procs || [];
  const window = Math.max(0.001, Number(after.t) - Number(before.t));
  const span = `${(Math.floor(window * 10 + 0.5) / 10).toFixed(1)} s`;
  if (!procs.length) return { working: true, why: 'no process of the job is left: its exit decides' };
  if (!procs.some((p) => isPython(p.name))) {
    return { working: true, why: `no Python in the job's process tree yet (${names(procs)}): it is starting, not hung; a Python it starts later says hello` };
  }
  const old = new Map((before.procs || []).map((p) => [p.pid, p]));
  let cpu = 0;
  let moved = 0;
  for (const p of procs) {
    const was = old.get(p.pid) || {};
    cpu += Math.max(0, Number(p.cpu_s || 0) - Number(was.cpu_s || 0));
    if (Number.isInteger(p.io_bytes) && Number.isInteger(was.io_bytes)) moved += Math.max(0, p.io_bytes - was.io_bytes);
  }
  const share = Math.floor((cpu / window) * 100 + 0.5);
  if (cpu / window >= BUSY_CPU) return { working: true, why: `its processes used ${share}% of a core over ${span}` };
  if (moved > 0) return { working: true, why: `its processes read or wrote ${size(moved)} in ${span}` };
  const lines = Number(after.lines || 0) - Number(before.lines || 0);
  if (lines > 0) return { working: true, why: `it printed ${lines} line${lines !== 1 ? 's' : ''} in ${span}` };
  const python = procs.find((p) => isPython(p.name));
  return { working: false, why: `${python.name} (pid ${python.pid}) started and then did nothing in ${span}: ${share}% of a core, no bytes read or written, no output` };
}

module.exports = { BUSY_CPU, isPython, judge };
