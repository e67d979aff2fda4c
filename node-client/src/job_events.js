'use strict';
/**
 * The event queue behind `for await (const event of job)` / job.events() (src/feed_job.js): a
 * bounded queue for one consumer, which, when it falls behind, gets one {type: "dropped",
 * data: {count, kinds}} event saying what it missed, as bridge/job_events.py's EventQueue does.
 */

const EVENT_NAMES = ['spawn', 'no_worker', 'cancel', 'hello', 'lead', 'stage', 'progress', 'status', 'log', 'heartbeat', 'stalled', 'state', 'hang', 'signal', 'log_error', 'error', 'end', 'message', 'health', 'starting', 'starved', 'computing', 'artifact', 'resources', 'dropped'];
const EVENT_QUEUE = 10000; // events kept for a slow events() consumer; the oldest go first

/**
 * One queued event: its type and data, and (as src/feed_job.js queues them) its time `t` and
 * feed number `seq`.
 * @typedef {{type: string, data: unknown, t?: number | null, seq?: number | null}} QueuedEvent
 */

/** Events in order for one consumer; at most `maxlen` held, the oldest go first. */
class EventQueue {
  constructor(maxlen = EVENT_QUEUE) {
    this._maxlen = maxlen;
    /** @type {QueuedEvent[]} */
    this._buffer = [];
    this._dropped = 0;
    /** @type {Record<string, number>} */
    this._kinds = {}; // of `_dropped`, per event type (as bridge's `kinds`)
    /** @type {((value?: unknown) => void) | null} */
    this._wake = null;
  }

  /**
   * Queue one {type, data}; wake a waiting next().
   * @param {QueuedEvent} event
   */
  put(event) {
    if (this._buffer.length >= this._maxlen) {
      const gone = /** @type {QueuedEvent} */ (this._buffer.shift()); // maxlen >= 1: the buffer is full
      this._dropped += 1;
      this._kinds[gone.type] = (this._kinds[gone.type] || 0) + 1;
    }
    this._buffer.push(event);
    if (this._wake) { this._wake(); this._wake = null; }
  }

  /**
   * The next event, a "dropped" one first when some were lost; null once `over()` and empty.
   * @param {() => boolean} over
   */
  async next(over) {
    while (!this._buffer.length) {
      if (over()) return null;
      await new Promise((resolve) => { this._wake = resolve; });
    }
    if (this._dropped) {
      const data = { count: this._dropped, kinds: this._kinds };
      this._dropped = 0;
      this._kinds = {};
      return { type: 'dropped', data };
    }
    return this._buffer.shift();
  }
}

module.exports = { EventQueue, EVENT_NAMES, EVENT_QUEUE };
