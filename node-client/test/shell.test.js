'use strict';
// The python-shell adapter (require('trainbridge/shell')), behaviour by behaviour against
// python-shell itself (a devDependency): the same script, the same calls, the same events,
// messages, errors and exit; plus what supervision adds (the report).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { compileAsInstalled } = require('../test-support/typescript.js');
const Reference = require('python-shell');
const Ours = require('trainbridge/shell');
const { PYTHON, userEnv, processesOfJob } = require('../test-support/e2e.js');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-shell-'));
test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
let counter = 0;
function script(code) {
  counter += 1;
  const file = path.join(dir, `s${counter}.py`);
  fs.writeFileSync(file, code);
  return file;
}
const base = () => ({ pythonPath: PYTHON, env: userEnv() });

/**
 * Run one script with python-shell and with the adapter; drive(shell) sends/ends; returns
 * each side's record: the events in order and the end callback's arguments.
 */
function runOne(Shell, file, options, drive) {
  return new Promise((resolve) => {
    const shell = new Shell(file, { ...base(), ...options });
    const events = [];
    shell.on('message', (m) => events.push(['message', m]));
    shell.on('stderr', (l) => events.push(['stderr', l]));
    shell.on('close', () => events.push(['close']));
    const binary = [];
    if (options.mode === 'binary') shell.stdout.on('data', (c) => binary.push(Buffer.from(c)));
    drive(shell);
    shell.end((err, code, signal) => resolve({ shell, events, err, code, signal, binary: Buffer.concat(binary) }));
  });
}
async function both(code, options = {}, drive = () => undefined) {
  const file = script(code);
  const [ref, ours] = await Promise.all([
    runOne(Reference.PythonShell, file, options, drive), runOne(Ours.PythonShell, file, options, drive)]);
  return { ref, ours };
}

test('text mode: a message per stdout line, split as python-shell splits ("\\r", no final newline)', async () => {
  const { ref, ours } = await both('import sys\nprint("a")\nsys.stdout.write("b\\r\\nprompt> 10%\\rc\\n")\nprint("\\u4e2d\\u6587")\nsys.stdout.write("last, no newline")\n');
  assert.deepEqual(ours.events, ref.events);
  assert.equal(ours.events.at(-2)[1], 'last, no newline');
  assert.deepEqual([ours.err, ours.code, ours.signal], [undefined, 0, null]);
  assert.equal(ours.shell.report.outcome, 'succeeded'); // what the adapter adds
  assert.deepEqual(processesOfJob(ours.shell.report.job_id), []);
});

test('json mode: send() objects as JSON lines, messages parsed, stdin EOF ends the loop', async () => {
  const code = 'import sys, json\nfor line in sys.stdin:\n    print(json.dumps({"got": json.loads(line)}))\n';
  const drive = (shell) => { shell.send({ a: 1, s: '\u00e9' }); shell.send([1, 2]); shell.send('x'); };
  const { ref, ours } = await both(code, { mode: 'json' }, drive);
  assert.deepEqual(ours.events, ref.events);
  assert.deepEqual(ours.events[0], ['message', { got: { a: 1, s: '\u00e9' } }]);
});

test('binary mode: raw bytes both ways, no message or stderr events', async () => {
  const code = 'import sys\nd = sys.stdin.buffer.read()\nsys.stdout.buffer.write(d[::-1] + bytes(range(256)))\nsys.stderr.write("note\\n")\n';
  const data = Buffer.from([0xd6, 0xd0, 0x0d, 0x00, 0xff, 0x0a]);
  const { ref, ours } = await both(code, { mode: 'binary' }, (shell) => shell.send(data));
  assert.deepEqual(ours.binary, ref.binary);
  assert.deepEqual(ours.binary.subarray(0, 6), Buffer.from([...data].reverse()));
  assert.deepEqual(ours.events, ref.events);
});

