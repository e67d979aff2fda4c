#!/usr/bin/env node
'use strict';
/**
 * Time from a child's death to the job's `end` event (and to Node's 'exit' event), over N
 * runs of each kind of death. The child prints its wall clock (time.time()) as its last
 * line and dies at once; the Node side stamps `end` with performance.timeOrigin + now().
 *
 *   node bench/exit_to_end.js [runs=20]
 */

const path = require('node:path');
const { launch, resolvePython } = require('../src/index.js');

const RUNS = Number(process.argv[2] || 20);
const PYTHON = resolvePython();
const REPO = path.resolve(__dirname, '../..');

const CHILD = {
  // no last words: the process is gone before anything else can happen
  sigkill: 'import os, signal, sys, time; from trainbridge import worker\nworker.progress(1, 1)\ntime.sleep(0.3)\nprint(repr(time.time()), flush=True)\nos.kill(os.getpid(), signal.SIGKILL)',
  // a clean end: the worker's bye is acked before the process may exit
  success: 'import time; from trainbridge import worker\nworker.progress(1, 1)\ntime.sleep(0.3)\nprint(repr(time.time()), flush=True)',
  // an uncaught exception: error + bye acked, then exit 1
  exception: 'import time; from trainbridge import worker\nworker.progress(1, 1)\ntime.sleep(0.3)\nprint(repr(time.time()), flush=True)\nraise ValueError("x")',
};

const wall = () => (performance.timeOrigin + performance.now()) / 1000;
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };

async function once(code) {
  const env = { ...process.env, PYTHONPATH: REPO };
  delete env.PYTHONUNBUFFERED;
  const job = launch({ command: PYTHON, args: ['-c', code], env, zeroCode: false });
  let lastWords = null;
  let exitAt = null;
  job.on('log', (l) => { if (/^\d+\.\d+$/.test(l.text)) lastWords = Number(l.text); });
  job._child_exit_probe = null;
  const endAt = await new Promise((resolve) => {
    job.once('end', () => resolve(wall()));
    const poll = setInterval(() => {
      if (job._child) {
        clearInterval(poll);
        job._child.once('exit', () => { exitAt = wall(); });
      }
    }, 1);
  });
  const report = await job.done;
  return { outcome: report.outcome, deathToEndMs: (endAt - lastWords) * 1000, exitToEndMs: (endAt - exitAt) * 1000 };
}

async function main() {
  const results = {};
  for (const [kind, code] of Object.entries(CHILD)) {
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await once(code));
    const death = runs.map((r) => r.deathToEndMs);
    const exit = runs.map((r) => r.exitToEndMs);
    results[kind] = {
      outcome: runs[0].outcome,
      runs: RUNS,
      death_to_end_ms: { median: +median(death).toFixed(1), p90: +pct(death, 0.9).toFixed(1), min: +Math.min(...death).toFixed(1), max: +Math.max(...death).toFixed(1) },
      exit_event_to_end_ms: { median: +median(exit).toFixed(1), p90: +pct(exit, 0.9).toFixed(1) },
    };
    console.error(`${kind}: median death->end ${results[kind].death_to_end_ms.median} ms`);
  }
  console.log(JSON.stringify({ node: process.version, results }, null, 2));
}

main();
