'use strict';
// The Node GPU room (src/gpu.js, twin of bridge/gpu.py): nvidia-smi's CSV into the evidence's
// gpu facts, and the query run against a stand-in nvidia-smi on PATH (a script printing what
// the real one prints), so the path is exercised on machines without a GPU too.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const gpu = require('../src/gpu.js');

const MIB = 1024 * 1024;
const TWO_GPUS = '0, GPU-aaa, NVIDIA H200, 97, 81000, 143771\n1, GPU-bbb, NVIDIA H200, 0, 4, 143771\n';
const APPS = '4242, GPU-aaa\n99, GPU-bbb\n';

test('parse: one entry per device, memory in bytes, used_by_job from the job\'s pids', () => {
  const { gpu: devices, gpu_note: note } = gpu.parse(TWO_GPUS, APPS, [4242, 4243]);
  assert.equal(note, null);
  assert.deepEqual(devices, [
    { index: 0, name: 'NVIDIA H200', util_percent: 97, mem_used: 81000 * MIB, mem_total: 143771 * MIB, used_by_job: true },
    { index: 1, name: 'NVIDIA H200', util_percent: 0, mem_used: 4 * MIB, mem_total: 143771 * MIB, used_by_job: false },
  ]);
});

test('parse: without the apps answer used_by_job stays unknown; odd values are null', () => {
  const { gpu: devices } = gpu.parse('0, GPU-aaa, Tesla T4, [N/A], [N/A], 15360\n', null, [1]);
  assert.deepEqual(devices, [{ index: 0, name: 'Tesla T4', util_percent: null, mem_used: null, mem_total: 15360 * MIB }]);
  assert.equal('used_by_job' in devices[0], false);
});

test('parse: no device line is no GPU, with a note', () => {
  assert.deepEqual(gpu.parse('No devices were found\n'), { gpu: null, gpu_note: 'no NVIDIA GPU (nvidia-smi: 0 devices)' });
});

function withFakeSmi(script, fn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-smi-'));
  fs.writeFileSync(path.join(dir, 'nvidia-smi'), `#!/bin/sh\n${script}\n`, { mode: 0o755 });
  const saved = process.env.PATH;
  process.env.PATH = `${dir}:${saved}`;
  return Promise.resolve()
    .then(fn)
    .finally(() => {
      process.env.PATH = saved;
      fs.rmSync(dir, { recursive: true, force: true });
    });
}

const within = (promise, ms) => Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms))]);

test('start + facts: both queries asked, answered within the deadline', () => withFakeSmi(
  `case "$1" in --query-gpu=*) printf '${TWO_GPUS.replace(/\n/g, '\\n')}' ;; *) printf '${APPS.replace(/\n/g, '\\n')}' ;; esac`,
  async () => {
    const handle = gpu.start([4242]);
    await within(handle.done, 10000);
    const facts = gpu.facts(handle);
    assert.equal(facts.gpu_note, null);
    assert.deepEqual(facts.gpu.map((g) => [g.index, g.util_percent, g.used_by_job]), [[0, 97, true], [1, 0, false]]);
  },
));

test('start + facts: a failing nvidia-smi is a note, and facts() before the answer says so', () => withFakeSmi(
  'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver" >&2; exit 9',
  async () => {
    const handle = gpu.start([1]);
    assert.deepEqual(gpu.facts(handle), { gpu: null, gpu_note: 'nvidia-smi did not answer within the evidence window' });
    await within(handle.done, 10000);
    const facts = gpu.facts(handle);
    assert.equal(facts.gpu, null);
    assert.equal(facts.gpu_note, 'no NVIDIA GPU (nvidia-smi: exit 9: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver)');
  },
));

// Last: it leaves the run's cache saying that nvidia-smi is missing.
test('without nvidia-smi on PATH: a note, remembered for the run', async () => {
  const saved = process.env.PATH;
  process.env.PATH = '/nonexistent';
  try {
    const handle = gpu.start([1]);
    await within(handle.done, 10000);
    assert.deepEqual(gpu.facts(handle), { gpu: null, gpu_note: 'no NVIDIA GPU (nvidia-smi: not found)' });
  } finally {
    process.env.PATH = saved;
  }
  // Remembered: no second spawn in this run, even where one would now be found.
  await withFakeSmi('exit 3', () => {
    const again = gpu.start([1]);
    assert.equal(gpu.facts(again).gpu_note, 'no NVIDIA GPU (nvidia-smi: not found)');
  });
});
