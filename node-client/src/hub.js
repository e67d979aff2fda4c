'use strict';
/**
 * Hub: one ROUTER socket serving many jobs, routed by job id. The mirror of bridge/hub.py.
 *
 * The hub binds (the worker connects), authenticates and numbers every message with the
 * job's key and per-sender sequence (codec.decode, codec.checkSeq), acks the last words
 * (`error`, `bye`; a replayed one is acked again but not processed), answers a worker with
 * an unsupported protocol major with `refuse`, counts rejections per job by reason, and
 * hands accepted messages to the job. It sends the client's commands, numbered per job.
 *
 * The socket lives while jobs are registered; the default hub closes it, and removes its
 * private runtime directory, when its last job is over, so a Node program can exit.
 *
 * Its length (about 420 lines): it also holds what Python keeps in bridge/channel.py (each
 * job's checks, counts, acks and held commands), which here works on the job's own fields.
 */

const path = require('node:path');
const zmq = require('zeromq');
const codec = require('./codec.js');
const intake = require('./intake.js');
const { makeRuntimeDir, removeRuntimeDir } = require('./launcher.js');

const IPC_PATH_MAX = 100; // sun_path is 108 bytes on Linux; keep a margin
// Memory budget for input not yet read (docs/PROTOCOL.md "Limits"), as bridge/hub.py: libzmq
// queues at most RCVHWM messages per connection, each at most maxMessageSize a frame, then
// stops reading that connection (the sender waits; nothing is dropped). 16 x 1 MiB = 16 MiB
// per connection; 100,000 allowed about 100 GiB.
const RCVHWM = 16;
// Received buffers live outside V8's heap and are freed only when a GC finds them; V8
// collects after some 64 MiB of them. Input the hub rejects (unauthenticated, unroutable)
// is garbage at once: past REJECTED_GC_BYTES of it, the hub asks for a collection, so a
// flood of bad frames costs at most that much memory, not V8's allowance on top.
const REJECTED_GC_BYTES = 16 * 1024 * 1024;
const YIELD_MESSAGES = 1000; // the receive loop lets the event loop run after this many messages
const YIELD_BYTES = 8 * 1024 * 1024; // ... or after this many bytes
const SEND_RETRY_MS = 10; // how soon a send that a full worker queue refused is tried again
// job.send() messages held for one worker whose queue is full (a stopped or stuck worker):
// at most this many and this many bytes; more are dropped and counted in protocol.undelivered
// (as bridge/hub.py; docs/PROTOCOL.md "Limits"). Commands are never dropped here.
const HELD_USER_LIMIT = 10_000;
const HELD_USER_BYTES = 64 * 1024 * 1024;
// ZMQ_ROUTER_NOTIFY (a draft option of libzmq 4.3, which zeromq.js builds with) set to
// ZMQ_NOTIFY_DISCONNECT: when a worker's connection ends, the ROUTER queues an empty
// message from that routing id after everything the connection delivered. It is the proof
// that the socket holds nothing more from that process (Job._drain), without a quiet wait.
// libzmq drops the notice when that connection's queue is full (receiveHighWaterMark) at its
// end: then the drain waits for a quiet socket, as without notices.
const ZMQ_ROUTER_NOTIFY = 97;
const ZMQ_NOTIFY_DISCONNECT = 2;

const ROUTER_OPTIONS = {
  maxMessageSize: codec.MAX_MESSAGE_BYTES + 64, // a larger frame drops the peer in libzmq
  linger: 0, // commands to a dead job are worthless; closing must never block
  sendHighWaterMark: 1000, // as bridge/hub.py (libzmq's default); a full peer queue holds sends
  // A send to a full peer queue fails at once with EAGAIN (held, retried in order) and one to
  // a gone peer with EHOSTUNREACH (counted): without `mandatory` the ROUTER drops both unseen.
  mandatory: true,
  sendTimeout: 0,
  receiveHighWaterMark: RCVHWM, // a full queue makes the worker wait (its log backpressure), not drop
};

/** Ask for disconnect notices; false where this libzmq has no draft options. */
function enableDisconnectNotice(sock) {
  try {
    sock.setInt32Option(ZMQ_ROUTER_NOTIFY, ZMQ_NOTIFY_DISCONNECT);
    return sock.getInt32Option(ZMQ_ROUTER_NOTIFY) === ZMQ_NOTIFY_DISCONNECT;
  } catch {
    return false; // the drain then waits for a quiet socket instead (Job._drain)
  }
}

