#!/usr/bin/env node
'use strict';
/**
 * Event throughput into Node: a Python worker floods worker.log() records (and progress)
 * as fast as it can; we count what arrives as 'log' events per second, what the worker
 * reports as dropped (its bounded queue), and, for scale, how many messages per second
 * Node's codec alone verifies and decodes.
 *
 *   node bench/throughput.js [records=200000]
 */

const crypto = require('node:crypto');
const path = require('node:path');
const { launch, resolvePython } = require('../src/index.js');
const codec = require('../src/codec.js');

const N = Number(process.argv[2] || 200000);
const REPO = path.resolve(__dirname, '../..');

// paced=True keeps the worker's 10,000-record log queue from overflowing (nothing dropped:
// the delivered rate); paced=False floods and lets the worker count drops.
const child = (paced) => `
import time; from trainbridge import worker
from worker.runtime import STATE
queue = getattr(STATE, "logs", None)
queue = STATE.events if queue is None else queue  # where the worker keeps waiting records
n = ${N}
t0 = time.perf_counter()
for i in range(n):
    while ${paced ? 'True' : 'False'} and len(queue) > 8000:
        time.sleep(0.0002)
    worker.log(f"record {i} loss=0.123")
    if i % 64 == 0:
        worker.progress(i, n, loss=0.5)
worker.progress(n, n)
print(f"python side: {n} calls in {time.perf_counter() - t0:.3f} s", flush=True)
time.sleep(1.5)  # one more heartbeat carries the drop counters
`;

async function flood(paced) {
  const CHILD = child(paced);
  const env = { ...process.env, PYTHONPATH: REPO };
  delete env.PYTHONUNBUFFERED;
  const job = launch({ command: resolvePython(), args: ['-c', CHILD], env, zeroCode: false });
  let logs = 0;
  let progress = 0;
  let first = null;
  let last = null;
  let dropped = 0;
  let pyLine = '';
  job.on('log', (l) => {
    if (l.stream !== 'worker') { if (l.text.startsWith('python side')) pyLine = l.text; return; }
    const t = performance.now();
    if (first === null) first = t;
    last = t;
    logs += 1;
  });
  job.on('progress', () => { progress += 1; });
  job.on('heartbeat', (hb) => { dropped = Number(hb.dropped.log || 0); });
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const report = await job.done;
  const cpu = process.cpuUsage(cpu0);
  const nodeCpuShare = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
  const seconds = (last - first) / 1000;
  return {
    outcome: report.outcome, records_sent: N, log_events_received: logs, dropped_by_worker: dropped,
    progress_events_received: progress, seconds: +seconds.toFixed(3),
    log_events_per_s: Math.round(logs / seconds), python: pyLine,
    protocol: report.protocol, node_cpu_share_of_one_core: +nodeCpuShare.toFixed(2),
  };
}

function codecOnly() {
  const key = crypto.randomBytes(32);
  const frames = codec.encode('log', 1, { level: 'info', message: 'record 12345 loss=0.123', created: 1764460800.25 }, key, 'job-1');
  const hb = codec.encode('heartbeat', 1, { beat: 1, stage: 'train', stages: ['main', 'train'], idle_s: 0.1, progress_age_s: 0.05, dropped: { log: 0 }, rss_bytes: 123456789, cpu_s: 1.5, threads: 5 }, key, 'job-1');
  const out = {};
  for (const [name, f] of [['log', frames], ['heartbeat', hb]]) {
    for (let i = 0; i < 20000; i++) codec.decode(f, key, 'worker'); // warm up
    const n = 200000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) codec.decode(f, key, 'worker');
    out[`${name}_decodes_per_s`] = Math.round(n / ((performance.now() - t0) / 1000));
  }
  return out;
}

(async () => {
  const result = { node: process.version, paced: await flood(true), flood: await flood(false), codec_only: codecOnly() };
  console.log(JSON.stringify(result, null, 2));
})();
