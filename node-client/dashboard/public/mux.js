// The dashboard's one event stream per browser (a SharedWorker that every tab of this
// dashboard shares). A browser gives a host about six HTTP/1.1 connections; a stream per tab
// spent them all, and with six tabs open a submit waited forever. This worker holds one
// stream (GET /api/mux) and tells the server what its tabs watch (POST /api/mux/<sid>); each
// tab gets the messages of the topics it watches, as if it had its own stream (dom.js stream()).
//
// tab -> worker: {op: 'watch', key, address} | {op: 'unwatch', key} | {op: 'bye'}
// worker -> tab: {op: 'open', key} (live: a snapshot follows)
//                | {op: 'down', refused} (not answering; refused: 401 or 403 when the server
//                  answers but refuses this browser, e.g. restarted with another token)
//                | {op: 'm', key, event, data} (a topic's own event)
//                | {op: 'alive', every_ms} (the server's keep-alive: it still answers)

const tabs = new Map(); // port -> Map(key -> address)
let source = null; // the EventSource, while any tab watches anything
let sid = null; // the stream's id on the server, once it said so
const RETRY_MS = 3000; // a stream the browser gave up on is opened again this much later

function watched() {
  const all = {};
  for (const keys of tabs.values()) for (const [key, address] of keys) all[key] = address;
  return all;
}

function tell(change) {
  if (sid === null) return; // sent with everything when the stream (re)opens
  fetch(`/api/mux/${sid}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(change) })
    .catch(() => undefined); // the stream is down too: its reopening sends everything again
}

function broadcast(msg) {
  for (const port of tabs.keys()) port.postMessage(msg);
}

/**
 * Why a stream was refused: the status of a plain request (401: the token, 403: the address),
 * or null (not answering at all, or another failure). Its twin is dom.js refusal(): this
 * classic worker script cannot import the page's modules.
 */
async function refusal() {
  try {
    const { status } = await fetch('/api/queue', { cache: 'no-store' });
    return status === 401 || status === 403 ? status : null;
  } catch {
    return null;
  }
}

function connect() {
  const es = new EventSource('/api/mux');
  source = es;
  es.addEventListener('mux', (e) => {
    sid = JSON.parse(e.data).sid;
    for (const [port, keys] of tabs) for (const key of keys.keys()) port.postMessage({ op: 'open', key });
    tell({ watch: watched() });
  });
  es.addEventListener('m', (e) => {
    const msg = JSON.parse(e.data);
    for (const [port, keys] of tabs) if (keys.has(msg.key)) port.postMessage({ op: 'm', ...msg });
  });
  es.addEventListener('alive', (e) => broadcast({ op: 'alive', every_ms: JSON.parse(e.data).every_ms }));
  es.onerror = () => {
    sid = null;
    broadcast({ op: 'down', refused: null });
    if (es.readyState !== EventSource.CLOSED) return; // the browser tries again by itself
    // An answer that was no stream (a refusal, an error page): the browser gives up on it
    // for good. Say why to the tabs, and open it again while they watch.
    refusal().then((refused) => { if (refused && source === es) broadcast({ op: 'down', refused }); });
    setTimeout(() => {
      if (source !== es) return;
      source = null;
      if (Object.keys(watched()).length) connect();
    }, RETRY_MS);
  };
}

function disconnectWhenIdle() {
  for (const keys of tabs.values()) if (keys.size) return;
  if (source) source.close();
  source = null;
  sid = null;
}

// A SharedWorker's global (SharedWorkerGlobalScope): not in the DOM lib the page's scripts are checked with.
/** @type {any} */ (self).onconnect = (/** @type {MessageEvent} */ event) => {
  const port = event.ports[0];
  tabs.set(port, new Map());
  port.onmessage = ({ data }) => {
    let keys = tabs.get(port);
    if (!keys) { // said bye, then came back (the back button's page cache)
      if (data.op !== 'watch') return;
      keys = new Map();
      tabs.set(port, keys);
    }
    if (data.op === 'watch') {
      keys.set(data.key, data.address);
      if (!source) connect();
      else if (sid !== null) {
        port.postMessage({ op: 'open', key: data.key });
        tell({ watch: { [data.key]: data.address } });
      }
    } else if (data.op === 'unwatch') {
      if (keys.delete(data.key)) tell({ unwatch: [data.key] });
      disconnectWhenIdle();
    } else if (data.op === 'bye') {
      tabs.delete(port);
      if (keys.size) tell({ unwatch: [...keys.keys()] });
      disconnectWhenIdle();
    }
  };
  port.start();
};
