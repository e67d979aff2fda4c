// The dashboard's one event stream per browser (a SharedWorker that every tab of this
// dashboard shares). A browser gives a host about six HTTP/1.1 connections; a stream per tab
// spent them all, and with six tabs open a submit waited forever. This worker holds one
// stream (GET /api/mux) and tells the server what its tabs watch (POST /api/mux/<sid>); each
// tab gets the messages of the topics it watches, as if it had its own stream (dom.js stream()).
//
// tab -> worker: {op: 'watch', key, address} | {op: 'unwatch', key} | {op: 'bye'}
// worker -> tab: {op: 'open', key} (live: a snapshot follows) | {op: 'down'} (not answering)
//                | {op: 'm', key, event, data} (a topic's own event)
//                | {op: 'alive', every_ms} (the server's keep-alive: it still answers)

const tabs = new Map(); // port -> Map(key -> address)
let source = null; // the EventSource, while any tab watches anything
let sid = null; // the stream's id on the server, once it said so

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

function connect() {
  source = new EventSource('/api/mux');
  source.addEventListener('mux', (e) => {
    sid = JSON.parse(e.data).sid;
    for (const [port, keys] of tabs) for (const key of keys.keys()) port.postMessage({ op: 'open', key });
    tell({ watch: watched() });
  });
  source.addEventListener('m', (e) => {
    const msg = JSON.parse(e.data);
    for (const [port, keys] of tabs) if (keys.has(msg.key)) port.postMessage({ op: 'm', ...msg });
  });
  source.addEventListener('alive', (e) => {
    const { every_ms } = JSON.parse(e.data);
    for (const port of tabs.keys()) port.postMessage({ op: 'alive', every_ms });
  });
  source.onerror = () => {
    sid = null;
    for (const port of tabs.keys()) port.postMessage({ op: 'down' });
  };
}

function disconnectWhenIdle() {
  for (const keys of tabs.values()) if (keys.size) return;
  if (source) source.close();
  source = null;
  sid = null;
}

self.onconnect = (event) => {
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
