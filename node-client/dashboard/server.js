'use strict';
/**
 * The dashboard's server: Node's http, Server-Sent Events for live updates, the page's static
 * files and the chart library from node_modules (no CDN: it works offline). It speaks to a
 * job source only (source.js). The command line is cli.js (`npm run dashboard`).
 *
 * Every request needs the dashboard's token (docs/SECURITY.md): another account on the machine
 * reaches a loopback port as easily as the user does. It is taken from `Authorization: Bearer`
 * or the page's cookie; opening `/?token=...` (the address the server prints) trades it for
 * that cookie (HttpOnly, SameSite=Strict). On loopback, requests must also name this host (a
 * DNS-rebinding page cannot reach it); a request with an Origin must come from this origin
 * (`null` or a malformed one is refused); POSTs must be JSON (a cross-site form cannot submit);
 * no page may frame this one. `noToken` drops the token, on loopback only, with a warning.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const jsonform = require('../src/jsonform.js');
const { toJSON } = require('../src/jsonform.js');
const model = require('./model.js');
const { MemorySource, NoQueueError } = require('./source.js');
const { StoreSource } = require('./store_source.js');
const { SpecError } = require('./spec.js');
const { newToken } = require('./token.js');

/** @typedef {import('node:http').IncomingMessage} IncomingMessage */
/** @typedef {import('node:http').ServerResponse} ServerResponse */
/** @typedef {{send: (event: string, data: unknown) => void}} Channel where a topic writes (watchJob, watchList) */
/** @typedef {Channel & {onClose: (fn: () => void) => void}} SseStream sse()'s */
/** @typedef {{jobId: string | null, stop: () => void}} Watched a topic a browser's stream carries */
/** @typedef {{stream: SseStream, watched: Map<string, Watched>}} Mux a browser's multiplexed stream (muxStream()) */
/** @typedef {{jobId?: string | null, mux?: Mux, end: () => void}} OpenStream a page's stream, or a browser's */
/** @typedef {import('./model.js').Delta} Delta */

const PUBLIC = path.join(__dirname, 'public');
const UPLOT = path.dirname(require.resolve('uplot/dist/uPlot.esm.js'));
/** @type {Record<string, [string, string]>} */
const STATIC = {
  '/': [path.join(PUBLIC, 'index.html'), 'text/html; charset=utf-8'],
  '/app.js': [path.join(PUBLIC, 'app.js'), 'text/javascript; charset=utf-8'],
  '/dom.js': [path.join(PUBLIC, 'dom.js'), 'text/javascript; charset=utf-8'],
  '/list.js': [path.join(PUBLIC, 'list.js'), 'text/javascript; charset=utf-8'],
  '/job.js': [path.join(PUBLIC, 'job.js'), 'text/javascript; charset=utf-8'],
  '/mux.js': [path.join(PUBLIC, 'mux.js'), 'text/javascript; charset=utf-8'],
  '/compare.js': [path.join(PUBLIC, 'compare.js'), 'text/javascript; charset=utf-8'],
  '/style.css': [path.join(PUBLIC, 'style.css'), 'text/css; charset=utf-8'],
  '/vendor/uPlot.esm.js': [path.join(UPLOT, 'uPlot.esm.js'), 'text/javascript; charset=utf-8'],
  '/vendor/uPlot.min.css': [path.join(UPLOT, 'uPlot.min.css'), 'text/css; charset=utf-8'],
};
/** @type {Record<string, string>} */
const IMAGE_TYPES = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.webp': 'image/webp', '.gif': 'image/gif', '.bmp': 'image/bmp' };
const FLUSH_MS = 100; // a page gets at most ten updates a second, however fast the job talks
const LIST_FLUSH_MS = 250;
const BODY_MAX = 64 * 1024;

/** @type {(host: string) => boolean} */
const isLoopback = (host) => host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);

