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
 * marked stale (greyed by body.stale), a banner says since when, and every enabled button in
 * it is disabled (and enabled again once the stream is back: the page's own rendering then
 * decides). Connection state is part of what the page says, not a grey word in a corner.
 */
const banner = document.getElementById('stale-banner');
let heardAt = Date.now(); // the last message of any stream
let staleTimer = null;
function markStale(stale) {
  if (stale === document.body.classList.contains('stale')) return;
  document.body.classList.toggle('stale', stale);
  banner.hidden = !stale;
  if (stale) {
    for (const b of document.querySelectorAll('main button:not([disabled])')) { b.disabled = true; b.dataset.staleOff = '1'; }
    const say = () => {
      const ago = Math.round((Date.now() - heardAt) / 1000);
      banner.textContent = `The dashboard server is not answering (trying again): what you see is from ${ago} s ago, `
        + 'and the buttons are off until it answers. The jobs go on under their keepers.';
    };
    say();
    staleTimer = setInterval(say, 1000);
  } else {
    clearInterval(staleTimer);
    for (const b of document.querySelectorAll('main button[data-stale-off]')) { b.disabled = false; delete b.dataset.staleOff; }
  }
}

/**
 * A Server-Sent Events stream that a hidden tab lets go of: a browser gives each host about
 * six HTTP/1.1 connections, and every open stream holds one, so background tabs must not
 * starve the one in front. Opened again (from a fresh snapshot) when the tab shows.
 */
export function stream(url, handlers) {
  let es = null;
  const connect = () => {
    es = new EventSource(url);
    es.onopen = () => { conn.textContent = 'live'; markStale(false); if (handlers.open) handlers.open(); };
    es.onerror = () => { conn.textContent = 'reconnecting…'; markStale(true); };
    for (const [name, fn] of Object.entries(handlers)) {
      if (name !== 'open') es.addEventListener(name, (e) => { heardAt = Date.now(); fn(JSON.parse(e.data)); });
    }
  };
  const onVisibility = () => {
    if (document.hidden && es) { es.close(); es = null; conn.textContent = 'paused (tab hidden)'; }
    else if (!document.hidden && !es) connect();
  };
  document.addEventListener('visibilitychange', onVisibility);
  if (!document.hidden) connect();
  return () => {
    document.removeEventListener('visibilitychange', onVisibility);
    if (es) es.close();
    markStale(false); // the next page opens its own stream
  };
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

