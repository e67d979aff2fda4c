'use strict';
// The issue's own experiment: a python-shell program whose `python3` is a shim that runs
// `trainbridge run --transparent -- python3 "$@"`. Everything python-shell relies on must be
// the same as with the bare interpreter (messages, "\r", stdin EOF, the error's last line,
// exit code and signal), and the report must still be written.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PythonShell } = require('python-shell');
const { PYTHON, userEnv } = require('../test-support/e2e.js');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-transparent-'));
test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
const SHIM = path.join(dir, 'python3');
fs.writeFileSync(SHIM, `#!/bin/sh\nexec "${PYTHON}" -m trainbridge run --transparent --report "$TB_REPORT" -- "${PYTHON}" "$@"\n`, { mode: 0o755 });
let counter = 0;
function script(code) {
  counter += 1;
  const file = path.join(dir, `s${counter}.py`);
  fs.writeFileSync(file, code);
  return file;
}

function run(pythonPath, file, options, drive, report) {
  return new Promise((resolve) => {
    const shell = new PythonShell(file, { pythonPath, env: { ...userEnv(), TB_REPORT: report }, ...options });
    const events = [];
    shell.on('message', (m) => events.push(['message', m]));
    shell.on('stderr', (l) => events.push(['stderr', l]));
    drive(shell);
    shell.end((err, code, signal) => resolve({ events, message: err ? err.message : null, code, signal }));
  });
}

async function compare(code, options = {}, drive = () => undefined) {
  const file = script(code);
  const report = path.join(dir, `r${counter}.json`);
  const bare = await run(PYTHON, file, options, drive, report);
  const wrapped = await run(SHIM, file, options, drive, report);
  assert.deepEqual(wrapped, bare);
  return { bare, report: JSON.parse(fs.readFileSync(report, 'utf8')) };
}

test('text mode through the shim: the same messages, "\\r" and the last line without newline', async () => {
  const { report } = await compare('import sys\nprint("a")\nsys.stdout.write("b\\r\\nprompt> 10%\\rc")\n');
  assert.equal(report.outcome, 'succeeded');
});

test('json mode through the shim: send() reaches the script, EOF ends its loop', async () => {
  const code = 'import sys, json\nfor line in sys.stdin:\n    print(json.dumps({"got": json.loads(line)}))\n';
  const { bare } = await compare(code, { mode: 'json' }, (shell) => { shell.send({ a: '\u00e9' }); shell.send([1]); });
  assert.deepEqual(bare.events.map((e) => e[1]), [{ got: { a: '\u00e9' } }, { got: [1] }]);
});

test('an exception through the shim: the same error message (its last stderr line) and exit code', async () => {
  const { bare, report } = await compare('import sys\nsys.stderr.write("note\\n")\nraise ValueError("bad")\n');
  assert.equal(bare.code, 1);
  assert.equal(report.outcome, 'failed');
  assert.equal(report.error.type, 'ValueError');
});

test('kill() through the shim: the script dies of the same signal', async () => {
  const code = 'import time\nprint("ready", flush=True)\ntime.sleep(30)\n';
  const drive = (shell) => shell.on('message', (m) => { if (m === 'ready') shell.kill('SIGTERM'); });
  const { bare, report } = await compare(code, {}, drive);
  assert.equal(bare.signal, 'SIGTERM');
  assert.equal(report.signal, 'SIGTERM');
});
