'use strict';
/**
 * A Job's worker messages: each authentic message from a process of the job (from the hub),
 * turned into emitted events, report facts and machine events; who speaks for the job (the
 * lead); replies to commands; the stage records; whether a hello comes from the job's own
 * process tree. Part of Job (src/job.js mixes these methods into Job.prototype). The Python
 * twin is bridge/job_messages.py.
 */

const fs = require('node:fs');
const machine = require('./machine.js');
const look = require('./look.js');
const launcher = require('./launcher.js');
const ranks = require('./ranks.js');
const { PythonError } = require('./errors.js');
const { now } = require('./job_actions.js');
const health = require('./health.js');
const jobFacts = require('./job_facts.js');
const { sentAt } = require('./status.js');

const LEADS_KEPT = 16; // lead changes kept for the report
const LEAD_CHECK_MS = 1000; // how often a lead other than the launched process is checked

class JobMessages {
  // --- from the hub -----------------------------------------------------------------
  rejected(reason) {
    this._facts.rejected[reason] = (this._facts.rejected[reason] || 0) + 1;
  }

  lost(count) {
    this._facts.lost += count;
  }

  undelivered(kind) {
    this._facts.undelivered[kind] = (this._facts.undelivered[kind] || 0) + 1;
  }

  /** The hub's notice that the connection of `peer` ended: it delivers nothing more. */
  disconnected(peer) {
    this._gone.add(peer);
    if (this._drainCheck) this._drainCheck();
  }

  refused(reason) {
    this._post({ type: 'refused', reason });
  }

  /** One authentic, in-order message from a worker process (`peer`: its routing id). */
  receive(msg, peer) {
    const { body } = msg;
    if (this._foreign.has(peer)) {
      this.rejected('foreign');
      return;
    }
    const remote = this._remote && this._hub.remotePeers.has(peer); // a rank of another host
    if (msg.kind === 'hello' && !remote && !this._helloInTree(body)) {
      // Not a process of this job (docs/PROTOCOL.md "Trust boundary"): it neither leads
      // nor is listed, and what it sends later is rejected and counted.
      this._foreign.add(peer);
      this._facts.foreign_hellos += 1;
      return;
    }
    if (msg.kind === 'reply' && this._hangSeqs && body.to >= this._hangSeqs[0] && body.to <= this._hangSeqs[1] && body.stacks) {
      this._hangAnswered.add(peer); // answered the hang's dump in-band: no fallback for it
    }
    this._peers.add(peer); // commands (cancel, dumps) go to the job's own processes only
    if (this._gone.size) this._gone.delete(peer); // it spoke again: a new connection (libzmq reconnects)
    if (msg.kind === 'hello') {
      this._present.set(peer, body);
      if (this._elect() && peer !== this._lead) this._post({ type: 'lead', present: this._lead !== null });
    }
    const lead = peer !== null && peer === this._lead;
    // The report's facts (src/job_facts.js apply: pure), every process's own state among them.
    const said = this._facts.health.entries.length;
    this._facts = jobFacts.apply(this._facts, {
      kind: msg.kind, body, key: peer, rank: Number(peer.split('/')[1]), ts: msg.ts, lead, t: now(),
      // Never a signal to a rank of another host: its pid names a process over there.
      in_tree: msg.kind === 'hello' && !remote && this._dumpsTo(body),
    });
    // Every emitted body names its sender (docs/CLIENT.md "Ranks"): rank, local_rank, host, pid, role, lead.
    const sender = { ...ranks.sender(this._facts.ranks, peer), lead };
    if (body && typeof body === 'object' && msg.kind !== 'logs') body.sender = sender;
    this._sender = sender;
    if (lead) this._lastMsgAt = now();
    if (!lead) {
      this._fromOther(msg);
      if (msg.kind === 'bye') this._leave(peer); // it can no longer lead
      return;
    }
    if (msg.kind === 'reply' && this._cancelSeqs && body.to >= this._cancelSeqs[0] && body.to <= this._cancelSeqs[1]) {
      this._onCancelReply(body);
    }
    switch (msg.kind) {
      case 'hello': {
        this._emit('hello', body);
        this._post({
          type: 'hello', dump_signal: this._facts.dump_pids.length > 0,
          native_dump: this._facts.native_dump_pids.length > 0 && process.platform !== 'win32',
          awaits_ranks: ranks.awaitsRanks(body),
        });
        this._sendOutbox();
        break;
      }
      case 'stage':
        this._status.stage(body);
        this._emit('stage', body);
        this._publishStatus();
        this._post({ type: 'stage', event: body.event, name: body.name, depth: body.depth ?? null, budget_s: body.budget_s ?? null });
        break;
      case 'progress':
        this._status.progress(body, sentAt(now(), Date.now() / 1000, msg.ts)); // when the worker sent it
        body.t = Date.now() / 1000; // when it arrived, as the Python client's event "t"
        this._emit('progress', body);
        this._publishStatus();
        for (const entry of this._facts.health.entries.slice(said)) this._onHealth(entry, sender);
        this._post({ type: 'progress' });
        break;
      case 'error': {
        const err = new PythonError(body);
        if (this.listenerCount('error') > 0) this._emit('error', err);
        for (const tap of this._errorTaps) tap(err);
        this._post({ type: 'error', fatal: Boolean(body.fatal), kind: body.kind, exit_code: body.exit_code ?? null });
        break;
      }
      case 'bye':
        this._post({ type: 'bye', reason: body.reason, exit_code: body.exit_code ?? null });
        this._leave(peer);
        break;
      case 'heartbeat': {
        this._emit('heartbeat', body);
        const [track, worked] = look.heard(this._heard, body, now());
        this._heard = track;
        this._post(worked ? { type: 'beat', work: true } : { type: 'beat' });
        if (machine.liveLookDue(this._m)) this._liveDiagnose();
        break;
      }
      case 'log':
        this._emit('log', { stream: 'worker', text: String(body.message), level: body.level, logger: body.logger ?? null, record: body, sender: this._sender });
        this._post({ type: 'beat' });
        break;
      case 'logs':
        // A batch of consecutive records (PROTOCOL.md): listeners see each as a worker
        // 'log', as if it had come alone; the machine hears of the message once.
        for (const record of body.records) {
          this._emit('log', { stream: 'worker', text: String(record.message), level: record.level, logger: record.logger ?? null, record, sender: this._sender });
        }
        this._post({ type: 'beat' });
        break;
      case 'reply':
        this._onReply(body);
        this._post({ type: 'beat' });
        break;
      case 'user':
        this._emit('message', body.data ?? null);
        this._post({ type: 'beat' });
        break;
      case 'artifact': // a file the job made (report.artifacts)
        this._emit('artifact', body);
        this._post({ type: 'beat' });
        break;
      default:
        this._post({ type: 'beat' });
        break;
    }
  }