test('stderr: a "stderr" event per line; the error is the traceback\'s last line, with its fields', async () => {
  const code = 'import sys\nprint("before")\nsys.stderr.write("warning one\\n")\nraise ValueError("bad \\u00e9 value")\n';
  const { ref, ours } = await both(code, { args: ['--x', '1'], pythonOptions: ['-u'] });
  assert.deepEqual(ours.events, ref.events);
  for (const side of [ref, ours]) assert.equal(side.code, 1);
  assert.equal(ours.err.message, ref.err.message);
  // python-shell: stderr that does not start with a traceback is the message as a whole
  assert.ok(ours.err.message.startsWith('warning one\nTraceback'));
  assert.ok(ours.err.message.trimEnd().endsWith('ValueError: bad \u00e9 value'));
  assert.equal(ours.err.constructor.name, 'PythonShellError');
  for (const field of ['traceback', 'executable', 'options', 'script', 'args', 'exitCode']) {
    assert.deepEqual(ours.err[field], ref.err[field], field);
  }
  assert.equal(ours.err.report.outcome, 'failed'); // what the adapter adds: the diagnosis
  assert.equal(ours.err.report.error.type, 'ValueError');
});

test('a traceback alone on stderr: the message is its last line', async () => {
  const { ref, ours } = await both('raise ValueError("bad \\u00e9 value")\n');
  assert.equal(ours.err.message, ref.err.message);
  assert.equal(ours.err.message, 'ValueError: bad \u00e9 value');
  assert.equal(ours.err.traceback, ref.err.traceback);
});

test('a non-zero exit with nothing on stderr: "process exited with code N"', async () => {
  const { ref, ours } = await both('import sys\nsys.exit(3)\n');
  assert.equal(ours.err.message, ref.err.message);
  assert.equal(ours.err.message, 'process exited with code 3');
  assert.deepEqual([ours.code, ours.signal], [ref.code, ref.signal]);
});

test('kill(): the end callback sees the signal; terminated and close as python-shell', async () => {
  const code = 'import sys, time\nprint("ready", flush=True)\ntime.sleep(30)\n';
  const drive = (shell) => shell.on('message', (m) => { if (m === 'ready') shell.kill(); });
  const { ref, ours } = await both(code, {}, drive);
  assert.deepEqual([ours.code, ours.signal, ours.err], [ref.code, ref.signal, ref.err]);
  assert.equal(ours.signal, 'SIGTERM');
  assert.equal(ours.shell.terminated, true);
  assert.deepEqual(ours.events, ref.events);
  // The user's own signal stopped it: cancelled (not crashed by SIGTERM), and by what.
  const { report } = ours.shell;
  assert.equal(report.outcome, 'cancelled', report.summary);
  assert.deepEqual([report.cancel.by, report.cancel.signal], ['signal', 'SIGTERM']);
});

test('run() and runString() resolve to the messages; a failure rejects with err.logs', async () => {
  const ok = 'print("one")\nprint("two")\n';
  assert.deepEqual(await Ours.PythonShell.run(script(ok), base()), await Reference.PythonShell.run(script(ok), base()));
  assert.deepEqual(await Ours.PythonShell.runString(ok, base()), ['one', 'two']);
  const bad = 'print("partial")\nraise KeyError("k")\n';
  const [ref, ours] = await Promise.all([
    Reference.PythonShell.runString(bad, base()).catch((e) => e),
    Ours.PythonShell.runString(bad, base()).catch((e) => e)]);
  assert.equal(ours.message, ref.message);
  assert.deepEqual(ours.logs, ref.logs);
  assert.deepEqual(ours.logs, ['partial']);
});

test('pythonError is emitted when no end callback is given', async () => {
  const shell = new Ours.PythonShell(script('raise RuntimeError("x")\n'), base());
  const err = await new Promise((resolve) => shell.on('pythonError', resolve));
  assert.equal(err.message, 'RuntimeError: x');
  await new Promise((resolve) => (shell.terminated ? resolve() : shell.on('close', resolve)));
});

