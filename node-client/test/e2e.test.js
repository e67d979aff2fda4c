'use strict';
// End to end with real Python children: each outcome the user relies on, the time to know
// (generous bounds: deadlines, not speed), and that nothing of the job is left running.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { launch, PythonError, LaunchError } = require('../src/index.js');
const { FIXTURE, REPO, PYTHON, userEnv, liveProcesses, processesOfJob } = require('../test-support/e2e.js');

const run = (mode, options = {}) => launch({ command: PYTHON, args: [FIXTURE, mode], env: userEnv(), ...options });

test('success: stages, progress, output and a clean report', async () => {
  const job = run('succeed');
  const seen = { stage: [], progress: [], state: [] };
  for (const name of Object.keys(seen)) job.on(name, (v) => seen[name].push(v));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.equal(report.exit_code, 0);
  assert.equal(report.signal, null);
  assert.equal(report.diagnosis, null);
  assert.equal(report.error, null);
  const ours = report.stages.filter((s) => ['data', 'train'].includes(s.name));
  assert.deepEqual(ours.map((s) => [s.name, s.status]), [['data', 'ok'], ['train', 'ok']]);
  assert.deepEqual(report.progress, { step: 5, total: 5, metrics: { loss: 0.2 } });
  assert.deepEqual(report.log_tail.slice(-2), ['step 5/5', 'done']);
  assert.equal(seen.progress.at(-1).step, 5);
  assert.ok(seen.stage.some((s) => s.name === 'train' && s.event === 'end'));
  assert.deepEqual(seen.state.slice(-2), ['running', 'ended']);
  assert.equal(job.state, 'ended');
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('the last words are acked: the worker exits at once instead of waiting for its ack timeout', async () => {
  // With a 20 s ack timeout, an unacked bye (or error) would hold the process for 20 s.
  const ok = await run('succeed', { timeouts: { ackTimeoutS: 20 } }).done;
  const failed = await run('raise', { timeouts: { ackTimeoutS: 20 } }).done;
  for (const report of [ok, failed]) {
    assert.ok(report.worker.bye, 'the worker said bye');
    assert.ok(report.duration_s < 10, `took ${report.duration_s} s`);
    assert.deepEqual(report.protocol, { rejected: {}, lost: 0, foreign_hello: 0, unrouted: 0, undelivered: {}, unsent: 0 });
  }
});

test('exception: failed, with the Python error as an Error object', async () => {
  const job = run('raise');
  const errors = [];
  job.on('error', (err) => errors.push(err));
  const report = await job.done;
  assert.equal(report.outcome, 'failed');
  assert.equal(report.exit_code, 1);
  assert.equal(report.error.type, 'ValueError');
  assert.equal(report.error.message, 'bad layer size: 0');
  assert.equal(report.diagnosis.kind, 'python_exception');
  assert.match(report.diagnosis.summary, /ValueError: bad layer size: 0 .*child\.py:\d+/);
  assert.equal(errors.length, 1);
  const [err] = errors;
  assert.ok(err instanceof PythonError && err instanceof Error);
  assert.equal(err.name, 'ValueError');
  assert.equal(err.message, 'bad layer size: 0');
  assert.match(err.stack, /^Traceback \(most recent call last\):/);
  assert.match(err.stack, /child\.py", line \d+, in <module>/);
  assert.ok(err.fatal);
});

test('native crash: crashed by SIGSEGV, the faulthandler stack, known at once', async () => {
  const goFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tb-node-')), 'go');
  const job = run('segfault', { env: userEnv({ TB_GO_FILE: goFile }) });
  job.on('stage', (s) => { if (s.name === 'forward') fs.writeFileSync(goFile, ''); });
  let lastWords = null;
  job.on('log', (line) => { if (line.text === 'calling native code') lastWords = performance.now(); });
  const report = await job.done;
  const knownAfterS = (performance.now() - lastWords) / 1000;
  assert.equal(report.outcome, 'crashed');
  assert.equal(report.signal, 'SIGSEGV');
  assert.equal(report.exit_code, null);
  assert.equal(report.diagnosis.kind, 'native_crash');
  assert.match(report.diagnosis.summary, /SIGSEGV \(segmentation fault\) in stage 'forward' .*string_at/);
  assert.equal(report.stage, 'forward');
  fs.rmSync(path.dirname(goFile), { recursive: true, force: true });
  assert.match(report.stacks, /Segmentation fault/);
  assert.match(report.stacks, /child\.py", line \d+ in <module>/);
  // The death comes from the OS at once, not from a deadline (heartbeat silence is 30 s).
  assert.ok(knownAfterS < 3, `known ${knownAfterS} s after the crash`);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test("a hang's idle time counts from the last activity, not the worker's last progress", async () => {
  // As tests/client/test_deadlines.py: 3 s of printing with no progress source is activity.
  const script = path.join(REPO, 'tests', 'faults', 'scenarios', '_prints_then_waits.py');
  const job = launch({
    command: PYTHON,
    args: [script],
    env: userEnv(),
    timeouts: { stallTimeout: 1.5, heartbeatTimeout: 4, killGrace: 1 },
  });
  const beats = [];
  job.on('heartbeat', (b) => beats.push(b));
  const report = await job.done;
  assert.equal(report.outcome, 'hung');
  assert.equal(report.hang.reason, 'stall');
  const workerIdle = beats[beats.length - 1].idle_s; // since the stage began
  const idle = report.hang.idle_s;
  assert.ok(idle + 2 < workerIdle, `${idle} vs the worker's ${workerIdle}`);
  assert.equal(report.diagnosis.evidence.idle_s, idle);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('stall -> hung with stacks, then the tree is killed', async () => {
  const job = run('stall', { timeouts: { stallTimeout: 1, killGrace: 1 } });
  const states = [];
  let stalled = null;
  let hang = null;
  const signals = [];
  job.on('state', (s) => states.push(s));
  job.on('stalled', (info) => { stalled = info; });
  job.on('hang', (h) => { hang = h; });
  job.on('signal', (name) => signals.push(name));
  const report = await job.done;
  assert.deepEqual(hang, { reason: 'stall', stage: 'train' });
  assert.deepEqual(signals, report.signals_sent);
  assert.equal(report.outcome, 'hung');
  assert.equal(report.hang.reason, 'stall');
  assert.equal(report.hang.stage, 'train');
  // declared at the stall deadline (1 s after the last progress), not long after
  assert.ok(report.hang.after_s >= 1 && report.hang.after_s < 5, `hung after ${report.hang.after_s} s`);
  assert.deepEqual(states.slice(-3), ['running', 'stalled', 'ended']);
  assert.equal(stalled.stage, 'train');
  assert.match(report.stacks, /in-band dump_stacks \(worker\)/);
  assert.match(report.stacks, /MainThread[\s\S]*child\.py", line \d+, in <module>/);
  assert.match(report.stacks, /faulthandler \(crash file\)/); // the SIGUSR1 dump
  assert.deepEqual(report.signals_sent, ['SIGUSR1', 'SIGTERM']);
  assert.equal(report.diagnosis.kind, 'sleeping');
  assert.deepEqual(liveProcesses([report.pid]), []);
});

test('stage budget overrun -> hung in that stage', async () => {
  const report = await run('budget', { timeouts: { killGrace: 1 } }).done;
  assert.equal(report.outcome, 'hung');
  assert.deepEqual([report.hang.reason, report.hang.stage], ['stage_budget', 'download']);
  assert.ok(report.hang.after_s >= 0.5 && report.hang.after_s < 5, `hung after ${report.hang.after_s} s`);
  assert.equal(report.diagnosis.kind, 'sleeping');
  assert.deepEqual(liveProcesses([report.pid]), []);
});

test('a read from a silent peer -> hung, naming the remote address', async () => {
  const report = await run('socket', { timeouts: { stallTimeout: 1, killGrace: 1 } }).done;
  assert.equal(report.outcome, 'hung');
  assert.equal(report.diagnosis.kind, 'network_wait');
  assert.match(report.diagnosis.summary, /^blocked reading from 127\.0\.0\.1:\d+ .*in stage 'download'/);
  assert.equal(report.evidence.main_thread.syscall, 'recvfrom');
  assert.ok(report.evidence.sockets.some((x) => x.status === 'ESTABLISHED' && x.fd === report.evidence.main_thread.fd));
});

test('heartbeat silence with the GIL held -> hung, with the SIGUSR1 stack', async () => {
  const goFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tb-node-')), 'go');
  const job = run('gil', { timeouts: { heartbeatTimeout: 1, killGrace: 1 }, env: userEnv({ TB_GO_FILE: goFile }) });
  job.once('progress', () => fs.writeFileSync(goFile, ''));
  const said = [];
  job.on('starved', (s) => said.push(s.why));
  const report = await job.done;
  fs.rmSync(path.dirname(goFile), { recursive: true, force: true });
  const seen = JSON.stringify({ outcome: report.outcome, hang: report.hang, summary: report.diagnosis?.summary, said });
  assert.equal(report.outcome, 'hung', seen);
  assert.equal(report.hang.reason, 'heartbeat', seen);
  assert.equal(report.diagnosis.kind, 'gil_held', seen);
  // no in-band dump (the beacon cannot run), but faulthandler writes with the GIL held
  assert.deepEqual(report.signals_sent.slice(0, 2), ['SIGUSR1', 'SIGTERM']);
  assert.match(report.stacks, /faulthandler \(crash file\)[\s\S]*child\.py", line \d+ in <module>/);
  assert.deepEqual(liveProcesses([report.pid]), []);
});

test('a stall shorter than the freeze watchdog, native deadlock with the GIL held -> SIGUSR2 stack, gil_held', async () => {
  // No signal ends a pthread mutex wait: the main thread never runs Python again, so neither
  // the in-band dump nor the SIGUSR1 handler answers; the stall (1 s) comes long before the
  // freeze watchdog (15 s). SIGUSR2: faulthandler's C handler dumps the main thread.
  const goFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tb-node-')), 'go');
  const job = run('gil_mutex', {
    timeouts: { stallTimeout: 1, heartbeatTimeout: 30, killGrace: 1 }, env: userEnv({ TB_GO_FILE: goFile }),
  });
  job.once('progress', () => fs.writeFileSync(goFile, ''));
  const report = await job.done;
  fs.rmSync(path.dirname(goFile), { recursive: true, force: true });
  assert.equal(report.outcome, 'hung');
  assert.equal(report.hang.reason, 'stall');
  assert.deepEqual(report.signals_sent.slice(0, 3), ['SIGUSR1', 'SIGUSR2', 'SIGTERM']);
  assert.match(report.stacks, /faulthandler \(crash file\)[\s\S]*child\.py", line \d+ in hold_gil/);
  assert.doesNotMatch(report.stacks, /Timeout \(/); // the native dump, not the freeze watchdog's
  assert.equal(report.diagnosis.kind, 'gil_held');
  assert.ok(report.duration_s < 10, `took ${report.duration_s} s`);
  assert.deepEqual(liveProcesses([report.pid]), []);
});

test('no hello before the startup deadline from a Python that does nothing -> hung (startup)', async () => {
  const job = launch({ command: PYTHON, args: ['-c', 'import time; time.sleep(30)'], zeroCode: false, timeouts: { startupTimeout: 0.5, killGrace: 1 } });
  const report = await job.done;
  assert.equal(report.outcome, 'hung');
  assert.equal(report.hang.reason, 'startup');
  assert.equal(report.diagnosis.kind, 'startup');
  assert.equal(report.signal, 'SIGTERM');
  assert.deepEqual(liveProcesses([report.pid]), []);
});

test('a tree with no Python yet is starting, not hung: it goes on past the startup deadline (Python: test_deadlines.py)', async () => {
  const job = launch({ command: 'bash', args: ['-c', 'sleep 2.5; echo prepared'], timeouts: { startupTimeout: 0.5, killGrace: 1 } });
  const said = [];
  job.on('starting', (s) => said.push(s.why));
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded', report.summary);
  assert.ok(said.length && said[0].startsWith("no Python in the job's process tree yet (bash"), said.join('; '));
});

test('cancel with grandchildren: cancelled, and none of them is left', async () => {
  const job = run('grandchildren', { timeouts: { cancelGrace: 0.5, killGrace: 0.5 } });
  let grandchildren = null;
  job.on('log', (line) => {
    const m = /^grandchildren (\d+) (\d+)$/.exec(line.text);
    if (m) grandchildren = [Number(m[1]), Number(m[2])];
  });
  await new Promise((resolve) => job.once('progress', resolve));
  assert.ok(grandchildren, 'the child printed its grandchildren before its first progress');
  assert.equal(liveProcesses(grandchildren).length, 2);
  const report = await job.cancel();
  assert.equal(report.outcome, 'cancelled');
  assert.equal(report.diagnosis, null);
  assert.deepEqual(liveProcesses([report.pid, ...grandchildren]), []);
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('GBK and undecodable output: decoded, reversible, and logged', async () => {
  const logPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tb-node-')), 'job.log');
  const job = run('gbk', { logPath });
  const lines = [];
  job.on('log', (line) => { if (line.stream === 'stdout') lines.push(line); });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual(lines.map((l) => [l.text, l.encoding]), [
    ['\u635f\u5931 loss=0.5 \u4e2d\u6587', 'gbk'],
    ['bad \udcff\udcfe bytes', 'escaped'],
  ]);
  assert.deepEqual(report.log_tail.slice(0, 2), lines.map((l) => l.text));
  assert.equal(fs.readFileSync(logPath, 'utf8'), '\u635f\u5931 loss=0.5 \u4e2d\u6587\nbad \\udcff\\udcfe bytes\n'
    + `[trainbridge] ${report.summary}\n`); // the verdict ends the log
  fs.rmSync(path.dirname(logPath), { recursive: true, force: true });
});

test('sys.exit(3): failed with exit_nonzero', async () => {
  const report = await run('exit3').done;
  assert.equal(report.outcome, 'failed');
  assert.equal(report.exit_code, 3);
  assert.equal(report.diagnosis.kind, 'exit_nonzero');
});

test('one job server serves many jobs at once; events as an async iterator', async () => {
  const jobs = [run('succeed'), run('raise'), run('succeed')];
  const kinds = await Promise.all(jobs.map(async (job) => {
    const types = [];
    for await (const event of job) types.push(event.type);
    return types;
  }));
  for (const types of kinds) {
    assert.equal(types.at(-1), 'end');
    assert.ok(types.includes('hello') && types.includes('stage'));
  }
  const outcomes = await Promise.all(jobs.map((job) => job.done.then((r) => r.outcome)));
  assert.deepEqual(outcomes, ['succeeded', 'failed', 'succeeded']);
  assert.ok(kinds[1].includes('error'));
});

test('messages that break the protocol are counted and dropped; the job is unharmed', async () => {
  const job = run('hostile');
  const workerLogs = [];
  job.on('log', (line) => { if (line.stream === 'worker') workerLogs.push(line.text); });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual(report.protocol.rejected, { bad_signature: 1, non_ascii: 1, unknown_kind: 1, replay: 1 });
  assert.deepEqual(workerLogs, ['rank 1 here']); // the one valid message, once
});

test('dumpStacks() and ping() on a running job', async () => {
  const job = run('grandchildren', { timeouts: { cancelGrace: 0.5, killGrace: 0.5 } });
  await new Promise((resolve) => job.once('progress', resolve));
  const stacks = await job.dumpStacks();
  assert.match(stacks, /MainThread/);
  assert.match(stacks, /child\.py/);
  const rtt = await job.ping();
  assert.ok(typeof rtt === 'number' && rtt >= 0);
  await job.cancel();
});

test('a command that cannot start rejects done with LaunchError', async () => {
  const job = launch({ command: '/nonexistent/python-please' });
  await assert.rejects(job.done, (err) => err instanceof LaunchError && /python-please/.test(err.message));
});

test('cancel() right after launch, before the child even started', async () => {
  const job = run('grandchildren', { timeouts: { killGrace: 1 } });
  const report = await job.cancel();
  assert.equal(report.outcome, 'cancelled');
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('a consumer of events() that falls 10,000 behind gets a dropped count, then the end', async () => {
  const job = run('flood-lines');
  const events = job.events();
  await job.done; // read nothing until the job is over
  const seen = [];
  for await (const event of events) seen.push(event);
  assert.equal(seen[0].type, 'dropped');
  assert.ok(seen[0].data.count > 0);
  assert.equal(Object.values(seen[0].data.kinds).reduce((a, b) => a + b, 0), seen[0].data.count, 'each one counted by type');
  assert.ok(seen[0].data.kinds.log > 0, 'the flood was output lines');
  assert.equal(seen.length, 10001);
  assert.equal(seen.at(-1).type, 'end');
});

test('out of host memory under an address-space limit is named, with the limit (Python: test_exhaustion.py)', async () => {
  const code = [
    'import resource',
    'with open("/proc/self/status") as f:',
    '    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))',
    'limit = vm + (256 << 20)',
    'resource.setrlimit(resource.RLIMIT_AS, (limit, limit))',
    'print("limit", limit, flush=True)',
    'blob = bytearray(1 << 30)',
  ].join('\n');
  const report = await launch({ command: PYTHON, args: ['-c', code], env: userEnv() }).done;
  const limit = Number(report.log_tail.find((l) => l.startsWith('limit')).split(' ')[1]);
  const d = report.diagnosis;
  assert.equal(d.kind, 'host_oom', report.summary);
  assert.equal(d.evidence.memory.as_limit_bytes, limit);
  assert.match(d.summary, /^out of host memory .*, ulimit -v.*MemoryError/);
  assert.match(d.hint, /^the process hit its address-space limit/);
  assert.deepEqual(liveProcesses([report.pid]), []);
});
