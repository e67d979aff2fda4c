// Small helpers of the dashboard's page: DOM building, formatting, requests, streams.

const conn = document.getElementById('conn');

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}
export const seconds = (s) => {
  if (s === null || s === undefined) return '';
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 120) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  return m < 120 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
};
/** The colours of a chart's series, in order. */
export const COLORS = ['#0969da', '#bc4c00', '#1a7f37', '#8250df', '#cf222e', '#57606a'];
/**
 * An axis tick as people write it: a learning rate's 3e-4 is not "0" (uPlot's default). On a
 * log axis uPlot keeps every tick but labels only some (1, 10, 100 ...): the others come as
 * null and are drawn as nothing, as uPlot's own formatter does (they said "null").
 */
export const tickText = (v) => (v === null || v === undefined ? '' : v === 0 ? '0'
  : Math.abs(v) < 0.01 || Math.abs(v) >= 1e5 ? Number(v.toPrecision(3)).toExponential() : String(Number(v.toPrecision(3))));
/**
 * A value in a chart's legend (shown while hovering): uPlot's own keeps three decimals, so a
 * learning rate of 3e-4 read "0", and writes 2979 as "2,979". Six significant digits, small
 * and huge ones as 3e-4.
 */
export const valueText = (v) => (v === null || v === undefined ? '--' : v !== 0 && (Math.abs(v) < 0.01 || Math.abs(v) >= 1e6)
  ? Number(v.toPrecision(4)).toExponential() : String(Number(v.toPrecision(6))));
export const shown = (head) => (head.state === 'ended' ? head.outcome : head.state);
export const badgeClass = (word) => `badge s-${word}`;

export async function post(url, body) {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body || {}) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || `${res.status} ${res.statusText}`);
  return data;
}

/**
 * While the server does not answer, what the page shows is not the truth any more: the page is
 * marked stale (greyed by body.stale), a banner says since when, every enabled button in it is
 * disabled and every link to the server (the log, the report, a file) is taken off (marked
 * aria-disabled, its address kept aside), all given back once the stream is back: the page's
 * own rendering then decides. Connection state is part of what the page says, not a grey
 * word in a corner.
 *
 * Two ways to know: the stream breaks (the server died: at once), or it stays open and says
 * nothing, not even its keep-alive (`alive {every_ms}`, server.js): after SILENT_PERIODS of
 * them the server is called not answering, and its next word makes the page live again.
 */
const banner = document.getElementById('stale-banner');
const SILENT_PERIODS = 3;
let keepAliveMs = 2000; // the server says its period in each `alive`
// When the last message of any stream came, on the monotonic clock: the silence is judged by
// it, so a wall clock set forward (NTP, a laptop waking) is no silence.
let heardAt = performance.now();
let staleTimer = null;
let silent = false; // stale because nothing came, on an open stream (not because it broke)
let watchingStreams = 0; // streams this page has open (the watchdog only watches those)
let refused = null; // 401 or 403 while the server answers but refuses this browser
/** The stale banner's words: why, and since when. */
function sayStale() {
  const ago = Math.round((performance.now() - heardAt) / 1000);
  banner.textContent = refused === 401
    ? `The dashboard server answers but no longer takes this browser's sign-in (HTTP 401: restarted with another token?): `
      + `open the address it printed (the one with ?token=), and this page comes back by itself. What you see is from ${ago} s ago.`
    : refused === 403
      ? `The dashboard server refuses this page's address (HTTP 403): open it as the server printed it (127.0.0.1 or localhost). What you see is from ${ago} s ago.`
      : `The dashboard server is not answering (trying again): what you see is from ${ago} s ago, `
        + 'and the buttons are off until it answers. The jobs go on under their keepers.';
}
function markStale(stale) {
  if (stale === document.body.classList.contains('stale')) return;
  document.body.classList.toggle('stale', stale);
  banner.hidden = !stale;
  if (stale) {
    document.body.dataset.staleSince = String(Date.now());
    document.body.dataset.silentMs = String(Math.round(performance.now() - heardAt)); // what the page judged by
    for (const b of /** @type {NodeListOf<HTMLButtonElement>} */ (document.querySelectorAll('main button:not([disabled])'))) { b.disabled = true; b.dataset.staleOff = '1'; }
    for (const a of /** @type {NodeListOf<HTMLAnchorElement>} */ (document.querySelectorAll('main a[href^="/api/"]'))) {
      a.dataset.staleHref = a.getAttribute('href');
      a.removeAttribute('href'); // an <a> without an address is no link: not clickable, not focusable
      a.setAttribute('aria-disabled', 'true');
    }
    sayStale();
    staleTimer = setInterval(sayStale, 1000);
  } else {
    silent = false;
    delete document.body.dataset.staleSince;
    delete document.body.dataset.silentMs;
    clearInterval(staleTimer);
    for (const b of /** @type {NodeListOf<HTMLButtonElement>} */ (document.querySelectorAll('main button[data-stale-off]'))) { b.disabled = false; delete b.dataset.staleOff; }
    for (const a of /** @type {NodeListOf<HTMLAnchorElement>} */ (document.querySelectorAll('main a[data-stale-href]'))) {
      a.setAttribute('href', a.dataset.staleHref);
      delete a.dataset.staleHref;
      a.removeAttribute('aria-disabled');
    }
  }
}
/** Anything from the server: the keep-alive or a topic's message. */
function heard() {
  heardAt = performance.now();
  if (silent) { conn.textContent = 'live'; markStale(false); }
}
function heardAlive(everyMs) {
  if (everyMs > 0) keepAliveMs = everyMs;
  heard();
}
setInterval(() => {
  if (!watchingStreams || silent || document.body.classList.contains('stale')) return;
  if (performance.now() - heardAt > SILENT_PERIODS * keepAliveMs) {
    conn.textContent = 'not answering';
    markStale(true);
    silent = true;
  }
}, 250);

