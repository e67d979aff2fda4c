'use strict';
// Run one row of tests/faults/matrix.json through the Node client (node-client/) and print
// one JSON line: {report, measures, subs, job_id}. tests/faults/test_node_matrix.py judges it
// with the same judge as the Python client's run (matrix.py) and compares the two.
//
//   node tests/faults/matrix_node.js ROW_NAME
//
// The runner mirrors matrix.py: a silent loopback server for rows that need one, a "go"
// socket that releases the scenario once the client has heard the row's go_when message.

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');
const { launch, prepare, resolvePython } = require(path.join(ROOT, 'node-client', 'src', 'index.js'));
// The judge's look at a deadline (bridge/machine.py LOOKED_AT, LOOK_S) and the worker's beat
// (bridge/jobenv.py: a quarter of heartbeat_timeout, from 0.05 to 1 s): the Python supervisor's.
const LOOKED_AT = ['startup', 'heartbeat', 'stall'];
const LOOK_S = 1.0;
const heartbeatS = (config) => (config.heartbeat_timeout == null ? 1.0 : Math.max(0.05, Math.min(1.0, config.heartbeat_timeout / 4)));

const MATRIX = JSON.parse(fs.readFileSync(path.join(HERE, 'matrix.json'), 'utf8'));
const now = () => Number(process.hrtime.bigint()) / 1e9;

/**
 * Seconds the job server (the supervisor: this process's, started by prepare()) has waited
 * for a CPU so far, all its threads together (schedstat run_delay): as matrix.py's
 * supervisor_cpu_wait, a deadline can only be judged once the judge runs, so a hang's bound
 * grows by this wait between the last line and the verdict (docs/DIAGNOSIS.md). Python's
 * thread names are not the OS's, so the hub's thread cannot be told from the others here:
 * the allowance can be larger than the Python route's. null where it cannot be read.
 */
function supervisorCpuWait(pid) {
  let total = 0;
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        total += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]) || 0;
      } catch { /* the thread ended */ }
    }
  } catch {
    return null;
  }
  return total / 1e9;
}

function listen(onConnection) {
  return new Promise((resolve) => {
    const server = net.createServer(onConnection);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/** Another process holding an exclusive flock on a fresh file (scenarios/_lock_holder.py), once it says so. */
async function lockHolder() {
  const { spawn } = require('node:child_process');
  const folder = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'fault-lock-'));
  const file = path.join(folder, 'model.safetensors.lock');
  const holder = spawn(resolvePython(), [path.join(HERE, 'scenarios', '_lock_holder.py'), file], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    let out = '';
    holder.stdout.on('data', (b) => { out += b; if (out.includes('locked\n')) resolve(); });
    holder.on('exit', (code) => reject(new Error(`the lock holder exited (${code}) before it held the lock`)));
  });
  return {
    file, pid: holder.pid,
    close: () => { holder.kill('SIGKILL'); fs.rmSync(folder, { recursive: true, force: true }); },
  };
}

async function silentServer() {
  const held = [];
  const server = await listen((sock) => { held.push(sock); sock.on('error', () => {}); });
  return { port: server.address().port, close: () => { held.forEach((s) => s.destroy()); server.close(); } };
}

async function goSignal(when) {
  const [kind, ...rest] = when.split(':');
  const name = rest.join(':');
  let conn = null;
  let heard = false;
  const release = () => { if (conn && heard) { conn.end('go'); conn = null; } };
  const server = await listen((sock) => { sock.on('error', () => {}); conn = sock; release(); });
  return {
    port: server.address().port,
    seen(eventKind, body) {
      if (eventKind !== kind) return;
      if (kind === 'stage' && body.event !== 'begin') return;
      if (!name || body.name === name || body.message === name) { heard = true; release(); }
    },
    close: () => { if (conn) conn.destroy(); server.close(); },
  };
}

