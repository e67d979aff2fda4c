#!/usr/bin/env node
'use strict';
/**
 * From the stall deadline (last progress + stallTimeout) to the `hang` event, and to the
 * job's `end` (stacks collected, tree killed), over N runs.
 *
 *   node bench/stall_to_hung.js [runs=10]
 */

const path = require('node:path');
const { launch, resolvePython } = require('../src/index.js');

const RUNS = Number(process.argv[2] || 10);
const STALL_S = 0.5;
const REPO = path.resolve(__dirname, '../..');
const CHILD = 'import time; from trainbridge import worker\nworker.progress(1, 10)\nwhile True:\n    time.sleep(0.05)';
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function once() {
  const env = { ...process.env, PYTHONPATH: REPO };
  delete env.PYTHONUNBUFFERED;
  const job = launch({ command: resolvePython(), args: ['-c', CHILD], env, zeroCode: false, timeouts: { stallTimeout: STALL_S, killGrace: 1 } });
  let progressAt = null;
  let hangAt = null;
  job.on('progress', () => { progressAt = performance.now(); });
  job.on('hang', () => { hangAt = performance.now(); });
  await job.done;
  const deadline = progressAt + STALL_S * 1000;
  return { toHang: hangAt - deadline, toEnd: performance.now() - deadline };
}

(async () => {
  const runs = [];
  for (let i = 0; i < RUNS; i++) runs.push(await once());
  console.log(JSON.stringify({
    runs: RUNS,
    stall_deadline_to_hang_event_ms: { median: +median(runs.map((r) => r.toHang)).toFixed(1), max: +Math.max(...runs.map((r) => r.toHang)).toFixed(1) },
    stall_deadline_to_end_ms: { median: +median(runs.map((r) => r.toEnd)).toFixed(1) },
  }, null, 2));
})();