const RETRY_MS = 3000; // a stream the browser gave up on is opened again this much later

/** Why the server refuses this browser: 401 (the token), 403 (the address), or null (mux.js has its twin). */
async function refusal() {
  try {
    const { status } = await fetch('/api/queue', { cache: 'no-store' });
    return status === 401 || status === 403 ? status : null;
  } catch {
    return null;
  }
}

/**
 * A topic's events (the list: /api/stream; a job: /api/jobs/<id>/stream), given to
 * handlers[event](data); handlers.open() when it is live (a snapshot follows). Every tab of
 * this dashboard shares one connection (mux.js, a SharedWorker): a browser gives a host about
 * six HTTP/1.1 connections, and a stream per tab spent them. Without SharedWorker, a stream of
 * its own. A hidden tab lets go of its topic and takes a fresh snapshot when shown again.
 */
export function stream(address, handlers) {
  const shared = muxPort();
  const key = `${tabId}-${++keys}`;
  let watching = false;
  let es = null;
  const live = () => { heardAt = performance.now(); refused = null; conn.textContent = 'live'; markStale(false); if (handlers.open) handlers.open(); };
  const down = (why = null) => {
    refused = why;
    conn.textContent = why ? 'refused: sign in again' : 'reconnecting…';
    markStale(true);
    sayStale(); // already stale: the reason may be new
    silent = false;
  };
  const deliver = (name, data) => { heard(); if (name !== 'open' && handlers[name]) handlers[name](data); };
  const connect = () => {
    if (shared) {
      subscribers.set(key, { address, live, down, deliver });
      shared.postMessage({ op: 'watch', key, address });
    } else {
      const own = new EventSource(address);
      es = own;
      es.onopen = live;
      es.onerror = () => {
        down();
        if (own.readyState !== EventSource.CLOSED) return; // the browser tries again by itself
        // An answer that was no stream (a refusal, an error page): given up on for good by
        // the browser. Say why, and open it again (as mux.js does for shared streams).
        refusal().then((why) => { if (why && es === own) down(why); });
        setTimeout(() => { if (es === own) { disconnect(); connect(); } }, RETRY_MS);
      };
      es.addEventListener('alive', (e) => heardAlive(JSON.parse(e.data).every_ms));
      for (const name of Object.keys(handlers)) {
        if (name !== 'open') es.addEventListener(name, (e) => deliver(name, JSON.parse(e.data)));
      }
    }
    watching = true;
    watchingStreams++;
    heardAt = Math.max(heardAt, performance.now() - keepAliveMs); // a new stream has its own periods to answer in
  };
  const disconnect = () => {
    if (!watching) return;
    if (shared) {
      subscribers.delete(key);
      shared.postMessage({ op: 'unwatch', key });
    } else {
      es.close();
      es = null;
    }
    watching = false;
    watchingStreams--;
  };
  const onVisibility = () => {
    if (document.hidden && watching) { disconnect(); conn.textContent = 'paused (tab hidden)'; }
    else if (!document.hidden && !watching) connect();
  };
  document.addEventListener('visibilitychange', onVisibility);
  if (!document.hidden) connect();
  return () => {
    document.removeEventListener('visibilitychange', onVisibility);
    disconnect();
    markStale(false); // the next page opens its own stream
  };
}

// The shared connection's port (null: this browser has no SharedWorker), and what this tab
// watches through it: key -> {live, down, deliver}.
const tabId = Math.random().toString(36).slice(2);
let keys = 0;
let port;
const subscribers = new Map();
function muxPort() {
  if (port !== undefined) return port;
  port = null;
  if (typeof SharedWorker !== 'function') return port;
  try {
    port = new SharedWorker('/mux.js', { name: 'trainbridge-stream' }).port;
  } catch {
    return port; // refused (a privacy mode): a stream of its own
  }
  port.onmessage = ({ data }) => {
    if (data.op === 'down') {
      for (const s of subscribers.values()) s.down(data.refused || null);
      return;
    }
    if (data.op === 'alive') { heardAlive(data.every_ms); return; }
    const s = subscribers.get(data.key);
    if (!s) return; // let go of already
    if (data.op === 'open') s.live();
    else if (data.op === 'm') s.deliver(data.event, data.data);
  };
  port.start();
  window.addEventListener('pagehide', () => port.postMessage({ op: 'bye' }));
  window.addEventListener('pageshow', (e) => { // back from the page cache: watch again
    if (e.persisted) for (const [key, s] of subscribers) port.postMessage({ op: 'watch', key, address: s.address });
  });
  return port;
}

/** Split a command line as a POSIX shell would for words and quotes (no expansions). */
export function splitCommand(line) {
  const out = [];
  let word = null;
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
    } else if (c === '"' || c === "'") { quote = c; word = word ?? ''; }
    else if (c === '\\' && i + 1 < line.length) word = (word ?? '') + line[++i];
    else if (/\s/.test(c)) { if (word !== null) out.push(word); word = null; }
    else word = (word ?? '') + c;
  }
  if (quote) throw new Error(`unclosed ${quote} in the command`);
  if (word !== null) out.push(word);
  return out;
}

