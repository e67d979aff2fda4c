'use strict';
/**
 * A Job and its state machine: machine events in (stamped with the shell's clock, queued
 * until the spawn), the machine's actions performed (state events, snapshots, stack dumps,
 * the in-band cancel, signals, drain, finish), its timer; the look for a loaded worker before
 * any hello; the live diagnosis while stalled. Part of Job (src/job.js mixes these methods
 * into Job.prototype). The Python twin is bridge/job_actions.py.
 */

const fs = require('node:fs');
const machine = require('./machine.js');
const launcher = require('./launcher.js');
const evidence = require('./evidence.js');
const { diagnoseHang } = require('./diagnosis.js');
const ranks = require('./ranks.js');
const ranksHang = require('./ranks_hang.js');
const rankdumps = require('./rankdumps.js');
const procfs = require('./procfs.js');
const look = require('./look.js');

// The event when a deadline's look saw the job working, not hung (bridge/job_actions.py).
const LOOKED_EVENTS = { startup: 'starting', heartbeat: 'starved', stall: 'computing' };
const { crashFileSize, signalDumpedPids } = require('./report_files.js');

const LIVE_DIAGNOSIS_S = 2.0; // while stalled, the live diagnosis is refreshed at most this often
// The 'status' event goes out on every lead stage, progress and state change, and at least this
// often while the process lives (bridge/job_actions.py STATUS_EVERY_S; docs/CLIENT.md).
const STATUS_EVERY_MS = 1000;
const PAUSED_MIN_S = 1.0; // a timer this late means the loop did not run (bridge/hub.py)
const now = () => performance.now() / 1000; // the shell's monotonic clock, in seconds

class JobActions {
  // --- the machine ------------------------------------------------------------------
  /** Hand one event (stamped now) to the machine; events before the spawn wait for it. */
  _post(event) {
    this._queue.push({ t: now(), ...event });
    this._pump();
  }

  _pump() {
    if (this._stepping || this.pid === null) return;
    this._stepping = true;
    try {
      while (this._queue.length) {
        const ev = this._queue.shift();
        const [state, actions] = machine.step(this._m, ev);
        this._m = state;
        for (const action of actions) this._perform(action);
      }
    } finally {
      this._stepping = false;
    }
    this._schedule();
  }

  _schedule() {
    if (this.pid === null || this.report) return;
    const deadline = machine.nextDeadline(this._m);
    // A timer armed for an earlier time stays: an early "timer" event changes nothing (the
    // machine judges deadlines itself), and re-arming on every message would cost more.
    if (this._timer && deadline !== null && this._timerAt <= deadline) return;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    if (deadline === null) return;
    this._timerAt = deadline;
    const ms = Math.max(0, (deadline - now()) * 1000) + 1;
    this._timer = setTimeout(() => {
      this._timer = null;
      // Fired this late: the event loop itself did not run (blocked, stopped, starved), and the
      // socket's backlog is read after timers: the machine hears "paused" first (machine.js).
      const late = now() - deadline;
      this._guard(() => { if (late >= PAUSED_MIN_S) this._post({ type: 'paused', paused_s: late }); this._onTimer(); });
    }, ms);
  }

  _onTimer() {
    // Did the lead's SIGUSR1 handler answer? If not, the machine sends SIGUSR2 next.
    const { ending } = this._m;
    if (ending && ending.step === 'signal_dump' && !this._m.answered
        && signalDumpedPids(this._crashFile, this._signalDumpAt).has(this._facts.lead_pid)) {
      this._post({ type: 'signal_dumped' });
    }
    if (ending && ending.step === 'signal_dump' && this._fallbackPids === null && this._crashFile) {
      this._rankDumpsFallback().then(
        () => this._guard(() => this._post({ type: 'timer' })),
        (err) => this._guard(() => { throw err; }),
      );
      return;
    }
    this._post({ type: 'timer' });
  }