  // --- who speaks for the job (bridge/job.py's twins) --------------------------------
  /** Apply machine.chooseLead to the processes present; true when the lead changed. */
  _elect() {
    const present = [...this._present.values()];
    // The launched process loaded the worker but its hello is not read yet (bridge/job_messages.py).
    const launchedLoaded = this.pid !== null && Boolean(this._crashFile)
      && present.every((h) => h.pid !== this.pid) && fs.existsSync(`${this._crashFile}.stages.${this.pid}`);
    const pid = machine.chooseLead(present, this.pid, launchedLoaded);
    let lead = null;
    for (const [peer, hello] of this._present) if (hello.pid === pid) { lead = peer; break; }
    if (lead === this._lead) return false;
    this._lead = lead;
    this._heard = {}; // a new lead: its own heartbeats' work and places (look.heard)
    this._facts.lead_pid = pid;
    this._facts.leads = [...this._facts.leads, pid].slice(-LEADS_KEPT);
    this._watchLead();
    this._emit('lead', { pid });
    return true;
  }

  /**
   * A process said bye or is gone. The launched process never leaves: its last words are
   * the job's. Another one that led hands the lead back (machine event "lead").
   */
  /**
   * A metric became NaN or infinite (health.js): said in a 'health' event, and the job
   * cancelled when the user asked for that (stopOnNan). Python: JobMessages._on_health.
   */
  _onHealth(entry, sender) {
    this._emit('health', { ...entry, sender, t: Date.now() / 1000 });
    if (health.stops(entry, this._stopOnNan) && this._m.exit === null) {
      this._askCancel(undefined, `${entry.text}: stopped, as stopOnNan asks`, { by: 'health' });
    }
  }

  _leave(peer) {
    const hello = this._present.get(peer);
    if (hello === undefined || hello.pid === this.pid) return;
    this._present.delete(peer);
    if (this._elect() && this._m.exit === null) this._post({ type: 'lead', present: this._lead !== null });
  }

