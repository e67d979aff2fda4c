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

test('a bad-MAC flood leaves the client within its memory budget and the report right', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-flood-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gate = path.join(dir, 'gate');
  const client = spawn(process.execPath, [path.join(__dirname, '../test-support/flood_client.js'), PYTHON, gate],
    { cwd: REPO, env: userEnv(), stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => client.kill('SIGKILL'));
  const lines = readline.createInterface({ input: client.stdout })[Symbol.asyncIterator]();
  const hello = JSON.parse((await lines.next()).value);
  const before = statusBytes(hello.pid, 'VmRSS');
  await flood(hello.endpoint, hello.job);
  fs.writeFileSync(gate, '');
  const report = JSON.parse((await lines.next()).value);
  const peak = statusBytes(hello.pid, 'VmHWM');
  client.stdin.end();
  console.log(`client RSS ${Math.round(before / 2 ** 20)} MiB before, peak ${Math.round(peak / 2 ** 20)} MiB`);
  assert.ok(peak - before < BUDGET, `peak RSS grew by ${Math.round((peak - before) / 2 ** 20)} MiB`);
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.progress.step, 2);
  assert.deepEqual(report.protocol.rejected, { bad_signature: FRAMES }, 'each one counted');
});
