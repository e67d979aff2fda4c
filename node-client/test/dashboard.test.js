'use strict';
// The dashboard without a browser: its pure view model, the job specs it accepts, the
// resource chart (the supervisor's samples, GPU through a fake nvidia-smi), and the server's guards.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const model = require('../dashboard/model.js');
const { launchOptions, SpecError, titleOf } = require('../dashboard/spec.js');
const { MemorySource } = require('../dashboard/source.js');
const { serveDashboard } = require('../test-support/dashboard.js');
const { fakeNvidiaSmi } = require('../test-support/nvidia_smi.js');
const { startDashboard } = require('../dashboard/server.js');
const { StoreSource } = require('../dashboard/store_source.js');
const { openStore } = require('../src/index.js');

const T0 = 1_800_000_000_000;

/** Wait until ok() holds, polling every 25 ms; fail with `what` after ms. */
async function until(what, ok, ms = 30000) {
  const deadline = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
const view0 = () => model.createView({ id: 'job-1', title: 'demo', command: ['python', 'x.py'], t: T0 });

test('progress: the page shows the judge\'s status (rate, ETA, falling in a stall); metrics series from progress', () => {
  // The page once computed its own rate and kept "1 step/s, ETA 90 s" while stalled. Now
  // it renders the supervisor's 'status' event (bridge/status.py judges it), as it says it.
  const v = view0();
  model.apply(v, { type: 'state', data: 'running', t: T0 });
  const feed = (step, total, metrics, at) => model.apply(v, { type: 'progress', data: { step, total, metrics }, t: T0 + at * 1000 });
  const status = (snap, at) => {
    const full = { state: 'running', pid: 11, elapsed_s: at, stages: [], script_stages: [], metrics: {}, ...snap };
    model.apply(v, { type: 'status', data: full, t: T0 + at * 1000 });
    return full;
  };
  feed(10, 100, { loss: 1.5 }, 1);
  feed(30, 100, { loss: 1.0, lr: 0.1 }, 2);
  let snap = status({ step: 30, total: 100, rate: 20, eta_s: 3.5, progress_age_s: 0 }, 2);
  assert.deepEqual({ ...v.progress, metrics: undefined },
    { step: 30, total: 100, percent: 30, rate: snap.rate, eta_s: snap.eta_s, age_s: 0, metrics: undefined });
  // a minute without progress: the judge's rate falls and its ETA grows; the page says so
  snap = status({ state: 'stalled', step: 30, total: 100, rate: 0.5, eta_s: 140, progress_age_s: 60 }, 62);
  assert.deepEqual([v.progress.rate, v.progress.eta_s, v.progress.age_s], [0.5, 140, 60], JSON.stringify(v.progress));
  assert.deepEqual(v.metrics.names, ['loss', 'lr']);
  assert.deepEqual(v.metrics.values.lr, [null, 0.1]);
  feed(40, null, {}, 63);
  status({ step: 40, total: null, rate: 1, eta_s: null, progress_age_s: 0 }, 63);
  assert.equal(v.progress.percent, null);
  assert.equal(v.progress.eta_s, null);
});

test('a hang stays "hung" until the end; the end closes open stages with the outcome', () => {
  const v = view0();
  model.apply(v, { type: 'state', data: 'running', t: T0 });
  model.apply(v, { type: 'stage', data: { event: 'begin', name: 'data', depth: 0 }, t: T0 + 500 });
  model.apply(v, { type: 'hang', data: { reason: 'stall', stage: 'data' }, t: T0 + 4000 });
  model.apply(v, { type: 'state', data: 'running', t: T0 + 4100 });
  assert.equal(v.state, 'hung');
  model.apply(v, { type: 'state', data: 'ended', t: T0 + 4900 });
  assert.equal(v.state, 'hung', 'ended only with the report, which has the outcome');
  model.apply(v, { type: 'end', data: { outcome: 'hung', summary: 'Job hung.', signal: 'SIGTERM',
    diagnosis: { kind: 'lock_wait', summary: 's', hint: 'h', evidence: { frame: 'threading.py:327 wait', user_frame: 'x.py:3 f' } } }, t: T0 + 5000 });
  assert.equal(v.state, 'ended');
  assert.equal(v.outcome, 'hung');
  assert.deepEqual(v.stages.map((s) => [s.name, s.start_s, s.end_s, s.status]), [['data', 0.5, 5, 'hung']]);
  assert.equal(v.report.diagnosis.frame, 'threading.py:327 wait');
  assert.equal(v.report.diagnosis.thread, null, 'no thread named: the main thread\'s own wait');
  // A main thread waiting for a thread of the script: the judge names it (evidence.waits_for),
  // and the page puts that thread's stack first.
  const w = view0();
  model.apply(w, { type: 'end', data: { outcome: 'hung', summary: 'Job hung.', diagnosis: { kind: 'child_wait', summary: 's', hint: 'h',
    evidence: { frame: 'subprocess.py:2004 _try_wait', waits_for: { thread: 'loader', via: 'join', at: 'threading.py:1139' } } } }, t: T0 + 5000 });
  assert.equal(w.report.diagnosis.thread, 'loader');
});

test('training health: the judge\'s entries are in the page\'s head while it runs and after, in its words', () => {
  const v = view0();
  model.apply(v, { type: 'state', data: 'running', t: T0 });
  const { message: before } = model.delta(v, null);
  assert.deepEqual(before.head.health, []);
  const entry = { metric: 'loss', value: NaN, step: 6, last_finite: 0.2, last_finite_step: 5, text: 'loss became NaN at step 6 (it was 0.2 at step 5)' };
  model.apply(v, { type: 'health', data: entry, t: T0 + 1000 });
  const { message } = model.delta(v, null);
  assert.deepEqual(message.head.health, [{ metric: 'loss', step: 6, text: entry.text }]);
  model.apply(v, { type: 'end', data: { outcome: 'succeeded', summary: 'Job succeeded.' }, t: T0 + 2000 });
  assert.deepEqual(model.head(v).health.map((e) => e.text), [entry.text]);
});

test('what a deadline\'s look saw instead of a hang (starting, starved, computing) is on the page until the job moves on', () => {
  // The CLI notes all three (cli_views.py); the page showed only `starting`.
  const v = view0();
  model.apply(v, { type: 'state', data: 'starting', t: T0 });
  assert.equal(model.head(v).looked, null);
  model.apply(v, { type: 'starting', data: { why: "no Python in the job's process tree yet (bash)", for_s: 120 }, t: T0 + 120000 });
  assert.deepEqual(model.delta(v, null).message.head.looked,
    { event: 'starting', why: "no Python in the job's process tree yet (bash)", at_s: 120 });
  model.apply(v, { type: 'state', data: 'running', t: T0 + 121000 });
  assert.equal(model.head(v).looked, null, 'running: no longer starting');

  const why = 'computing, not hung: busy (98% of a core, running or waiting for one), its main thread moved through 3 of the script\'s functions';
  model.apply(v, { type: 'status', data: { step: 4, total: 100 }, t: T0 + 122000 });
  model.apply(v, { type: 'computing', data: { why, for_s: 30 }, t: T0 + 152000 });
  assert.deepEqual(model.head(v).looked, { event: 'computing', why, at_s: 152 }); // since the start
  model.apply(v, { type: 'state', data: 'running', t: T0 + 152001 }); // the machine's new deadline
  model.apply(v, { type: 'status', data: { step: 4, total: 100 }, t: T0 + 153000 }); // no new step
  assert.equal(model.head(v).looked.event, 'computing');
  model.apply(v, { type: 'status', data: { step: 5, total: 100 }, t: T0 + 154000 });
  assert.equal(model.head(v).looked, null, 'a new step: what the look said no longer holds');

  model.apply(v, { type: 'starved', data: { why: 'silent, not hung: runnable, waiting for a free core', for_s: 30 }, t: T0 + 190000 });
  assert.equal(model.head(v).looked.event, 'starved');
  model.apply(v, { type: 'stalled', data: { stage: 'train', idle_s: 60 }, t: T0 + 214000 });
  assert.equal(model.head(v).looked, null, 'stalled says more now');
  model.apply(v, { type: 'starved', data: { why: 'waiting for a free core', for_s: 30 }, t: T0 + 220000 });
  model.apply(v, { type: 'end', data: { outcome: 'succeeded', summary: 'Job succeeded.' }, t: T0 + 230000 });
  assert.equal(model.head(v).looked, null, 'an ended job shows its outcome');
});

test('a closed stage is as long as the worker measured, ending when its end arrived', () => {
  const v = view0();
  model.apply(v, { type: 'state', data: 'starting', t: T0 });
  model.apply(v, { type: 'stage', data: { event: 'begin', name: 'config', depth: 0 }, t: T0 + 3000 });
  model.apply(v, { type: 'stage', data: { event: 'end', name: 'config', status: 'ok', duration_s: 2.5 }, t: T0 + 3100 });
  assert.deepEqual(v.stages.map((s) => [s.start_s, s.end_s, s.status]), [[0.6, 3.1, 'ok']]);
});

test("a child stage's bar never starts before its parent's, whatever each end's delay", () => {
  const v = view0();
  model.apply(v, { type: 'state', data: 'starting', t: T0 });
  const stage = (data, at) => model.apply(v, { type: 'stage', data, t: T0 + at });
  stage({ event: 'begin', name: 'main', depth: 0 }, 100);
  stage({ event: 'begin', name: 'config', depth: 1 }, 200);
  stage({ event: 'begin', name: 'import torch', depth: 2 }, 300);
  // the import's end came 0.5 s late: its start, measured back from its arrival, is 1.0 s;
  // config's begin had arrived at 0.2 s, but config's end came on time: 2.0 - 1.5 = 0.5 s
  stage({ event: 'end', name: 'import torch', status: 'ok', duration_s: 0.5 }, 1500);
  stage({ event: 'end', name: 'config', status: 'ok', duration_s: 1.8 }, 2000);
  stage({ event: 'begin', name: 'train', depth: 1 }, 2100);
  const at = () => Object.fromEntries(v.stages.map((s) => [s.name, s.start_s]));
  assert.deepEqual(at(), { main: 0.1, config: 0.2, 'import torch': 1, train: 2.1 });
  // an end delivered late makes the child start before its parent: the parent holds it
  stage({ event: 'begin', name: 'save', depth: 2 }, 2200);
  stage({ event: 'end', name: 'save', status: 'ok', duration_s: 2.0 }, 3000);
  assert.equal(at().save, 1);
  assert.equal(at().train, 1, 'train now starts where its child did');
  assert.equal(at().main, 0.1, 'main already held it');
  // and a parent whose own end came late, after its child's: it still holds the child
  stage({ event: 'begin', name: 'eval', depth: 1 }, 3100);
  stage({ event: 'begin', name: 'load', depth: 2 }, 3150);
  stage({ event: 'end', name: 'load', status: 'ok', duration_s: 0.1 }, 3300); // starts 3.2
  stage({ event: 'end', name: 'eval', status: 'ok', duration_s: 0.3 }, 4000); // 3.7 measured back
  assert.equal(at().load, 3.2);
  assert.equal(at().eval, 3.2, 'eval starts where its child did, not at 3.7');
  assert.equal(v.stages.find((s) => s.name === 'eval').end_s, 4);
});

test('the log is bounded; undecodable bytes show as \\xNN; a page catches up by delta', () => {
  const v = view0();
  model.apply(v, { type: 'log', data: { stream: 'stdout', text: 'raw \udcff end', encoding: 'escaped' }, t: T0 });
  assert.equal(v.log.lines[0].text, 'raw \\xff end');
  model.apply(v, { type: 'log', data: { stream: 'stdout', text: 'no tag \udcfe, a real pair \ud83d\ude00' }, t: T0 });
  assert.deepEqual([v.log.lines[1].text, v.log.lines[1].encoding], ['no tag \\xfe, a real pair \ud83d\ude00', 'escaped']);
  let { message, cursor } = model.delta(v, null);
  assert.equal(message.log.lines.length, 2);
  assert.equal(model.delta(v, cursor).message, null, 'nothing new, nothing sent');
  for (let i = 0; i < model.LOG_KEEP + 200; i++) model.apply(v, { type: 'log', data: { stream: 'stdout', text: `l${i}` }, t: T0 });
  assert.equal(v.log.lines.length, model.LOG_KEEP);
  ({ message, cursor } = model.delta(v, cursor));
  assert.equal(message.log.skipped, 200, 'lines that left the bounded view are counted');
  assert.equal(message.log.lines.at(-1).text, `l${model.LOG_KEEP + 199}`);
  assert.equal(message.head.log_count, model.LOG_KEEP + 202);
});

test('series: a page gets the new points, or all of them after the series was thinned', () => {
  const v = view0();
  const step = (n) => model.apply(v, { type: 'progress', data: { step: n, total: null, metrics: { loss: 1 / n } }, t: T0 + n });
  for (let n = 1; n <= 10; n++) step(n);
  let { message, cursor } = model.delta(v, null);
  assert.equal(message.metrics.reset, true);
  step(11);
  ({ message, cursor } = model.delta(v, cursor));
  assert.deepEqual([message.metrics.reset, message.metrics.step], [false, [11]]);
  for (let n = 12; n <= model.SERIES_MAX + 1; n++) step(n);
  ({ message, cursor } = model.delta(v, cursor));
  assert.equal(message.metrics.reset, true);
  assert.ok(message.metrics.step.length <= model.SERIES_MAX / 2 + 2);
  assert.equal(message.metrics.step.at(-1), model.SERIES_MAX + 1, 'the last point is kept');
});

test('series: every step\'s metrics from a message\'s points; a spike of one step on a 10,000-step curve survives thinning', () => {
  const v = view0();
  const loss = (n) => (n === 6173 ? 50 : 10 - n * 0.0005);
  // The worker sends a few messages a second, each with every call's points since the last.
  for (let first = 1; first <= 10000; first += 500) {
    const steps = Array.from({ length: 500 }, (_, i) => first + i);
    const last = steps.at(-1);
    model.apply(v, { type: 'progress', t: T0 + first,
      data: { step: last, total: 10000, metrics: { loss: loss(last), note: 'x' }, points: { steps, metrics: { loss: steps.map(loss) } } } });
  }
  const { message } = model.delta(v, null);
  const { step, values } = message.metrics;
  assert.ok(step.length <= model.SERIES_MAX, `${step.length} points drawn`);
  assert.ok(step.length > 1000, `${step.length} points drawn`);
  assert.deepEqual(step, [...step].sort((a, b) => a - b), 'in order, no step twice');
  assert.equal(new Set(step).size, step.length);
  const at = step.indexOf(6173);
  assert.ok(at >= 0, 'the spike\'s step is kept');
  assert.equal(values.loss[at], 50);
  assert.equal(step.at(-1), 10000);
  // A message queued behind a log: its latest value is older than its points; x keeps rising.
  const q = view0();
  model.apply(q, { type: 'progress', t: T0, data: { step: 3, metrics: { loss: 1 }, points: { steps: [3, 4, 5], metrics: { loss: [1, 2, 3] } } } });
  assert.deepEqual(model.delta(q, null).message.metrics.step, [3, 4, 5]);
  // A message without points (zero-code's source, an older worker) is one point.
  const w = view0();
  model.apply(w, { type: 'progress', data: { step: 3, total: null, metrics: { loss: 0.5 } }, t: T0 });
  assert.deepEqual(model.delta(w, null).message.metrics.step, [3]);
});

test('after a cancel, the interrupted script\'s stderr (its KeyboardInterrupt traceback) is the cancel\'s, not an error', () => {
  const v = view0();
  const log = (stream, text) => model.apply(v, { type: 'log', data: { stream, text }, t: T0 });
  log('stderr', 'a warning before');
  model.apply(v, { type: 'cancel', data: { reason: 'cancelled by the client', accepted: true }, t: T0 + 5000 });
  log('stderr', 'Traceback (most recent call last):');
  log('stderr', 'KeyboardInterrupt');
  log('stdout', 'saved a checkpoint');
  assert.deepEqual(v.log.lines.map((l) => [l.stream, l.after_cancel ?? false]),
    [['stderr', false], ['stderr', true], ['stderr', true], ['stdout', false]]);
  assert.deepEqual(model.head(v).cancel, { reason: 'cancelled by the client', at_s: 5 });

  // The interrupt goes first: the traceback often comes before the cancel's answer.
  const w = view0();
  const wlog = (stream, text) => model.apply(w, { type: 'log', data: { stream, text }, t: T0 });
  wlog('stderr', 'Traceback (most recent call last):');
  wlog('stderr', 'ValueError: an earlier error, handled');
  wlog('stdout', 'step 5');
  wlog('stderr', 'Traceback (most recent call last):');
  wlog('stderr', '  File "train.py", line 3, in <module>');
  wlog('stderr', 'KeyboardInterrupt');
  model.apply(w, { type: 'cancel', data: { reason: null, accepted: true }, t: T0 + 1000 });
  assert.deepEqual(w.log.lines.map((l) => l.after_cancel ?? false), [false, false, false, true, true, true]);
  assert.deepEqual(model.head(w).cancelTrace, [4, 6]);
});

test('files the job made: listed by number, sent to a page once each', () => {
  const v = view0();
  const said = (name, kind, step) => model.apply(v, { type: 'artifact', t: T0 + 1000,
    data: { path: `/runs/a/${name}`, name, kind, bytes: 10, step, by: 'Image.save' } });
  said('s-1.png', 'image', 1);
  let { message, cursor } = model.delta(v, null);
  assert.deepEqual(message.artifacts, [{ n: 0, path: '/runs/a/s-1.png', name: 's-1.png', kind: 'image', bytes: 10, step: 1, at_s: 1 }]);
  assert.equal(model.head(v).artifacts, undefined, 'not in every head update');
  said('model.pt', 'checkpoint', 2);
  said('odd', 'weights', 3);
  ({ message, cursor } = model.delta(v, cursor));
  assert.deepEqual(message.artifacts.map((a) => [a.n, a.name, a.kind]), [[1, 'model.pt', 'checkpoint'], [2, 'odd', 'file']]);
  model.apply(v, { type: 'log', data: { stream: 'stdout', text: 'x' }, t: T0 });
  assert.equal(model.delta(v, cursor).message.artifacts, undefined, 'new files only');
});

test('each metric family has an axis of its own: the page is told which family each metric is', () => {
  const fam = (n) => model.familyOf(n);
  assert.deepEqual(['loss', 'val_loss', 'ppl', 'train/nll'].map(fam), ['loss', 'loss', 'loss', 'loss']);
  assert.deepEqual(['lr', 'learning_rate', 'train/lr', 'lr_head'].map(fam), ['lr', 'lr', 'lr', 'lr']);
  assert.deepEqual(['acc', 'val_accuracy', 'f1'].map(fam), ['score', 'score', 'score']);
  assert.deepEqual(['grad_norm', 'tokens_per_s', 'clr'].map(fam), ['other', 'other', 'other']);
  const v = view0();
  model.apply(v, { type: 'progress', data: { step: 1, metrics: { loss: 2, lr: 3e-4 } }, t: T0 });
  assert.deepEqual(model.delta(v, null).message.metrics.families, { loss: 'loss', lr: 'lr' });
});

test('specs: the demo\'s options and any command with its timeouts; a bad one says what is wrong', () => {
  const demo = launchOptions({ kind: 'demo', steps: '50', hangAt: 'data', stallTimeout: '3' }, { python: 'py' });
  assert.equal(demo.title, 'demo --hang-at data');
  assert.deepEqual(demo.options.args.slice(1), ['--steps', '50', '--hang-at', 'data']);
  assert.equal(demo.options.timeouts.stallTimeout, 3);
  const cmd = launchOptions({ kind: 'command', argv: ['python', '-c', 'print(1)'], timeouts: { heartbeatTimeout: 10, stallTimeout: '' } });
  assert.deepEqual([cmd.options.command, cmd.options.args, cmd.options.timeouts], ['python', ['-c', 'print(1)'], { heartbeatTimeout: 10 }]);
  assert.equal(cmd.title, 'python -c "print(1)"');
  const bad = [
    [{ kind: 'demo', crashAt: 'nowhere' }, /--crash-at takes one of config, data/],
    [{ kind: 'demo', steps: 0 }, /steps must be a whole number/],
    [{ kind: 'demo', stallTimeout: -1 }, /stallTimeout must be a positive number/],
    [{ kind: 'command', argv: [] }, /needs argv/],
    [{ kind: 'command', argv: ['x'], timeouts: { stall: 3 } }, /unknown timeout "stall"/],
    [{ kind: 'command', argv: ['x'], cwd: '/no/such/dir' }, /does not exist/],
    [{ kind: 'shell' }, /kind must be "demo" or "command"/],
  ];
  for (const [spec, message] of bad) assert.throws(() => launchOptions(spec, { python: 'py' }), (err) => err instanceof SpecError && message.test(err.message));
});

async function request(url, options = {}) {
  const res = await fetch(url, options);
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/** Requests to a dashboard carrying its token, as its own page (or a script of the user's) does. */
const asUser = (dash) => (p, options = {}) => request(`${dash.url}${p}`,
  { ...options, headers: { Authorization: `Bearer ${dash.token}`, ...(options.headers || {}) } });

test('server: a token by default; Host, Origin, JSON guards; a job that cannot start says why', async (t) => {
  await assert.rejects(startDashboard({ host: '0.0.0.0', port: 0, noToken: true }), /refusing to serve on 0\.0\.0\.0 without a token/);
  // The default source is the job store (here a fresh one): the job below is the store's.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-store-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const storePath = path.join(dir, 'jobs.db');
  const dash = await startDashboard({ port: 0, store: storePath });
  t.after(() => dash.close());
  assert.ok(dash.source instanceof StoreSource, 'jobs go to the job store unless memory: true');
  const url = dash.url;
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.ok(dash.token.length >= 32, 'a random token unless one is given');
  assert.equal(dash.loginUrl, `${url}?token=${dash.token}`);
  const user = asUser(dash);
  // Without the token: nothing, not even the list.
  for (const [p, options] of [['api/jobs', {}], ['api/stream', {}], ['vendor/uPlot.esm.js', {}],
    ['api/jobs', { method: 'POST', body: '{"kind":"demo"}', headers: { 'Content-Type': 'application/json' } }]]) {
    assert.equal((await request(`${url}${p}`, options)).status, 401, `${options.method || 'GET'} ${p} without the token`);
  }
  const login = await request(url);
  assert.equal(login.status, 401);
  assert.match(login.body, /needs its token/);
  assert.equal((await user('')).status, 200);
  assert.equal((await user('vendor/uPlot.esm.js')).status, 200, 'the chart library is served from node_modules');
  const rebinding = await new Promise((resolve, reject) => {
    // fetch() will not send another Host; a DNS-rebinding page's requests do.
    require('node:http').get(`${url}api/jobs`, { headers: { Host: `evil.example:${new URL(url).port}`, Authorization: `Bearer ${dash.token}` } },
      (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
  });
  assert.equal(rebinding, 421);
  // Origin: only this origin's own pages; `null` (a sandboxed frame, file:) and junk are refused, not a 500.
  for (const origin of ['null', 'http://evil.example', 'not a url', `https://${new URL(url).host}`]) {
    const r = await user('api/jobs', { method: 'POST', body: '{"kind":"demo"}', headers: { 'Content-Type': 'application/json', Origin: origin } });
    assert.equal(r.status, 403, `Origin: ${origin}`);
    assert.match(JSON.parse(r.body).error, /refused/);
  }
  assert.equal((await user('api/jobs', { headers: { Origin: 'null' } })).status, 403, 'a GET with Origin: null too');
  // No page may frame the dashboard (clickjacking); every answer says so.
  for (const p of ['', 'api/jobs', 'api/nope']) {
    const r = await user(p);
    assert.equal(r.headers.get('x-frame-options'), 'DENY', p);
    assert.match(r.headers.get('content-security-policy'), /frame-ancestors 'none'/, p);
  }
  const form = await user('api/jobs', { method: 'POST', body: 'kind=demo', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
  assert.equal(form.status, 415);
  const bad = await user('api/jobs', { method: 'POST', body: JSON.stringify({ kind: 'demo', hangAt: 'x' }), headers: { 'Content-Type': 'application/json' } });
  assert.equal(bad.status, 400);
  assert.match(JSON.parse(bad.body).error, /--hang-at takes one of/);
  const made = await user('api/jobs', { method: 'POST', body: JSON.stringify({ kind: 'command', argv: ['/nonexistent/trainer'] }),
    headers: { 'Content-Type': 'application/json', Origin: new URL(url).origin } });
  assert.equal(made.status, 201);
  const { id } = JSON.parse(made.body);
  const deadline = performance.now() + 10000;
  let view;
  while (performance.now() < deadline) {
    view = dash.source.get(id);
    if (view.state === 'ended') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(view.outcome, 'failed');
  assert.match(view.report.summary, /(could|did) not start '?\/nonexistent\/trainer.*Check the path/);
  assert.equal((await request(`${url}api/jobs/${id}/log`)).status, 401, 'no log without the token');
  assert.equal((await request(`${url}api/jobs/${id}/report`)).status, 401, 'no report without the token');
  assert.equal((await user(`api/jobs/${id}/cancel`, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } })).status, 409);
  assert.equal((await user('api/jobs/job-nope')).status, 404);
  const store = openStore(storePath);
  t.after(() => store.close());
  assert.equal((await store.get(id)).outcome, 'failed', 'the job is in the store: it outlives this dashboard');
});

test('server with a token: taken from a header or the cookie its printed address sets, never from the query of an API call', async (t) => {
  const secret = 's3cret-s3cret-s3cret';
  const dash = await startDashboard({ host: '127.0.0.1', port: 0, token: secret, memory: true });
  assert.ok(dash.source instanceof MemorySource && !(dash.source instanceof StoreSource));
  t.after(() => dash.close());
  const url = dash.url;
  assert.equal((await request(`${url}api/jobs`)).status, 401);
  assert.equal((await request(`${url}api/jobs`, { headers: { Authorization: 'Bearer wrong' } })).status, 401);
  assert.equal((await request(`${url}api/jobs`, { headers: { Authorization: `Bearer ${secret}` } })).status, 200);
  assert.equal((await request(`${url}api/jobs?token=${secret}`)).status, 401, 'the query works only on the address the server prints');
  assert.equal((await request(`${url}?token=wrong`, { redirect: 'manual' })).status, 401);
  const link = await request(dash.loginUrl, { redirect: 'manual' });
  assert.equal(link.status, 303);
  assert.equal(link.headers.get('location'), '/', 'the token leaves the address bar');
  const setCookie = link.headers.get('set-cookie');
  assert.match(setCookie, new RegExp(`^tb_token_${new URL(url).port}=`), 'one cookie per port: a host\'s cookies go to all its ports');
  assert.match(setCookie, /HttpOnly; SameSite=Strict/);
  const cookie = setCookie.split(';')[0];
  assert.equal((await request(url, { headers: { Cookie: cookie } })).status, 200);
  assert.equal((await request(`${url}api/jobs`, { headers: { Cookie: cookie } })).status, 200);
  assert.equal((await request(`${url}api/jobs`, { headers: { Cookie: `tb_token_1=${secret}` } })).status, 401, 'another port\'s cookie');
});

test('memory source: each job\'s supervisor samples its tree (a busy child\'s CPU, RSS, GPU via a fake nvidia-smi); the chart draws its samples', async (t) => {
  // The dashboard used to read /proc and nvidia-smi itself for the jobs it launched, a third
  // copy of bridge/resources.py. Now launch({sampleResources: true}) has the job server sample
  // them, as a keeper does a scheduled job's. Its own process: the server's environment names
  // the fake nvidia-smi, as a user's would name theirs.
  const python = require('../src/index.js').resolvePython();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-res-home-'));
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const dash = await serveDashboard(['--memory', '--port', '0'],
    { ...process.env, XDG_CONFIG_HOME: home, TRAINBRIDGE_NVIDIA_SMI: fakeNvidiaSmi(t, python) });
  t.after(async () => { dash.proc.kill('SIGTERM'); await dash.exited; });
  const user = asUser(dash);
  // A parent that only waits on a busy child: the tree's CPU is the child's.
  const busy = 'import subprocess, sys\nsubprocess.run([sys.executable, "-c", "while True: pass"])\n';
  const made = await user('api/jobs', { method: 'POST', body: JSON.stringify({ kind: 'command', argv: [python, '-c', busy] }),
    headers: { 'Content-Type': 'application/json' } });
  assert.equal(made.status, 201, made.body);
  const { id } = JSON.parse(made.body);
  let view = null;
  await until('a sample with the busy child\'s CPU and the GPU', async () => {
    view = JSON.parse((await user(`api/jobs/${id}`)).body);
    const r = view.resources || { cpu: [] };
    return view.head.gpu && r.cpu.some((cpu) => cpu >= 5);
  });
  const r = view.resources;
  assert.ok(r.rss_mb.every((mb) => mb > 1), `RSS of a Python tree: ${JSON.stringify(r.rss_mb)}`);
  assert.equal(r.gpu_mem_mb.at(-1), 1536, 'the job\'s processes on the GPU, not the other user\'s');
  assert.equal(r.gpu_util.at(-1), 87);
  assert.equal(view.head.gpus, 2, 'the devices nvidia-smi sees');
  assert.ok(r.t.every((s, i) => i === 0 || s > r.t[i - 1]), `on the job's timeline: ${JSON.stringify(r.t)}`);
  const pid = view.head.pid;
  const child = Number(fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim());
  assert.ok(child > 0, 'the busy child');
  assert.equal((await user(`api/jobs/${id}/cancel`, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } })).status, 202);
  await until('the end', async () => JSON.parse((await user(`api/jobs/${id}`)).body).head.state === 'ended');
  await until('the busy child gone', () => { try { process.kill(child, 0); return false; } catch { return true; } });
  assert.throws(() => process.kill(pid, 0), /ESRCH/, 'cancel leaves no process');
});

test('ranks: one row per worker hello (torchrun); string metrics (zero-code\'s source) are not plotted', () => {
  const v = view0();
  model.apply(v, { type: 'hello', data: { pid: 11, rank: 0, local_rank: 0, host: 'h' }, t: T0 });
  model.apply(v, { type: 'hello', data: { pid: 12, rank: 1, local_rank: 1, host: 'h' }, t: T0 });
  assert.deepEqual(v.ranks.map((r) => [r.rank, r.local_rank, r.pid]), [[0, 0, 11], [1, 1, 12]]);
  // torchrun's own process says hello too: a launcher row, not a second rank 0.
  model.apply(v, { type: 'hello', data: { pid: 10, host: 'h', argv: ['/venv/bin/torchrun', '--nproc_per_node=2', 'ddp.py'], sender: { awaits_ranks: true } }, t: T0 });
  assert.deepEqual(v.ranks.at(-1), { rank: null, local_rank: null, pid: 10, host: 'h', role: 'launcher' });
  model.apply(v, { type: 'progress', data: { step: 3, total: null, metrics: { source: 'optimizer' } }, t: T0 });
  assert.deepEqual(v.metrics.names, []);
  model.apply(v, { type: 'progress', data: { step: 4, total: null, metrics: { source: 'optimizer', loss: 0.5 } }, t: T0 + 10 });
  assert.deepEqual([v.metrics.names, v.metrics.step], [['loss'], [4]]);
});

test('store source: a job outlives the source that started it; a new one replays it with its own times', async (t) => {
  const python = require('../src/index.js').resolvePython();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-store-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const storePath = path.join(dir, 'jobs.db');
  const first = new StoreSource({ storePath, python });
  const id = await first.submit({ kind: 'command', argv: [python, '-c', "import time; print('before', flush=True); time.sleep(1.5); print('after')"] });
  await until('the first line', () => first.get(id).log.lines.some((l) => l.text === 'before'));
  const startedAt = first.get(id).startedAt;
  await first.close(); // the job goes on under its keeper
  const second = new StoreSource({ storePath, python });
  t.after(() => second.close());
  await second.refresh();
  await until('the end', () => second.get(id) && second.get(id).state === 'ended');
  const v = second.get(id);
  assert.equal(v.outcome, 'succeeded');
  assert.deepEqual(v.log.lines.map((l) => l.text).filter((x) => x === 'before' || x === 'after'), ['before', 'after']);
  assert.equal(v.startedAt, startedAt, 'the replay keeps the events\' own times');
  assert.equal(second.report(id).outcome, 'succeeded');
  assert.ok(fs.readFileSync(second.logPath(id), 'utf8').includes('after'), 'the full log is the keeper\'s');
});

test('a store job is known as soon as submit() returns, before the change feed brings it', async (t) => {
  // The page opens the job's stream with the id submit() gave it: a job not yet followed is a
  // 404 there, and the page never showed its output. The change feed is held back here until
  // submit() has returned: the job must already be in the list.
  const python = require('../src/index.js').resolvePython();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-store-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const source = new StoreSource({ storePath: path.join(dir, 'jobs.db'), python });
  t.after(() => source.close());
  await source.refresh();
  const held = [];
  const deliver = source._watch._deliver.bind(source._watch);
  source._watch._deliver = (change) => { held.push(change); };
  const id = await source.submit({ kind: 'command', argv: [python, '-c', 'pass'] });
  assert.ok(source.get(id), `job ${id} is followed once submit() has returned`);
  source._watch._deliver = deliver;
  for (const change of held) deliver(change); // the feed's own 'added' then changes nothing
  assert.equal(source.list().filter((j) => j.id === id).length, 1);
  await source.cancel(id);
});

test('store source: the list is driven by the store\'s change feed, not by reading the rows', async (t) => {
  // A job submitted by another process appears, its end is drawn, a forgotten job leaves the
  // list; the source never calls jobs() (it used to, every second).
  const python = require('../src/index.js').resolvePython();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-watch-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const storePath = path.join(dir, 'jobs.db');
  const source = new StoreSource({ storePath, python });
  t.after(() => source.close());
  let reads = 0;
  const jobs = source._store.jobs.bind(source._store);
  source._store.jobs = (options) => { reads += 1; return jobs(options); };
  await source.refresh();
  const changed = [];
  const unwatch = source.watch((id) => changed.push(id));
  t.after(unwatch);
  const sched = (code) => {
    const py = spawnSync(python, ['-c', `import sys; from trainbridge import bridge; s = bridge.Scheduler(store=sys.argv[1], tick=None); ${code}; s.close()`,
      storePath, python], { encoding: 'utf8' });
    assert.equal(py.status, 0, py.stderr);
    return py.stdout.trim();
  };
  const id = sched("print(s.submit([sys.argv[2], '-c', 'print(1)']))");
  await until('the job submitted elsewhere, ended in the list', () => source.list().some((j) => j.id === id && j.state === 'ended'));
  assert.equal(source.get(id).outcome, 'succeeded');
  assert.equal(sched(`print(s.forget(${JSON.stringify(id)}))`), 'True');
  await until('the forgotten job to leave the list', () => !source.list().some((j) => j.id === id));
  assert.equal(source.get(id), null);
  assert.ok(changed.includes(id), 'the page was told (the server sends the list again)');
  assert.equal(reads, 0, 'the source read the rows with jobs()');
});

test('close() does not wait for a connection that has not sent a request (a browser\'s preconnect)', async (t) => {
  // Node's server.close() waits for it until its headers timeout: the dashboard's SIGTERM
  // hung past the restart browser test's 120 s (flake hunt 2, run 5).
  const net = require('node:net');
  const dash = await startDashboard({ port: 0, memory: true });
  t.after(() => dash.server.closeAllConnections());
  const { hostname, port } = new URL(dash.url);
  const sock = net.connect(Number(port), hostname);
  t.after(() => sock.destroy());
  await new Promise((resolve, reject) => { sock.on('connect', resolve); sock.on('error', reject); });
  const t0 = performance.now();
  const verdict = await Promise.race([dash.close().then(() => 'closed'),
    new Promise((resolve) => { setTimeout(() => resolve('still open after 5 s'), 5000).unref(); })]);
  assert.equal(verdict, 'closed');
  t.diagnostic(`closed in ${performance.now() - t0} ms with an idle connection open`);
});

test('close() ends while an open page keeps reconnecting its event stream', async (t) => {
  // A page's EventSource asks again 1 s after its stream ends (`retry: 1000`), on the same
  // kept-alive connection. server.close() waits for connections with a request in progress, so the
  // dashboard's SIGTERM/Ctrl-C could wait for ever on an open page (seen: the restart browser
  // test's server never exited).
  const http = require('node:http');
  const dash = await startDashboard({ port: 0, memory: true });
  t.after(() => dash.server.closeAllConnections());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  let opened = 0;
  let stopped = false;
  await new Promise((resolve) => {
    const connect = () => {
      if (stopped) return;
      http.get(`${dash.url}api/stream`, { agent, headers: { Authorization: `Bearer ${dash.token}` } }, (res) => {
        assert.equal(res.statusCode, 200);
        opened += 1;
        resolve();
        res.resume();
        res.on('end', () => setTimeout(connect, 1000)); // the stream's `retry: 1000`, as EventSource waits
      }).on('error', () => undefined);
    };
    connect();
  });
  const verdict = await Promise.race([dash.close().then(() => 'closed'),
    new Promise((resolve) => { setTimeout(() => resolve('still open after 5 s'), 5000).unref(); })]);
  stopped = true;
  assert.equal(verdict, 'closed', `${opened} streams opened`);
});

test('a job title names the program, not its install path, and keeps the arguments', () => {
  const deep = `/tmp/${'x'.repeat(80)}/.venv/bin/python`;
  assert.equal(titleOf([deep, '-c', 'print(1)', 'two words']), 'python -c "print(1)" "two words"');
  assert.equal(titleOf([deep, 'train.py', '--lr', '3e-4']), 'python train.py --lr 3e-4');
  // code over several lines: its lines, not JSON's "\n" (read as a backslash in the code)
  const code = 'from trainbridge import worker\nfor step in range(3):\n    worker.progress(step, 3)';
  assert.equal(titleOf(['python', '-c', code]),
    'python -c "from trainbridge import worker \u23ce for step in range(3): \u23ce worker.progress(step, 3)"');
  const long = titleOf(['python', 'train.py', ...Array.from({ length: 40 }, (_, i) => `--opt${i}`)]);
  assert.equal(long.length, 100);
  assert.ok(long.endsWith('…') && long.startsWith('python train.py --opt0'));
});

test('a log download is exactly as long as it says, even when the job writes during it', async (t) => {
  // The log was sent up to the size seen at the start; with an empty file the read went one
  // byte past its Content-Length of 0, and the next answer on that kept-alive connection
  // could not be parsed (seen as 'Parse Error' and 'other side closed' in other_user.test.js).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-log-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const logFile = path.join(dir, 'job.log');
  fs.writeFileSync(logFile, '');
  const source = { list: () => [], get: () => ({}), logPath: () => logFile, watch: () => () => undefined, close: async () => undefined };
  const dash = await startDashboard({ port: 0, source });
  t.after(() => dash.close());
  const realStat = fs.statSync;
  t.after(() => { fs.statSync = realStat; });
  // The job writes a line right after the server looked at the file's size.
  fs.statSync = (p, ...rest) => {
    const st = realStat(p, ...rest);
    if (p === logFile) fs.appendFileSync(logFile, 'a line the job wrote meanwhile\n');
    return st;
  };
  const http = require('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const get = (p) => new Promise((resolve, reject) => {
    http.get(`${dash.url}${p}`, { agent, headers: { Authorization: `Bearer ${dash.token}` } }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, length: res.headers['content-length'], body }));
    }).on('error', reject);
  });
  for (const expected of ['', 'a line the job wrote meanwhile\n']) {
    const r = await get('api/jobs/j-1/log');
    assert.deepEqual(r, { status: 200, length: String(Buffer.byteLength(expected)), body: expected });
  }
  assert.equal((await get('api/jobs')).status, 200, 'the connection still reads answers right');
});