  /**
   * After SIGUSR1 at hang time: each local rank that did not answer the hang's dump_stacks
   * gets its stack into `ranks` from its SIGUSR1 dump, else from SIGUSR2 sent to it alone
   * (rankdumps.js), once (as bridge/job_actions.py).
   */
  async _rankDumpsFallback() {
    this._fallbackPids = new Set();
    const sections = rankdumps.sigusr1Sections(rankdumps.readFrom(this._crashFile, this._signalDumpAt || 0));
    const state = this._facts.ranks;
    for (const [key, p] of [...state.procs]) {
      if (p.world_size === null || p.addr || p.exit !== null || this._hangAnswered.has(key) || !Number.isInteger(p.pid)) continue;
      let text = sections.get(p.pid) ?? null;
      if (text === null && this._facts.native_dump_pids.includes(p.pid) && process.platform !== 'win32') {
        // Not in signals_sent: that list is the lead's escalation (a SIGUSR2 there means the
        // lead's Python was silent); the dump shows in the crash file.
        this._fallbackPids.add(p.pid);
        text = await rankdumps.nativeDump(this._crashFile, p.pid, (pid) => launcher.signalProcess(pid, 'SIGUSR2'));
      }
      if (text) ranks.observe(this._facts.ranks, key, 'signal_dump', { stacks: text }, p.last_beat);
    }
  }

  /** The 'status' event: the judge's snapshot (src/status.js), which faces render as it is. */
  _publishStatus() {
    this._emit('status', this.status());
  }

  /** Publish 'status' every STATUS_EVERY_MS until the process exits (_stopStatusTick). */
  _startStatusTick() {
    this._statusTick = setInterval(() => this._guard(() => this._publishStatus()), STATUS_EVERY_MS);
    this._statusTick.unref();
  }

  _stopStatusTick() {
    if (this._statusTick) clearInterval(this._statusTick);
    this._statusTick = null;
  }

  _perform(action) {
    switch (action.do) {
      case 'state':
        this.state = action.state;
        this._emit('state', action.state);
        this._publishStatus();
        if (action.state === 'stalled') this._liveDiagnose(true);
        break;
      case 'snapshot':
        this._emit('hang', { reason: action.reason, stage: (this._m.hang || {}).stage ?? null });
        this._snapshot();
        break;
      case 'dump_stacks':
        {
          const first = this.clientSeq + 1;
          this._dumpSeq = this._command('dump_stacks');
          this._hangSeqs = this._dumpSeq === null ? null : [first, this._dumpSeq];
        }
        break;
      case 'cancel': {
        const first = this.clientSeq + 1;
        const last = this._command('cancel', { reason: (this._facts.cancel || {}).reason || 'cancelled by the client' });
        this._cancelSeqs = last === null ? null : [first, last];
        break;
      }
      case 'signal':
        this._signal(action.signal);
        break;
      case 'look':
        this._look(action.reason);
        break;
      case 'drain':
        this._drain();
        break;
      case 'finish':
        this._finish();
        break;
      default:
        break;
    }
  }

  /**
   * A startup, heartbeat or stall deadline passed: sample the job's tree now and LOOK_S later,
   * then answer the machine (machine.js "look"; the verdict is look.js's). A job with no
   * Python yet, or one that works, is starting ('starting' says why); a lead starved of CPU is
   * waiting for a core ('starved'); a busy lead whose main thread moves is computing
   * ('computing'). Python: JobActions._start_look / _end_look.
   */
  _look(reason) {
    const sample = () => procfs.treeSample(this.pid, this._facts.lines.stdout + this._facts.lines.stderr, now(),
      this._facts.lead_pid || this.pid);
    const before = sample();
    const timer = setTimeout(() => {
      if (this._m.exit !== null || this.report) return;
      const after = sample();
      const start = this._m.last_activity_t;
      if (reason === 'stall' && start !== null) Object.assign(after, { from: start, wheres: look.stallWheres(this._heard.wheres || [], start) });
      const verdict = look.judge(reason, before, after);
      if (verdict.working) {
        this._emit(LOOKED_EVENTS[reason], { why: verdict.why, for_s: this._m.config[`${reason}_timeout`] });
      }
      this._post({ type: 'looked', reason, working: verdict.working, ...('since' in verdict ? { since: verdict.since } : {}) });
    }, machine.LOOK_S * 1000);
    timer.unref();
  }

  /** Send a command to every process of the job that spoke; returns its seq (or null). */
  _command(kind, body = {}) {
    let seq = null;
    for (const peer of this._peers) seq = this._hub.send(this, peer, kind, body);
    return seq;
  }

