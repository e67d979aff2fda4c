'use strict';
// Host A of the two-host tests through the Node client (as twohost/driver.py): run in host
// A's network namespace, it supervises CMD... (torchrun, node 1 of 2), listening for host B's
// ranks on ADDRESS.  node driver.js ADDRESS CONFIG_JSON CMD...
// stdout: line 1 the JSON of job.remoteEnv(ADDRESS), then the JSON of the report.
const path = require('node:path');

const { launch } = require(path.resolve(__dirname, '..', '..', '..', 'node-client', 'src', 'index.js'));

async function main() {
  const [address, config, command, ...args] = process.argv.slice(2);
  const job = launch({ command, args, timeouts: JSON.parse(config) });
  process.stdout.write(`${JSON.stringify(await job.remoteEnv(address))}\n`);
  const report = await job.done;
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack}\n`);
  process.exit(1);
});