/** On every answer: no page may frame this one (clickjacking), nor sniff types, nor learn its address. */
const SAFE_HEADERS = {
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

const LOGIN_PAGE = `<!doctype html><meta charset="utf-8"><title>trainbridge dashboard: token needed</title>
<p>This dashboard needs its token. Open the address that <code>npm run dashboard</code> printed
(it ends with <code>?token=...</code>); the token is also in the file it names.</p>
`;

class HttpError extends Error {
  /** @param {number} status @param {string} message */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** @param {ServerResponse} res @param {number} status @param {unknown} value */
function sendJSON(res, status, value) {
  const body = typeof value === 'string' ? value : jsonform.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(body);
}

/**
 * @param {IncomingMessage} req
 * @returns {Promise<any>} the body as parsed (arbitrary JSON): each field is checked where it is read
 */
function readBody(req) {
  return new Promise((resolve, reject) => {
    /** @type {Buffer[]} */
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > BODY_MAX) {
        reject(new HttpError(413, `the request body is over ${BODY_MAX} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(size ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {});
      } catch (err) {
        reject(new HttpError(400, `the request body is not JSON: ${/** @type {Error} */ (err).message}`));
      }
    });
    req.on('error', reject);
  });
}

/**
 * The server's clock with each view, so a page can extend the open stage's bar in between.
 * @param {{head: Record<string, unknown>}} message
 */
function withNow(message) {
  message.head.now = Date.now();
  return message;
}

/** @param {IncomingMessage} req @param {string} name @returns {string | null} */
function cookie(req, name) {
  for (const part of String(req.headers.cookie || '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return null;
}

/** @param {unknown} a @param {unknown} b */
function sameToken(a, b) {
  if (typeof a !== 'string' || typeof b !== 'string') return false;
  const x = crypto.createHash('sha256').update(a).digest();
  const y = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(x, y);
}

/**
 * How often every stream says it is alive (`alive {every_ms}`): a page that hears nothing for
 * three of these periods calls the server not answering (public/dom.js). A server stopped
 * (SIGSTOP, a swapped-out host) keeps the connection open and would otherwise look live.
 */
const KEEPALIVE_MS = 2000;

/**
 * An SSE stream: send(event, data), plus `alive` every KEEPALIVE_MS (proxies keep it open too).
 * @param {IncomingMessage} req
 * @param {ServerResponse} res
 * @returns {SseStream}
 */
function sse(req, res) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store',
    Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
  res.write('retry: 1000\n\n');
  const alive = `event: alive\ndata: ${JSON.stringify({ every_ms: KEEPALIVE_MS })}\n\n`;
  res.write(alive);
  const ping = setInterval(() => res.write(alive), KEEPALIVE_MS);
  const closers = [() => clearInterval(ping)];
  req.on('close', () => { for (const c of closers) c(); });
  return {
    send: (event, data) => res.write(`event: ${event}\ndata: ${jsonform.stringify(data)}\n\n`),
    onClose: (fn) => closers.push(fn),
  };
}

/**
 * Start serving. options: source (a job source; default a StoreSource on `store`, the job
 * store's path, default the per-user store: jobs outlive the dashboard; with `memory: true` a
 * MemorySource: jobs run in this process and end with it), sourceOptions (for the default
 * source), host (default 127.0.0.1), port (default 8765; 0 picks a free one), token (default:
 * a new random one; cli.js passes the per-user one of token.js), noToken (serve without one:
 * loopback only; every local account can then run commands as you). Resolves to {url,
 * loginUrl (url with ?token=, to open once), token, server, source, close()}; close() closes
 * a default source.
 */
/**
 * @param {{source?: any, store?: string, memory?: boolean, host?: string, port?: number,
 *   token?: string | null, noToken?: boolean, sourceOptions?: Record<string, any>}} [options]
 */
async function startDashboard({ source, store, memory = false, host = '127.0.0.1', port = 8765, token,
  noToken = false, sourceOptions = {} } = {}) {
  if (noToken && token) throw new Error('startDashboard: give token or noToken, not both');
  if (noToken && !isLoopback(host)) {
    throw new Error(`refusing to serve on ${host} without a token: anyone who reaches it could run commands. `
      + 'Leave out --no-token (the dashboard makes one), or serve on 127.0.0.1');
  }
  if (!noToken && !token) token = newToken();
  if (noToken) token = null;
  let jobs = source;
  if (!jobs && memory) jobs = new MemorySource(sourceOptions);
  else if (!jobs) {
    jobs = new StoreSource({ storePath: store, ...sourceOptions });
    try {
      await jobs.refresh(); // the store answers before the page does
    } catch (err) {
      await jobs.close().catch(() => undefined);
      throw err;
    }
  }
  /** @type {Set<OpenStream>} */
  const streams = new Set(); // {jobId} of a page's stream, {mux} of a browser's: {end()} each
  /** @type {Map<string, Mux>} */
  const muxes = new Map(); // sid -> a browser's multiplexed stream
  let bound = port;

  // A browser sends a host's cookies to every port of it: one per port, so two dashboards
  // (two users, or two stores) do not take each other's.
  let cookieName = 'tb_token';

  /** @param {IncomingMessage} req */
  function allowedHost(req) {
    if (!isLoopback(host)) return true; // off loopback the token is the guard
    const h = String(req.headers.host || '').toLowerCase();
    return [`127.0.0.1:${bound}`, `localhost:${bound}`, `[::1]:${bound}`].includes(h);
  }

  /** A request with an Origin must come from this origin; `null` (a sandboxed frame, a file:) and malformed ones are refused. */
  /** @param {IncomingMessage} req */
  function allowedOrigin(req) {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    try {
      const o = new URL(origin);
      return o.protocol === 'http:' && o.host === String(req.headers.host || '').toLowerCase();
    } catch {
      return false;
    }
  }

  /** @param {IncomingMessage} req */
  function authorised(req) {
    if (!token) return true;
    const auth = String(req.headers.authorization || '');
    if (auth.startsWith('Bearer ') && sameToken(auth.slice(7), token)) return true;
    return sameToken(cookie(req, cookieName), token);
  }

  /** @param {IncomingMessage} req @param {ServerResponse} res */
  async function route(req, res) {
    for (const [name, value] of Object.entries(SAFE_HEADERS)) res.setHeader(name, value);
    const url = new URL(/** @type {string} */ (req.url), 'http://dashboard'); // a server's request has its url
    if (!allowedHost(req)) throw new HttpError(421, `this dashboard answers only to 127.0.0.1:${bound} or localhost:${bound}`);
    if (!allowedOrigin(req)) throw new HttpError(403, `request from origin ${JSON.stringify(req.headers.origin)} refused: only this dashboard's own pages may call it`);
    if (token && req.method === 'GET' && url.pathname === '/' && url.searchParams.has('token')) {
      if (!sameToken(url.searchParams.get('token'), token)) throw new HttpError(401, 'wrong token: open the address the dashboard printed');
      res.writeHead(303, { Location: '/', 'Set-Cookie': `${cookieName}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/` });
      res.end();
      return;
    }
    if (!authorised(req)) {
      if (req.method === 'GET' && url.pathname === '/') {
        res.writeHead(401, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(LOGIN_PAGE);
        return;
      }
      throw new HttpError(401, 'a token is needed: open the address the dashboard printed (it ends with ?token=...) or send Authorization: Bearer ...');
    }
    if (req.method === 'POST' && !String(req.headers['content-type'] || '').startsWith('application/json')) {
      throw new HttpError(415, 'POST bodies must be application/json');
    }
    const p = url.pathname;
    if (p === '/favicon.ico') {
      res.writeHead(204);
      res.end();
      return;
    }
    if (req.method === 'GET' && STATIC[p]) {
      const [file, type] = STATIC[p];
      res.writeHead(200, { 'Content-Type': type, 'Cache-Control': 'no-cache' });
      fs.createReadStream(file).pipe(res);
      return;
    }
    if (p === '/api/jobs' && req.method === 'GET') return sendJSON(res, 200, jobs.list());
    if (p === '/api/jobs' && req.method === 'POST') {
      const spec = await readBody(req);
      try {
        return sendJSON(res, 201, { id: await jobs.submit(spec) });
      } catch (err) {
        if (err instanceof SpecError) throw new HttpError(400, err.message);
        throw err;
      }
    }
    if (p === '/api/stream' && req.method === 'GET') return pageStream(req, res, p);
    if (p === '/api/mux' && req.method === 'GET') return muxStream(req, res);
    const mx = /^\/api\/mux\/([0-9a-f]{32})$/.exec(p);
    if (mx && req.method === 'POST') return sendJSON(res, 200, muxChange(mx[1], await readBody(req)));
    if (p === '/api/queue' && req.method === 'GET') return sendJSON(res, 200, { queue: await jobs.queue() });
    if (p === '/api/queue' && req.method === 'POST') {
      const { paused } = await readBody(req);
      if (typeof paused !== 'boolean') throw new HttpError(400, 'send {"paused": true} to pause the queue, {"paused": false} to resume it');
      try {
        await (paused ? jobs.pause() : jobs.resume());
      } catch (err) {
        if (err instanceof NoQueueError) throw new HttpError(409, err.message);
        throw err;
      }
      return sendJSON(res, 200, { queue: jobs.queueState() });
    }
    const a = /^\/api\/jobs\/([A-Za-z0-9_.-]+)\/artifacts\/(\d+)$/.exec(p);
    if (a && req.method === 'GET') return sendArtifact(res, a[1], Number(a[2]));
    const m = /^\/api\/jobs\/([A-Za-z0-9_.-]+)(?:\/(stream|report|log|cancel|stacks|rerun|forget))?$/.exec(p);
    if (!m) throw new HttpError(404, `no such page: ${p}`);
    const [, id, what] = m;
    const view = jobs.get(id);
    if (!view) throw new HttpError(404, `no job ${id} (the dashboard lists the jobs it knows at /)`);
    // cursor null: a message, never null
    if (req.method === 'GET' && !what) return sendJSON(res, 200, withNow(/** @type {Delta} */ (model.delta(view, null).message)));
    if (req.method === 'GET' && what === 'stream') return pageStream(req, res, p);
    if (req.method === 'GET' && what === 'report') {
      const report = jobs.report(id);
      if (!report) throw new HttpError(409, `job ${id} has not ended yet: its report comes when it does`);
      return sendJSON(res, 200, toJSON(report, 2));
    }
    if (req.method === 'GET' && what === 'log') return sendLog(res, id);
    if (req.method === 'POST' && what === 'cancel') {
      if (view.state === 'ended') throw new HttpError(409, `job ${id} has already ended (${view.outcome})`);
      // The page sees the end through its stream; a failure is written where the server's user sees it.
      jobs.cancel(id).catch((/** @type {Error} */ err) => process.stderr.write(`[dashboard] cancel ${id} failed: ${err.message}\n`));
      return sendJSON(res, 202, { id, cancelling: true });
    }
    if (req.method === 'POST' && what === 'rerun') {
      if (view.state !== 'ended') throw new HttpError(409, `job ${id} has not ended: re-run it once it has (or cancel it)`);
      return sendJSON(res, 201, { id: await jobs.rerun(id) });
    }
    if (req.method === 'POST' && what === 'forget') {
      // Deleting takes its files too: the page asks first, and the request must say so.
      const { confirm } = await readBody(req);
      if (confirm !== true) throw new HttpError(400, `deleting job ${id} removes its log and report: send {"confirm": true}`);
      if (view.state !== 'ended') throw new HttpError(409, `job ${id} is ${view.state}: cancel it before deleting it`);
      await jobs.forget(id);
      return sendJSON(res, 200, { id, deleted: true });
    }
    if (req.method === 'POST' && what === 'stacks') {
      if (view.state === 'ended') throw new HttpError(409, `job ${id} has ended: its last stacks are in the report`);
      const stacks = await jobs.dumpStacks(id);
      return sendJSON(res, 200, { id, stacks });
    }
    throw new HttpError(405, `${req.method} is not allowed on ${p}`);
  }

  /**
   * A file the job said it made (an `artifact`), by its number in the job's list: only those,
   * never a path from the request. Images are shown in the page; the rest is a download.
   * @param {ServerResponse} res
   * @param {string} id
   * @param {number} n
   */
  function sendArtifact(res, id, n) {
    const view = jobs.get(id);
    if (!view) throw new HttpError(404, `no job ${id} (the dashboard lists the jobs it knows at /)`);
    const entry = (view.artifacts || [])[n];
    if (!entry) throw new HttpError(404, `job ${id} has no file ${n}: it said ${(view.artifacts || []).length}`);
    let stat;
    try {
      stat = fs.statSync(entry.path);
    } catch (err) {
      throw new HttpError(410, `${entry.path} is gone (${/** @type {NodeJS.ErrnoException} */ (err).code}): the job, or someone, removed or moved it`);
    }
    if (!stat.isFile()) throw new HttpError(409, `${entry.path} is a directory (save_pretrained's): open it on the machine`);
    const ext = path.extname(entry.path).toLowerCase();
    const type = IMAGE_TYPES[ext];
    const name = path.basename(entry.path).replace(/[^\x20-\x7e]|["\\]/g, '_');
    res.writeHead(200, { 'Content-Type': type || 'application/octet-stream', 'Content-Length': stat.size, 'Cache-Control': 'no-store',
      'Content-Disposition': `${type ? 'inline' : 'attachment'}; filename="${name}"` });
    if (stat.size === 0) res.end(''); // (end: 0 would read a byte written since)
    else fs.createReadStream(entry.path, { start: 0, end: stat.size - 1 }).pipe(res);
  }

  /** @param {ServerResponse} res @param {string} id */
  function sendLog(res, id) {
    const file = jobs.logPath(id);
    let stat = null;
    try { stat = file && fs.statSync(file); } catch { stat = null; }
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store',
      'Content-Disposition': `attachment; filename="${id}.log"`, ...(stat ? { 'Content-Length': stat.size } : {}) });
    if (!stat || stat.size === 0) {
      res.end('');
      return;
    }
    // Up to the size seen now: the job may still be writing. (`end` is inclusive: with an empty
    // file, end 0 read one byte the job wrote since, past the Content-Length of 0, and a client
    // that kept the connection read it as the start of its next answer.)
    fs.createReadStream(file, { start: 0, end: stat.size - 1 }).pipe(res);
  }

  // A topic is what one page watches: a job (its view's deltas, from a snapshot) or the list.
  // It writes to a channel, {send(event, data)}, and returns how to stop: the channel is an
  // SSE stream of its own (one per page) or a part of a browser's multiplexed stream (/api/mux).
  /** @param {Channel} channel @param {string} id */
  function watchJob(channel, id) {
    /** @type {import('./model.js').Cursor | null} */
    let cursor = null;
    /** @type {NodeJS.Timeout | null} */
    let timer = null;
    const flush = () => {
      timer = null;
      const view = jobs.get(id);
      if (!view) return;
      const d = model.delta(view, cursor);
      cursor = d.cursor;
      if (d.message) channel.send('update', withNow(d.message));
    };
    flush();
    const detach = jobs.attach(id, () => { if (!timer) timer = setTimeout(flush, FLUSH_MS); });
    return () => { if (detach) detach(); if (timer) clearTimeout(timer); };
  }

  /** @param {Channel} channel */
  function watchList(channel) {
    /** @type {NodeJS.Timeout | null} */
    let timer = null;
    const flush = () => {
      timer = null;
      channel.send('jobs', jobs.list());
      channel.send('queue', { queue: jobs.queueState() });
    };
    flush();
    const unwatch = jobs.watch(() => { if (!timer) timer = setTimeout(flush, LIST_FLUSH_MS); });
    return () => { unwatch(); if (timer) clearTimeout(timer); };
  }

  /**
   * The topic a page's stream address names: [jobId or null, start(channel) -> stop].
   * @param {string} address
   * @returns {[string | null, (channel: Channel) => () => void]}
   */
  function topic(address) {
    if (address === '/api/stream') return [null, watchList];
    const m = /^\/api\/jobs\/([A-Za-z0-9_.-]+)\/stream$/.exec(address);
    if (!m) throw new HttpError(400, `${JSON.stringify(address)} is not a stream: /api/stream or /api/jobs/<id>/stream`);
    if (!jobs.get(m[1])) throw new HttpError(404, `no job ${m[1]} (the dashboard lists the jobs it knows at /)`);
    return [m[1], (channel) => watchJob(channel, m[1])];
  }

  /**
   * One page's own stream (a browser without SharedWorker, a script).
   * @param {IncomingMessage} req
   * @param {ServerResponse} res
   * @param {string} address
   */
  function pageStream(req, res, address) {
    const [jobId, start] = topic(address);
    const stream = sse(req, res);
    stream.onClose(start(stream));
    const entry = { jobId, end: () => res.end() };
    streams.add(entry);
    stream.onClose(() => streams.delete(entry));
  }

  /**
   * A browser's one stream for all its tabs (public/mux.js, a SharedWorker, holds it): a
   * browser gives a host six HTTP/1.1 connections, and a stream per tab spent them. It starts
   * with `mux {sid}`; POST /api/mux/<sid> {watch: {key: address}, unwatch: [key]} changes
   * what it carries; each message is `m {key, event, data}`, a watched topic's own event.
   * @param {IncomingMessage} req
   * @param {ServerResponse} res
   */
  function muxStream(req, res) {
    const stream = sse(req, res);
    const sid = crypto.randomBytes(16).toString('hex');
    /** @type {Mux} */
    const mux = { stream, watched: new Map() }; // key -> {jobId, stop}
    muxes.set(sid, mux);
    const entry = { mux, end: () => res.end() };
    streams.add(entry);
    stream.onClose(() => {
      muxes.delete(sid);
      streams.delete(entry);
      for (const w of mux.watched.values()) w.stop();
      mux.watched.clear();
    });
    stream.send('mux', { sid });
  }

  /** @param {string} sid @param {{watch?: unknown, unwatch?: unknown}} body as parsed: checked here */
  function muxChange(sid, { watch = {}, unwatch = [] }) {
    const mux = muxes.get(sid);
    if (!mux) throw new HttpError(404, `no stream ${sid}: it closed; open /api/mux again`);
    if (typeof watch !== 'object' || watch === null || Array.isArray(watch) || !Array.isArray(unwatch)) {
      throw new HttpError(400, 'send {"watch": {"<key>": "/api/jobs/<id>/stream"}, "unwatch": ["<key>"]}');
    }
    /** @type {Record<string, {status: number, error: string}>} */
    const refused = {};
    for (const key of unwatch) {
      const w = mux.watched.get(String(key));
      if (w) { w.stop(); mux.watched.delete(String(key)); }
    }
    for (const [key, address] of Object.entries(watch)) {
      if (mux.watched.has(key)) /** @type {Watched} */ (mux.watched.get(key)).stop(); // watched again: from a snapshot
      try {
        const [jobId, start] = topic(String(address));
        mux.watched.set(key, { jobId, stop: start({ send: (event, data) => mux.stream.send('m', { key, event, data }) }) });
      } catch (err) {
        if (!(err instanceof HttpError)) throw err;
        mux.watched.delete(key);
        refused[key] = { status: err.status, error: err.message };
      }
    }
    return { watching: mux.watched.size, refused };
  }

  const server = http.createServer({
    // A kept-alive connection the server closes just as a client reuses it is reset under
    // that request (a submit's POST, which no client retries; hunt run 2 on 34a0797). Idle
    // ones are kept longer than clients keep them (Node's default was 5 s).
    keepAliveTimeout: 65000,
    headersTimeout: 66000,
  }, (req, res) => {
    route(req, res).catch((err) => {
      const status = err.status || 500;
      if (status === 500) process.stderr.write(`[dashboard] ${req.method} ${/** @type {string} */ (req.url).split('?')[0]}: ${err.stack}\n`);
      if (res.headersSent) res.end();
      else sendJSON(res, status, { error: String(err.message) });
    });
  });
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve(undefined));
    });
  } catch (err) {
    if (!source) await jobs.close().catch(() => undefined); // e.g. the port is taken
    throw err;
  }
  bound = /** @type {import('node:net').AddressInfo} */ (server.address()).port;
  cookieName = `tb_token_${bound}`;
  const shown = host.includes(':') ? `[${host}]` : host;
  const url = `http://${shown}:${bound}/`;
  return {
    url,
    loginUrl: token ? `${url}?token=${encodeURIComponent(token)}` : url,
    token,
    server,
    source: jobs,
    /** How many pages watch now: all, or one job's (a page's stream, or its part of a browser's). @param {string} [id] */
    openStreams: (id) => [...streams]
      .flatMap((e) => (e.mux ? [...e.mux.watched.values()] : /** @type {{jobId?: string | null}[]} */ ([e])))
      .filter((w) => id === undefined || w.jobId === id).length,
    /** How many event-stream connections are open now (a browser's shared one counts once). */
    openConnections: () => streams.size,
    async close({ keepSource = false } = {}) {
      for (const entry of streams) entry.end();
      const closed = new Promise((resolve) => server.close(resolve));
      // server.close() waits for every connection with a request in progress, and counts a
      // connection that has not sent one yet (a browser's preconnect) as such: it held a
      // dashboard's SIGTERM for a minute. Ending, we drop them all.
      server.closeAllConnections();
      await closed;
      if (!keepSource && !source) await jobs.close();
    },
  };
}

module.exports = { startDashboard, isLoopback };
