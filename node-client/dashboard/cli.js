#!/usr/bin/env node
'use strict';
/**
 * `npx trainbridge-dashboard` (the package's bin, in a project that installed it) or
 * `npm run dashboard --` (in the checkout): serve the dashboard (server.js) over the job
 * store, or in memory. The store's helper runs under $TRAINBRIDGE_PYTHON (else the active venv's
 * Python, else python3): pyzmq and msgpack are all it needs.
 *
 *   npm run dashboard                          # http://127.0.0.1:8765/?token=..., jobs in the default store
 *   npm run dashboard -- --port 9000 --store ./jobs.db
 *   npm run dashboard -- --memory              # jobs run inside this process and end with it
 *   npm run dashboard -- --host 0.0.0.0        # other interfaces: the same token guards them
 *
 * The token (token.js) is never an argument: every account on the machine reads argv in `ps`.
 */

const path = require('node:path');
const { startDashboard } = require('./server.js');
const { loadToken } = require('./token.js');
const { MemorySource } = require('./source.js');
const { StoreSource } = require('./store_source.js');

/**
 * The command line as read: each path resolved; help when -h or --help was given.
 * @typedef {{host: string, port: number, tokenFile: string | null, noToken: boolean, dataDir: string | null,
 *   store: string | undefined, memory: boolean, help?: boolean}} Args
 */

/**
 * @param {string[]} argv
 * @returns {Args}
 */
function parseArgs(argv) {
  /** @type {Args} */
  const out = { host: '127.0.0.1', port: 8765, tokenFile: null, noToken: false, dataDir: null, store: undefined, memory: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--host') out.host = value();
    else if (a === '--port') {
      out.port = Number(value());
      if (!Number.isInteger(out.port) || out.port < 0 || out.port > 65535) throw new Error(`--port takes 0..65535, not ${argv[i]}`);
    } else if (a === '--token' || a.startsWith('--token=')) {
      throw new Error('--token would show the token to every account on this machine (`ps` lists arguments): '
        + 'set $TRAINBRIDGE_DASHBOARD_TOKEN or give --token-file FILE (a file only you can read)');
    } else if (a === '--token-file') out.tokenFile = path.resolve(value());
    else if (a === '--no-token') out.noToken = true;
    else if (a === '--data-dir') out.dataDir = path.resolve(value());
    else if (a === '--store') out.store = path.resolve(value());
    else if (a === '--memory') out.memory = true;
    else if (a === '-h' || a === '--help') out.help = true;
    else throw new Error(`unknown option ${a} (options: --host, --port, --token-file, --no-token, --store, --memory, --data-dir)`);
  }
  if (out.noToken && out.tokenFile) throw new Error('--no-token and --token-file go against each other: give one');
  return out;
}

async function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`trainbridge dashboard: ${/** @type {Error} */ (err).message}\n`);
    process.exitCode = 2;
    return;
  }
  if (args.help) {
    process.stdout.write([
      'usage: trainbridge-dashboard [--host 127.0.0.1] [--port 8765] [--token-file FILE | --no-token] [--store FILE | --memory [--data-dir DIR]]',
      '  --store FILE       the job store (default: $TRAINBRIDGE_STORE, else the per-user one): jobs outlive the dashboard',
      '  --memory           run jobs inside the dashboard instead (they end with it); logs in --data-dir',
      '  --token-file FILE  the token every request needs (default: $TRAINBRIDGE_DASHBOARD_TOKEN, else',
      '                     ~/.config/trainbridge/dashboard-token, made on first use, mode 0600)',
      '  --no-token         no token (loopback only): every account on this machine can then run commands as you',
      '',
    ].join('\n'));
    return;
  }
  let dash;
  let sourceToClose = null;
  let tokenSource = null;
  try {
    // The job store by default (jobs outlive the dashboard); --memory runs them in this process.
    /** @type {{token?: string, noToken?: boolean, source: string | null}} */
    const auth = args.noToken ? { noToken: true, source: null } : loadToken({ file: args.tokenFile });
    /** @type {any} MemorySource or StoreSource (refresh() and path: the store's only) */
    const source = args.memory ? new MemorySource(args.dataDir ? { dataDir: args.dataDir } : {})
      : new StoreSource({ storePath: args.store });
    sourceToClose = source;
    if (source.refresh) await source.refresh(); // the store answers before the page does
    dash = await startDashboard({ host: args.host, port: args.port, token: auth.token, noToken: auth.noToken, source });
    tokenSource = auth.source;
  } catch (err) {
    process.stderr.write(`trainbridge dashboard: ${/** @type {Error} */ (err).message}\n`);
    if (sourceToClose) await sourceToClose.close().catch(() => undefined);
    process.exitCode = 2;
    return;
  }
  const where = sourceToClose.path ? `jobs in ${sourceToClose.path}` : 'jobs run inside this process and end with it';
  // One address to open: it carries the token, which the page trades for a cookie.
  process.stdout.write(`trainbridge dashboard: ${dash.loginUrl} (${where})\n`);
  if (tokenSource) process.stdout.write(`trainbridge dashboard: the token is in ${tokenSource}; every request needs it\n`);
  else {
    process.stderr.write('trainbridge dashboard: warning: --no-token: every account on this machine can list, start, '
      + 'cancel and read your jobs through this port, and run commands as you\n');
  }
  let stopping = false;
  /** @param {string} signal */
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`trainbridge dashboard: ${signal}, stopping${sourceToClose.path ? ' (the jobs go on)' : ' and cancelling running jobs'}\n`);
    await dash.close();
    await sourceToClose.close();
    process.exit(0);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}


if (require.main === module) main();

module.exports = { parseArgs };
