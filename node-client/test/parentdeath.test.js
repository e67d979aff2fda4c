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
const { PYTHON, userEnv, liveProcesses, processesOfJob } = require('../test-support/e2e.js');
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
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
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

test('launch({detached: true}) is refused with the way to a job that outlives its client', () => {
  assert.throws(() => launch({ command: PYTHON, args: ['-c', 'pass'], detached: true }),
    /detached: true\}\) was removed.*openStore\(path\)\.submit/);
});
