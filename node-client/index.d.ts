// Type declarations for trainbridge (node-client). Hand-written; the code is plain JavaScript.

import { EventEmitter } from 'events';

/**
 * What launch() uses of an AbortSignal (an AbortController's `signal` fits). Spelt out, not
 * the global AbortSignal, so that projects on older @types/node (python-shell's 14) compile;
 * as are the un-prefixed 'events' and 'stream' imports.
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * Deadlines (seconds; null disables one) and worker settings, camelCase or snake_case. A
 * closed type: a misspelt name (stallTimout) does not compile, and at run time it rejects
 * `done` naming the known ones.
 */
export interface Timeouts {
  /** spawn -> hello; else hung (startup). Default 120. */
  startupTimeout?: number | null;
  /** last worker message -> hung (heartbeat), while the process lives. Default 30. */
  heartbeatTimeout?: number | null;
  /** last progress or stage change -> hung (stall). Default null (off). */
  stallTimeout?: number | null;
  /** last progress or stage change -> state "stalled" (reversible). Default 30, or stallTimeout / 2. */
  stalledAfter?: number | null;
  /** SIGTERM -> SIGKILL. Default 5. */
  killGrace?: number;
  /** in-band cancel -> SIGTERM. Default 5. */
  cancelGrace?: number;
  /** in-band dump_stacks -> give up on the reply. Default 1. */
  dumpTimeout?: number;
  /** SIGUSR1 -> SIGUSR2 or SIGTERM, and SIGUSR2 -> SIGTERM. Default 0.2. */
  signalDumpWait?: number;
  /** hang -> SIGTERM at the latest while the hang evidence is collected. Default 2. */
  snapshotTimeout?: number;
  /** exit -> outcome at the latest, if the drain does not finish. Default 1. */
  drainTimeout?: number;
  /** Worker settings (TRAINBRIDGE_* variables); derived from the deadlines when absent. */
  heartbeatS?: number;
  stallS?: number;
  freezeS?: number;
  ackTimeoutS?: number;
  startup_timeout?: number | null;
  heartbeat_timeout?: number | null;
  stall_timeout?: number | null;
  stalled_after?: number | null;
  kill_grace?: number;
  cancel_grace?: number;
  dump_timeout?: number;
  signal_dump_wait?: number;
  snapshot_timeout?: number;
  drain_timeout?: number;
  heartbeat_s?: number;
  stall_s?: number;
  freeze_s?: number;
  ack_timeout_s?: number;
}

export interface LaunchOptions {
  /** The program to run (no shell). Default: the Python of `python` (see resolvePython). */
  command?: string;
  /**
   * The Python interpreter to run when `command` is not given (python-shell's pythonPath):
   * e.g. the training venv's bin/python. Default: resolvePython().
   */
  python?: string;
  /** The same as `python`, under python-shell's name. */
  pythonPath?: string;
  args?: string[];
  cwd?: string;
  /** The child's environment (default: process.env); trainbridge adds its variables. */
  env?: NodeJS.ProcessEnv;
  timeouts?: Timeouts;
  /** Every output line is appended here (UTF-8) as it arrives: it survives a crash of this process.
   *  A path that cannot be written rejects the launch (LaunchError saying why); a disk that
   *  fills up later gives 'log_error' and the report's log_error, and the job goes on. */
  logPath?: string;
  /** Lines kept for the report's log_tail. Default 40. */
  tailLines?: number;
  /** Load the worker in every Python process of the job without code changes (bridge/inject). Default true. */
  zeroCode?: boolean;
  /** Cancels the job when aborted (as child_process and execa take one): an AbortSignal. */
  signal?: AbortSignalLike;
  /**
   * Make `done` reject with a JobFailedError when the outcome is failed, crashed or hung
   * (a cancel still resolves). Default false: `done` resolves to every report.
   */
  rejectOnFailure?: boolean;
  /** The child's stdin: 'ignore' (default, /dev/null), 'pipe' (job.stdin is a Writable) or 'inherit'. */
  stdin?: 'ignore' | 'devnull' | 'pipe' | 'inherit';
  /** Give job.stdout / job.stderr: Readables of the output's bytes exactly as written (besides 'log' lines). */
  raw?: boolean;
  /** false: leave PYTHONUNBUFFERED, PYTHONIOENCODING, PYTHONUTF8, PYTHONFAULTHANDLER as env has them. Default true. */
  pythonEnv?: boolean;
  /** Cancel the job when one of these metrics first becomes NaN or infinite ('*': any metric).
   *  Without it the job goes on; the 'health' event and report.health say it either way. */
  stopOnNan?: string | string[];
  /** Prefix every line of logPath with its UTC arrival time (ISO 8601, ms). Default false. */
  logTimestamps?: boolean;
  /** The supervisor samples the job's process tree about once a second ('resources' events:
   *  CPU, RSS; GPU memory and use where nvidia-smi, or $TRAINBRIDGE_NVIDIA_SMI, answers),
   *  as a scheduled job's keeper does. Default false. */
  sampleResources?: boolean;
}

