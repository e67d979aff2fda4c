'use strict';
// node benchmarks/node_launch.js MODE PYTHON ROUNDS: milliseconds from the call to the child's
// first output line, as a JSON list, for MODE:
//   spawn  child_process.spawn(PYTHON) and its first stdout line (the baseline: no supervision)
//   warm   launch() in a Node process whose job server already runs (the second launch on)
//   cold   launch() in a fresh Node process: the job server starts with it (one sample per
//          process; bench_node_launch.py starts ROUNDS of them)
//   prepared  the first launch() of a fresh Node process that awaited prepare() first (a GUI's
//          start-up; not timed)
// The child prints at once and exits, as a script's first print(); PYTHONUNBUFFERED is removed.
const path = require('path');
const { spawn } = require('child_process');
const { launch, prepare } = require(path.join(__dirname, '..', 'node-client'));

const [mode, python, rounds] = process.argv.slice(2);
const CODE = 'print("first", flush=True)';
const env = { ...process.env };
delete env.PYTHONUNBUFFERED;

function direct() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(python, ['-c', CODE], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let first = null;
    child.stdout.on('data', () => { if (first === null) first = performance.now() - t0; });
    child.on('error', reject);
    child.on('close', () => resolve(first));
  });
}

async function supervised() {
  const t0 = performance.now();
  const job = launch({ command: python, args: ['-c', CODE], env });
  let first = null;
  job.on('log', (l) => { if (first === null && l.stream === 'stdout') first = performance.now() - t0; });
  const report = await job.done;
  if (report.outcome !== 'succeeded') throw new Error(report.summary);
  return first;
}

(async () => {
  const out = [];
  if (mode === 'spawn') for (let i = 0; i < Number(rounds); i += 1) out.push(await direct());
  else if (mode === 'warm') {
    await supervised(); // the job server starts here
    for (let i = 0; i < Number(rounds); i += 1) out.push(await supervised());
  } else if (mode === 'cold') out.push(await supervised());
  else if (mode === 'prepared') {
    await prepare({ python });
    out.push(await supervised());
  }
  else throw new Error(`unknown mode ${mode}`);
  process.stdout.write(`${JSON.stringify(out)}\n`);
})().catch((err) => { console.error(err); process.exit(1); });
