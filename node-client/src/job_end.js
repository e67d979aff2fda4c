'use strict';
/**
 * A Job's end: the exit noticed, the drain (last messages and output, orphans asked to go),
 * the hang snapshot, the report built and delivered, the files closed; and the end of a job
 * whose handling hit a bug in trainbridge (failInternal). Part of Job (src/job.js mixes these
 * methods into Job.prototype). The Python twin is bridge/job_end.py.
 */

const launcher = require('./launcher.js');
const evidence = require('./evidence.js');
const oom = require('./oom.js');
const procfs = require('./procfs.js');
const { logText } = require('./lines.js');
const { buildReport, minimalReport } = require('./report.js');
const { readFiles } = require('./report_files.js');
const { logFooter } = require('./report_text.js');
const jobFacts = require('./job_facts.js');
const { now } = require('./job_actions.js');
const machine = require('./machine.js');

// After the exit, the drain ends by machine.drainWait (one rule with bridge/machine.py,
// vectors/drain.json). Without a proof that the socket is empty, quiet means read: the receive
// loop hands on whatever is queued at once (it is the only reader: src/hub.js).
const SNAPSHOT_WINDOW_MS = 500; // CPU is measured over this window (bridge/evidence.py's)
const STATE_SAMPLE_MS = 20; // how often the main thread's state is sampled in the window
// With rejectOnFailure, `done` rejects on these; a cancel (the user's own stop) still resolves.
const FAILED_OUTCOMES = Object.freeze(['failed', 'crashed', 'hung']);
/**
 * How many processes the OOM killer took in our cgroup while a job that ended badly ran (a
 * DataLoader worker killed while the main process lived); null when unknown or clean. As
 * bridge/job.py _oom_kills_since.
 */
function oomKillsSince(before, code, signal) {
  if (before === null || before === undefined || (code === 0 && !signal)) return null;
  const after = oom.oomKillCount(null);
  return after === null ? null : Math.max(0, after - before);
}

class JobEnd {
  _onExit(code, signal) {
    if (this._internal) return; // failInternal ends the job itself
    this._stopStatusTick();
    this._exitAt = now();
    this._facts.ended = this._exitAt;
    this._facts.exit_code = code;
    this._facts.exit_signal = signal;
    if (signal === 'SIGKILL' && !this._facts.signals_sent.includes('SIGKILL')) {
      this._facts.oom_killed = oom.oomKilled(this._oomBefore, oom.oomKillCount(null));
    }
    this._facts.oom_kills = oomKillsSince(this._oomBefore, code, signal);
    this._post({ type: 'exit', code, signal });
  }

  // --- a bug while handling this job --------------------------------------------------
  /** Run one piece of this job's handling; if it throws (a bug), this job alone fails. */
  _guard(fn) {
    try {
      fn();
    } catch (err) {
      this.failInternal(err);
    }
  }

  /**
   * Handling this job threw (a bug in trainbridge): the job is stopped at once and ends
   * `failed` with an `internal` diagnosis that carries the stack; other jobs go on. The hub
   * calls this too. Mirrors bridge/job.py fail_internal.
   */
  failInternal(err) {
    if (this.report || this._internal) return;
    this._internal = true;
    const message = err && err.message !== undefined ? err.message : String(err);
    this._facts.internal_error = {
      type: (err && err.name) || 'Error', message: `trainbridge failed while supervising this job: ${message}`,
      traceback: String((err && err.stack) || message), kind: 'internal', fatal: true,
    };
    this._facts.error = this._facts.internal_error;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    this._queue = [];
    this._m = { ...this._m, state: 'ended', outcome: 'failed', ending: null };
    this.state = 'ended';
    const end = () => {
      if (this.report) return;
      clearTimeout(fallback);
      try {
        this._emit('state', 'ended');
        this._finish();
      } catch (err2) {
        if (!this.report) {
          this.report = minimalReport(this._finalFacts(), err2);
          this._hub.unregister(this);
          this._resolveDone(this.report);
        }
      }
    };
    // Wait (bounded) for the killed process's exit, so that nothing of the job outlives the report.
    const fallback = setTimeout(end, 5000);
    if (this._child && this._child.exitCode === null && this._child.signalCode === null) {
      this._child.once('exit', (code, signal) => {
        this._facts.exit_code = code;
        this._facts.exit_signal = signal;
        this._facts.ended = now();
        end();
      });
    } else {
      setImmediate(end);
    }
    if (this._tree) {
      this._facts.signals_sent.push('SIGKILL');
      launcher.signalTree(this._tree, 'SIGKILL');
    }
  }

  /** Hang evidence from the live process over SNAPSHOT_WINDOW_MS, then "snapshotted". */
  _snapshot() {
    const first = evidence.sample(this.pid);
    const states = [procfs.mainThreadSample(this.pid)];
    const { pid, status, name, alive, notes, sockets, children, main_thread: mainThread } = first;
    // Until the window is over: what can be read at once (no CPU deltas yet).
    this._facts.snapshot = { pid, status, name, alive, notes, sockets, children, main_thread: mainThread };
    const sampler = setInterval(() => states.push(procfs.mainThreadSample(this.pid)), STATE_SAMPLE_MS);
    setTimeout(() => {
      clearInterval(sampler);
      if (this.report) return;
      if (this._m.exit === null) {
        const measured = evidence.measure(first, states);
        // What was read at the start counts when none can be read now (the process just ended).
        if (!(measured.sockets && measured.sockets.length) && first.sockets) measured.sockets = first.sockets;
        if (!(measured.children && measured.children.length) && first.children) measured.children = first.children;
        this._facts.snapshot = measured;
      }
      this._post({ type: 'snapshotted' });
    }, SNAPSHOT_WINDOW_MS);
  }