/**
 * Training health (docs/CLIENT.md): a metric that became NaN or infinite, said once per metric.
 * value and last_finite are numbers (NaN, Infinity): JSON spells them "NaN", "Infinity",
 * "-Infinity" (docs/PROTOCOL.md section 12) and the client reads them back.
 */
export interface HealthEntry {
  metric: string;
  value: number;
  step: number | string | null;
  /** The metric's last finite value and its step; null when it was never finite. */
  last_finite: number | null;
  last_finite_step: number | string | null;
  /** e.g. "loss became NaN by step 12 (it was 2.31 at step 9)": "at step" when no step was missed between. */
  text: string;
}

export type JobState = 'starting' | 'running' | 'stalled' | 'ended';
/** lost: the job's supervisor (its keeper, or a launched job's job server) died before its end. */
export type Outcome = 'succeeded' | 'failed' | 'crashed' | 'hung' | 'cancelled' | 'lost';

export interface Frame { file: string; line: number; function: string }

export interface Diagnosis {
  kind: string;
  summary: string;
  hint: string;
  evidence: Record<string, unknown>;
}

/** The final report: the same JSON as the Python client's (docs/report.schema.json). */
export interface Report {
  outcome: Outcome;
  exit_code: number | null;
  signal: string | null;
  stage: string | null;
  stages: { name: string; status: 'running' | 'ok' | 'error' | 'cancelled' | string; duration_s: number | null; depth: number }[];
  progress: { step: number; total: number | null; metrics: Record<string, number | string> } | null;
  /** Metrics that became NaN or infinite, in the order it happened (empty: none). */
  health: HealthEntry[];
  error: {
    type: string; message: string; traceback: string; kind?: string; stage?: string | null;
    fatal?: boolean; thread?: string; frames?: Frame[]; chain?: unknown[]; exit_code?: number | null; source?: string;
  } | null;
  diagnosis: Diagnosis | null;
  stacks: string | null;
  /** The last output lines; for a job declared hung, the last lines up to the verdict. */
  log_tail: string[];
  /** A job declared hung: what it printed after the verdict (the stop's doing), else null. */
  log_after_hang?: { lines: number; tail: string[] } | null;
  duration_s: number;
  pid: number;
  report_version: number;
  job_id: string;
  command: string[];
  started_at: string;
  hang: { reason: string; stage: string | null; after_s: number } | null;
  signals_sent: string[];
  /** off: why the worker could not load (zero-code mode off, e.g. pyzmq missing); null when it could. */
  worker: { hello: boolean; bye: Record<string, unknown> | null; lead_pid: number | null; leads: (number | null)[]; ranks: number[]; dump_signal: boolean; off: string | null };
  output: { lines: { stdout: number; stderr: number }; bytes: { stdout: number; stderr: number } };
  protocol: { rejected: Record<string, number>; lost: number; foreign_hello: number; unrouted: number; undelivered: Record<string, number> };
  leftovers: number[];
  log_path: string | null;
  /** The log file could not be written from line from_line on (a full disk): it holds lines 1..from_line-1. */
  log_error: LogError | null;
  /** Records the job's worker processes dropped, per kind (log: queue full past TRAINBRIDGE_LOG_WAIT_S). */
  dropped: Record<string, number>;
  /** Files the job made, in the order said, at most 1,000. */
  artifacts: Artifact[];
  evidence: Record<string, unknown> | null;
  /** The deadline's look that found the job not working, and so hung (null: none did). */
  look: { reason: 'startup' | 'heartbeat' | 'stall'; why: string } | null;
  /** The user's cancel (null when none): reason, the worker's answer, where the script stopped. */
  cancel: { reason: string | null; accepted: boolean | null; refused: string | null; traceback: string | null;
    /** client: cancel(); signal: the user signalled the process (run --transparent, PythonShell.kill());
     *  health: a metric became NaN under stopOnNan. */
    by: 'client' | 'signal' | 'health'; signal: string | null } | null;
  summary: string;
  /** One row per worker process (docs/CLIENT.md, Ranks and the root cause). */
  ranks: RankRow[];
  /** The rank that failed first by its own clock; null unless two ranks or more and a failure. */
  root_cause: RootCause | null;
  /** Scheduled jobs: events of the feed a failed write dropped (a full disk), and the first error. */
  events_failed?: number;
  feed_error?: string | null;
  /** Scheduled jobs: the feed's end line could not be written yet (the error); reconcile() writes it. */
  end_line_owed?: string;
  [extra: string]: unknown;
}

