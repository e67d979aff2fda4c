'use strict';
// The Node client as a drop-in: stdin 'pipe', raw byte streams
// besides the 'log' lines, and two-way messages, with the same results as the Python
// client (tests/client/test_dropin.py runs the same scripts).

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { launch } = require('../src/index.js');
const { PYTHON, REPO, userEnv, processesOfJob } = require('../test-support/e2e.js');

const GBK = Buffer.from([0xd6, 0xd0, 0xce, 0xc4]); // "中文" in GBK: not valid UTF-8
const ECHO = `GBK = bytes([0xd6, 0xd0, 0xce, 0xc4])
import sys
data = sys.stdin.buffer.read()
out = sys.stdout.buffer
out.write(b"[%d]" % len(data) + data)
out.write(b"prompt> 50%\\r")
out.write(GBK)
out.write(bytes(range(256)))
out.write(b"tail without newline")
`;
const py = (code, options = {}) => launch({ command: PYTHON, args: ['-c', code], env: userEnv(), timeouts: { startupTimeout: 60 }, ...options });
const collect = (stream) => new Promise((resolve) => {
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('end', () => resolve(Buffer.concat(chunks)));
});

test('stdin pipe and raw output are byte-exact, besides the lines', async () => {
  const job = py(ECHO, { stdin: 'pipe', raw: true });
  const out = collect(job.stdout);
  const err = collect(job.stderr);
  const lines = [];
  job.on('log', (line) => { if (line.stream === 'stdout') lines.push(line); });
  const sent = Buffer.concat([Buffer.from('abc\xff\r\n', 'latin1'), GBK, Buffer.from('no newline at the end')]);
  job.stdin.end(sent); // EOF
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  const expected = Buffer.concat([Buffer.from(`[${sent.length}]`), sent, Buffer.from('prompt> 50%\r'), GBK,
    Buffer.from([...Array(256).keys()]), Buffer.from('tail without newline')]);
  assert.deepEqual(await out, expected);
  assert.deepEqual(await err, Buffer.alloc(0));
  assert.ok(lines.at(-1).text.endsWith('tail without newline'));
  assert.equal(lines.at(-1).end, 'eof');
  assert.ok(report.log_tail.at(-1).endsWith('tail without newline'));
  assert.deepEqual(processesOfJob(report.job_id), []);
});

test('a prompt without a newline arrives before the answer is written', async () => {
  const code = "import sys\nsys.stdout.write('name? '); sys.stdout.flush()\nprint('hi', sys.stdin.readline().strip())\n";
  const job = py(code, { stdin: 'pipe', raw: true });
  const first = await new Promise((resolve) => job.stdout.once('data', resolve));
  assert.equal(first.toString(), 'name? ');
  const rest = collect(job.stdout);
  job.stdin.end('ada\n');
  assert.equal((await rest).toString(), 'hi ada\n');
  assert.equal((await job.done).outcome, 'succeeded');
});

test('stdin defaults to /dev/null; an unknown mode is refused', async () => {
  const job = py('import sys; print(repr(sys.stdin.read()))', { raw: true });
  assert.equal(job.stdin, null);
  assert.equal((await collect(job.stdout)).toString(), "''\n");
  await job.done;
  assert.throws(() => py('pass', { stdin: 'tty' }), /stdin must be one of/);
});

test("stdin 'inherit' passes this process's stdin to the script, and lets it go at the end", () => {
  // A real Node process whose stdin is a pipe: the script reads it to EOF, and the Node
  // process exits when the job is done (its stdin no longer held).
  const driver = `
const { launch } = require(${JSON.stringify(path.join(__dirname, '..', 'src', 'index.js'))});
const job = launch({ command: process.argv[1], args: ['-c', 'import sys; print("got " + sys.stdin.read().strip(), flush=True)'], stdin: 'inherit' });
job.on('log', (l) => { if (l.stream === 'stdout') console.log(l.text); });
job.done.then((r) => console.log(r.outcome));
`;
  const out = execFileSync(process.execPath, ['-e', driver, PYTHON], { env: userEnv(), input: 'hello from the parent\n', timeout: 60000 }).toString();
  assert.deepEqual(out.trim().split('\n'), ['got hello from the parent', 'succeeded']);
});

