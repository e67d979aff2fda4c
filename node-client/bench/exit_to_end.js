#!/usr/bin/env node
'use strict';
/**
 * Time from a child's death to the job's `end` event, over N runs of each kind of death,
 * through Node's launch() (the job server judges, the feed carries the end) and, side by
 * side, the Python client's bridge.launch() on the same children (its 'end' event). The
 * child prints its wall clock (time.time()) as its last line and dies at once; each side
 * stamps `end` with its wall clock.
 *
 *   node bench/exit_to_end.js [runs=20]
 */

const path = require('node:path');
const { execFileSync } = require('node:child_process');
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
  job.on('log', (l) => { if (/^\d+\.\d+$/.test(l.text)) lastWords = Number(l.text); });
  const endAt = await new Promise((resolve) => job.once('end', () => resolve(wall())));
  const report = await job.done;
  return { outcome: report.outcome, deathToEndMs: (endAt - lastWords) * 1000 };
}

/** The same children under the Python client (bridge.launch): its 'end' event, the baseline. */
function python(code, runs) {
  const driver = `
import json, sys, time
from trainbridge import bridge
out = []
for _ in range(int(sys.argv[2])):
    last, end = [None], [None]
    def on(e):
        if e["event"] == "output":
            try: last[0] = float(e["text"])
            except ValueError: pass
        elif e["event"] == "end":
            end[0] = time.time()
    job = bridge.launch([sys.executable, "-c", sys.argv[1]], zero_code=False, on_event=on)
    job.wait(60)
    out.append((end[0] - last[0]) * 1000)
print(json.dumps(out))
`;
  const env = { ...process.env, PYTHONPATH: REPO };
  delete env.PYTHONUNBUFFERED;
  return JSON.parse(execFileSync(PYTHON, ['-c', driver, code, String(runs)], { env }).toString());
}

async function main() {
  const results = {};
  for (const [kind, code] of Object.entries(CHILD)) {
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await once(code));
    const death = runs.map((r) => r.deathToEndMs);
    const py = python(code, RUNS);
    const sum = (xs) => ({ median: +median(xs).toFixed(1), p90: +pct(xs, 0.9).toFixed(1), p99: +pct(xs, 0.99).toFixed(1), max: +Math.max(...xs).toFixed(1) });
    results[kind] = { outcome: runs[0].outcome, runs: RUNS, node_death_to_end_ms: sum(death), python_death_to_end_ms: sum(py) };
    console.error(`${kind}: death->end p99 node ${results[kind].node_death_to_end_ms.p99} ms, python ${results[kind].python_death_to_end_ms.p99} ms`);
  }
  console.log(JSON.stringify({ node: process.version, results }, null, 2));
}

main();