export interface RankError { type: string | null; message: string | null; stage: string | null; frame: string | null; t: number | null; source: 'worker' | 'error_file'; traceback?: string | null; frames?: Frame[] }
export interface RankRow {
  rank: number | null; local_rank: number | null; host: string | null; pid: number | null;
  role: 'rank' | 'launcher' | 'other'; state: 'running' | 'exited' | 'failed'; stage: string | null;
  progress: { step: number; total: number | null } | null; last_beat: number | null;
  exit: { code: number | null; reason: string | null } | null; error: RankError | null;
}
export interface RootCause {
  rank: number | null; local_rank: number | null; host: string | null; pid: number | null; error: RankError;
  consequences: { rank: number | null; host: string | null; pid: number | null; why: 'peer_gone' | 'stopped' | 'later'; error: RankError | null }[];
  summary: string;
}

/** Worker message bodies as the supervisor's feed carries them (JSON: an integer beyond 2^53 arrives as the nearest number). */
/** Who sent a worker message (docs/CLIENT.md, Ranks and the root cause). */
export interface Sender { rank: number | null; local_rank: number | null; host: string | null; pid: number | null; role: 'rank' | 'launcher' | 'other'; lead: boolean; awaits_ranks?: boolean }
export interface HelloBody { pid: number; argv: string[]; cwd: string; python: Record<string, unknown>; host: string; proto: string; worker: string; heartbeat_s: number; sender: Sender; [k: string]: unknown }
export interface StageBody { event: 'begin' | 'end'; name: string; depth: number; sender: Sender; budget_s?: number | null; status?: string | null; duration_s?: number | null; [k: string]: unknown }
/** `t`: when the client received it, seconds since the epoch (the Python client's event `t`). */
export interface ProgressBody { sender: Sender; step: number; total?: number | null; metrics: Record<string, number | string>; t: number; [k: string]: unknown }
export interface LogError { path: string | null; from_line: number; error: string }
export interface HeartbeatBody { sender: Sender; beat: number; stage: string | null; stages: string[]; idle_s: number; progress_age_s: number | null; stack?: string | null; dropped: Record<string, number>; [k: string]: unknown }

/** An output line (stream stdout/stderr) or a worker log record (stream "worker"). */
export interface LogLine {
  stream: 'stdout' | 'stderr' | 'worker';
  text: string;
  encoding?: 'utf-8' | 'gbk' | 'escaped';
  end?: 'lf' | 'cr' | 'crlf' | 'max' | 'eof';
  level?: string;
  logger?: string | null;
  record?: Record<string, unknown>;
  /** worker records: the process that logged it */
  sender?: Sender;
}

/** The supervisor's live look while stalled: where, since when, and its diagnosis now. */
export interface StalledInfo { stage: string | null; idle_s: number | null; stack: string | null; diagnosis: Diagnosis | null }

/** job.status(): what a GUI shows now, as the supervisor judged it (bridge/status.py). */
export interface JobStatus {
  state: JobState;
  pid: number | null;
  elapsed_s: number;
  /** The open stages, outermost first. */
  stages: string[];
  /** The same without zero-code mode's own (startup, main, import X, first batch/train in main). */
  script_stages: string[];
  step: number | null;
  total: number | null;
  /** The lead's latest progress metrics. */
  metrics: Record<string, unknown>;
  /** Steps per second over the last 20 progress messages (falling during a stall); null until two. */
  rate: number | null;
  /** At that rate; null without a total and once ended. */
  eta_s: number | null;
  progress_age_s: number | null;
}

/** The process was started. */
export interface SpawnInfo { pid: number; command: string[] }
/** A process of the job cannot load the worker: `reason` is its one-line explanation. */
export interface NoWorkerInfo { reason: string }
/** The worker's answer to the in-band cancel. */
export interface CancelAnswer { reason: string | null; accepted: boolean; refused: string | null }

export type JobEvent =
  | { type: 'spawn'; data: SpawnInfo }
  | { type: 'no_worker'; data: NoWorkerInfo }
  | { type: 'cancel'; data: CancelAnswer }
  | { type: 'hello'; data: HelloBody }
  | { type: 'stage'; data: StageBody }
  | { type: 'progress'; data: ProgressBody }
  /** The supervisor's judged snapshot: on every lead stage, progress and state change, and each second. */
  | { type: 'status'; data: JobStatus }
  | { type: 'log'; data: LogLine }
  | { type: 'heartbeat'; data: HeartbeatBody }
  | { type: 'stalled'; data: StalledInfo }
  | { type: 'state'; data: JobState }
  | { type: 'hang'; data: { reason: string; stage: string | null } }
  | { type: 'signal'; data: 'SIGUSR1' | 'SIGUSR2' | 'SIGTERM' | 'SIGKILL' }
  | { type: 'log_error'; data: LogError }
  | { type: 'dropped'; data: { count: number; kinds: Record<string, number> } }
  | { type: 'error'; data: PythonError }
  | { type: 'message'; data: unknown }
  | { type: 'health'; data: HealthEntry & { sender?: Sender; t: number } }
  /** The startup deadline passed without a hello, and a look at the tree saw it starting, not hung. */
  | { type: 'starting'; data: { why: string; for_s: number } }
  /** The heartbeat deadline passed, and a look saw the lead waiting for a CPU (a busy machine): not hung. */
  | { type: 'starved'; data: { why: string; for_s: number } }
  /** The stall deadline passed, and a look saw the lead busy with its main thread moving: computing, not hung. */
  | { type: 'computing'; data: { why: string; for_s: number } }
  /** A file the job made (worker.artifact; zero-code: torch.save, PIL's Image.save to a path). */
  | { type: 'artifact'; data: ArtifactBody }
  /** A sample of the job's process tree, about once a second: a scheduled job's always, a launched one's with sampleResources. */
  | { type: 'resources'; data: ResourceSample }
  | { type: 'end'; data: Report };