test('a python that does not exist: an error event and the end callback get it', async () => {
  const shell = new Ours.PythonShell(script('pass\n'), { pythonPath: '/nonexistent/python3' });
  const fromEvent = new Promise((resolve) => shell.on('error', resolve));
  const fromEnd = new Promise((resolve) => shell.end(resolve));
  assert.match((await fromEvent).message, /cannot start/);
  assert.match((await fromEnd).message, /cannot start/);
});

test('the adapter supervises: stages and the environment the caller gave', async () => {
  const code = 'import os\nfrom trainbridge import worker\nwith worker.stage("train"):\n    print(os.environ.get("PYTHONUNBUFFERED"), os.environ.get("MY_FLAG"))\n';
  const shell = new Ours.PythonShell(script(code), { ...base(), env: { ...userEnv(), MY_FLAG: 'on' } });
  const stages = [];
  shell.job.on('stage', (s) => stages.push(`${s.event} ${s.name}`));
  const messages = [];
  shell.on('message', (m) => messages.push(m));
  await new Promise((resolve) => shell.end(resolve));
  assert.deepEqual(messages, ['None on']); // python-shell passes env as given: so do we
  assert.ok(stages.includes('begin train') && stages.includes('end train'));
  assert.ok(shell.report.stages.some((s) => s.name === 'train' && s.status === 'ok'));
});

test('options: scriptPath folder, custom formatter / parser / stderrParser, defaultOptions', async () => {
  const file = script('import sys\nfor line in sys.stdin:\n    print(line.strip().upper())\nsys.stderr.write("e1\\ne2\\n")\n');
  const options = {
    scriptPath: path.dirname(file), formatter: (m) => `<${m}>`, parser: (l) => ({ line: l }),
    stderrParser: (l) => `!${l}`,
  };
  const drive = (shell) => { shell.send('a'); shell.send('b'); };
  const [ref, ours] = await Promise.all([Reference.PythonShell, Ours.PythonShell].map(
    (Shell) => runOne(Shell, path.basename(file), options, drive)));
  // Each stream in order, and 'close' last: two pipes have no order between them (the
  // script's stdout, block-buffered, and its stderr may reach a reader in the same instant).
  const byStream = (events) => ['message', 'stderr'].map((k) => events.filter((e) => e[0] === k));
  assert.deepEqual(byStream(ours.events), byStream(ref.events));
  assert.deepEqual(ours.events.at(-1), ['close']);
  const kinds = (name) => ours.events.filter((e) => e[0] === name);
  assert.deepEqual(kinds('message'), [['message', { line: '<A>' }], ['message', { line: '<B>' }]]);
  assert.deepEqual(kinds('stderr'), [['stderr', '!e1'], ['stderr', '!e2']]);
  assert.equal(ours.shell.scriptPath, file);
  const saved = Ours.PythonShell.defaultOptions;
  Ours.PythonShell.defaultOptions = { pythonPath: PYTHON, env: userEnv() };
  try {
    assert.equal(Ours.PythonShell.getPythonPath(), PYTHON);
    assert.deepEqual(await Ours.PythonShell.runString('print(1)\n'), ['1']);
  } finally {
    Ours.PythonShell.defaultOptions = saved;
  }
});