async function run(name) {
  const row = MATRIX.scenarios.find((r) => r.name === name);
  if (!row) throw new Error(`no row ${name}`);
  const config = { ...MATRIX.config, ...(row.config || {}) };
  const env = { ...process.env };
  env.PYTHONPATH = ROOT + (env.PYTHONPATH ? path.delimiter + env.PYTHONPATH : '');
  Object.assign(env, row.env || {});
  const subs = {};
  const closers = [];
  if (row.tmpdir) { // its own TMPDIR (torchrun leaves its log folders there), removed after the row
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'fault-'));
    env.TMPDIR = dir;
    closers.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  }
  let go = null;
  if (row.go_when) {
    go = await goSignal(row.go_when);
    env.FAULT_GO_PORT = String(go.port);
    closers.push(go.close);
  }
  if ((row.needs || []).includes('silent_server')) {
    const srv = await silentServer();
    env.FAULT_SERVER_PORT = subs.FAULT_SERVER_PORT = String(srv.port);
    closers.push(srv.close);
  }
  if ((row.needs || []).includes('lock_holder')) {
    const holder = await lockHolder();
    env.FAULT_LOCK_PATH = subs.FAULT_LOCK_PATH = holder.file;
    subs.FAULT_LOCK_PID = String(holder.pid);
    closers.push(holder.close);
  }
  let marker = row.last_line;
  for (const [k, v] of Object.entries(subs)) if (marker) marker = marker.split(`{${k}}`).join(v);
  let markerT = null;
  let endT = null;
  // The job's times count from its spawn by the supervisor (the spawn event's `t`, on this
  // machine's wall clock), as the Python rows' do: a cold job server's start-up before it is
  // launch latency (benchmarks/), not the time the judge took to know.
  const { pid: serverPid } = await prepare({ python: resolvePython() });
  let markerWait = null;
  let hangWait = null;
  let launched = now();
  const job = launch({
    command: resolvePython(), args: row.argv, cwd: path.join(HERE, 'scenarios'), env,
    timeouts: config, zeroCode: row.zero_code !== false,
  });
  if (go) {
    job.on('hello', (b) => go.seen('hello', b));
    job.on('stage', (b) => go.seen('stage', b));
    job.on('log', (l) => { if (l.stream === 'worker') go.seen('log', l.record || {}); });
  }
  job.on('log', (l) => {
    if (marker && markerT === null && l.stream !== 'worker' && String(l.text).includes(marker)) {
      markerT = now();
      markerWait = supervisorCpuWait(serverPid);
    }
  });
  job.once('hang', () => { hangWait = supervisorCpuWait(serverPid); });
  job.on('end', () => { endT = now(); });
  job.once('spawn', (_, t) => { if (typeof t === 'number') launched = now() - (Date.now() / 1000 - t); });
  let live = null; // the last live (stalled) diagnosis
  job.on('stalled', (e) => { if (e && e.diagnosis) live = e.diagnosis; });
  // As matrix.py's report_budget: a hang comes as late as the startup deadline plus the
  // stall deadline, then its look, snapshot and grace.
  const deadlines = Number(config.startup_timeout || 0) + Number(config.stall_timeout || 0);
  const timeout = setTimeout(() => job.cancel({ grace: 0 }), Math.max(60, deadlines + 30) * 1000);
  const report = await job.done;
  clearTimeout(timeout);
  closers.forEach((c) => c());
  const how = row.deadline;
  let start = null;
  let stop = null;
  let limit;
  if (how === 'end') {
    start = report.duration_s == null ? null : launched + report.duration_s;
    stop = endT;
    limit = MATRIX.end_deadline_s;
  } else {
    const hangT = report.hang && report.hang.after_s != null ? launched + report.hang.after_s : null;
    start = how === 'startup' ? launched : markerT;
    stop = hangT;
    // plus the look at the deadline (an idle Python, a lead not starved of CPU, a busy main
    // thread that stays in one place, is hung after it); a stall counts from where the main
    // thread last moved, which the next heartbeat tells
    limit = config[`${how}_timeout`] + (LOOKED_AT.includes(how) ? LOOK_S : 0) + 1;
    if (how === 'stall') limit += heartbeatS(config);
    if (how !== 'startup' && markerWait !== null && hangWait !== null && hangWait > markerWait) {
      limit = Math.round((limit + hangWait - markerWait) * 1000) / 1000; // the judge could not run sooner
    }
  }
  const known = start === null || stop === null ? null : Math.round((stop - start) * 1000) / 1000;
  return { report, measures: { how, known_s: known, limit_s: limit, live }, subs, job_id: job.id };
}

run(process.argv[2]).then((out) => {
  process.stdout.write(`${JSON.stringify(out, (k, v) => (typeof v === 'bigint' ? String(v) : v))}\n`);
  process.exit(0);
}, (err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(2);
});
