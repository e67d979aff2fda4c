#!/usr/bin/env node
'use strict';
/**
 * The Node side of the demo: supervise the Python demo training script
 * (examples/demo_train.py) and show its stages, a progress bar and the final report.
 *
 *   npm run demo                              # succeeded
 *   npm run demo -- --fail-at train           # failed: an exception in stage 'train'
 *   npm run demo -- --crash-at model          # crashed: SIGSEGV in native code
 *   npm run demo -- --hang-at data --stall-timeout 5   # hung, with stacks
 *   npm run demo -- --script ../tests/zerocode/scripts/torch_loop.py
 *                                             # an unmodified script: zero-code stages and steps
 *
 * Options of this script: --stall-timeout S, --report FILE, --script PATH (another Python
 * script instead of demo_train.py); the rest go to the script.
 */

const fs = require('node:fs');
const path = require('node:path');
const { launch, resolvePython, toJSON } = require('../src/index.js');

const SCRIPT = path.resolve(__dirname, '../../examples/demo_train.py');

function parseArgs(argv) {
  const out = { stallTimeout: null, report: null, script: SCRIPT, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--stall-timeout') out.stallTimeout = Number(argv[++i]);
    else if (argv[i] === '--report') out.report = argv[++i];
    else if (argv[i] === '--script') out.script = path.resolve(argv[++i]);
    else out.rest.push(argv[i]);
  }
  return out;
}

function bar(step, total, width = 30) {
  if (!total) return `step ${step}`;
  const done = Math.max(0, Math.min(width, Math.round((Number(step) / Number(total)) * width)));
  return `[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${step}/${total}`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const tty = process.stdout.isTTY;
  const job = launch({
    command: resolvePython(),
    args: [args.script, ...args.rest],
    cwd: process.cwd(),
    timeouts: { startupTimeout: 120, stallTimeout: args.stallTimeout, killGrace: 3 },
  });
  let barShown = false;
  let lastPrinted = 0;
  const clearBar = () => { if (barShown && tty) process.stdout.write('\r\x1b[K'); barShown = false; };
  const say = (text) => { clearBar(); console.log(text); };

  job.on('hello', (h) => say(`[trainbridge] worker hello: pid ${h.pid}, python ${h.python.version}`));
  job.on('stage', (s) => {
    if (s.event === 'begin') say(`[stage] ${'  '.repeat(s.depth)}> ${s.name}${s.budget_s ? ` (budget ${s.budget_s} s)` : ''}`);
    else say(`[stage] ${'  '.repeat(s.depth)}< ${s.name}: ${s.status} in ${Number(s.duration_s).toFixed(2)} s`);
  });
  job.on('progress', (p) => {
    const loss = typeof p.metrics.loss === 'number' ? `  loss ${p.metrics.loss.toFixed(4)}` : '';
    const line = `[train] ${bar(p.step, p.total)}${loss}`;
    if (tty) {
      process.stdout.write(`\r\x1b[K${line}`);
      barShown = true;
    } else if (Date.now() - lastPrinted > 500 || p.step === p.total) {
      console.log(line); // a pipe gets a line every half second, not a redraw per step
      lastPrinted = Date.now();
    }
  });
  job.on('log', (l) => { if (l.stream !== 'worker') say(`  ${l.stream === 'stderr' ? '!' : '|'} ${l.text}`); });
  job.on('stalled', (s) => say(`[trainbridge] stalled in stage ${s.stage}: no progress for ${s.idle_s} s`));
  job.on('error', (err) => say(`[trainbridge] Python error: ${err.name}: ${err.message}`));

  const report = await job.done;
  clearBar();
  for (const line of reportLines(report)) console.log(line);
  if (args.report) {
    fs.writeFileSync(args.report, toJSON(report), { mode: 0o600 });
    console.log(`the whole report (JSON): ${args.report}`);
  } else console.log('the whole report as JSON: --report FILE');
  process.exitCode = report.outcome === 'succeeded' ? 0 : 1;
}

/** The report in a few lines a person reads (the whole of it goes to --report FILE). */
function reportLines(report) {
  const lines = ['', `=== ${report.outcome} (exit ${report.exit_code ?? report.signal}) in ${report.duration_s.toFixed(1)} s ===`];
  const stages = (report.stages || []).filter((s) => s.name !== 'main');
  if (stages.length) lines.push(`stages: ${stages.map((s) => `${s.name} ${s.duration_s == null ? '?' : s.duration_s.toFixed(1)} s ${s.status}`).join(', ')}`);
  if (report.progress) lines.push(`progress: ${report.progress.step}/${report.progress.total ?? '?'}`);
  if (report.error) lines.push(`error: ${report.error.type}: ${report.error.message}`);
  if (report.diagnosis) lines.push(`diagnosis: ${report.diagnosis.kind}: ${report.diagnosis.summary}`);
  if (report.stacks) lines.push(`stacks: ${report.stacks.split('\n').length} lines (in the report)`);
  lines.push('', report.summary);
  return lines;
}

main().catch((err) => {
  console.error(`demo failed to run: ${err.message}`);
  process.exitCode = 2;
});
