'use strict';
// What another local account can do through the Node client and the dashboard of a user who
// runs them (docs/SECURITY.md): nothing. The twin of tests/security/test_other_user.py. Each
// attempt runs as that account (test-support/other_user.js) against a real `npm run dashboard`.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { launch, LaunchError } = require('../src/index.js');
const { PYTHON } = require('../test-support/python.js');
const { serveDashboard } = require('../test-support/dashboard.js');
const { unavailable, account, asOther, openDir, canRead } = require('../test-support/other_user.js');

const why = unavailable();
const skip = why && !process.env.CI ? why : false;
if (why && process.env.CI) test('the second-user tests can run in CI', () => assert.fail(`CI=${process.env.CI} but ${why}`));

const SECRET = 'wandb_api_key=0123456789abcdef';

/** An HTTP request made by the other account: its status and body. */
function requestAsOther(who, method, url, body) {
  const script = `
    const [method, url, body] = process.argv.slice(1);
    fetch(url, { method, body: body || undefined, headers: body ? { 'Content-Type': 'application/json' } : {} })
      .then(async (r) => { console.log(JSON.stringify({ status: r.status, body: (await r.text()).slice(0, 300) })); })
      .catch((e) => { console.log(JSON.stringify({ status: 0, body: String(e) })); });`;
  const r = asOther(who, [process.execPath, '-e', script, method, url, body || '']);
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/**
 * The user's own request, on a connection of its own ({status, text(), json()}): fetch() keeps
 * connections alive, and one the server closes after 5 s idle (the attempts below take longer
 * on a loaded machine) fails as 'other side closed' when reused at that moment.
 */
function requestOnce(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = require('node:http').request(url, { method, headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode, text: async () => text, json: async () => JSON.parse(text) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** `npm run dashboard` as the user: HOME and the XDG dirs in `home`. */
function serveAsUser(home) {
  const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'), XDG_DATA_HOME: path.join(home, '.local', 'share') };
  delete env.TRAINBRIDGE_STORE;
  return serveDashboard(['--port', '0'], env);
}

test('another account can neither list, start, cancel nor read jobs through the dashboard, nor read its token', { skip, timeout: 120000 }, async (t) => {
  const who = account();
  const home = openDir(0o755);
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const dash = await serveAsUser(home);
  t.after(() => dash.proc.kill('SIGKILL'));
  assert.ok(dash.token && dash.token.length >= 32, `the printed address carries a token: ${dash.output()}`);
  const user = (p, options = {}) => requestOnce(`${dash.url}${p}`, { ...options, headers: { Authorization: `Bearer ${dash.token}`, 'Content-Type': 'application/json' } });
  const made = await user('api/jobs', { method: 'POST', body: JSON.stringify({ kind: 'command', argv: [PYTHON, '-c', `print(${JSON.stringify(SECRET)}, flush=True); import time; time.sleep(60)`] }) });
  assert.equal(made.status, 201);
  const { id } = await made.json();
  t.after(() => user(`api/jobs/${id}/cancel`, { method: 'POST', body: '{}' }).catch(() => undefined));
  const deadline = performance.now() + 60000;
  let log = '';
  while (!log.includes(SECRET)) {
    assert.ok(performance.now() < deadline, 'the job printed its line within 60 s');
    log = await (await user(`api/jobs/${id}/log`)).text();
    await new Promise((r) => setTimeout(r, 100));
  }
  // The other account, on the same loopback port.
  const marker = path.join(home, 'ran-as-the-user');
  const attempts = [
    ['GET', 'api/jobs'],
    ['GET', 'api/stream'],
    ['GET', `api/jobs/${id}`],
    ['GET', `api/jobs/${id}/log`],
    ['GET', `api/jobs/${id}/report`],
    ['POST', 'api/jobs', JSON.stringify({ kind: 'command', argv: ['sh', '-c', `id > ${marker}`] })],
    ['POST', `api/jobs/${id}/cancel`, '{}'],
    ['POST', `api/jobs/${id}/stacks`, '{}'],
    ['GET', `?token=${'x'.repeat(43)}`],
  ];
  for (const [method, p, body] of attempts) {
    const r = requestAsOther(who, method, `${dash.url}${p}`, body);
    assert.equal(r.status, 401, `${method} /${p} as another account: ${JSON.stringify(r)}`);
    assert.ok(!r.body.includes(SECRET) && !r.body.includes(id), `${method} /${p} told nothing: ${r.body}`);
  }
  assert.ok(!fs.existsSync(marker), 'the other account ran a command as the user');
  const jobs = await (await user('api/jobs')).json();
  // Still live: a sleeping job with no progress may be 'stalled' by now on a loaded machine.
  assert.deepEqual(jobs.map((j) => [j.id, ['running', 'stalled'].includes(j.state)]), [[id, true]], `no job added, none cancelled: ${JSON.stringify(jobs.map((j) => [j.id, j.state]))}`);
  // Nor where the token and the jobs are kept.
  const tokenFile = path.join(home, '.config', 'trainbridge', 'dashboard-token');
  assert.equal(fs.readFileSync(tokenFile, 'ascii').trim(), dash.token);
  assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600);
  assert.equal(fs.statSync(path.dirname(tokenFile)).mode & 0o777, 0o700);
  assert.ok(!canRead(who, tokenFile), 'the other account read the token file');
  const cmdline = asOther(who, ['cat', `/proc/${dash.proc.pid}/cmdline`]);
  assert.equal(cmdline.status, 0, 'argv is public, as `ps` shows');
  assert.ok(!cmdline.stdout.includes(dash.token), 'the token is not in argv');
  const store = path.join(home, '.local', 'share', 'trainbridge', 'jobs.db');
  for (const p of [store, path.join(path.dirname(store), 'jobs')]) assert.ok(!canRead(who, p), `the other account read ${p}`);
});

test('a log file is created 0600 and never written through a link another account planted', { skip, timeout: 60000 }, async (t) => {
  const who = account();
  const shared = openDir(0o777);
  const home = openDir(0o755);
  t.after(() => { fs.rmSync(shared, { recursive: true, force: true }); fs.rmSync(home, { recursive: true, force: true }); });
  const logPath = path.join(shared, 'train.log');
  const job = launch({ command: PYTHON, args: ['-c', `print(${JSON.stringify(SECRET)})`], logPath });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.ok(fs.readFileSync(logPath, 'utf8').includes(SECRET));
  assert.equal(fs.statSync(logPath).mode & 0o777, 0o600);
  assert.ok(!canRead(who, logPath), 'the other account read the log');
  fs.unlinkSync(logPath);
  const precious = path.join(home, 'precious');
  fs.writeFileSync(precious, 'precious\n');
  assert.equal(asOther(who, ['ln', '-s', precious, logPath]).status, 0);
  await assert.rejects(launch({ command: PYTHON, args: ['-c', 'print(1)'], logPath }).done,
    (err) => err instanceof LaunchError && /symbolic link/.test(err.message));
  assert.equal(fs.readFileSync(precious, 'utf8'), 'precious\n');
  fs.unlinkSync(logPath);
  assert.equal(asOther(who, ['touch', logPath]).status, 0);
  await assert.rejects(launch({ command: PYTHON, args: ['-c', `print(${JSON.stringify(SECRET)})`], logPath }).done,
    (err) => err instanceof LaunchError && /belongs to uid/.test(err.message));
  assert.equal(fs.readFileSync(logPath, 'utf8'), '', 'nothing went into the other account\'s file');
});
