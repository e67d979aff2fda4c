'use strict';
// Bad disks, as tests/client/test_bad_disks.py: a logPath on a full or
// read-only file system. The client runs in a private mount namespace (unshare) with a
// 64 KiB tmpfs (full) or a read-only tmpfs, so nothing stays mounted whatever happens.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { PYTHON, REPO, userEnv } = require('../test-support/e2e.js');

const UNSHARE = process.geteuid() === 0 ? ['--mount', '--propagation', 'private'] : ['--user', '--map-root-user', '--mount'];
const CLIENT = `
const { launch } = require(${JSON.stringify(path.resolve(__dirname, '../src/index.js'))});
const [python, logPath, code] = process.argv.slice(1);
const job = launch({ command: python, args: ['-c', code], logPath, zeroCode: false });
const problems = [];
job.on('log_error', (p) => problems.push(p));
job.done.then((report) => console.log(JSON.stringify({ report, problems })),
  (err) => console.log(JSON.stringify({ launchError: { name: err.name, message: err.message } })));
`;

/** Run CLIENT after `setup` (sh) in a mount namespace; `after` runs there too. */
function inNamespace(setup, logPath, code, after = 'true') {
  const script = `set -e; ${setup}; set +e; "$@"; ${after}`;
  return new Promise((resolve, reject) => {
    execFile('unshare', [...UNSHARE, 'sh', '-c', script, 'sh', process.execPath, '-e', CLIENT, PYTHON, logPath, code],
      { env: userEnv(), cwd: REPO, maxBuffer: 1 << 24 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout))));
  });
}

function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-disk-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a log on a full disk: the report and a log_error event say from which line it is incomplete', async (t) => {
  const dir = scratch(t);
  const full = path.join(dir, 'full');
  const copy = path.join(dir, 'copy');
  fs.mkdirSync(full);
  const logPath = path.join(full, 'job.log');
  const code = "for i in range(200): print(f'{i + 1:3d} ' + 'x' * 995)";
  const { report, problems } = await inNamespace(`mount -t tmpfs -o size=64k tmpfs ${full}`, logPath, code, `cp ${logPath} ${copy}`);
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.output.lines.stdout, 200);
  const n = report.log_error.from_line;
  assert.equal(report.log_error.path, logPath);
  assert.match(report.log_error.error, /^No space left on device \(ENOSPC\)$/);
  assert.ok(n > 10 && n < 200, `line ${n}`);
  assert.deepEqual(problems, [report.log_error], 'said once, when it happened');
  const kept = fs.readFileSync(copy).toString('latin1').split('\n');
  assert.equal(kept.length, n, 'lines 1..N-1, then what fitted of line N');
  assert.deepEqual(kept.slice(0, n - 1).map((line) => Number(line.slice(0, 3))), Array.from({ length: n - 1 }, (_, i) => i + 1));
  assert.ok(report.summary.includes(`incomplete from line ${n} on`), report.summary);
});

test('a read-only log path says what is wrong, not that the command cannot start', async (t) => {
  const dir = scratch(t);
  const ro = path.join(dir, 'ro');
  fs.mkdirSync(ro);
  const logPath = path.join(ro, 'job.log');
  const { launchError } = await inNamespace(`mount -t tmpfs -o ro,size=64k tmpfs ${ro}`, logPath, "print('hello')");
  assert.equal(launchError.name, 'LaunchError');
  assert.equal(launchError.message, `cannot write the log file ${logPath}: Read-only file system (EROFS); choose a writable path for the log`);
});
