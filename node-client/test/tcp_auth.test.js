'use strict';
// The tcp fallback authenticates before it buffers (issue 11 item 3), as
// tests/client/test_tcp_auth.py: on tcp the hub is a CurveZMQ server whose public key only
// the job's environment holds; a peer without it fails the handshake and gets nothing in,
// while the job's own worker connects, authenticated, and the job runs as ever.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zmq = require('zeromq');
const { launch, Hub } = require('../src/index.js');
const { PYTHON, REPO, userEnv } = require('../test-support/e2e.js');

/** How the first handshake of a DEALER posing as the job's rank 0 ends. */
async function handshake(endpoint, job, curveServerKey = null) {
  const options = { routingId: `${job}/0/4242`, linger: 0 };
  if (curveServerKey) {
    const mine = zmq.curveKeyPair();
    Object.assign(options, { curveServerKey, curvePublicKey: mine.publicKey, curveSecretKey: mine.secretKey });
  }
  const sock = new zmq.Dealer(options);
  try {
    const ended = (async () => {
      for await (const event of sock.events) {
        if (event.type === 'handshake') return 'succeeded';
        if (event.type.startsWith('handshake:error')) return 'failed';
      }
      return 'closed';
    })();
    sock.connect(endpoint);
    sock.send([Buffer.alloc(1024, 0x93), Buffer.alloc(32)]).catch(() => undefined);
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve('no handshake in 20 s'), 20000); });
    try {
      return await Promise.race([ended, timeout]);
    } finally {
      clearTimeout(timer);
    }
  } finally {
    sock.close();
  }
}

test('on tcp, a peer without the server key gets nothing in; the worker does', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-tcp-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gate = path.join(dir, 'gate');
  const hub = new Hub({ endpoint: 'tcp://127.0.0.1:*', closeWhenIdle: true });
  const child = `import os, time\nfrom trainbridge import worker\nworker.progress(1, 2)\n`
    + `while not os.path.exists(${JSON.stringify(gate)}):\n    time.sleep(0.01)\nworker.progress(2, 2)\n`;
  const job = launch({ command: PYTHON, args: ['-c', child], env: userEnv(), cwd: REPO, zeroCode: false, hub });
  await new Promise((resolve) => job.once('hello', resolve));
  assert.match(hub.endpoint, /^tcp:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(await handshake(hub.endpoint, job.id), 'failed', 'plain tcp');
  assert.equal(await handshake(hub.endpoint, job.id, zmq.curveKeyPair().publicKey), 'failed', 'a guessed key');
  fs.writeFileSync(gate, '');
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.progress.step, 2, "the job's own worker connected, authenticated");
  assert.deepEqual(report.protocol.rejected, {}, 'nothing of theirs reached the hub');
});

test('remoteEnv() refuses, in words, an address this host does not have (as the Python client)', async () => {
  const job = launch({ command: PYTHON, args: ['-c', 'import time; time.sleep(30)'] });
  try {
    await assert.rejects(job.remoteEnv('192.0.2.7'), /listen address 192\.0\.2\.7 is not an address of this host/);
  } finally {
    job.cancel({ grace: 0 });
    await job.done.catch(() => undefined);
  }
});
