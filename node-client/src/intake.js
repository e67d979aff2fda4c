'use strict';
/**
 * What the hub does with one incoming message, decided without sockets: the twin of
 * bridge/intake.py (vectors/intake.json pins both). Route by the routing id's job part,
 * verify and decode with that job's key, check the envelope's job and its signed sender
 * ("from") against the route, judge the per-sender seq. The caller counts the verdict the
 * same way in both clients: `job` null -> the client's `unrouted`; `reject` -> that job's
 * protocol.rejected[reject]; else deliver, add `lost`, store `lastSeq` for the sender.
 * `ack`: the seq to acknowledge (last words, replayed too); `refuse`: an unsupported version.
 */

const codec = require('./codec.js');

/** [job id, rank] of "<job id>/<rank>[/<pid>]" (PROTOCOL.md section 1), or [null, 0]. */
function parseRoutingId(peer) {
  // eslint-disable-next-line no-control-regex -- NUL..DEL is exactly the ASCII range tested here
  if (!/^[\x00-\x7f]*$/.test(peer)) return [null, 0];
  const parts = peer.split('/');
  if (parts.length < 2 || !/^\d+$/.test(parts[1])) return [null, 0];
  return [parts[0], Number(parts[1])];
}

/**
 * Judge one message (`frames` after the routing id `peer`, a latin1 string). `keys`: Map
 * job id -> key; `lastSeq`: Map routing id -> last accepted seq. Changes neither.
 */
function judge(peer, frames, keys, lastSeq) {
  const out = { job: null, rank: 0, reject: null, message: null, lost: 0, lastSeq: null, ack: null, refuse: null };
  const [jobId, rank] = parseRoutingId(peer);
  if (jobId === null || !keys.has(jobId)) return out;
  out.job = jobId;
  out.rank = rank;
  let msg;
  try {
    msg = codec.decode(frames, keys.get(jobId), 'worker');
  } catch (err) {
    if (!(err instanceof codec.ProtocolError)) throw err;
    out.reject = err.reason;
    if (err.reason === 'unsupported_version') out.refuse = err.detail || 'unsupported protocol version';
    return out;
  }
  if (msg.job !== jobId) {
    out.reject = 'bad_route';
    return out;
  }
  // A 1.1 worker signs its routing id: the same frames through another one are refused.
  if (msg.sender !== null && msg.sender !== peer) {
    out.reject = 'bad_sender';
    return out;
  }
  const previous = lastSeq.get(peer) || 0;
  const [verdict, last] = codec.checkSeq(previous, msg.seq);
  const final = codec.FINAL_KINDS.has(msg.kind);
  if (verdict === 'replay') {
    out.reject = 'replay';
    out.ack = final ? msg.seq : null;
    return out;
  }
  Object.assign(out, { message: msg, lastSeq: last, ack: final ? msg.seq : null, lost: verdict === 'gap' ? Number(msg.seq) - Number(previous) - 1 : 0 });
  return out;
}

// --- the total budget for unauthenticated input (issue 11 item 3), as bridge/intake.py ---
// Once a window's budget of input that failed authentication is spent, a message from a
// sender that already failed is dropped unverified and counted as `over_budget`; a sender
// that never failed is always verified.
const UNAUTH_BUDGET_BYTES = 16 * 1024 * 1024; // rejected input verified per window, all senders
const UNAUTH_WINDOW_S = 1.0;
const SUSPECTS_KEPT = 4096; // senders remembered as having failed authentication (oldest go)
const NOT_SUSPECT = ['replay', 'unsupported_version']; // honest workers get these too

function budgetInitial() {
  return { t: null, bytes: 0, suspects: new Map() };
}

function roll(budget, now) {
  if (budget.t === null || now - budget.t >= UNAUTH_WINDOW_S) {
    budget.t = now;
    budget.bytes = 0;
  }
}

/** Whether to drop this sender's message unverified (it failed before; budget spent). */
function overBudget(budget, sender, now) {
  roll(budget, now);
  return budget.suspects.has(sender) && budget.bytes >= UNAUTH_BUDGET_BYTES;
}

/** Count a rejected message (reject null: it named no job served) against the budget. */
function noteRejected(budget, sender, size, reject, now) {
  if (NOT_SUSPECT.includes(reject)) return;
  roll(budget, now);
  budget.bytes += size;
  budget.suspects.delete(sender);
  budget.suspects.set(sender, true);
  while (budget.suspects.size > SUSPECTS_KEPT) budget.suspects.delete(budget.suspects.keys().next().value);
}

module.exports = {
  parseRoutingId, judge, budgetInitial, overBudget, noteRejected, UNAUTH_BUDGET_BYTES, UNAUTH_WINDOW_S, SUSPECTS_KEPT,
};