class Hub {
  /**
   * @param {object} [options]
   * @param {string} [options.endpoint] e.g. "tcp://127.0.0.1:0"; default ipc in a private dir
   * @param {boolean} [options.closeWhenIdle] close the socket when the last job is over
   */
  constructor(options = {}) {
    this.runtimeDir = makeRuntimeDir();
    const sockPath = path.join(this.runtimeDir, 'hub.sock');
    // Where a unix socket path would be too long, tcp on loopback (as bridge/hub.py does).
    this.requestedEndpoint = options.endpoint
      || (sockPath.length <= IPC_PATH_MAX ? `ipc://${sockPath}` : 'tcp://127.0.0.1:*');
    // On tcp any local user could connect: the socket is a CurveZMQ server whose public key
    // only the job's environment holds (TRAINBRIDGE_SERVER_KEY), so a peer without it fails
    // the handshake before a byte of its input is queued (as bridge/hub.py). ipc lives in
    // the private (0700) runtime directory: only this user can connect.
    this.curve = this.requestedEndpoint.startsWith('tcp://') ? zmq.curveKeyPair() : null;
    this.serverKey = this.curve ? this.curve.publicKey : null;
    this.closeWhenIdle = Boolean(options.closeWhenIdle);
    this.endpoint = null;
    this.jobs = new Map(); // job id -> job
    this.keys = new Map(); // job id -> key, what intake.judge verifies with
    this.lastSeq = new Map(); // routing id -> last accepted seq
    this.held = new Map(); // routing id -> [{ job, peer, kind, frames }] a full queue refused, in order
    this.heldUser = new Map(); // routing id -> { count, bytes } of the job.send() messages held
    this.queued = new Set(); // sends not yet tried (serialised behind `sending`)
    this.retryTimer = null;
    this.unrouted = 0; // messages for no job this hub serves (each report shows its share)
    this.rejectedBytes = 0; // bytes of rejected input since the last collection
    this.budget = intake.budgetInitial(); // unauthenticated input, all connections (intake.js)
    this.sock = null;
    this.notifies = false; // whether the socket tells of ended connections (enableDisconnectNotice)
    // Other hosts (listen()): address -> { sock, ready }, a CurveZMQ ROUTER each, and the
    // routing ids that spoke on one (their commands go back on it).
    this.listening = new Map();
    this.remotePeers = new Map(); // routing id -> the listen socket it came on
    this.ready = null;
    this.sending = Promise.resolve();
    this.closed = false;
  }

  /** Bind (once); resolves to the endpoint workers connect to. */
  start() {
    if (!this.ready) {
      this.sock = new zmq.Router(this.curve
        ? { ...ROUTER_OPTIONS, curveServer: true, curveSecretKey: this.curve.secretKey }
        : ROUTER_OPTIONS);
      this.notifies = enableDisconnectNotice(this.sock);
      this.ready = this.sock.bind(this.requestedEndpoint).then(() => {
        this.endpoint = this.sock.lastEndpoint || this.requestedEndpoint;
        this.receiving = this.receiveLoop();
        return this.endpoint;
      });
    }
    return this.ready;
  }

  /**
   * Also accept workers of other hosts on tcp://address:port (0: a free port), on a
   * CurveZMQ server socket of its own: resolves to { endpoint, serverKey }. A peer that does
   * not hold the public key fails the handshake before a byte of its input is queued. Once
   * per address. zeromq.js exposes no peer address, so a socket of its own tells these
   * peers apart (bridge/hub.py reads the Peer-Address of one socket).
   */
  listen(address, port = 0) {
    if (!this.listening.has(address)) {
      const curve = zmq.curveKeyPair();
      const sock = new zmq.Router({ ...ROUTER_OPTIONS, curveServer: true, curveSecretKey: curve.secretKey });
      const host = address.includes(':') ? `[${address}]` : address;
      const ready = sock.bind(`tcp://${host}:${port || '*'}`).then(() => {
        this.receiveLoop(sock);
        return { endpoint: sock.lastEndpoint, serverKey: curve.publicKey };
      });
      this.listening.set(address, { sock, ready });
    }
    return this.listening.get(address).ready;
  }

  // No readable(): zeromq.js's `sock.readable` reads ZMQ_EVENTS, which takes the socket's
  // edge-triggered ZMQ_FD signal without waking the receive() pending in receiveLoop. A
  // message queued at that moment then waits for the next signal: a worker's disconnect
  // notice read 1 s late, in 2 of 150 SIGKILLed jobs of one client (the drain asked
  // readable() every 2 ms meanwhile). Only receiveLoop looks at the socket.

  register(job) {
    this.jobs.set(job.id, job);
    this.keys.set(job.id, job.key);
  }

