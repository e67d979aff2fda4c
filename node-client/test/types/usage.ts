// A GUI author's use of the package, type-checked by test/types.test.js (tsc --noEmit).
// Lines marked @ts-expect-error must NOT compile: if one does, tsc fails the test.
import {
  launch, prepare, doctor, DoctorError, JobFailedError, LaunchError, PythonError, resolvePython, openStore,
  type Report, type Timeouts, type FeedEvent, type DoctorReport, type FeedJob, type JobState, type Outcome,
} from 'trainbridge';

async function main(): Promise<void> {
  const served: { pid: number; python: string } = await prepare({ python: '/venv/bin/python' });
  void served;
  const controller = new AbortController();
  const timeouts: Timeouts = { stallTimeout: 600, startup_timeout: 120, killGrace: 5 };
  const job = launch({
    python: resolvePython({ python: '/venv/bin/python' }), args: ['train.py'], timeouts,
    signal: controller.signal, rejectOnFailure: true, sampleResources: true, logTimestamps: true,
  });
  job.on('resources', (r, t) => void `${r.cpu_percent ?? ''} ${r.rss_bytes ?? ''} ${r.gpu_mem_bytes ?? ''} ${r.gpu_util ?? ''} ${r.processes} ${r.gpus ?? ''} ${t ?? ''}`);
  job.on('spawn', (info) => { const pid: number = info.pid; void pid; });
  job.on('dropped', (d, t) => void `${d.count} ${d.kinds.output ?? 0} ${t ?? ''} ${job.droppedOutput}`);
  job.on('no_worker', (info) => { const why: string = info.reason; void why; });
  job.on('cancel', (answer) => { if (!answer.accepted) void answer.refused; });
  const now = job.status();
  void `${now.state} ${now.script_stages.join(' > ')} ${now.eta_s ?? '?'} ${now.rate ?? 0}`;
  void job.cancel({ reason: 'user pressed Stop', grace: 2 });
  job.on('progress', (p) => {
    const step: number = p.step; // JSON from the feed: a number
    void step;
  });
  for await (const event of job) {
    const e: FeedEvent = event;
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

  everyEvent(job);
  // A scheduled job's events carry their time (the events file's t, seconds).
  const attached = openStore('/tmp/jobs.db').attach('id');
  everyEvent(attached);
  attached.on('attempt', (a, t) => void `${a.attempt} ${a.outcome} ${a.report.outcome} ${a.restart_in} ${t ?? ''}`);
  attached.on('resources', (r) => void r);
  attached.on('supervisor', (s) => void `${s.answering} ${s.silent_s} ${s.keeper_pid ?? ''}`);
  attached.on('unreadable', (u) => void `${u.count} ${u.after_seq ?? ''} ${u.bytes} ${u.error}`);
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
  // A job for a Slurm cluster (docs/SCALE.md).
  const onSlurm: string = await openStore('/tmp/jobs.db').submit({
    command: 'srun', args: ['python', 'train.py'],
    slurm: { listen: '10.0.0.1', nodes: 2, ntasksPerNode: 1, time: '2:00:00', sbatch: ['--mem=8G'] },
  });
  void onSlurm;
  // @ts-expect-error: a Slurm job says which address of this host its nodes reach
  void openStore('/tmp/jobs.db').submit({ command: 'srun', slurm: { nodes: 2 } });

  // @ts-expect-error: a misspelt timeout does not compile (Timeouts is closed)
  launch({ command: 'python', timeouts: { stallTimout: 600 } });
  // @ts-expect-error: a step is a number, never a string
  job.on('progress', (p) => { const s: string = p.step; void s; });
  // @ts-expect-error: a verdict is one of five words
  const verdict: DoctorReport['checks'][number]['verdict'] = 'great';
  void verdict;
}

void main;

/** Every typed event of a launched Job and an AttachedJob (both FeedJobs), with what each listener gets. */
function everyEvent(job: FeedJob): void {
  const when = (t: number | null): string => (t === null ? '' : new Date(t * 1000).toISOString());
  job.on('spawn', (info, t) => void `${info.pid} ${info.command.join(' ')} ${when(t)}`);
  job.on('no_worker', (info) => void info.reason.length);
  job.on('cancel', (answer) => void `${answer.reason ?? ''} ${answer.accepted} ${answer.refused ?? ''}`);
  job.on('hello', (body) => void `${body.pid} ${body.host} ${body.sender.role} ${body.sender.awaits_ranks ?? false}`);
  job.on('stage', (body) => void `${body.event} ${body.name} ${body.depth} ${body.sender.lead}`);
  job.on('progress', (body) => void `${body.step} ${body.total ?? ''} ${body.t} ${body.sender.rank ?? ''}`);
  job.on('status', (st) => void `${st.state} ${st.step ?? ''} ${st.rate ?? ''} ${st.eta_s ?? ''}`);
  job.on('log', (line) => void `${line.stream} ${line.text} ${line.encoding ?? ''} ${line.end ?? ''}`);
  job.on('heartbeat', (body) => void `${body.beat} ${body.stage ?? ''} ${body.idle_s}`);
  job.on('stalled', (info) => void `${info.stage ?? ''} ${info.idle_s ?? ''} ${info.diagnosis?.kind ?? ''}`);
  job.on('state', (state) => { const s: JobState = state; void s; });
  job.on('lead', (lead) => void lead.pid);
  job.on('hang', (hang) => void `${hang.reason} ${hang.stage ?? ''}`);
  job.on('health', (entry) => void `${entry.metric} ${entry.text} ${entry.t}`);
  job.on('starting', (info) => void `${info.why} ${info.for_s}`);
  job.on('starved', (info) => void `${info.why} ${info.for_s}`);
  job.on('computing', (info) => void `${info.why} ${info.for_s}`);
  job.on('artifact', (body) => void `${body.path} ${body.kind} ${body.bytes ?? ''}`);
  job.on('signal', (signal) => void signal.startsWith('SIG'));
  job.on('log_error', (problem) => void `${problem.path ?? ''} ${problem.from_line} ${problem.error}`);
  job.on('error', (err) => void (err instanceof PythonError ? err.pythonType : err.message));
  job.on('message', (data) => void data);
  job.on('end', (report) => {
    const outcome: Outcome = report.outcome; // 'lost' too: the supervisor died first
    void (outcome === 'lost' ? report.summary : outcome);
  });
  void `${job.id} ${job.state} ${job.position ?? ''} ${job.liveDiagnosis?.summary ?? ''}`;
}
