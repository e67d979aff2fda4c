'use strict';
// doctor() from Node: it resolves to the same report the Python side prints, fake
// environments get the same verdicts through it, and a Python side that cannot answer rejects.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const { doctor, doctorCommand, DoctorError } = require('../src/doctor.js');
const { PYTHON } = require('../test-support/python.js');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-doctor-node-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function env(extra = {}) {
  const e = { ...process.env, HF_HUB_OFFLINE: '1' };
  delete e.CUDA_VISIBLE_DEVICES;
  return { ...e, ...extra };
}

const verdicts = (report) => Object.fromEntries(report.checks.map((c) => [c.name, c.verdict]));

let bareVenv;
function bareVenvPython() {
  // A torch-less venv, like a fresh training venv before its installs.
  if (!bareVenv) {
    const dir = path.join(tmp, 'bare-venv');
    execFileSync(PYTHON, ['-m', 'venv', '--without-pip', dir], { stdio: 'ignore', timeout: 60000 });
    bareVenv = path.join(dir, 'bin', 'python');
  }
  return bareVenv;
}

test('doctorCommand: python -m trainbridge.bridge.doctor, or the trainbridge script', () => {
  assert.deepEqual(doctorCommand({ trainbridge: '/v/bin/python', python: '/t/python', timeoutS: 5 }),
    { file: '/v/bin/python', args: ['-m', 'trainbridge.bridge.doctor', '--json', '--python', '/t/python', '--timeout', '5'] });
  assert.deepEqual(doctorCommand({ trainbridge: '/v/bin/trainbridge', hosts: ['127.0.0.1:9'] }),
    { file: '/v/bin/trainbridge', args: ['doctor', '--json', '--host', '127.0.0.1:9'] });
});

test('doctor() resolves to the Python side\'s report, with the same verdicts', async () => {
  const report = await doctor({ trainbridge: PYTHON, timeoutS: 30, env: env(), cwd: tmp });
  const direct = spawnSync(PYTHON, ['-m', 'trainbridge.bridge.doctor', '--json', '--timeout', '30'],
    { env: env(), cwd: tmp, timeout: 60000 });
  const expected = JSON.parse(direct.stdout.toString('ascii'));
  assert.equal(report.schema, 'trainbridge.doctor/1');
  assert.deepEqual(verdicts(report), verdicts(expected));
  assert.equal(report.exit_code, direct.status);
  // This machine: no GPU, CPU-only torch 2.13.0.
  const torch = report.checks.find((c) => c.name === 'torch');
  assert.match(torch.facts.version, /^2\.13\.0/);
  assert.equal(torch.facts.cuda, null);
  assert.equal(verdicts(report).nvidia_driver, 'warn');
  assert.equal(report.exit_code, 0);
});

test('through the trainbridge script: same verdicts', async () => {
  const script = path.join(path.dirname(PYTHON), 'trainbridge');
  const viaScript = await doctor({ trainbridge: script, timeoutS: 30, env: env(), cwd: tmp });
  const viaModule = await doctor({ trainbridge: PYTHON, timeoutS: 30, env: env(), cwd: tmp });
  assert.deepEqual(verdicts(viaScript), verdicts(viaModule));
});

test('a venv without torch: resolves with torch failed and exit_code 1', async () => {
  const report = await doctor({ trainbridge: PYTHON, python: bareVenvPython(), timeoutS: 10, env: env(), cwd: tmp });
  const v = verdicts(report);
  assert.equal(v.torch, 'fail');
  assert.equal(v.torch_tensor, 'skip');
  assert.equal(report.exit_code, 1);
  assert.equal(report.ok, false);
});

test('CUDA_VISIBLE_DEVICES naming a missing GPU and a non-UTF-8 locale', async () => {
  const e = env({ CUDA_VISIBLE_DEVICES: '7', LC_ALL: 'C', PYTHONUTF8: '0', PYTHONIOENCODING: 'gbk' });
  const report = await doctor({ trainbridge: PYTHON, python: bareVenvPython(), timeoutS: 10, env: e, cwd: tmp });
  const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]));
  assert.equal(byName.cuda_visible_devices.verdict, 'fail');
  assert.equal(byName.encoding.verdict, 'warn');
  assert.equal(byName.encoding.facts.stdout, 'gbk');
  assert.match(byName.encoding.fix, /PYTHONUTF8=1/);
});

test('a Python side that cannot answer rejects with DoctorError', async () => {
  await assert.rejects(doctor({ trainbridge: path.join(tmp, 'no-such-python'), env: env() }),
    (err) => err instanceof DoctorError && /cannot start/.test(err.message));
  // A Python without trainbridge: runs, fails, prints no JSON.
  await assert.rejects(doctor({ trainbridge: bareVenvPython(), env: env(), cwd: tmp }),
    (err) => err instanceof DoctorError && err.exitCode === 1 && /No module named/.test(err.message));
});
