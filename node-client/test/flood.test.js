'use strict';
// Bounded memory under hostile input (issue 11 item 3), as tests/client/test_flood.py: 5,000
// max-size frames with a bad MAC, sent as fast as the client takes them, leave the client's
// peak RSS under +64 MiB, and the job ends as it would have, every rejected frame counted.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const zmq = require('zeromq');
const codec = require('../src/codec.js');
const { PYTHON, REPO, userEnv } = require('../test-support/e2e.js');

const FRAMES = 5000;
const BUDGET = 64 * 1024 * 1024;

function statusBytes(pid, field) {
  const line = fs.readFileSync(`/proc/${pid}/status`, 'latin1').split('\n').find((l) => l.startsWith(`${field}:`));
  return Number(line.split(/\s+/)[1]) * 1024;
}

async function flood(endpoint, job) {
  const sock = new zmq.Dealer({ routingId: `${job}/0/4242`, sendHighWaterMark: 8, sendTimeout: 60000, linger: -1 });
  sock.connect(endpoint);
  const envelope = Buffer.alloc(codec.MAX_MESSAGE_BYTES, 0x93);
  const mac = Buffer.alloc(32);
  for (let i = 0; i < FRAMES; i += 1) await sock.send([envelope, mac]); // waits while the client does not read
  sock.close();
}

/**
 * test-support/flood_client.js as a process: resolves to its hello ({endpoint, job, pid}) and
 * finish(frames), which tells it how many frames were sent (it ends the job once it has counted
 * them all) and resolves to {report, peak}: the job's report and the client's peak RSS, read
 * before the process is let go (stdin closed).
 */
async function floodClient(t, gate) {
  const client = spawn(process.execPath, [path.join(__dirname, '../test-support/flood_client.js'), PYTHON, gate],
    { cwd: REPO, env: userEnv(), stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => client.kill('SIGKILL'));
  const lines = readline.createInterface({ input: client.stdout })[Symbol.asyncIterator]();
  const hello = JSON.parse((await lines.next()).value);
  const finish = async (frames) => {
    client.stdin.write(`${frames}\n`);
    const report = JSON.parse((await lines.next()).value);
    const peak = statusBytes(hello.pid, 'VmHWM');
    client.stdin.end();
    return { report, peak };
  };
  return { hello, finish };
}

test('a bad-MAC flood leaves the client within its memory budget and the report right', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-flood-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const { hello, finish } = await floodClient(t, path.join(dir, 'gate'));
  const before = statusBytes(hello.pid, 'VmRSS');
  await flood(hello.endpoint, hello.job);
  const { report, peak } = await finish(FRAMES);
  console.log(`client RSS ${Math.round(before / 2 ** 20)} MiB before, peak ${Math.round(peak / 2 ** 20)} MiB`);
  assert.ok(peak - before < BUDGET, `peak RSS grew by ${Math.round((peak - before) / 2 ** 20)} MiB`);
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.progress.step, 2);
  const { rejected } = report.protocol;
  assert.deepEqual(Object.keys(rejected).filter((k) => !['bad_signature', 'over_budget'].includes(k)), [], JSON.stringify(rejected));
  assert.equal((rejected.bad_signature || 0) + (rejected.over_budget || 0), FRAMES, 'each one counted');
  assert.ok(rejected.over_budget > 0, 'past the budget the sender goes unverified');
});

const SENDERS = 8; // hostile processes, each with its own connection
const EACH = 250; // 1 MiB frames each

test('a flood from many processes is budgeted in total, every frame counted (as test_flood.py)', async (t) => {
  const { UNAUTH_BUDGET_BYTES, UNAUTH_WINDOW_S } = require('../src/intake.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-flood-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const { hello, finish } = await floodClient(t, path.join(dir, 'gate'));
  const before = statusBytes(hello.pid, 'VmRSS');
  const started = performance.now() / 1000;
  const sender = path.join(REPO, 'tests', 'client', 'flood_sender.py');
  const env = { ...userEnv(), PYTHONPATH: REPO };
  const codes = await Promise.all(Array.from({ length: SENDERS }, (_, i) => new Promise((resolve) => {
    spawn(PYTHON, [sender, hello.endpoint, `${hello.job}/0/${7000 + i}`, String(EACH)], { cwd: REPO, env, stdio: 'inherit' })
      .on('exit', resolve);
  })));
  assert.deepEqual(codes, Array(SENDERS).fill(0));
  const took = performance.now() / 1000 - started;
  const { report, peak } = await finish(SENDERS * EACH);
  const { rejected } = report.protocol;
  console.log(`${SENDERS} senders x ${EACH} MiB in ${took.toFixed(1)} s: client RSS ${Math.round(before / 2 ** 20)} MiB before, peak ${Math.round(peak / 2 ** 20)} MiB; rejected ${JSON.stringify(rejected)}`);
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.progress.step, 2);
  assert.equal((rejected.bad_signature || 0) + (rejected.over_budget || 0), SENDERS * EACH, 'each one counted');
  assert.ok(rejected.over_budget > 0, JSON.stringify(rejected));
  const windows = took / UNAUTH_WINDOW_S + 2;
  const frame = codec.MAX_MESSAGE_BYTES;
  assert.ok((rejected.bad_signature || 0) * frame <= windows * (UNAUTH_BUDGET_BYTES + frame) + SENDERS * frame, JSON.stringify(rejected));
});