test('checkSyntax, getVersion and getVersionSync as python-shell', async () => {
  const saved = [Ours.PythonShell.defaultOptions, Reference.PythonShell.defaultOptions];
  Ours.PythonShell.defaultOptions = { pythonPath: PYTHON };
  Reference.PythonShell.defaultOptions = { pythonPath: PYTHON };
  try {
    await Ours.PythonShell.checkSyntax('x = 1\n');
    const [refBad, bad] = await Promise.all([Reference.PythonShell, Ours.PythonShell].map(
      (Shell) => Shell.checkSyntax('def (:\n').then(() => null, (e) => e)));
    assert.ok(bad instanceof Error, `checkSyntax rejected with ${bad}`);
    assert.deepEqual([bad.code, bad.stdout], [refBad.code, refBad.stdout]); // as python-shell's exec error
    assert.match(bad.stderr, /SyntaxError/);
    assert.equal((await Ours.PythonShell.getVersion()).stdout, (await Reference.PythonShell.getVersion()).stdout);
    assert.equal(Ours.PythonShell.getVersionSync(), Reference.PythonShell.getVersionSync());
  } finally {
    [Ours.PythonShell.defaultOptions, Reference.PythonShell.defaultOptions] = saved;
  }
});

// --- what python-shell users met when migrating ---------------------------------------------

