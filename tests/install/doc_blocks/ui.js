// Prepended (doc-test marker `with ui.js`) to the JS blocks that report to a GUI's `ui`
// object: it counts the calls, and prints the count of each at exit.
const calls = {};
const ui = new Proxy({}, {
  get: (_, name) => (...args) => { calls[name] = (calls[name] || 0) + 1; return args; },
});
process.on('exit', () => console.log(`ui calls: ${JSON.stringify(calls)}`));