test('store source: a stray subprocess does not replace the lead\'s progress or add a stage row (one judge)', async (t) => {
  // The dashboard once showed rank 1's step 59 instead of the lead's 109, and two "train"
  // rows. It now draws the keeper's 'status' events and the lead's stage and progress only.
  const python = require('../src/index.js').resolvePython();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-store-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const source = new StoreSource({ storePath: path.join(dir, 'jobs.db'), python });
  t.after(() => source.close());
  const child = path.join(__dirname, '..', '..', 'tests', 'scheduler', 'child.py');
  const id = await source.submit({ kind: 'command', argv: [python, child, 'stray'] });
  // At every position of the feed, the page's progress line is the judge's snapshot as it is
  // (the source folds each event into the view before later listeners hear it).
  const drawn = [];
  source._jobs.get(id).job.on('status', (snap) => {
    const p = source.get(id).progress;
    if (snap.step !== null) drawn.push([[p.step, p.total, p.rate, p.eta_s, p.age_s], [snap.step, snap.total, snap.rate, snap.eta_s, snap.progress_age_s]]);
  });
  const deadline = performance.now() + 60000;
  while (!(source.get(id) && source.get(id).state === 'ended')) {
    if (performance.now() > deadline) throw new Error('timed out waiting for the end');
    await new Promise((r) => setTimeout(r, 25));
  }
  const v = source.get(id);
  assert.equal(v.outcome, 'succeeded');
  assert.deepEqual([v.progress.step, v.progress.total], [105, 200], JSON.stringify(v.progress));
  assert.deepEqual(v.stages.filter((s) => s.name === 'train').length, 1, JSON.stringify(v.stages));
  const attached = source._jobs.get(id).job;
  assert.deepEqual([attached.status().step, attached.status().total], [105, 200]);
  assert.ok(drawn.length >= 1, "the judge's status was drawn");
  for (const [page, judged] of drawn) assert.deepEqual(page, judged);
});