  unregister(job) {
    this.jobs.delete(job.id);
    this.keys.delete(job.id);
    for (const peer of this.lastSeq.keys()) {
      if (peer.split('/')[0] === job.id) this.lastSeq.delete(peer);
    }
    for (const peer of this.remotePeers.keys()) {
      if (peer.split('/')[0] === job.id) this.remotePeers.delete(peer);
    }
    // Closed on the next turn, not now: the job's end (its report, its `end` event) does not
    // wait for the socket's close and the runtime directory's removal (~1 ms), and a job
    // launched from an `end` listener keeps this hub.
    if (this.closeWhenIdle && this.jobs.size === 0) {
      setImmediate(() => {
        if (this.jobs.size === 0) this.close();
      });
    }
  }

  async receiveLoop(sock = this.sock) {
    let messages = 0;
    let bytes = 0;
    try {
      for await (const [peer, ...frames] of sock) {
        try {
          if (sock !== this.sock) this.remotePeers.set(peer.toString('latin1'), sock);
          this.dispatch(peer, frames);
        } catch (err) {
          // dispatch() gives a job's failure to that job; this is for a bug in routing itself.
          process.emitWarning(`trainbridge: a message could not be handled: ${err && err.stack}`, 'TrainbridgeWarning');
        }
        // While messages keep coming, each receive resolves at once and the loop would run
        // on microtasks alone: pipes, timers and the finalizers that free received buffers
        // (napi, after GC, from the event loop) would wait for the flood to end. So after
        // YIELD_MESSAGES messages or YIELD_BYTES bytes, the event loop gets a turn.
        messages += 1;
        for (const frame of frames) bytes += frame.length;
        if (messages >= YIELD_MESSAGES || bytes >= YIELD_BYTES) {
          messages = 0;
          bytes = 0;
          await new Promise(setImmediate);
        }
      }
    } catch (err) {
      if (!this.closed) throw err;
    }
  }

  /** One incoming message: route, authenticate, judge its seq, hand it to its job. */
  dispatch(peerBuf, frames) {
    const peer = peerBuf.toString('latin1');
    const [jobId] = intake.parseRoutingId(peer);
    const job = jobId === null ? undefined : this.jobs.get(jobId);
    const t = performance.now() / 1000;
    if (this.notifies && frames.length === 1 && frames[0].length === 0) {
      // libzmq's notice that this connection ended (a worker never sends an empty frame).
      if (job) job.disconnected(peer);
      return;
    }
    if (!job) {
      this.unrouted += 1;
      intake.noteRejected(this.budget, peer, frameBytes(frames), null, t);
      this.discard(frames);
      return;
    }
    if (intake.overBudget(this.budget, peer, t)) {
      job.rejected('over_budget'); // dropped unverified (intake.js)
      this.discard(frames);
      return;
    }
    try {
      this.dispatchTo(job, peer, frames);
    } catch (err) {
      // A bug in one job's handling fails that job alone (internal); the socket that
      // serves every job goes on.
      try {
        job.failInternal(err);
      } catch (err2) {
        process.emitWarning(`trainbridge: internal error in the hub: ${err2 && err2.stack}`, 'TrainbridgeWarning');
      }
    }
  }

  /** The part of dispatch() that belongs to one job: intake.judge decides, this counts. */
  dispatchTo(job, peer, frames) {
    const verdict = intake.judge(peer, frames, this.keys, this.lastSeq);
    if (verdict.ack !== null) this.send(job, peer, 'ack', { to: verdict.ack });
    if (verdict.reject !== null) {
      job.rejected(verdict.reject);
      intake.noteRejected(this.budget, peer, frameBytes(frames), verdict.reject, performance.now() / 1000);
      this.discard(frames);
      if (verdict.refuse !== null) {
        this.send(job, peer, 'refuse', {
          reason: `this client speaks protocol v${codec.PROTOCOL_MAJOR} only (${verdict.refuse})`,
          supported: codec.SUPPORTED_MAJORS,
        });
        job.refused(verdict.refuse);
      }
      return;
    }
    this.lastSeq.set(peer, verdict.lastSeq);
    if (verdict.lost) job.lost(verdict.lost);
    job.receive(verdict.message, peer);
  }

  /** Rejected input: past REJECTED_GC_BYTES of it, have it collected (see there). */
  discard(frames) {
    for (const frame of frames) this.rejectedBytes += frame.length;
    if (this.rejectedBytes >= REJECTED_GC_BYTES) {
      this.rejectedBytes = 0;
      collect();
    }
  }

  /**
   * Send one command to a worker (`peer` = its routing id). Returns the command's seq.
   * Sends are serialised: zeromq allows one pending send per socket.
   */
  send(job, peer, kind, body = {}) {
    job.clientSeq += 1;
    const seq = job.clientSeq;
    const frames = codec.encode(kind, seq, body, job.key, job.id);
    if (this.closed || !this.sock) return seq;
    const item = { job, peer, kind, frames };
    this.queued.add(item);
    this.sending = this.sending.then(() => this._deliver(item)).catch(() => undefined);
    return seq;
  }

