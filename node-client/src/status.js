'use strict';
/**
 * A job's live status as a GUI shows it: a pure tracker, the mirror of bridge/status.py
 * (vectors/status.json holds cases both run). Fed the lead process's stage and progress
 * messages with their receive time (seconds, monotonic); snapshot(state, pid, now) gives
 * state, pid, elapsed_s, stages (open, outermost first), script_stages (without zero-code
 * mode's own: "startup"/"main" at depth 0, "import <module>", "first batch"/"train" directly
 * inside "main"), step, total, metrics, rate (steps/s over the last RATE_SAMPLES messages,
 * falling during a stall: rate()), eta_s (none once ended), progress_age_s. The one place a
 * job's rate and ETA are decided (the `status` event carries the snapshot to every face).
 */

const RATE_SAMPLES = 20;
const ZERO_CODE_TOP = ['startup', 'main'];
const ZERO_CODE_IN_MAIN = ['first batch', 'train'];

function isZeroCodeStage(name, depth, parent) {
  if (depth === 0) return ZERO_CODE_TOP.includes(name);
  if (name.startsWith('import ')) return true;
  return depth === 1 && parent === 'main' && ZERO_CODE_IN_MAIN.includes(name);
}

const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;
const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

const MAX_BACKLOG_S = 3600; // a message older than this by its envelope is taken as this old

/**
 * When a message was sent, on the receiver's clock (now): its envelope's ts (the sender's wall
 * clock) says how long it waited in a backlog (bridge/status.py sent_at). A ts from the future
 * counts as just now.
 */
function sentAt(now, wallNow, ts) {
  if (!isNum(ts)) return now;
  return now - Math.min(Math.max(0, wallNow - ts), MAX_BACKLOG_S);
}

class StatusTracker {
  constructor(started) {
    this.started = started;
    this._open = []; // [name, depth], outermost first
    this._samples = [];
    this.step = null;
    this.total = null;
    this.metrics = {};
    this.progressT = null;
  }

  stage(body) {
    const name = body.name;
    const depth = body.depth ?? 0;
    if (body.event === 'begin') {
      this._open = [...this._open.filter(([, d]) => d < depth), [name, depth]];
      return;
    }
    for (let i = this._open.length - 1; i >= 0; i--) {
      if (this._open[i][0] === name) {
        this._open.splice(i);
        break;
      }
    }
  }

  /** The lead's progress, sent at t (sentAt()); never before the one before it. */
  progress(body, t) {
    if (this.progressT !== null) t = Math.max(t, this.progressT);
    this.step = body.step ?? null;
    this.total = body.total ?? null;
    this.metrics = { ...(body.metrics || {}) };
    this.progressT = t;
    if (isNum(this.step)) {
      if (this._samples.length && this.step < this._samples[this._samples.length - 1][1]) this._samples = [];
      this._samples.push([t, this.step]);
      if (this._samples.length > RATE_SAMPLES) this._samples.shift();
    }
  }

  /** As bridge/status.py rate(): past the samples' mean gap the span runs on to now - gap. */
  rate(now = null) {
    if (this._samples.length < 2) return null;
    const [t0, s0] = this._samples[0];
    const [t1, s1] = this._samples[this._samples.length - 1];
    if (!(t1 > t0 && s1 > s0)) return null;
    const gap = (t1 - t0) / (this._samples.length - 1);
    const end = now === null ? t1 : Math.max(t1, now - gap);
    return (s1 - s0) / (end - t0);
  }

  snapshot(state, pid, now) {
    const ended = state === 'ended';
    const rate = this.rate(ended ? null : now);
    let eta = null;
    if (rate && !ended && isNum(this.total) && isNum(this.step)) eta = round(Math.max(0, (this.total - this.step) / rate), 3);
    const script = [];
    let parent = null;
    for (const [name, depth] of this._open) {
      if (!isZeroCodeStage(name, depth, parent)) script.push(name);
      parent = name;
    }
    return {
      state, pid, elapsed_s: round(now - this.started, 3),
      stages: this._open.map(([name]) => name), script_stages: script,
      step: this.step, total: this.total, metrics: { ...this.metrics },
      rate: rate === null ? null : round(rate, 6), eta_s: eta,
      progress_age_s: this.progressT === null ? null : round(now - this.progressT, 3),
    };
  }
}

module.exports = { StatusTracker, isZeroCodeStage, sentAt, RATE_SAMPLES };