const CHECKPOINT = `
from trainbridge import worker
worker.send({"ready": True, "path": "C:\\\\runs\\\\\\u6a21\\u578b"})
for step in range(2000):
    worker.progress(step, 2000)
    msg = worker.receive(timeout=0.01)
    if msg is None:
        continue
    if msg == "stop":
        break
    if msg.get("cmd") == "checkpoint":
        worker.send({"saved": "/ckpt/step-%d.pt" % step, "asked": msg["id"]})
`;

test('two-way messages: in order, held until the hello, non-ASCII intact, limits', async () => {
  const job = py(CHECKPOINT);
  job.send({ cmd: 'checkpoint', id: 1 }); // before the hello
  job.send({ cmd: 'checkpoint', id: 2 });
  const answers = [];
  job.on('message', (data) => {
    answers.push(data);
    if (answers.length === 3) job.send('stop');
  });
  assert.throws(() => job.send('x'.repeat(2 << 20)), RangeError);
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual(answers[0], { ready: true, path: 'C:\\runs\\\u6a21\u578b' });
  assert.deepEqual(answers.slice(1).map((a) => a.asked), [1, 2]);
  assert.throws(() => job.send('late'), /has ended/);
});

test('parity: the Python client gets the same messages from the same script', async () => {
  const job = py(CHECKPOINT);
  const answers = [];
  job.on('message', (data) => {
    answers.push(data);
    if (answers.length === 1) { job.send({ cmd: 'checkpoint', id: 1 }); job.send({ cmd: 'checkpoint', id: 2 }); }
    if (answers.length === 3) job.send('stop');
  });
  await job.done;
  const driver = `
import json, sys
from trainbridge import bridge
job = bridge.launch([sys.executable, "-c", sys.argv[1]], startup_timeout=60)
answers = []
for e in job.events():
    if e["event"] == "message" and e["kind"] == "user":
        answers.append(e["body"]["data"])
        if len(answers) == 1:
            job.send({"cmd": "checkpoint", "id": 1}); job.send({"cmd": "checkpoint", "id": 2})
        if len(answers) == 3:
            job.send("stop")
print(json.dumps(answers))
`;
  const fromPython = JSON.parse(execFileSync(PYTHON, ['-c', driver, CHECKPOINT], { env: userEnv(), cwd: REPO }).toString());
  const shape = (list) => list.map((a) => ({ ...a, saved: a.saved ? a.saved.replace(/\d+/, 'N') : undefined }));
  assert.deepEqual(shape(answers), shape(fromPython));
});

test('the checkpoint demo runs under the Node client', () => {
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'examples', 'checkpoint_gui.js')], {
    env: { ...userEnv(), PATH: `${path.dirname(PYTHON)}:${process.env.PATH}` },
  }).toString();
  assert.match(out, /checkpoint saved at \//);
  assert.match(out, /outcome: succeeded/);
});

test('messages wait for a hello, up to a limit', async () => {
  const job = launch({ command: PYTHON, args: ['-c', 'import time; time.sleep(30)'], env: userEnv(), zeroCode: false, timeouts: { startupTimeout: 0 } });
  for (let i = 0; i < 1000; i += 1) job.send(i);
  assert.throws(() => job.send(1000), /wait for the worker's hello/);
  await job.cancel({ grace: 0 });
  const report = await job.done;
  // No hello ever came: the 1,000 that waited for one are counted, not lost unseen.
  assert.deepEqual(report.protocol.undelivered, { user: 1000 });
});

test('a full inbox counts what it could not keep, and the summary says so', async () => {
  const job = py(`
from trainbridge import worker
from trainbridge.worker.runtime import STATE
import time
worker.send("go")
deadline = time.monotonic() + 30
while STATE.dropped.get("user", 0) < 5 and time.monotonic() < deadline:
    time.sleep(0.01)
kept = 0
while worker.receive() is not None:
    kept += 1
worker.send({"kept": kept, "dropped": STATE.dropped.get("user", 0)})
`);
  const answers = [];
  job.on('message', (data) => {
    answers.push(data);
    if (data === 'go') for (let i = 0; i < 1005; i += 1) job.send(i);
  });
  const report = await job.done;
  assert.equal(report.outcome, 'succeeded');
  assert.deepEqual(answers.at(-1), { kept: 1000, dropped: 5 });
  assert.equal(report.dropped.user, 5);
  assert.deepEqual(report.protocol.undelivered, {});
  assert.ok(report.summary.includes('inbox was full: the worker dropped 5 job.send() messages'), report.summary);
});

