'use strict';
// `npm run demo` as a newcomer runs it: the run, then a few lines of
// verdict; the whole report goes to --report FILE, not ~180 lines of JSON on the screen.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { userEnv } = require('../test-support/e2e.js');

test('the demo ends with the verdict in a few lines, and --report FILE gets the whole report', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-demo-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const reportFile = path.join(dir, 'report.json');
  const run = spawnSync(process.execPath, [path.join(__dirname, '..', 'examples', 'demo.js'), '--report', reportFile, '--steps', '40'],
    { cwd: dir, env: userEnv(), encoding: 'utf8', timeout: 120000 });
  assert.equal(run.status, 0, run.stderr);
  const tail = run.stdout.slice(run.stdout.indexOf('=== succeeded')).trim().split('\n');
  assert.ok(tail[0].startsWith('=== succeeded (exit 0) in'), run.stdout);
  assert.ok(tail.length <= 10, `the verdict in ${tail.length} lines:\n${tail.join('\n')}`);
  assert.ok(tail.some((l) => /^Job succeeded after .* at step 40 of 40\.$/.test(l)), tail.join('\n'));
  assert.ok(!run.stdout.includes('"log_tail"'), 'no report JSON on the screen');
  const report = JSON.parse(fs.readFileSync(reportFile, 'utf8'));
  assert.equal(report.outcome, 'succeeded');
  assert.equal(fs.statSync(reportFile).mode & 0o777, 0o600);
});