test('store source: a two-rank torchrun job shows the lead\'s progress and one stage tree (one judge)', async (t) => {
  // Rank 1 reports 150/200 after rank 0's 20/20 (tests/distributed/scenarios/
  // torchrun_two_ranks_progress.py); the page draws the lead's, and each rank's own "train"
  // is one row. tests/distributed/test_elastic.py runs the same job through status() and attach.
  const python = require('../src/index.js').resolvePython();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-torchrun-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const source = new StoreSource({ storePath: path.join(dir, 'jobs.db'), python });
  t.after(() => source.close());
  const script = path.join(__dirname, '..', '..', 'tests', 'distributed', 'scenarios', 'torchrun_two_ranks_progress.py');
  const argv = [python, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', script, path.join(dir, 'rank0-done')];
  const id = await source.submit({ kind: 'command', argv });
  const deadline = performance.now() + 120000;
  while (!(source.get(id) && source.get(id).state === 'ended')) {
    if (performance.now() > deadline) throw new Error('timed out waiting for the end');
    await new Promise((r) => setTimeout(r, 25));
  }
  const v = source.get(id);
  assert.equal(v.outcome, 'succeeded', JSON.stringify(v.report && v.report.summary));
  assert.deepEqual([v.progress.step, v.progress.total], [20, 20], JSON.stringify(v.progress));
  assert.equal(v.stages.filter((s) => s.name === 'train').length, 1, JSON.stringify(v.stages));
  assert.equal(v.ranks.filter((r) => r.rank === 1).length, 1, 'rank 1 has its row in the ranks table');
});

test('store source: the resource chart survives a dashboard restart (the keeper samples, the feed keeps it)', async (t) => {
  // The CPU/RSS chart used to start again when the dashboard restarted. The keeper samples
  // the job's tree every second into the feed (bridge/resources.py); a new source replays it.
  const python = require('../src/index.js').resolvePython();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-res-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const storePath = path.join(dir, 'jobs.db');
  const gate = path.join(dir, 'go');
  const code = `import os, time\nwhile not os.path.exists(${JSON.stringify(gate)}): time.sleep(0.05)\n`;
  const first = new StoreSource({ storePath, python });
  const id = await first.submit({ kind: 'command', argv: [python, '-c', code] });
  await until('three samples', () => first.get(id).resources.t.length >= 3);
  const seen = { t: [...first.get(id).resources.t], rss: [...first.get(id).resources.rss_mb] };
  await first.close(); // the job goes on under its keeper
  const second = new StoreSource({ storePath, python });
  t.after(() => second.close());
  await second.refresh();
  await until('the replayed samples', () => second.get(id) && second.get(id).resources.t.length > seen.t.length);
  const r = second.get(id).resources;
  assert.deepEqual(r.t.slice(0, seen.t.length), seen.t, 'the same points, on the job\'s own timeline');
  assert.deepEqual(r.rss_mb.slice(0, seen.rss.length), seen.rss);
  assert.ok(r.rss_mb.every((mb) => mb > 0), JSON.stringify(r.rss_mb));
  fs.writeFileSync(gate, '');
  await until('the end', () => second.get(id).state === 'ended');
  assert.equal(second.get(id).outcome, 'succeeded');
});

test('server: the list\'s actions: re-run, delete (confirmed, its files too), queue pause; the list says when and why', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-dash-actions-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const dash = await startDashboard({ port: 0, store: path.join(dir, 'jobs.db') });
  t.after(() => dash.close());
  const user = asUser(dash);
  const json = (p, body) => user(p, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  const python = require('../src/index.js').resolvePython();
  const made = await json('api/jobs', { kind: 'command', argv: [python, '-c', 'raise SystemExit("no data in /x")'] });
  const { id } = JSON.parse(made.body);
  await until('the job to end', () => dash.source.get(id).state === 'ended');
  const row = dash.source.list().find((j) => j.id === id);
  assert.equal(row.outcome, 'failed');
  assert.ok(row.startedAt > 0 && row.duration_s > 0, JSON.stringify(row));
  assert.match(row.reason, /no data in \/x/, 'why, from the report: no click needed');
  // Re-run: a new job with the same spec.
  const again = await json(`api/jobs/${id}/rerun`, {});
  assert.equal(again.status, 201);
  const second = JSON.parse(again.body).id;
  assert.notEqual(second, id);
  assert.deepEqual(dash.source.get(second).command, dash.source.get(id).command);
  await until('the re-run to end', () => dash.source.get(second).state === 'ended');
  // Delete: refused unconfirmed or for a running job; confirmed, the job, its row and files go.
  assert.equal((await json(`api/jobs/${id}/forget`, {})).status, 400);
  const logFile = dash.source.logPath(id);
  assert.ok(fs.existsSync(logFile));
  assert.equal((await json(`api/jobs/${id}/forget`, { confirm: true })).status, 200);
  assert.equal(dash.source.get(id), null);
  assert.ok(!dash.source.list().some((j) => j.id === id));
  assert.ok(!fs.existsSync(logFile), 'its files are gone');
  assert.equal((await user(`api/jobs/${id}`)).status, 404);
  // The queue: paused for every process on the store (the change feed brings it to the list).
  assert.deepEqual(JSON.parse((await user('api/queue')).body), { queue: { paused: false } });
  assert.equal((await json('api/queue', { paused: 'yes' })).status, 400);
  const pausedNow = JSON.parse((await json('api/queue', { paused: true })).body).queue;
  assert.equal(pausedNow.paused, true);
  // The answer is the state every list is sent from now on, before the change feed looked.
  assert.deepEqual(dash.source.queueState(), pausedNow);
  const held = JSON.parse((await json('api/jobs', { kind: 'command', argv: [python, '-c', 'pass'] })).body).id;
  assert.equal(dash.source.get(held).state, 'queued', 'a paused queue starts nothing');
  assert.equal((await json(`api/jobs/${held}/forget`, { confirm: true })).status, 409, 'not ended: cancel it first');
  const resumed = JSON.parse((await json('api/queue', { paused: false })).body).queue;
  assert.equal(resumed.paused, false);
  assert.ok(resumed.seq > pausedNow.seq, `a later state has a later seq: ${JSON.stringify([pausedNow, resumed])}`);
  assert.equal(dash.source.queueState().paused, false, 'no list is sent the paused queue after the resume answered');
  await until('the held job to end', () => dash.source.get(held).state === 'ended');
});

test('server: with --memory there is no queue to pause, and it says so', async (t) => {
  const dash = await startDashboard({ port: 0, memory: true });
  t.after(() => dash.close());
  const user = asUser(dash);
  assert.deepEqual(JSON.parse((await user('api/queue')).body), { queue: null });
  const r = await user('api/queue', { method: 'POST', body: '{"paused": true}', headers: { 'Content-Type': 'application/json' } });
  assert.equal(r.status, 409);
  assert.match(JSON.parse(r.body).error, /no queue to pause/);
});

/** The events of an SSE response, parsed: an async iterator of {event, data}. */
async function* sseEvents(res) {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields = Object.fromEntries(block.split('\n').filter((l) => l && !l.startsWith(':'))
        .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
      if (fields.event) yield { event: fields.event, data: JSON.parse(fields.data) };
    }
  }
}

