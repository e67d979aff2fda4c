'use strict';
// As tests/client/test_live_diagnosis.py: while stalled, the 'stalled'
// event and job.liveDiagnosis say why, refreshed every few seconds, and the verdict at the
// deadline agrees with the last live one.

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv, processesOfJob } = require('../test-support/e2e.js');

const SCRIPT = `
import socket, sys
from trainbridge import worker

def fetch_remote(port):
    sock = socket.create_connection(("127.0.0.1", port))
    print("connected, reading", flush=True)
    sock.recv(1024)

with worker.stage("download"):
    fetch_remote(int(sys.argv[1]))
`;

test('a stalled job says why before the deadline', async () => {
  const held = [];
  const server = net.createServer((conn) => held.push(conn)); // accepts, never answers
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  try {
    const job = launch({ command: PYTHON, args: ['-c', SCRIPT, String(port)], env: userEnv(), zeroCode: false,
      timeouts: { stallTimeout: 7, stalledAfter: 0.5 } });
    const live = [];
    let stalledAt = null;
    let hangAt = null;
    // When the supervisor said each (its clock, the listener's `t`), not when this process heard it
    const ms = (t) => t * 1000;
    job.on('state', (state, t) => { if (state === 'stalled' && stalledAt === null) stalledAt = ms(t); });
    job.on('stalled', (e, t) => live.push([ms(t), e.diagnosis]));
    job.on('hang', (_, t) => { hangAt = ms(t); });
    const report = await job.done;
    assert.equal(report.outcome, 'hung');
    assert.ok(live.length && hangAt !== null, report.summary);
    const [firstAt, first] = live[0];
    assert.ok(firstAt - stalledAt < 1000);
    assert.equal(first.kind, 'network_wait');
    assert.ok(first.summary.includes(`127.0.0.1:${port}`), first.summary);
    const before = live.filter(([t]) => t < hangAt).map(([, d]) => d);
    assert.ok(before.length >= 2, `${before.length} live diagnoses`);
    assert.ok(before.some((d) => d.summary.includes('fetch_remote')), JSON.stringify(before));
    for (let i = 1; i < live.length; i++) assert.ok(live[i][0] - live[i - 1][0] >= 1900);
    const last = live[live.length - 1][1];
    assert.deepEqual([report.diagnosis.kind, report.diagnosis.evidence.frame], [last.kind, last.frame]);
    assert.deepEqual(job.liveDiagnosis, last);
    assert.deepEqual(processesOfJob(report.job_id), []);
  } finally {
    for (const conn of held) conn.destroy();
    server.close();
  }
});

test('no live look once the hang is decided: no \'stalled\' event after \'hang\'', async () => {
  // As tests/client/test_live_diagnosis.py: while a hung job is being stopped the beacon still
  // beats; a live look then saw the tree half gone ("a child process") and was the last one a
  // face showed (the Node fault matrix failed on it under load).
  const code = 'import signal, time\nfrom trainbridge import worker\n'
    + 'signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwith worker.stage("wait"):\n    time.sleep(120)\n';
  const job = launch({ command: PYTHON, args: ['-c', code], env: userEnv(), zeroCode: false,
    timeouts: { stallTimeout: 2, stalledAfter: 0.5, killGrace: 5 } });
  const kinds = [];
  for (const name of ['stalled', 'hang', 'signal']) job.on(name, () => kinds.push(name));
  const report = await job.done;
  assert.equal(report.outcome, 'hung');
  const hang = kinds.indexOf('hang');
  assert.ok(hang > 0 && kinds.slice(0, hang).includes('stalled'), kinds.join(' '));
  assert.ok(kinds.slice(hang).includes('signal'), 'the ending did take a while');
  assert.ok(!kinds.slice(hang).includes('stalled'), kinds.join(' '));
  assert.deepEqual(processesOfJob(job.id), []);
});