/** An exception raised in the Python child: name = its type, stack = its traceback. */
export class PythonError extends Error {
  pythonType: string;
  traceback: string;
  frames: Frame[];
  chain: { type: string; message: string; relation: string }[];
  stage: string | null;
  fatal: boolean;
  kind: string;
  thread: string | null;
  exitCode: number | null;
  /** The process that raised it. */
  sender: Sender | null;
}

/** The command could not be started (not found, not executable, bad cwd). */
export class LaunchError extends Error {
  code?: string;
}

/** `done`'s rejection with rejectOnFailure: the job failed, crashed or hung. */
export class JobFailedError extends Error {
  outcome: Outcome;
  report: Report;
}

/** doctor() could not get an answer from the Python side (not found, crashed, no JSON, too slow). */
export class DoctorError extends Error {
  exitCode: number | null;
  signal: string | null;
  stderr: string;
}

/** A frame that is not a valid protocol v1 message; `reason` is a stable code. */
export class ProtocolError extends Error {
  reason: string;
  detail: string;
}

/** The job store cannot be used: one sentence with the cause and the fix (docs/STORE.md "Failures"). */
export class StoreError extends Error {
  kind: 'corrupt' | 'read_only' | 'full' | 'access' | 'missing' | 'too_new' | 'failed';
}

/**
 * A job as its supervisor's feed tells it (src/feed_job.js): a launched Job and an AttachedJob
 * both render the events the Python judge published, never judged again in Node. Every
 * listener gets the event's time as a second argument `t` (the supervisor's wall clock,
 * seconds since the epoch; null for an event made by the reader).
 */
export class FeedJob extends EventEmitter implements AsyncIterable<FeedEvent> {
  readonly id: string;
  /** starting | running | stalled | ended (an attached job: also its row's queued, restarting, unknown). */
  readonly state: JobState | string;
  /** The child's pid once spawned. */
  readonly pid: number | null;
  /** The report once the job ended. */
  readonly report: Report | null;
  /** Resolves to the report when the job is over. */
  readonly done: Promise<Report>;
  /** The feed number of the last event read. */
  readonly position: number | null;
  /** While stalled (and after a hang): the supervisor's live diagnosis, its last 'stalled' event's. */
  readonly liveDiagnosis: Diagnosis | null;
  /** The supervisor's judged snapshot: state, pid, stages, the script's own stages, step, total, rate, ETA, progress age. */
  status(): JobStatus;
  /** Events from now on, until (and including) "end"; a consumer 10,000 behind gets "dropped". */
  events(): AsyncIterableIterator<FeedEvent>;
  [Symbol.asyncIterator](): AsyncIterableIterator<FeedEvent>;

