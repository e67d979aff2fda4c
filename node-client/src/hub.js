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
 */

const path = require('node:path');
const zmq = require('zeromq');
const codec = require('./codec.js');
const { makeRuntimeDir, removeRuntimeDir } = require('./launcher.js');

const IPC_PATH_MAX = 100; // sun_path is 108 bytes on Linux; keep a margin

const ROUTER_OPTIONS = {
  maxMessageSize: codec.MAX_MESSAGE_BYTES + 64, // a larger frame drops the peer in libzmq
  linger: 0, // commands to a dead job are worthless; closing must never block
  sendHighWaterMark: 100000,
  receiveHighWaterMark: 100000, // the worker's bounded queues, not libzmq, decide what drops
};

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
    this.closeWhenIdle = Boolean(options.closeWhenIdle);
    this.endpoint = null;
    this.jobs = new Map(); // job id -> job
    this.lastSeq = new Map(); // routing id -> last accepted seq
    this.unroutable = 0; // messages for no job we know
    this.sock = null;
    this.ready = null;
    this.sending = Promise.resolve();
    this.closed = false;
  }

  /** Bind (once); resolves to the endpoint workers connect to. */
  start() {
    if (!this.ready) {
      this.sock = new zmq.Router(ROUTER_OPTIONS);
      this.ready = this.sock.bind(this.requestedEndpoint).then(() => {
        this.endpoint = this.sock.lastEndpoint || this.requestedEndpoint;
        this.receiving = this.receiveLoop();
        return this.endpoint;
      });
    }
    return this.ready;
  }

  /** Whether messages wait in the socket right now (not yet handed to their jobs). */
  readable() {
    return Boolean(this.sock && !this.closed && this.sock.readable);
  }

  register(job) {
    this.jobs.set(job.id, job);
  }

  unregister(job) {
    this.jobs.delete(job.id);
    for (const peer of this.lastSeq.keys()) {
      if (peer.split('/')[0] === job.id) this.lastSeq.delete(peer);
    }
    if (this.closeWhenIdle && this.jobs.size === 0) this.close();
  }

  async receiveLoop() {
    try {
      for await (const [peer, ...frames] of this.sock) {
        try {
          this.dispatch(peer, frames);
        } catch (err) {
          // A bug in one job's handling must not stop the socket that serves every job.
          process.emitWarning(`trainbridge: a message could not be handled: ${err && err.stack}`, 'TrainbridgeWarning');
        }
      }
    } catch (err) {
      if (!this.closed) throw err;
    }
  }

  /** One incoming message: route, authenticate, judge its seq, hand it to its job. */
  dispatch(peerBuf, frames) {
    const peer = peerBuf.toString('latin1');
    // "<job id>/<rank>/<pid>" (docs/PROTOCOL.md section 1): job ids have no "/".
    const parts = peer.split('/');
    const job = parts.length >= 2 && /^\d+$/.test(parts[1]) ? this.jobs.get(parts[0]) : undefined;
    if (!job) {
      this.unroutable += 1;
      return;
    }
    let msg;
    try {
      msg = codec.decode(frames, job.key, 'worker');
      if (msg.job !== job.id) throw new codec.ProtocolError('bad_route', `${msg.job} via ${peer}`);
    } catch (err) {
      if (!(err instanceof codec.ProtocolError)) throw err;
      job.rejected(err.reason, err);
      if (err.reason === 'unsupported_version') {
        this.send(job, peer, 'refuse', {
          reason: `this client speaks protocol v${codec.PROTOCOL_MAJOR} only (${err.detail})`,
          supported: codec.SUPPORTED_MAJORS,
        });
        job.refused(err.detail || 'unsupported protocol version');
      }
      return;
    }
    const [verdict, last] = codec.checkSeq(this.lastSeq.get(peer) || 0, msg.seq);
    if (verdict === 'replay') {
      job.rejected('replay');
      // The worker resends its last words until acked: our ack may have been lost.
      if (codec.FINAL_KINDS.has(msg.kind)) this.send(job, peer, 'ack', { to: msg.seq });
      return;
    }
    if (verdict === 'gap') job.lost(msg.seq - (this.lastSeq.get(peer) || 0) - 1);
    this.lastSeq.set(peer, last);
    if (codec.FINAL_KINDS.has(msg.kind)) this.send(job, peer, 'ack', { to: msg.seq });
    job.receive(msg, peer);
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
    this.sending = this.sending
      .then(() => (this.closed ? undefined : this.sock.send([Buffer.from(peer, 'latin1'), ...frames])))
      .catch(() => undefined); // a peer that is gone: libzmq drops it, so do we
    return seq;
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    if (this.sock) this.sock.close();
    removeRuntimeDir(this.runtimeDir);
    if (defaultHub === this) defaultHub = null;
  }
}

let defaultHub = null;

/** The shared hub every launch() uses unless given one; made on first use. */
function getDefaultHub() {
  if (!defaultHub || defaultHub.closed) defaultHub = new Hub({ closeWhenIdle: true });
  return defaultHub;
}

module.exports = { Hub, getDefaultHub, ROUTER_OPTIONS };
