'use strict';
/** `npm run dashboard` as its own process, for the tests that kill it or run it as a user would. */

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');

/**
 * Start dashboard/cli.js with `args` and `env` (the token is never inherited from the test's
 * own environment); resolves once it serves, with the one address it prints (loginUrl, with
 * the token), that address without its query (url), the token, the process and its exit.
 */
function serveDashboard(args, env) {
  env = { ...env };
  delete env.TRAINBRIDGE_DASHBOARD_TOKEN;
  const proc = spawn(process.execPath, [path.join(__dirname, '..', 'dashboard', 'cli.js'), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`the dashboard did not start: ${out}`)); }, 30000);
    const take = (chunk) => {
      out += chunk;
      const m = /trainbridge dashboard: (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        const login = new URL(m[1]);
        resolve({ proc, url: `${login.origin}/`, loginUrl: m[1], token: login.searchParams.get('token'), exited, output: () => out });
      }
    };
    proc.stdout.on('data', take);
    proc.stderr.on('data', take);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`the dashboard exited (${code}): ${out}`)); });
  });
}

/**
 * A free port below the kernel's ephemeral range, for a server a test kills and starts again
 * on the same port: a port 0 gave comes from that range, where any connection of the suite's
 * other processes (browsers, jobs, their sockets) may take it while the server is down.
 */
async function restartablePort() {
  let low = 32768;
  try { low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low; } catch { /* the default range */ }
  const floor = Math.min(20000, low - 1000);
  for (let i = 0; i < 50; i++) {
    const port = floor + Math.floor(Math.random() * (low - floor));
    const free = await new Promise((resolve) => {
      const probe = net.createServer();
      probe.once('error', () => resolve(false));
      probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error(`no free port in ${floor}-${low - 1} after 50 tries`);
}

module.exports = { serveDashboard, restartablePort };
