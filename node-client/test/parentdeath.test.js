'use strict';
// When the supervising Node client dies (SIGKILL), the job's whole tree ends within
// killGrace (+ a little); a job that must outlive it is a scheduled one (store.test.js). The client is a real Node
// process running launch(); the job is tests/parentdeath/job_child.py with a grandchild.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { PYTHON, userEnv, liveProcesses, processesOfJob, jobServers } = require('../test-support/e2e.js');
const { launch } = require('../src/index.js');

const CHILD = path.resolve(__dirname, '../../tests/parentdeath/job_child.py');
const INDEX = path.resolve(__dirname, '../src/index.js');
const KILL_GRACE = 1;
const STARTUP_MS = 30000; // generous: a test that needs it has failed anyway

// The client: launch the job, then stay alive (a pending timer) until killed.
const CLIENT = `
const { launch } = require(${JSON.stringify(INDEX)});
const [python, child, killGrace, detached, ...rest] = process.argv.slice(1);
launch({ command: python, args: [child, ...rest], detached: detached === '1',
  timeouts: { killGrace: Number(killGrace), startupTimeout: 60 } });
setInterval(() => undefined, 1 << 30);
`;

async function waitFor(condition, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10)); // polling a condition, not a sync sleep
  }
}

const readJson = (file) => { try { return JSON.parse(fs.readFileSync(file, 'ascii')); } catch { return null; } };

async function startClient({ detached = false, childOptions = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-parentdeath-'));
  const pidsFile = path.join(dir, 'pids.json');
  const client = spawn(process.execPath, ['-e', CLIENT, PYTHON, CHILD, String(KILL_GRACE), detached ? '1' : '0',
    pidsFile, ...childOptions], { env: userEnv(), stdio: 'ignore' });
  let exited = false;
  const gone = new Promise((resolve) => client.once('exit', () => { exited = true; resolve(); }));
  const info = await waitFor(() => readJson(pidsFile) || exited, STARTUP_MS, "the job's pids");
  assert.equal(exited, false, 'the client ended early');
  return { client, gone, info, pidsFile, dir };
}

async function killClient({ client, gone }) {
  client.kill('SIGKILL');
  await gone;
}

const jobAlive = ({ pids, job_id: jobId }) => liveProcesses(pids).length > 0 || processesOfJob(jobId).length > 0;

function killJob({ pids, job_id: jobId }) {
  for (const pid of [...liveProcesses(pids), ...processesOfJob(jobId)]) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
}

async function assertTreeEnds(info) {
  try {
    await waitFor(() => !jobAlive(info), (KILL_GRACE + 2) * 1000, `the job's tree ${info.pids} to end`);
  } finally {
    killJob(info); // a failed test must not leave its job running
  }
}

test('parent death: killing the Node client ends the job tree', async () => {
  const started = await startClient();
  assert.equal(liveProcesses(started.info.pids).length, 2);
  await killClient(started);
  await assertTreeEnds(started.info);
  fs.rmSync(started.dir, { recursive: true, force: true });
});

test('parent death: a job that ignores SIGTERM is killed after the grace', async () => {
  const started = await startClient({ childOptions: ['ignore_term'] });
  await killClient(started);
  await assertTreeEnds(started.info);
  fs.rmSync(started.dir, { recursive: true, force: true });
});

test('supervisor death: the job server SIGKILLed mid-job ends the job lost, says what was last known, and the tree ends', async () => {
  // The job server is this process's Python supervisor (bridge/jobserve.py): when it dies, no
  // judge is left, so the job is 'lost' (as a scheduled job whose keeper died), and its
  // workers end its tree (TRAINBRIDGE_CLIENT_PID is the server's pid).
  const code = [
    'import subprocess, time',
    'from trainbridge import worker',
    'subprocess.Popen(["sleep", "300"])',
    'with worker.stage("train"):',
    '    worker.progress(4, 10)',
    '    time.sleep(300)',
  ].join('\n');
  const job = launch({ command: PYTHON, args: ['-c', code], env: userEnv(), zeroCode: false,
    timeouts: { killGrace: KILL_GRACE } });
  await new Promise((resolve) => job.on('status', (s) => { if (s.step === 4 && s.stages.includes('train')) resolve(); }));
  const servers = jobServers();
  assert.equal(servers.length, 1, `this process's one job server: ${servers}`);
  const t0 = performance.now();
  process.kill(servers[0], 'SIGKILL');
  const report = await job.done;
  assert.ok(performance.now() - t0 < 5000, `lost after ${performance.now() - t0} ms`);
  assert.equal(report.outcome, 'lost');
  assert.equal(report.stage, 'train');
  assert.deepEqual(report.progress, { step: 4, total: 10 });
  assert.match(report.note, /trainbridge supervisor .* is gone: it exited with SIGKILL/);
  assert.match(report.note, /Last known: state running, stage 'train', step 4 of 10/);
  assert.equal(report.reason, report.note);
  assert.equal(report.summary, `Job lost: ${report.note}.`);
  const info = { pids: [report.pid], job_id: report.job_id };
  await assertTreeEnds(info); // the script and its sleep: the workers end the group
  // The next launch starts a new server.
  assert.equal((await launch({ command: PYTHON, args: ['-c', 'pass'], env: userEnv() }).done).outcome, 'succeeded');
});

test('launch({detached: true}) is refused with the way to a job that outlives its client', () => {
  assert.throws(() => launch({ command: PYTHON, args: ['-c', 'pass'], detached: true }),
    /detached: true\}\) was removed.*openStore\(path\)\.submit/);
});