test('server: one stream carries what all of a browser\'s tabs watch (/api/mux)', async (t) => {
  // A stream per tab spent the browser's six connections to the host: a submit waited forever.
  const dash = await startDashboard({ port: 0, memory: true });
  t.after(() => dash.close());
  const user = asUser(dash);
  const json = { 'Content-Type': 'application/json' };
  assert.equal((await request(`${dash.url}api/mux`)).status, 401, 'not without the token');
  const python = require('../src/index.js').resolvePython();
  const made = await user('api/jobs', { method: 'POST', headers: json,
    body: JSON.stringify({ kind: 'command', argv: [python, '-c', 'import time; time.sleep(60)'] }) });
  const { id } = JSON.parse(made.body);
  t.after(() => dash.source.cancel(id).catch(() => undefined));

  const abort = new AbortController();
  t.after(() => abort.abort());
  const res = await fetch(`${dash.url}api/mux`, { headers: { Authorization: `Bearer ${dash.token}` }, signal: abort.signal });
  assert.equal(res.status, 200);
  const events = sseEvents(res);
  // A stream says at once, and every 2 s, that it is alive: a page that hears nothing for
  // three periods (a stopped server keeps the connection open) calls it not answering.
  assert.deepEqual((await events.next()).value, { event: 'alive', data: { every_ms: 2000 } });
  const first = (await events.next()).value;
  assert.equal(first.event, 'mux');
  const { sid } = first.data;
  assert.match(sid, /^[0-9a-f]{32}$/);
  const change = (body, at = sid) => user(`api/mux/${at}`, { method: 'POST', headers: json, body: JSON.stringify(body) });
  const watched = await change({ watch: { list: '/api/stream', job: `/api/jobs/${id}/stream`,
    gone: '/api/jobs/job-nope/stream', other: '/api/jobs' } });
  assert.equal(watched.status, 200);
  const answer = JSON.parse(watched.body);
  assert.equal(answer.watching, 2);
  assert.deepEqual(Object.fromEntries(Object.entries(answer.refused).map(([k, v]) => [k, v.status])), { gone: 404, other: 400 });
  assert.match(answer.refused.gone.error, /no job job-nope/);
  // Each watched topic's own events, tagged with its key: the list, then the job's snapshot.
  const seen = {};
  while (!(seen.list && seen.job)) {
    const { value } = await events.next();
    if (value.event === 'alive') continue; // the keep-alive, every 2 s
    assert.equal(value.event, 'm');
    if (value.data.key === 'list' && value.data.event === 'jobs') seen.list = value.data.data;
    if (value.data.key === 'job' && value.data.event === 'update') seen.job = value.data.data;
  }
  assert.ok(seen.list.some((j) => j.id === id));
  assert.equal(seen.job.head.id, id);
  assert.equal(dash.openStreams(id), 1);
  assert.equal(dash.openConnections(), 1, 'two topics, one connection');
  assert.equal((await change({ unwatch: ['job'] })).status, 200);
  assert.equal(dash.openStreams(id), 0, 'unwatched: the server let go of the job');
  assert.equal((await change({ watch: [] })).status, 400);
  const unknown = await change({ watch: {} }, '0'.repeat(32));
  assert.equal(unknown.status, 404);
  assert.match(JSON.parse(unknown.body).error, /open \/api\/mux again/);
  abort.abort();
  const deadline = performance.now() + 5000;
  while (dash.openConnections() > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(dash.openConnections(), 0, 'the stream closed: its topics are let go');
  assert.equal((await change({ watch: {} })).status, 404);
});
