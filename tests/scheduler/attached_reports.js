// The report Node's openStore(STORE).attach(ID).done gives for ended jobs, for Python's tests to
// compare with the one an attached Python job got (one Report per job, whatever the face).
//   node attached_reports.js STORE PYTHON ID...   one JSON object {id: report}
//   node attached_reports.js --serve STORE PYTHON one id per stdin line, one JSON report per
//                                                 stdout line (a store opened once for many jobs)
'use strict';
const path = require('path');
const readline = require('readline');
const { openStore } = require(path.join(__dirname, '..', '..', 'node-client', 'src', 'index.js'));

async function main(argv) {
  const serve = argv[0] === '--serve';
  const [store, python, ...ids] = serve ? argv.slice(1) : argv;
  const handle = openStore(store, { python });
  try {
    if (!serve) {
      const out = {};
      for (const id of ids) out[id] = await handle.attach(id).done;
      process.stdout.write(JSON.stringify(out));
      return;
    }
    for await (const line of readline.createInterface({ input: process.stdin })) {
      const report = await handle.attach(line.trim()).done;
      process.stdout.write(`${JSON.stringify(report)}\n`);
    }
  } finally {
    await handle.close();
  }
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