  on(event: 'spawn', listener: (info: SpawnInfo, t: number | null) => void): this;
  on(event: 'no_worker', listener: (info: NoWorkerInfo, t: number | null) => void): this;
  on(event: 'cancel', listener: (answer: CancelAnswer, t: number | null) => void): this;
  on(event: 'hello', listener: (body: HelloBody, t: number | null) => void): this;
  on(event: 'stage', listener: (body: StageBody, t: number | null) => void): this;
  on(event: 'progress', listener: (body: ProgressBody, t: number | null) => void): this;
  /** The supervisor's judged snapshot (what status() returns then): render it as it is. */
  on(event: 'status', listener: (status: JobStatus, t: number | null) => void): this;
  on(event: 'log', listener: (line: LogLine, t: number | null) => void): this;
  on(event: 'heartbeat', listener: (body: HeartbeatBody, t: number | null) => void): this;
  on(event: 'stalled', listener: (info: StalledInfo, t: number | null) => void): this;
  on(event: 'state', listener: (state: JobState, t: number | null) => void): this;
  /** Another process speaks for the job now (docs/CLIENT.md "The lead process"); pid null: none. */
  on(event: 'lead', listener: (lead: { pid: number | null }, t: number | null) => void): this;
  /** A hang was declared (startup, stage_budget, stall, heartbeat, after_bye): stacks, then the kill. */
  on(event: 'hang', listener: (hang: { reason: string; stage: string | null }, t: number | null) => void): this;
  /** A metric became NaN or infinite (training health), once per metric; the job goes on unless stopOnNan names it. */
  on(event: 'health', listener: (entry: HealthEntry & { sender?: Sender; t: number }, t: number | null) => void): this;
  /** The supervisor's sample of the job's tree (CPU, RSS, GPU), about once a second: a scheduled
   *  job's keeper takes them always, a launched job's supervisor with sampleResources. */
  on(event: 'resources', listener: (sample: ResourceSample, t: number | null) => void): this;
  /** Output lines counted instead of sent while this process did not read its job server (the 'dropped' events' sum). */
  readonly droppedOutput: number;
  /** This process stopped reading its job server (its event loop blocked) while the job printed
   *  a flood: `count` output lines were counted instead of sent as 'log' events (logPath and the
   *  report's log_tail have them). events() yields the same for a consumer that fell behind. */
  on(event: 'dropped', listener: (info: { count: number; kinds: Record<string, number> }, t: number | null) => void): this;
  /** At the startup deadline with no hello: its tree has no Python yet, or works (CPU, I/O, output); another for_s seconds. */
  on(event: 'starting', listener: (info: { why: string; for_s: number }, t: number | null) => void): this;
  /** At the heartbeat deadline: the lead's threads waited for a CPU (a busy machine); another for_s seconds. */
  on(event: 'starved', listener: (info: { why: string; for_s: number }, t: number | null) => void): this;
  on(event: 'computing', listener: (info: { why: string; for_s: number }, t: number | null) => void): this;
  on(event: 'artifact', listener: (body: ArtifactBody, t: number | null) => void): this;
  on(event: 'signal', listener: (signal: 'SIGUSR1' | 'SIGUSR2' | 'SIGTERM' | 'SIGKILL', t: number | null) => void): this;
  on(event: 'log_error', listener: (problem: LogError, t: number | null) => void): this;
  /** Emitted only while someone listens: a Python error never crashes the supervisor. */
  on(event: 'error', listener: (err: PythonError | LaunchError, t: number | null) => void): this;
  on(event: 'end', listener: (report: Report, t: number | null) => void): this;
  /** A message the script sent with worker.send(). */
  on(event: 'message', listener: (data: unknown, t: number | null) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'spawn', listener: (info: SpawnInfo, t: number | null) => void): this;
  once(event: 'no_worker', listener: (info: NoWorkerInfo, t: number | null) => void): this;
  once(event: 'cancel', listener: (answer: CancelAnswer, t: number | null) => void): this;
  once(event: 'hello', listener: (body: HelloBody, t: number | null) => void): this;
  once(event: 'stage', listener: (body: StageBody, t: number | null) => void): this;
  once(event: 'progress', listener: (body: ProgressBody, t: number | null) => void): this;
  once(event: 'status', listener: (status: JobStatus, t: number | null) => void): this;
  once(event: 'log', listener: (line: LogLine, t: number | null) => void): this;
  once(event: 'heartbeat', listener: (body: HeartbeatBody, t: number | null) => void): this;
  once(event: 'stalled', listener: (info: StalledInfo, t: number | null) => void): this;
  once(event: 'state', listener: (state: JobState, t: number | null) => void): this;
  once(event: 'lead', listener: (lead: { pid: number | null }, t: number | null) => void): this;
  once(event: 'hang', listener: (hang: { reason: string; stage: string | null }, t: number | null) => void): this;
  once(event: 'health', listener: (entry: HealthEntry & { sender?: Sender; t: number }, t: number | null) => void): this;
  once(event: 'starting', listener: (info: { why: string; for_s: number }, t: number | null) => void): this;
  once(event: 'starved', listener: (info: { why: string; for_s: number }, t: number | null) => void): this;
  once(event: 'computing', listener: (info: { why: string; for_s: number }, t: number | null) => void): this;
  once(event: 'artifact', listener: (body: ArtifactBody, t: number | null) => void): this;
  once(event: 'signal', listener: (signal: 'SIGUSR1' | 'SIGUSR2' | 'SIGTERM' | 'SIGKILL', t: number | null) => void): this;
  once(event: 'error', listener: (err: PythonError | LaunchError, t: number | null) => void): this;
  once(event: 'end', listener: (report: Report, t: number | null) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

export class Job extends FeedJob {
  readonly id: string;
  readonly command: string[];
  /** Resolves to the report when the job is over; rejects with LaunchError if it never started. */
  readonly done: Promise<Report>;
  readonly state: JobState;
  /**
   * In-band cancel, then SIGTERM to the tree after `grace` s (at once if the worker refuses,
   * e.g. SIGINT ignored), then SIGKILL. `reason` is echoed in report.cancel. Resolves to the report.
   */
  cancel(options?: { grace?: number; reason?: string }): Promise<Report>;
  /** You sent the process `signal` yourself (as PythonShell.kill()): no escalation, but the report says cancelled, cancel.by 'signal'. */
  noteUserSignal(signal: string, reason: string): void;
  /** Every thread's Python stack from the worker; null without a worker or an answer in time. */
  dumpStacks(options?: { timeout?: number }): Promise<string | null>;
  /** Round trip to the worker's beacon in seconds; null without a worker or an answer in time. */
  ping(options?: { timeout?: number }): Promise<number | null>;
  /**
   * The TRAINBRIDGE_* variables for the job's ranks on other hosts (docs/CLIENT.md, Other
   * hosts): the supervisor listens on tcp://address:port with CurveZMQ. Rejects a loopback address.
   */
  remoteEnv(address: string, port?: number): Promise<Record<string, string>>;
  /** With stdin: 'pipe': the child's stdin (end() it for EOF). */
  readonly stdin: import('stream').Writable | null;
  /** With raw: true: the child's stdout / stderr bytes, exactly as written. */
  readonly stdout: import('stream').Readable | null;
  readonly stderr: import('stream').Readable | null;
  /** Send a message (JSON-like) to the script (worker.on_message / worker.receive); held until its hello. */
  send(data: unknown): void;
}

/** Start `command args` under supervision; returns the Job at once. */
export function launch(options: LaunchOptions): Job;
/**
 * Start the supervisor for `python` now (the job server that launch() starts with the first
 * job), so that the first launch finds it running: call it at a GUI's start-up. Resolves once
 * it serves; rejects with a LaunchError when it cannot run (a Python without pyzmq and msgpack).
 */
export function prepare(options?: { python?: string; pythonPath?: string }): Promise<{ pid: number; python: string }>;

/** A row of the job store (docs/STORE.md "The jobs table"). */
export interface StoredJob {
  id: string;
  /** As submitted (null when not given). */
  name: string | null;
  tags: string[] | null;
  meta: Record<string, unknown> | null;
  command: string[];
  cwd: string | null;
  env_names: string[] | null;
  config: Record<string, number | boolean | null>;
  resources: { gpus?: number };
  assigned: { gpus?: number[] } | null;
  priority: number;
  max_restarts: number;
  restart_backoff: number;
  state: 'queued' | 'starting' | 'running' | 'stalled' | 'restarting' | 'ended';
  outcome: Outcome | 'lost' | null;
  exit_code: number | null;
  signal: string | null;
  stage: string | null;
  /** The judge's last numbers (its `status`), for a job list that does not attach. */
  progress: {
    step?: number; total?: number | null; rate?: number | null; eta_s?: number | null;
    metrics?: Record<string, number | string>;
  } | null;
  note: string | null;
  submitted_at: number;
  started_at: number | null;
  ended_at: number | null;
  updated_at: number;
  attempt: number;
  keeper_pid: number | null;
  keeper_start: number | null;
  job_pid: number | null;
  job_start: number | null;
  endpoint: string | null;
  dir: string;
  log_path: string;
  events_path: string;
  cancel_requested: number;
  /** What the canceller asked for (store.cancel(id, {reason, grace})), else null. */
  cancel_reason: string | null;
  cancel_grace: number | null;
  /** 1 while the row says ended and the feed's end line is still to be written (by its keeper, or reconcile). */
  end_pending: number | null;
  report: Report | null;
  /** get() only: every attempt's outcome and report. */
  attempts?: Array<{ attempt: number; started_at: number | null; ended_at: number | null; outcome: string | null; exit_code: number | null; signal: string | null; report: Report | null }>;
}

export interface SubmitOptions {
  command: string;
  args?: string[];
  cwd?: string;
  /** The job's whole environment (default: process.env now); only the names are stored. */
  env?: NodeJS.ProcessEnv;
  timeouts?: Timeouts;
  resources?: { gpus?: number };
  priority?: number;
  maxRestarts?: number;
  /** Seconds before the first restart, doubled for each next one. Default 1. */
  restartBackoff?: number;
  /** As launch()'s: false = only scripts that import trainbridge's worker say hello. Default true. */
  zeroCode?: boolean;
  /** Kept in the row for the GUI (no id mapping of its own): a name, tags, free JSON metadata. */
  name?: string;
  tags?: string[];
  meta?: Record<string, unknown>;
  /** The job's output log at this path (its folder must exist) instead of in the job's folder. */
  logPath?: string;
  /** As launch()'s: cancel the job when one of these metrics first becomes NaN or infinite. */
  stopOnNan?: string | string[];
  /** Send the job to Slurm with sbatch (docs/SCALE.md); listen: this host's address the nodes reach. */
  slurm?: SlurmOptions;
}

/** A job's Slurm resources and options (docs/SCALE.md). */
export interface SlurmOptions {
  listen: string;
  nodes?: number;
  ntasksPerNode?: number;
  cpusPerTask?: number;
  gres?: string;
  /** sbatch's --time: minutes, or "HH:MM:SS" */
  time?: string | number;
  partition?: string;
  account?: string;
  qos?: string;
  /** more sbatch options, each "--name=value" */
  sbatch?: string[];
}

/** A file the job made, as its worker said it (PROTOCOL.md "artifact"). */
export interface ArtifactBody {
  path: string;
  name: string;
  kind: 'checkpoint' | 'image' | 'file';
  bytes: number | null;
  step: number | null;
  /** script (worker.artifact), torch.save or Image.save */
  by: string;
  sender?: Sender;
}

/** A report's entry for a file the job made: its worker's words and the rank that said it. */
export interface Artifact extends Omit<ArtifactBody, 'sender'> {
  rank: number | null;
}

/**
 * The supervisor's sample of a job's process tree, about once a second (bridge/resources.py):
 * CPU as a percent of one core since the previous sample (null for the first), memory, GPU.
 */
export interface ResourceSample {
  cpu_percent: number | null;
  rss_bytes: number | null;
  gpu_mem_bytes: number | null;
  gpu_util: number | null;
  processes: number;
  /** The GPUs nvidia-smi sees on the machine: 0 when none (or no nvidia-smi). */
  gpus?: number;
}

/**
 * An attached job's event: a launched Job's or `attempt` (a failed attempt that will be
 * restarted), with `t`: its time in the events file (the keeper's wall clock, seconds since the
 * epoch); for an end read from the row without its line, the row's `ended_at`. `seq`: the feed number of
 * the line it came from (null for an event made by the reader, such as 'supervisor').
 */
export type FeedEvent =
  (JobEvent
    | { type: 'lead'; data: { pid: number | null } }
    | { type: 'attempt'; data: { attempt: number; outcome: string; report: Report; restart_in: number } }
    | { type: 'supervisor'; data: { answering: boolean; silent_s: number; keeper_pid: number | null } }
    | { type: 'unreadable'; data: { count: number; after_seq: number | null; bytes: number; error: string } })
  & { t: number | null; seq: number | null };

/** An attached job's events: a FeedEvent. */
export type AttachedJobEvent = FeedEvent;

/**
 * A scheduled job followed through its events file: a launched Job's events, from the first.
 * Every listener gets the event's time (AttachedJobEvent's `t`) as a second argument.
 */
export class AttachedJob extends FeedJob {
  /** The job's row state: queued, starting, running, stalled, restarting, ended (unknown until read). */
  readonly state: string;
  /** false while the keeper is not answering (its events file silent past 5 s), else null (not judged yet) or true. */
  readonly answering: boolean | null;
  /** Lines of the events file that were not an event ('unreadable' events). */
  readonly unreadable: number;
  /** As a launched Job's: the in-band cancel with `reason`, SIGTERM after `grace` seconds (else the job's cancelGrace). */
  cancel(options?: { grace?: number | null; reason?: string | null }): Promise<Report>;
  /**
   * Every thread's stack from the worker, or null (no worker, no answer, no running keeper);
   * `timeout`: how long the keeper waits for the worker, in seconds, at most 60 (more rejects
   * with a RangeError), as a launched Job's.
   */
  dumpStacks(options?: { timeout?: number }): Promise<string | null>;
  /**
   * The keeper's round trip to the worker in seconds, or null (no worker, no answer, no running keeper).
   * `timeout`: seconds, more than 0 and at most 60 (the keeper waits no longer); else a RangeError.
   */
  ping(options?: { timeout?: number }): Promise<number | null>;
  /** As a launched Job's send(), through the keeper; resolves once the keeper took it (`timeout` seconds). */
  send(data: unknown, options?: { timeout?: number }): Promise<void>;
  /** A failed attempt that will be restarted. */
  on(event: 'attempt', listener: (info: { attempt: number; outcome: string; report: Report; restart_in: number }, t: number | null) => void): this;
  /** The keeper stopped answering (a SIGSTOP, a starved machine), or answers again. */
  on(event: 'supervisor', listener: (info: { answering: boolean; silent_s: number; keeper_pid: number | null }, t: number | null) => void): this;
  /** A line of the events file is not an event (a keeper killed mid-line): what it held is lost; this says so. */
  on(event: 'unreadable', listener: (info: { count: number; after_seq: number | null; bytes: number; error: string }, t: number | null) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  /** Stop following (the job goes on). */
  close(): void;
}

/** A change of the store's job list (bridge/watch.py): every row 'added' first (initial), then each commit. */
export interface JobChange {
  event: 'job';
  change: 'added' | 'changed' | 'removed';
  id: string;
  /** The row as it is now; null when removed. */
  row: StoredJob | null;
  /** Seconds since the epoch. */
  t: number;
  initial?: true;
  /** Why a row was removed: 'forgotten', or 'retention (keep_ended=N)'. */
  why?: string;
}

/** JobStore.watch()'s handle. */
export class StoreWatch extends EventEmitter {
  /** Resolves once the first rows have been emitted; rejects with a StoreError. */
  readonly ready: Promise<StoreWatch>;
  on(event: 'job', listener: (change: JobChange) => void): this;
  /** The queue was paused or resumed (by any process; first its state then, initial). */
  on(event: 'queue', listener: (change: { event: 'queue'; paused: boolean; t: number; initial?: true }) => void): this;
  /** The store failed while watched (said once per cause; the watch goes on). */
  on(event: 'error', listener: (failure: { event: 'error'; message: string; kind: string }) => void): this;
  close(): Promise<void>;
}

export interface JobStore {
  readonly path: string;
  /** The job list's change feed: no polling by the caller. */
  watch(): StoreWatch;
  jobs(options?: { state?: string | string[]; limit?: number; tag?: string }): Promise<StoredJob[]>;
  get(id: string): Promise<StoredJob | null>;
  submit(options: SubmitOptions): Promise<string>;
  cancel(id: string, options?: { reason?: string | null; grace?: number | null }): Promise<boolean>;
  forget(id: string): Promise<boolean>;
  /** Start no queued job (in any process on this store) until resume(); running jobs go on. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Whether the queue is paused. */
  paused(): Promise<boolean>;
  /** What retention forgot so far ({} when nothing). */
  forgotten(): Promise<{ count?: number; keep_ended?: number; at?: number; last?: string[] }>;
  /** The store's retention (null: every ended job is kept). */
  keepEnded(): Promise<number | null>;
  /** A new job with an ended one's spec; its environment is options.env, else process.env. */
  rerun(id: string, options?: { env?: NodeJS.ProcessEnv }): Promise<string>;
  /**
   * From the first event; since 'now': the job's state and its keeper's last status, then what
   * comes next; since N: the events numbered N and after.
   */
  attach(id: string, options?: { since?: 'start' | 'now' | number }): AttachedJob;
  close(): Promise<void>;
}

/** Open a job store (default: defaultStorePath()); a Python helper serves it. Close it when done. */
export function openStore(path?: string, options?: {
  python?: string;
  slots?: { jobs?: number; gpus?: number[] };
  /** The store's retention, for every process on it: keep the newest N ended jobs, forgetting older ones with their files (default: the store's, 1000 unless set); null keeps all. */
  keepEnded?: number | null;
}): JobStore;
/** $TRAINBRIDGE_STORE, else the per-user data directory's trainbridge/jobs.db. */
export function defaultStorePath(): string;

/** The report as ASCII JSON (non-ASCII as \u escapes). */
export function toJSON(report: Report, indent?: number): string;

/** The report's one readable paragraph. */
export function summary(report: Report): string;

/**
 * The Python the package would use: `python` when given, else $TRAINBRIDGE_PYTHON, else the
 * active venv's ($VIRTUAL_ENV), else (in the repository) its .venv, else python3.
 */
export function resolvePython(options?: { python?: string }): string;

export interface DoctorOptions {
  /** The training venv's interpreter to check (default: the runner's own). */
  python?: string;
  /** Each check's deadline in seconds. Default 20. */
  timeoutS?: number;
  /** A Python that has trainbridge installed, or the `trainbridge` script (default: resolvePython()). */
  trainbridge?: string;
  /** Hosts to check connectivity to (multi-node). */
  hosts?: string[];
  connectTimeoutS?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export type DoctorVerdict = 'ok' | 'warn' | 'fail' | 'hung' | 'skip';

/** One check of the doctor's report (docs/DOCTOR.md "Report"). */
export interface DoctorCheck {
  name: string;
  verdict: DoctorVerdict;
  /** One line: what was found, with the numbers. */
  detail: string;
  /** What to do, or null. */
  fix: string | null;
  /** The raw facts the verdict was decided from. */
  facts: Record<string, unknown>;
  duration_s: number;
  /** A hung check: every thread's stack at the deadline; a crashed one: its stderr tail. */
  stack: string | null;
}

/** The doctor's report (docs/DOCTOR.md); a "do not train" verdict (exit_code 1) still resolves. */
export interface DoctorReport {
  schema: string;
  python: string;
  ok: boolean;
  exit_code: 0 | 1;
  summary: Record<DoctorVerdict, number>;
  duration_s: number;
  checks: DoctorCheck[];
  [extra: string]: unknown;
}

/** Environment checks run through the Python side (trainbridge doctor); rejects with DoctorError. */
export function doctor(options?: DoctorOptions): Promise<DoctorReport>;

export const DEFAULT_TIMEOUTS: Readonly<Record<string, number | null>>;
