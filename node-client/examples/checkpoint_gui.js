#!/usr/bin/env node
'use strict';
/**
 * The GUI side of the two-way message demo, with the Node client: when the script says it
 * is ready, ask it for a checkpoint; print the path it answers with; then ask it to stop.
 * The script is examples/checkpoint_train.py (the same one examples/checkpoint_gui.py runs).
 *
 *   node examples/checkpoint_gui.js
 */

const path = require('node:path');
const { launch, resolvePython } = require('../src/index.js');

const SCRIPT = path.resolve(__dirname, '../../examples/checkpoint_train.py');

async function main() {
  const job = launch({ command: resolvePython(), args: [SCRIPT, '2000'], timeouts: { startupTimeout: 60 } });
  job.on('message', (data) => {
    if (data.ready) job.send({ cmd: 'checkpoint', id: 1 });
    else if (data.checkpoint) {
      console.log(`checkpoint saved at ${data.checkpoint} (step ${data.step})`);
      job.send({ cmd: 'stop' });
    } else if (data.stopping) console.log(`the script stops at step ${data.stopping}`);
  });
  const report = await job.done;
  console.log(`outcome: ${report.outcome}`);
  process.exitCode = report.outcome === 'succeeded' ? 0 : 1;
}

main();
