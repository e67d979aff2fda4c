'use strict';
// The files a job made, in the Node client: 'artifact' events and report.artifacts, as the
// Python client lists them (tests/client/test_artifacts.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { launch } = require('../src/index.js');
const { PYTHON, userEnv, processesOfJob } = require('../test-support/e2e.js');

test('files the script names and an unmodified script saves are events and report entries', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-artifacts-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  const code = [
    'import os, sys, torch',
    'from PIL import Image',
    'from trainbridge import worker',
    'out = sys.argv[1]',
    'worker.progress(10, 100)',
    'open(os.path.join(out, "ckpt-10.pt"), "wb").write(b"x" * 1000)',
    'worker.artifact(os.path.join(out, "ckpt-10.pt"))',
    'Image.new("RGB", (4, 4)).save(os.path.join(out, "sample.png"))',
    'torch.save({"w": 1}, os.path.join(out, "model.pt"))',
  ].join('\n');
  const job = launch({ command: PYTHON, args: ['-c', code, out], env: userEnv() });
  const said = [];
  job.on('artifact', (a) => said.push(a.name));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', report.summary);
  assert.deepEqual(said, ['ckpt-10.pt', 'sample.png', 'model.pt']);
  assert.deepEqual(report.artifacts.map((a) => [a.name, a.kind, a.step, a.by, a.rank]), [
    ['ckpt-10.pt', 'checkpoint', 10, 'script', 0],
    ['sample.png', 'image', 10, 'Image.save', 0],
    ['model.pt', 'checkpoint', 10, 'torch.save', 0],
  ]);
  assert.equal(report.artifacts[0].bytes, 1000);
  assert.equal(report.artifacts[0].path, path.join(out, 'ckpt-10.pt'));
  assert.deepEqual(processesOfJob(report.job_id), []);
});
