#!/usr/bin/env node
'use strict';
/**
 * `npm run dashboard`: serve the dashboard (server.js) over the job store, or in memory.
 *
 *   npm run dashboard                          # http://127.0.0.1:8765/, jobs in the default store
 *   npm run dashboard -- --port 9000 --store ./jobs.db
 *   npm run dashboard -- --memory              # jobs run inside this process and end with it
 *   npm run dashboard -- --host 0.0.0.0 --token SECRET   # other interfaces need a token
 */

const path = require('node:path');
const { startDashboard } = require('./server.js');
const { MemorySource } = require('./source.js');
const { StoreSource } = require('./store_source.js');

function parseArgs(argv) {
  const out = { host: '127.0.0.1', port: 8765, token: process.env.TRAINBRIDGE_DASHBOARD_TOKEN || null, dataDir: null,
    store: undefined, memory: false };
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
    } else if (a === '--token') out.token = value();
    else if (a === '--data-dir') out.dataDir = path.resolve(value());
    else if (a === '--store') out.store = path.resolve(value());
    else if (a === '--memory') out.memory = true;
    else if (a === '-h' || a === '--help') out.help = true;
    else throw new Error(`unknown option ${a} (options: --host, --port, --token, --store, --memory, --data-dir)`);
  }
  return out;
}

async function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`trainbridge dashboard: ${err.message}\n`);
    process.exitCode = 2;
    return;
  }
  if (args.help) {
    process.stdout.write([
      'usage: npm run dashboard -- [--host 127.0.0.1] [--port 8765] [--token SECRET] [--store FILE | --memory [--data-dir DIR]]',
      '  --store FILE  the job store (default: $TRAINBRIDGE_STORE, else the per-user one): jobs outlive the dashboard',
      '  --memory      run jobs inside the dashboard instead (they end with it); logs in --data-dir',
      '',
    ].join('\n'));
    return;
  }
  let dash;
  let sourceToClose = null;
  try {
    // The job store by default (jobs outlive the dashboard); --memory runs them in this process.
    const source = args.memory ? new MemorySource(args.dataDir ? { dataDir: args.dataDir } : {})
      : new StoreSource({ storePath: args.store });
    sourceToClose = source;
    if (source.refresh) await source.refresh(); // the store answers before the page does
    dash = await startDashboard({ host: args.host, port: args.port, token: args.token, source });
  } catch (err) {
    process.stderr.write(`trainbridge dashboard: ${err.message}\n`);
    if (sourceToClose) await sourceToClose.close().catch(() => undefined);
    process.exitCode = 2;
    return;
  }
  const where = sourceToClose.path ? `jobs in ${sourceToClose.path}` : 'jobs run inside this process and end with it';
  process.stdout.write(`trainbridge dashboard: ${dash.url} (${where})${args.token ? ' (token required)' : ''}\n`);
  let stopping = false;
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