/** `promise`, or a rejection saying what did not happen within `ms` (a deadline, not a sleep). */
function within(ms, what, promise) {
  let timer;
  const deadline = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
const ended = (shell) => new Promise((resolve) => shell.end((err, code, signal) => resolve({ err, code, signal })));

test('relative paths are resolved at construction: chdir, new PythonShell, chdir back (python-shell\'s own test)', async () => {
  const file = script('import os\nprint(os.getcwd())\n');
  const name = path.basename(file);
  const home = process.cwd();
  const runs = [];
  for (const Shell of [Reference.PythonShell, Ours.PythonShell]) {
    const messages = [];
    const made = [];
    try {
      process.chdir(dir); // the script and scriptPath '.' are relative to the folder of now
      made.push(new Shell(name, base()), new Shell(name, { ...base(), scriptPath: '.' }));
      process.chdir(path.dirname(dir)); // a relative cwd too
      made.push(new Shell(name, { ...base(), cwd: path.basename(dir) }));
    } finally {
      process.chdir(home);
    }
    const outputs = made.map((shell) => {
      const lines = [];
      shell.on('message', (m) => lines.push(m));
      return ended(shell).then((end) => ({ ...end, lines }));
    });
    for (const { err, code, lines } of await within(20000, 'the end callbacks', Promise.all(outputs))) {
      assert.deepEqual([err && err.message, code], [undefined, 0]);
      messages.push(...lines);
    }
    runs.push(messages);
  }
  assert.deepEqual(runs[1], runs[0]);
  assert.deepEqual(runs[1], [dir, dir, dir].map((d) => fs.realpathSync(d)));
});

test('binary mode with nobody reading stdout: the end callback and run() settle, as python-shell', { timeout: 60000 }, async () => {
  const file = script('import sys\nsys.stdout.buffer.write(b"x" * 1000)\n');
  for (const Shell of [Reference.PythonShell, Ours.PythonShell]) {
    const shell = new Shell(file, { ...base(), mode: 'binary' });
    const { err, code } = await within(20000, `${Shell === Ours.PythonShell ? 'the adapter' : 'python-shell'}'s end callback`, ended(shell));
    assert.deepEqual([err, code], [undefined, 0]);
    assert.deepEqual(await within(20000, 'run()', Shell.run(file, { ...base(), mode: 'binary' })), []);
  }
});

test('kill() right after the constructor stops the script, and the shell ends (an Electron "Cancel" at once)', async () => {
  const file = script('import time\nprint("started", flush=True)\ntime.sleep(60)\n');
  for (const signal of [undefined, 'SIGKILL']) {
    const results = [];
    for (const Shell of [Reference.PythonShell, Ours.PythonShell]) {
      const shell = new Shell(file, base());
      const messages = [];
      shell.on('message', (m) => messages.push(m));
      shell.kill(signal);
      assert.equal(shell.terminated, true);
      const { err, code, signal: got } = await within(20000, 'the end callback after kill()', ended(shell));
      results.push({ err, code, signal: got, exitSignal: shell.exitSignal, messages });
      if (Shell === Ours.PythonShell) {
        assert.equal(shell.report.outcome, 'cancelled', shell.report.summary);
        assert.deepEqual(processesOfJob(shell.report.job_id), []);
      }
    }
    assert.deepEqual(results[1], results[0]);
    assert.deepEqual([results[1].signal, results[1].messages], [signal || 'SIGTERM', []]);
  }
});

test('kill() sets terminated at once, as python-shell', async () => {
  const code = 'import time\nprint("ready", flush=True)\ntime.sleep(60)\n';
  const seen = [];
  const drive = (shell) => shell.on('message', (m) => {
    if (m !== 'ready') return;
    shell.kill();
    seen.push(shell.terminated);
  });
  const { ref, ours } = await both(code, {}, drive);
  assert.deepEqual(seen, [true, true]);
  assert.deepEqual([ours.shell.terminated, ours.signal], [ref.shell.terminated, ref.signal]);
});

test('the types: Options extends spawn\'s options (as python-shell\'s), rejectOnFailure included', (t) => {
  const source = [
    "import { PythonShell, Options, PythonShellError } from 'trainbridge/shell';",
    "const options: Options = { stdio: ['ignore', 'inherit', process.stderr], detached: false, cwd: new URL('file:///tmp'),",
    "  env: { A: '1' }, mode: 'json', rejectOnFailure: true, timeouts: { stallTimeout: 60 } };",
    "void PythonShell.run('train.py', { ...options, args: ['--x'] }).catch((err: PythonShellError) => err.report?.outcome ?? err.outcome);",
    "// @ts-expect-error a mode python-shell does not have",
    "void new PythonShell('train.py', { mode: 'xml' });",
    '',
  ].join('\n');
  const done = compileAsInstalled(t, source);
  assert.equal(done.status, 0, `tsc:\n${done.output}`);
});

test('rejectOnFailure: a segfault rejects run() / runString() and gives end() an error carrying the report', async () => {
  const crash = 'import ctypes\nprint("step 1", flush=True)\nctypes.string_at(0)\n';
  // python-shell, and the adapter by default: a death by signal is no error
  assert.deepEqual(await Reference.PythonShell.runString(crash, base()), ['step 1']);
  assert.deepEqual(await Ours.PythonShell.runString(crash, base()), ['step 1']);
  const options = { ...base(), rejectOnFailure: true };
  const err = await Ours.PythonShell.runString(crash, options).then(() => null, (e) => e);
  assert.ok(err instanceof Ours.PythonShellError, `run() resolved or rejected with ${err}`);
  assert.equal(err.report.outcome, 'crashed', err.report.summary);
  assert.deepEqual([err.outcome, err.exitCode, err.exitSignal, err.logs], ['crashed', null, 'SIGSEGV', ['step 1']]);
  assert.match(err.message, /^trainbridge: .*SIGSEGV/);
  assert.match(err.message, /^[\x20-\x7e\n]*$/); // ASCII
  const shell = new Ours.PythonShell(script(crash), options);
  const fromEnd = await within(20000, 'the end callback', ended(shell));
  assert.equal(fromEnd.err.report, shell.report);
  assert.deepEqual([fromEnd.code, fromEnd.signal], [null, 'SIGSEGV']);
  // A non-zero exit keeps python-shell's error; success and kill() (a cancel) are no error.
  const failed = await Ours.PythonShell.runString('raise ValueError("v")\n', options).then(() => null, (e) => e);
  assert.deepEqual([failed.message, failed.outcome, failed.exitCode], ['ValueError: v', 'failed', 1]);
  assert.deepEqual(await Ours.PythonShell.runString('print("ok")\n', options), ['ok']);
  const killed = new Ours.PythonShell(script('import time\ntime.sleep(60)\n'), options).kill();
  assert.deepEqual(await within(20000, 'the end callback after kill()', ended(killed)), { err: undefined, code: null, signal: 'SIGTERM' });
});