  _signal(signal) {
    this._facts.signals_sent.push(signal);
    this._emit('signal', signal);
    if (signal === 'SIGUSR1') {
      this._signalDumpAt = crashFileSize(this._crashFile);
      for (const pid of this._facts.dump_pids) launcher.signalProcess(pid, signal);
      return;
    }
    if (signal === 'SIGUSR2') {
      // Only to the processes whose SIGUSR1 handler did not answer: Python runs in the
      // others, and the C dump would race it (worker/hooks.py).
      const answered = signalDumpedPids(this._crashFile, this._signalDumpAt);
      const done = this._fallbackPids || new Set();
      for (const pid of this._facts.native_dump_pids) if (!answered.has(pid) && !done.has(pid)) launcher.signalProcess(pid, signal);
      return;
    }
    launcher.signalTree(this._tree, signal);
  }

  /**
   * Before any hello: has the worker loaded in the launched process? Its stage box is written
   * synchronously at `import worker`, before the beacon can speak; a GIL held right after
   * would otherwise be seen only at the startup timeout. The box's mtime says when, /proc's
   * SigCgt whether SIGUSR1 has a handler (as bridge/job.py _check_loaded).
   */
  _checkLoaded() {
    if (this._m.hello || this._m.exit !== null || (this._m.loaded_t ?? null) !== null || this.report) {
      clearInterval(this._loadedPoll);
      return;
    }
    let mtimeMs;
    try { mtimeMs = fs.statSync(`${this._crashFile}.stages.${this.pid}`).mtimeMs; } catch { return; }
    const t = now();
    const loaded = Math.min(t, t - (Date.now() - mtimeMs) / 1000);
    let caught = false;
    let native = false;
    try {
      const m = /^SigCgt:\s*([0-9a-f]+)/m.exec(fs.readFileSync(`/proc/${this.pid}/status`, 'latin1'));
      caught = m !== null && (BigInt(`0x${m[1]}`) & (1n << 9n)) !== 0n; // SIGUSR1 = 10
      // SIGUSR2 = 12, faulthandler's C dump: answers even when a held GIL stops SIGUSR1's.
      native = m !== null && (BigInt(`0x${m[1]}`) & (1n << 11n)) !== 0n && process.platform !== 'win32';
    } catch { /* gone */ }
    if (native && !this._facts.native_dump_pids.includes(this.pid)) this._facts.native_dump_pids.push(this.pid);
    clearInterval(this._loadedPoll);
    this._queue.push({ t: loaded, type: 'worker_loaded', dump_signal: caught, native_dump: native });
    this._post({ type: 'timer' });
  }

  /**
   * While stalled, before any deadline: the diagnosis now, from the last heartbeat's stack
   * and a cheap look at the process, at most every LIVE_DIAGNOSIS_S; emitted as 'stalled'
   * {stage, idle_s, stack, diagnosis} and kept in job.liveDiagnosis (as bridge/job.py).
   */
  _liveDiagnose(force = false) {
    const t = now();
    if (this.pid === null || (!force && this._liveT !== null && t - this._liveT < LIVE_DIAGNOSIS_S)) return;
    this._liveT = t;
    const hb = this._facts.heartbeat || {};
    const running = this._facts.stages.filter((s) => s.status === 'running').map((s) => s.name);
    const last = this._m.last_activity_t;
    const idle = last !== null && last !== undefined ? Math.round((t - last) * 10) / 10 : (hb.idle_s ?? null);
    let found;
    try {
      const ev = evidence.live(this.pid, this._liveMark);
      this._liveMark = ev.mark || null;
      delete ev.mark;
      found = diagnoseHang({ reason: 'stall', stage: running.length ? running[running.length - 1] : null, stages: running,
        idle_s: idle, stack: hb.stack ?? null, saw_hello: Object.keys(this._facts.hellos).length > 0, evidence: ev, progress: this._facts.progress });
      // Ranks waiting in a collective for one that is elsewhere (issue 12 item 12).
      found = ranksHang.liveCollective(this._facts.ranks) || found;
    } catch (err) {
      found = { kind: 'unknown', summary: `live diagnosis failed: ${err.message}`, hint: '', evidence: {} };
    }
    this.liveDiagnosis = { kind: found.kind, frame: found.evidence.frame ?? null, summary: found.summary, hint: found.hint, idle_s: idle };
    this._emit('stalled', { stage: hb.stage ?? null, idle_s: idle, stack: hb.stack ?? null, diagnosis: this.liveDiagnosis });
  }
}

module.exports = { JobActions, now };
