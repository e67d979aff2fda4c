'use strict';
/**
 * A job as its supervisor's feed tells it: the events the Python judge published (bridge/job.py
 * on_event; one JSON object each, docs/PROTOCOL.md "The feed"), rendered in Node's idiom and
 * never judged again here. The base of a launched Job (src/job.js: the feed comes from the
 * job server's stdout) and of an AttachedJob (src/store.js: from a scheduled job's events file).
 *
 * Emits spawn, no_worker, cancel, state, hello, stage, progress, status, log, heartbeat, stalled,
 * hang, signal, log_error, starting, starved, computing, health, artifact, message, lead,
 * resources, dropped, attempt, error (only while listened to), end (the report). Each listener gets the
 * event's time as a second argument, `t`: the supervisor's wall clock in seconds (Python's "t"),
 * so a replay keeps the job's own timeline. `status()` is the judge's last 'status', `done`
 * resolves to the report; events() yields {type, data, t, seq} until 'end'.
 */

const { EventEmitter } = require('node:events');
const { PythonError } = require('./errors.js');
const { EventQueue, EVENT_NAMES, EVENT_QUEUE } = require('./job_events.js');

const MAX_REPLIES = 256; // replies kept for a waiter that has not asked yet
// Besides a launched Job's: what only a scheduled job's feed has (bridge/attach.py).
const FEED_EVENTS = [...EVENT_NAMES, 'supervisor', 'unreadable', 'attempt'];

/**
 * One line of the feed as parsed (docs/PROTOCOL.md "The feed"): its kind `event`, that kind's
 * fields, and the supervisor's time `t` (seconds) and feed number `seq` where it has them.
 * Parsed JSON: each field is checked where it is read.
 * @typedef {{event?: string, [field: string]: any}} FeedLine
 */
/**
 * The end report as the judge wrote it (docs/report.schema.json, index.d.ts Report), or the
 * short one a lost or forgotten job gets: parsed JSON, passed on as it is.
 * @typedef {Record<string, any>} Report
 */
/**
 * A 'status' event's snapshot, as the judge published it (bridge/status.py snapshot, index.d.ts
 * JobStatus): what status() gives, with the state the feed said since.
 * @typedef {{state: string, pid: number | null, elapsed_s: number, stages: string[], script_stages: string[],
 *   step: number | null, total: number | null, metrics: Record<string, unknown>, rate: number | null,
 *   eta_s: number | null, progress_age_s: number | null, [field: string]: unknown}} JobStatus
 */
/** @typedef {(name: string, value: unknown) => void} Emit an event at the line's time */
/** @typedef {(err: unknown, t?: number | null) => void} ErrorTap */

class FeedJob extends EventEmitter {
  /** @param {string} id */
  constructor(id) {
    super();
    this.id = id;
    this.state = 'starting';
    /** @type {number | null} */
    this.pid = null;
    /** @type {Report | null} */
    this.report = null;
    // The feed number (seq) of the last event read: attach again with {since: position + 1} to go
    // on from here without a gap or a repeat.
    /** @type {number | null} */
    this.position = null;
    /** @type {JobStatus | null} */
    this._status = null; // status(): the judge's latest 'status' event
    // Output lines the job server counted instead of sending while this process did not read
    // ('dropped' events; logPath and the report's log_tail have them): for whoever only awaits done.
    this.droppedOutput = 0;
    // While stalled (and after, when the job hung): the supervisor's live diagnosis, the last
    // 'stalled' event's; null while the job makes progress.
    /** @type {Record<string, any> | null} */
    this.liveDiagnosis = null;
    /** @type {number | null} */
    this._lineSeq = null; // the seq of the line being delivered, for events()
    /** @type {Map<number, FeedLine>} */
    this._replies = new Map(); // request id -> a reply nobody waits for yet
    /** @type {Map<number, (reply: FeedLine | null) => void>} */
    this._replyWaiters = new Map(); // request id -> resolve
    /** @type {Set<ErrorTap>} */
    this._errorTaps = new Set(); // events() iterators get errors without listening to 'error'
    /** @type {Promise<Report>} */
    this.done = new Promise((resolve, reject) => { this._resolveDone = resolve; this._rejectDone = reject; });
    this.done.catch(() => undefined); // a failure also reaches 'error' listeners; never unhandled
  }

  /**
   * A snapshot for a GUI (state, pid, elapsed_s, stages, script_stages, step, total, metrics,
   * rate, eta_s, progress_age_s) as the judge published it last, with the state as the feed
   * said it since (the end's); before the first one, the state and pid alone.
   * @returns {JobStatus}
   */
  status() {
    if (this._status) return { ...this._status, state: this.state, pid: this.pid ?? this._status.pid ?? null };
    return {
      state: this.state, pid: this.pid, elapsed_s: 0, stages: [], script_stages: [], step: null, total: null,
      metrics: {}, rate: null, eta_s: null, progress_age_s: null,
    };
  }