  _drain() {
    // Whatever of the tree outlived the main process is an orphan now: ask it to go (it is
    // SIGKILLed at finish), so it cannot hold our pipes. Then wait for the pipes' end and for
    // the socket's last messages, as machine.drainWait says.
    this._facts.leftovers = launcher.jobLeftovers(this._tree);
    this._drainScanned = true;
    if (this._facts.leftovers.length) launcher.signalTree(this._tree, 'SIGTERM', { includeRoot: false });
    const start = now();
    const check = () => {
      if (this.report) return;
      const t = now();
      // After an acked bye the worker sent its last message; otherwise (a crash) messages may
      // still be queued: every connection of the job ended (the hub's notice comes after all
      // it delivered), or, without that proof, nothing came for the quiet time.
      const wait = machine.drainWait({
        pipes_open: this._pipesOpen > 0,
        since_drain_s: t - start,
        bye: this._facts.bye !== null,
        connections_ended: this._connectionsEnded(),
        notice_due: this._noticeDue(),
        quiet_s: t - Math.max(this._lastMsgAt, this._exitAt || 0),
      });
      if (wait === 0) {
        this._drainCheck = null;
        this._post({ type: 'drained' });
        return;
      }
      if (timer === null) timer = setTimeout(() => { timer = null; check(); }, 2);
    };
    let timer = null;
    this._drainCheck = () => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      check();
    };
    setImmediate(check); // the pipes' last chunks and EOF are often already queued
  }

  /**
   * Whether the socket can hold nothing more from this job: every process of it that spoke
   * has ended its connection (the hub's notice is queued after all that connection
   * delivered), and the drain found none of its processes still running.
   */
  _connectionsEnded() {
    if (!this._hub.notifies || this._peers.size === 0 || this._facts.leftovers.length > 0) return false;
    for (const peer of this._peers) if (!this._gone.has(peer)) return false;
    return true;
  }

  /** Whether _connectionsEnded() can still become true: the proof is worth waiting for. */
  _noticeDue() {
    return this._hub.notifies && this._peers.size > 0 && this._facts.leftovers.length === 0;
  }

  _finish() {
    if (this.report) return;
    this._stopStatusTick();
    clearInterval(this._loadedPoll);
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    if (this._leadWatch !== null) clearInterval(this._leadWatch);
    this._leadWatch = null;
    for (const stream of ['stdout', 'stderr']) this._lines(stream, this._splitters[stream].flush());
    // Nothing of the job outlives it: a grandchild still holding a pipe, say. The /proc
    // scan costs milliseconds; when the drain's scan (after the main process's exit) found
    // no other process, none can have appeared since, so it is not repeated.
    const rescan = !this._drainScanned || this._facts.leftovers.length > 0;
    if (this._tree && rescan && launcher.jobProcesses(this._tree).some((p) => p.pid !== this.pid)) {
      launcher.signalTree(this._tree, 'SIGKILL', { includeRoot: false });
    }
    if (this._child) {
      this._child.stdout.destroy();
      this._child.stderr.destroy();
    }
    this._hub.giveUp(this);
    for (let i = 0; i < this._outbox.length; i += 1) this.undelivered('user'); // no hello came
    this._outbox = [];
    const facts = this._finalFacts();
    try {
      this.report = buildReport(facts, readFiles(this._crashFile, facts.lead_pid ?? facts.pid));
    } catch (err) {
      this.report = minimalReport(facts, err);
    }
    for (const resolve of this._stackRequests.values()) resolve(null);
    this._hub.unregister(this);
    this._endLog();
    this._closeLog();
    if (this._unfollowAbort) this._unfollowAbort();
    if (this.stdin) this.stdin.unpipe();
    launcher.removeTree(this._dir); // the crash file is in the report now
    this._emit('end', this.report);
    if (this._options.rejectOnFailure && FAILED_OUTCOMES.includes(this.report.outcome)) {
      this._rejectDone(new JobFailedError(this.report));
    } else {
      this._resolveDone(this.report);
    }
  }

  /**
   * The facts record as buildReport reads it: a copy with the machine's verdict, the messages
   * for no job meanwhile and the end time (the exit's, else now) added.
   */
  _finalFacts() {
    return {
      ...this._facts, machine: jobFacts.machineVerdict(this._m), pid: this.pid,
      unrouted: this._hub.unrouted - this._unroutedAtStart, ended: this._facts.ended ?? now(),
    };
  }

  /** The log file ends with the bar's last state, the verdict and the stacks. */
  _endLog() {
    const held = this._redraws.flush();
    if (held.length) this._writeLog(held.map(logText).join('\n'));
    this._writeLog(logText(logFooter(this.report)));
  }

}

/** `done`'s rejection with rejectOnFailure: the job failed, crashed or hung; `report` says how. */
class JobFailedError extends Error {
  constructor(report) {
    super(`trainbridge: ${report.summary || `the job ${report.outcome}`}`);
    this.name = 'JobFailedError';
    this.outcome = report.outcome;
    this.report = report;
  }
}

module.exports = { JobEnd, JobFailedError, FAILED_OUTCOMES };
