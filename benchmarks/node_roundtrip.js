'use strict';
// node benchmarks/node_roundtrip.js PYTHON CODE PINGS: ping round trips in seconds as JSON.
// node benchmarks/node_roundtrip.js --raw PYTHON ECHO PINGS: the same count of raw zeromq.js
// ROUTER -> DEALER echo round trips (the Node baseline: no codec, no signing, no client).
const path = require('path');

const raw = process.argv[2] === '--raw';
const [python, code, pings] = process.argv.slice(raw ? 3 : 2);

async function rawPingPong() {
  const zmq = require(path.join(__dirname, 'node_modules', 'zeromq'));
  const { spawn } = require('child_process');
  const router = new zmq.Router();
  await router.bind('tcp://127.0.0.1:*');
  const child = spawn(python, ['-c', code, router.lastEndpoint], { stdio: 'inherit' });
  const [peer] = await router.receive(); // b'ready'
  const rtts = [];
  for (let i = 0; i < Number(pings); i += 1) {
    const t = process.hrtime.bigint();
    await router.send([peer, 'ping']);
    await router.receive();
    rtts.push(Number(process.hrtime.bigint() - t) / 1e9);
  }
  await router.send([peer, 'stop']);
  await new Promise((resolve) => child.once('exit', resolve));
  router.close();
  console.log(JSON.stringify({ rtts_s: rtts }));
  process.exit(0);
}

if (raw) {
  rawPingPong().catch((err) => { console.error(err); process.exit(1); });
} else {
  const { launch } = require(path.join(__dirname, '..', 'node-client'));
  const job = launch({ command: python, args: ['-c', code], cwd: path.join(__dirname, '..') });
  job.once('hello', async () => {
    const rtts = [];
    for (let i = 0; i < Number(pings); i += 1) {
      // The caller's wall time around the call: what a user of ping() waits.
      const t = process.hrtime.bigint();
      const rtt = await job.ping({ timeout: 5 });
      if (rtt === null) { console.error('ping went unanswered'); process.exit(1); }
      rtts.push(Number(process.hrtime.bigint() - t) / 1e9);
    }
    job.cancel({ grace: 0.2 });
    await job.done;
    console.log(JSON.stringify({ rtts_s: rtts }));
    process.exit(0);
  });
}