  async _deliver(item) {
    if (!this.queued.delete(item) || this.closed) return; // given up (counted) or closed
    const queue = this.held.get(item.peer);
    if (queue) {
      this._hold(item); // behind what waits already: order is kept
    } else if (!(await this._try(item))) {
      item.job.sendWaited += 1;
      this._hold(item);
      this._scheduleRetry();
    }
  }

  /** Queue a send behind what waits for its worker; a job.send() message past the held
   * limits is dropped and counted instead. */
  _hold(item) {
    const queue = this.held.get(item.peer) || [];
    if (item.kind === 'user') {
      const size = item.frames.reduce((n, f) => n + f.length, 0);
      const held = this.heldUser.get(item.peer) || { count: 0, bytes: 0 };
      if (queue.length && (held.count >= HELD_USER_LIMIT || held.bytes + size > HELD_USER_BYTES)) {
        item.job.undelivered(item.kind);
        return;
      }
      this.heldUser.set(item.peer, { count: held.count + 1, bytes: held.bytes + size });
    }
    queue.push(item);
    this.held.set(item.peer, queue);
  }

  _sentHeld(item) {
    if (item.kind !== 'user') return;
    const held = this.heldUser.get(item.peer);
    if (held) this.heldUser.set(item.peer, { count: held.count - 1, bytes: held.bytes - item.frames.reduce((n, f) => n + f.length, 0) });
  }

  /** Send now; false when the peer's queue is full. A gone peer: counted, undelivered. */
  async _try(item) {
    try {
      const sock = this.remotePeers.get(item.peer) || this.sock;
      await sock.send([Buffer.from(item.peer, 'latin1'), ...item.frames]);
    } catch (err) {
      if (this.closed) return true;
      if (err.code === 'EAGAIN') return false;
      notDelivered(item);
    }
    return true;
  }

  _scheduleRetry() {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.sending = this.sending.then(() => this._flush()).catch(() => undefined);
    }, SEND_RETRY_MS);
  }

  /** Send what full peer queues held, in order, as far as they take it now. */
  async _flush() {
    for (const [peer, queue] of [...this.held]) {
      while (queue.length && !this.closed && (await this._try(queue[0]))) this._sentHeld(queue.shift());
      if (!queue.length) {
        this.held.delete(peer);
        this.heldUser.delete(peer);
      }
    }
    if (this.held.size) this._scheduleRetry();
  }

  /** The job ended: what is still held for it will never be sent; count it. */
  giveUp(job) {
    for (const [peer, queue] of [...this.held]) {
      const kept = queue.filter((item) => item.job !== job);
      for (const item of queue) if (item.job === job) notDelivered(item);
      if (kept.length) this.held.set(peer, kept);
      else {
        this.held.delete(peer);
        this.heldUser.delete(peer);
      }
    }
    // Sends queued just before the end and not tried yet: counted now, never tried later
    // (the report is built right after this).
    for (const item of [...this.queued]) {
      if (item.job !== job) continue;
      this.queued.delete(item);
      notDelivered(item);
    }
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.held.clear();
    this.heldUser.clear();
    this.queued.clear();
    if (this.sock) this.sock.close();
    for (const { sock } of this.listening.values()) sock.close();
    removeRuntimeDir(this.runtimeDir);
    if (defaultHub === this) defaultHub = null;
  }
}

function frameBytes(frames) {
  return frames.reduce((n, f) => n + f.length, 0);
}

/** An ack or refuse to a worker that is gone is worthless to it: not counted (as bridge/hub.py). */
const REPLY_KINDS = ['ack', 'refuse'];
function notDelivered(item) {
  if (!REPLY_KINDS.includes(item.kind)) item.job.undelivered(item.kind);
}

let defaultHub = null;

let collectGarbage;
/** V8's gc(), without exposing it to the host program (the flag is set back at once). */
function collect() {
  if (collectGarbage === undefined) {
    collectGarbage = typeof globalThis.gc === 'function' ? globalThis.gc : null;
    if (!collectGarbage) {
      try {
        const v8 = require('node:v8');
        v8.setFlagsFromString('--expose-gc');
        collectGarbage = require('node:vm').runInNewContext('gc');
        v8.setFlagsFromString('--no-expose-gc');
      } catch {
        collectGarbage = null; // the runtime's own GC will get to it
      }
    }
  }
  if (collectGarbage) collectGarbage();
}

/** The shared hub every launch() uses unless given one; made on first use. */
function getDefaultHub() {
  if (!defaultHub || defaultHub.closed) defaultHub = new Hub({ closeWhenIdle: true });
  return defaultHub;
}

module.exports = { HELD_USER_LIMIT, Hub, getDefaultHub, ROUTER_OPTIONS, RCVHWM };