  /**
   * Events as an async iterator: {type, data, t, seq}, from now until {type: 'end'}; seq is the
   * feed number of the line the event came from (null for one made here). At most EVENT_QUEUE
   * wait for a slow consumer; beyond that the oldest go, and the next event it gets is
   * {type: 'dropped', data: {count, kinds}} (src/job_events.js).
   */
  events() {
    const queue = new EventQueue(EVENT_QUEUE);
    let ended = false;
    const listeners = FEED_EVENTS.map((type) => {
      const fn = (/** @type {unknown} */ data, /** @type {number | null | undefined} */ t) => {
        queue.put({ type, data, t: t ?? null, seq: this._lineSeq });
        if (type === 'end') ended = true;
      };
      if (type === 'error') this._errorTaps.add(fn); else this.on(type, fn);
      return /** @type {[string, (data: any, t: any) => void]} */ ([type, fn]);
    });
    const detach = () => {
      for (const [type, fn] of listeners) {
        if (type === 'error') this._errorTaps.delete(fn); else this.off(type, fn);
      }
    };
    return {
      [Symbol.asyncIterator]() { return this; },
      next: async () => {
        const value = await queue.next(() => ended || this.report !== null);
        if (value === null) { detach(); return { done: true, value: undefined }; }
        return { done: false, value };
      },
      async return() { detach(); return { done: true, value: undefined }; },
    };
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  /**
   * The supervisor's reply to request `id`, or null after `timeoutMs` or once the job ended.
   * @param {number} id
   * @param {number} timeoutMs
   * @returns {Promise<FeedLine | null>}
   */
  _reply(id, timeoutMs) {
    if (this._replies.has(id)) {
      const reply = /** @type {FeedLine} */ (this._replies.get(id)); // has(id): a line, never undefined
      this._replies.delete(id);
      return Promise.resolve(reply);
    }
    if (this.report) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this._replyWaiters.delete(id); resolve(null); }, timeoutMs);
      this._replyWaiters.set(id, (/** @type {FeedLine | null} */ reply) => { clearTimeout(timer); resolve(reply); });
    });
  }

  /**
   * @param {string} name
   * @param {unknown} value
   * @param {number | null} [t]
   */
  _emit(name, value, t = null) {
    try {
      this.emit(name, value, t);
    } catch (err) {
      // A throwing listener must not break the rendering; it still surfaces, as Node would.
      queueMicrotask(() => { throw err; });
    }
  }

  /**
   * An error for 'error' listeners and events() iterators (never thrown at nobody).
   * @param {unknown} err
   * @param {number | null} [t]
   */
  _emitError(err, t = null) {
    if (this.listenerCount('error') > 0) this._emit('error', err, t);
    for (const tap of this._errorTaps) tap(err, t);
  }

  /**
   * The end: every waiter is answered, 'end' emitted, `done` settled (subclasses may reject it).
   * @param {Report} report
   * @param {number | null} [t]
   */
  _end(report, t = null) {
    this.state = 'ended';
    this.report = report;
    for (const waiter of this._replyWaiters.values()) waiter(null); // no reply will come now
    this._replyWaiters.clear();
    this._ended(report);
    this._emit('end', report, t);
    this._settle(report);
  }

  /** Subclasses: what to let go of before 'end' is emitted. */
  /**
   * A subclass's own end (its server forgets it, its streams end).
   * @param {Report} _report
   */
  _ended(_report) {}

  /** @param {Report} report */
  _settle(report) {
    this._resolveDone(report);
  }

  /**
   * One line of the feed -> the events a Job emits (bridge event names).
   * @param {FeedLine} event
   */
  _deliver(event) {
    const t = typeof event.t === 'number' ? event.t : null; // the supervisor's wall clock, seconds
    if (Number.isInteger(event.seq)) this.position = event.seq;
    this._lineSeq = Number.isInteger(event.seq) ? event.seq : null;
    try {
      this._deliverKind(event, t);
    } finally {
      this._lineSeq = null;
    }
  }

  /**
   * @param {FeedLine} event
   * @param {number | null} t
   */
  _deliverKind(event, t) {
    /** @type {Emit} */
    const emit = (name, value) => this._emit(name, value, t);
    switch (event.event) {
      case 'state':
        this.state = event.state;
        if (event.state === 'running') this.liveDiagnosis = null;
        emit('state', event.state);
        break;
      case 'stalled': // judged by the supervisor, with its live diagnosis
        this.liveDiagnosis = event.diagnosis ?? null;
        emit('stalled', { stage: event.stage ?? null, idle_s: event.idle_s ?? null, stack: event.stack ?? null, diagnosis: event.diagnosis ?? null });
        break;
      case 'output':
        emit('log', { stream: event.stream, text: event.text, encoding: event.encoding ?? null, end: event.end });
        break;
      case 'lines': // the job server's run of output events first..seq, written together
        event.lines.forEach((/** @type {[string, string | null, string, ...unknown[]]} */ [text, encoding, end], /** @type {number} */ i) => {
          this._lineSeq = event.first + i;
          emit('log', { stream: event.stream, text, encoding: encoding ?? null, end });
        });
        break;
      case 'spawn':
        this.pid = event.pid;
        emit('spawn', { pid: event.pid, command: event.command });
        break;
      case 'no_worker':
        emit('no_worker', { reason: event.reason });
        break;
      case 'dropped': // the job server's: this process did not read, and output lines were counted instead
        this.droppedOutput += (event.kinds && event.kinds.output) || 0;
        emit('dropped', { count: event.count, kinds: event.kinds || {} });
        break;
      case 'cancel':
        emit('cancel', { reason: event.reason, accepted: event.accepted, refused: event.refused });
        break;
      case 'lead':
        emit('lead', { pid: event.pid ?? null });
        break;
      case 'log_error': {
        const { event: _kind, t: _t, seq: _seq, ...info } = event;
        emit('log_error', info);
        break;
      }
      case 'status':
        this._status = event.status || null;
        emit('status', this._status);
        break;
      case 'message':
        this._message(event, emit);
        break;
      case 'hang':
        emit('hang', { reason: event.reason, stage: event.stage ?? null });
        break;
      case 'starting': // the deadline's look: starting, starved of CPU or computing, not hung
      case 'starved':
      case 'computing':
        emit(event.event, { why: event.why, for_s: event.for_s ?? null });
        break;
      case 'health': { // a metric became NaN or infinite (bridge/health.py)
        const { event: _kind, seq: _seq, ...entry } = event;
        emit('health', entry);
        break;
      }
      case 'signal':
        emit('signal', event.signal);
        break;
      case 'resources': { // a sample of the job's tree (bridge/resources.py)
        const { event: _kind, t: _t, seq: _seq, ...sample } = event;
        emit('resources', sample);
        break;
      }
      case 'attempt':
        emit('attempt', { attempt: event.attempt, outcome: event.outcome, report: event.report, restart_in: event.restart_in });
        break;
      case 'reply': { // the supervisor's answer to a request
        const waiter = this._replyWaiters.get(event.request);
        if (waiter) { this._replyWaiters.delete(event.request); waiter(event); break; }
        this._replies.set(event.request, event);
        if (this._replies.size > MAX_REPLIES) this._replies.delete(/** @type {number} */ (this._replies.keys().next().value));
        break;
      }
      case 'end':
        this._end(event.report || { outcome: event.outcome }, t);
        break;
      default:
        this._other(event, emit);
        break;
    }
  }

  /**
   * A worker's message: its events, each body naming its sender (rank, local_rank, host, pid,
   * role, lead: docs/CLIENT.md "Ranks"). Every process's hello, logs, errors and files; the
   * job's stage, progress and heartbeat are its lead's (bridge/job_messages.py marks the lead):
   * a subprocess's are in the feed, not the job's events.
   * @param {FeedLine} event
   * @param {Emit} emit
   */
  _message(event, emit) {
    const sender = event.sender || null;
    const body = event.body && typeof event.body === 'object' ? { ...event.body, sender } : {};
    // A progress event carries the time it arrived (seconds since the epoch), as in Python.
    if (event.kind === 'progress' && typeof body.t !== 'number' && typeof event.t === 'number') body.t = event.t;
    const log = (/** @type {Record<string, any>} */ record) => emit('log', {
      stream: 'worker', text: String(record.message), level: record.level, logger: record.logger ?? null, record, sender,
    });
    switch (event.kind) {
      case 'log': log(event.body || {}); break;
      case 'logs': for (const record of (event.body || {}).records || []) log(record); break;
      case 'user': emit('message', body.data ?? null); break; // worker.send()
      case 'error': this._emitError(new PythonError(body)); break;
      case 'artifact': emit('artifact', body); break; // any process's file
      case 'hello':
        emit('hello', body);
        break;
      case 'stage':
      case 'progress':
      case 'heartbeat':
        if (!sender || sender.lead !== false) emit(event.kind, body);
        break;
      default: break;
    }
  }

  /**
   * Subclasses: a feed line this base does not know.
   * @param {FeedLine} _event
   * @param {Emit} _emit
   */
  _other(_event, _emit) {}
}

module.exports = { FeedJob, FEED_EVENTS, MAX_REPLIES };
