// A GUI author's use of the package, type-checked by test/types.test.js (tsc --noEmit).
// Lines marked @ts-expect-error must NOT compile: if one does, tsc fails the test.
import {
  launch, doctor, DoctorError, JobFailedError, LaunchError, PythonError, resolvePython, openStore,
  type Report, type Timeouts, type JobEvent, type DoctorReport,
} from 'trainbridge';

async function main(): Promise<void> {
  const controller = new AbortController();
  const timeouts: Timeouts = { stallTimeout: 600, startup_timeout: 120, killGrace: 5 };
  const job = launch({
    python: resolvePython({ python: '/venv/bin/python' }), args: ['train.py'], timeouts,
    signal: controller.signal, rejectOnFailure: true,
  });
  job.on('spawn', (info) => { const pid: number = info.pid; void pid; });
  job.on('no_worker', (info) => { const why: string = info.reason; void why; });
  job.on('cancel', (answer) => { if (!answer.accepted) void answer.refused; });
  const now = job.status();
  void `${now.state} ${now.script_stages.join(' > ')} ${now.eta_s ?? '?'} ${now.rate ?? 0}`;
  void job.cancel({ reason: 'user pressed Stop', grace: 2 });
  job.on('progress', (p) => {
    const step: number | bigint = p.step; // BigInt steps are typed as such
    void step;
  });
  for await (const event of job) {
    const e: JobEvent = event;
    if (e.type === 'spawn') void e.data.command.join(' ');
  }
  try {
    const report: Report = await job.done;
    const off: string | null = report.worker.off;
    void off;
  } catch (err) {
    if (err instanceof JobFailedError) void err.report.outcome;
    if (err instanceof LaunchError || err instanceof PythonError) void err.message;
  }
  try {
    const checked: DoctorReport = await doctor({ python: '/venv/bin/python', timeoutS: 5 });
    for (const check of checked.checks) void `${check.name} ${check.verdict} ${check.fix ?? ''}`;
  } catch (err) {
    if (err instanceof DoctorError) void err.stderr;
  }

  // A scheduled job's events carry their time (the events file's t, seconds).
  const attached = openStore('/tmp/jobs.db').attach('id');
  attached.on('progress', (_p, t) => { if (t !== null) void new Date(t * 1000); });
  for await (const event of attached) { const t: number | null = event.t; void t; }
  // A face rejoins the feed where it left off.
  const rtt: number | null = await attached.ping({ timeout: 2 });
  void rtt;
  await attached.send({ stop_after_epoch: true });
  const seen: number | null = attached.position;
  if (seen !== null) openStore('/tmp/jobs.db').attach('id', { since: seen + 1 });
  // A GUI's job list from the change feed.
  const watch = openStore('/tmp/jobs.db').watch();
  watch.on('job', (c) => { if (c.change === 'removed') void c.why; else if (c.row) void c.row.state; });
  await watch.ready;
  await watch.close();

  // @ts-expect-error: a misspelt timeout does not compile (Timeouts is closed)
  launch({ command: 'python', timeouts: { stallTimout: 600 } });
  // @ts-expect-error: a step is a number or a bigint, never a string
  job.on('progress', (p) => { const s: string = p.step; void s; });
  // @ts-expect-error: a verdict is one of five words
  const verdict: DoctorReport['checks'][number]['verdict'] = 'great';
  void verdict;
}

void main;