  /** While a process other than the launched one leads, notice when it is gone. */
  _watchLead() {
    const watch = this._lead !== null && this._facts.lead_pid !== this.pid;
    if (watch && this._leadWatch === null) {
      this._leadWatch = setInterval(() => {
        if (this._lead === null || this._m.state === 'ended') return;
        if (!launcher.jobProcesses(this._tree).some((p) => p.pid === this._facts.lead_pid)) this._leave(this._lead);
      }, LEAD_CHECK_MS);
      this._leadWatch.unref();
    } else if (!watch && this._leadWatch !== null) {
      clearInterval(this._leadWatch);
      this._leadWatch = null;
    }
  }

  /**
   * A message from a process that does not lead the job (a subprocess in zero-code mode,
   * torchrun's launcher once rank 0 spoke): published to listeners, but it drives neither
   * the machine nor the report, as in bridge/job.py.
   */
  _fromOther(msg) {
    const { body } = msg;
    switch (msg.kind) {
      case 'hello': {
        // A rank's hello: the job has started, even when its lead is a launcher elsewhere.
        if ((body.world_size ?? null) !== null && this._m.awaiting_ranks) this._post({ type: 'hello', dump_signal: this._facts.dump_pids.length > 0 });
        this._emit('hello', body);
        break;
      }
      case 'stage': this._emit('stage', body); break;
      case 'progress': body.t = Date.now() / 1000; this._emit('progress', body); break;
      case 'heartbeat': this._emit('heartbeat', body); break;
      case 'log':
        this._emit('log', { stream: 'worker', text: String(body.message), level: body.level, logger: body.logger ?? null, record: body, sender: this._sender });
        break;
      case 'logs':
        for (const record of body.records) {
          this._emit('log', { stream: 'worker', text: String(record.message), level: record.level, logger: record.logger ?? null, record, sender: this._sender });
        }
        break;
      case 'reply': this._onReply(body); break; // dumps answer from every process of the job
      case 'user': this._emit('message', body.data ?? null); break;
      case 'artifact': this._emit('artifact', body); break; // any process's file
      case 'error': { // another rank's error, named by its sender; the lead's is the job's
        if (this.listenerCount('error') > 0) this._emit('error', new PythonError(body));
        break;
      }
      default: break;
    }
  }

  /** The lead's answer to the in-band cancel: accepted, or refused and why. */
  _onCancelReply(body) {
    this._cancelSeqs = null;
    if (this._facts.cancel === null) this._facts.cancel = { reason: null, accepted: null, refused: null, traceback: null };
    const info = this._facts.cancel;
    info.accepted = Boolean(body.ok);
    info.refused = body.ok ? null : String(body.error || 'refused');
    this._emit('cancel', { reason: info.reason, accepted: info.accepted, refused: info.refused });
    if (!info.accepted) this._post({ type: 'cancel_refused', reason: info.refused });
  }

  _onReply(body) {
    const resolve = this._stackRequests.get(body.to);
    if (resolve) resolve(body);
    if (body.to !== undefined && body.to === this._dumpSeq) {
      this._dumpSeq = null;
      this._post({ type: 'dumped' });
    }
  }

  /** A hello that offers a dump signal: is its process in the job's tree (so the signal may go to it)? */
  _dumpsTo(hello) {
    const offers = hello.dump_signal === 'SIGUSR1' || hello.native_dump_signal === 'SIGUSR2';
    return offers && this._inTree(hello.pid);
  }

  /**
   * Whether a hello comes from the job's tree: its pid is, or (a subprocess that said hello
   * and exited before we looked) its pid is gone and its parent is ours (bridge/job.py's rule).
   */
  _helloInTree(hello) {
    if (this._inTree(hello.pid)) return true;
    return Number.isInteger(hello.pid) && processGone(hello.pid) && this._inTree(hello.ppid);
  }

  _inTree(pid) {
    if (!Number.isInteger(pid)) return false;
    if (pid === this.pid) return true; // ours for sure, as in bridge/job.py
    if (!this._tree) return false;
    return launcher.jobProcesses(this._tree).some((p) => p.pid === pid);
  }
}

/** Whether a process is gone (no /proc entry, or a zombie). */
function processGone(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.charAt(stat.lastIndexOf(')') + 2) === 'Z';
  } catch {
    return true;
  }
}


module.exports = { JobMessages };
