'use strict';
/** Helpers for the end-to-end tests: run fixtures under either client, look at /proc. */

const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { PYTHON } = require('./python.js');

const FIXTURE = path.resolve(__dirname, '../test/fixtures/child.py');
const REPO = path.resolve(__dirname, '../..');

/** The environment a real user has: without this machine's PYTHONUNBUFFERED. */
function userEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  delete env.PYTHONUNBUFFERED;
  return env;
}

/** Pids (of `pids`) that are still running: zombies waiting for a reaper count as gone. */
function liveProcesses(pids) {
  return pids.filter((pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return false;
    }
  });
}

/** Every live process whose environment says it belongs to job `jobId`. */
function processesOfJob(jobId) {
  const marker = Buffer.from(`TRAINBRIDGE_JOB_ID=${jobId}\0`);
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/environ`).includes(marker)) out.push(Number(name));
    } catch { /* gone or not ours */ }
  }
  return liveProcesses(out);
}

/** The Python client's report for the same command (bridge.job.launch). */
function pythonReport(config, cmd, env = userEnv(), cwd = REPO) {
  const script = path.join(__dirname, 'python_report.py');
  return new Promise((resolve, reject) => {
    execFile(PYTHON, [script, JSON.stringify(config), '--', ...cmd], { env, cwd, maxBuffer: 1 << 24 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`python client failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      });
  });
}

// Durations and pids differ between runs; so does whether the last heartbeat before a hang
// was old enough (>= 1 s idle) to be named: " for N s" is the worker's timing, not the client's.
const normalise = (text) => (text === null || text === undefined ? text
  : String(text).replace(/ for \d+ s\b/g, '').replace(/\d+(\.\d+)? s\b/g, 'N s').replace(/pid \d+/g, 'pid N'));

/** The fields that must be equal in the two clients' reports for the same scenario. */
function comparable(report) {
  const pick = (obj, keys) => (obj ? Object.fromEntries(keys.map((k) => [k, obj[k] ?? null])) : null);
  return {
    outcome: report.outcome,
    exit_code: report.exit_code,
    signal: report.signal,
    stage: report.stage,
    stages: report.stages.map((s) => pick(s, ['name', 'status', 'depth'])),
    progress: report.progress,
    error: pick(report.error, ['type', 'message', 'kind', 'stage', 'fatal', 'source']),
    diagnosis: report.diagnosis && { kind: report.diagnosis.kind, summary: normalise(report.diagnosis.summary) },
    stacks: report.stacks !== null,
    log_tail: report.log_tail.map((line) => line.replace(/^grandchildren \d+ \d+$/, 'grandchildren A B')
      .replace(/ at \d+ steps\/s/, ' at N steps/s')),
    hang: pick(report.hang, ['reason', 'stage']),
    signals_sent: report.signals_sent,
    worker: pick(report.worker, ['hello', 'ranks', 'dump_signal']),
    environment: report.environment,
    leftovers: report.leftovers.length,
    summary: normalise(report.summary),
  };
}

/** The pids of this process's job servers (python -m trainbridge.bridge.jobserve), from /proc. */
function jobServers(parent = process.pid) {
  return fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'latin1');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent
        && fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').includes('trainbridge.bridge.jobserve');
    } catch {
      return false;
    }
  }).map(Number);
}

module.exports = { FIXTURE, REPO, PYTHON, userEnv, liveProcesses, processesOfJob, jobServers, pythonReport, comparable };
