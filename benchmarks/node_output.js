'use strict';
// node benchmarks/node_output.js MODE PYTHON SCRIPT ARGS...: run a flooding child to its end
// (bench_output.py times the whole process), as a Node GUI would:
//   python-shell  PythonShell in text mode, counting its 'message' events (the baseline)
//   launch        the Node client's launch(), awaiting done (the job server supervises it)
// Exits 1 when the child did not succeed or a line is missing.
const path = require('path');
const { PythonShell } = require('python-shell');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const [mode, python, script, ...args] = process.argv.slice(2);
const lines = Number(args[0]);
const env = { ...process.env };
delete env.PYTHONUNBUFFERED;

async function main() {
  if (mode === 'python-shell') {
    let count = 0;
    const shell = new PythonShell(script, { mode: 'text', pythonPath: python, args, env });
    shell.on('message', () => { count += 1; });
    await new Promise((resolve, reject) => shell.end((err) => (err ? reject(err) : resolve())));
    if (count !== lines) throw new Error(`python-shell saw ${count} of ${lines} lines`);
    return;
  }
  if (mode === 'launch') {
    const job = launch({ command: python, args: [script, ...args], env });
    const report = await job.done;
    if (report.outcome !== 'succeeded') throw new Error(report.summary);
    return;
  }
  throw new Error(`unknown mode ${mode}`);
}

main().then(() => process.exit(0), (err) => { console.error(String(err)); process.exit(1); });
