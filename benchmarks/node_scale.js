'use strict';
// node benchmarks/node_scale.js PYTHON CHILD_CODE WORKERS RUN_S WARMUP_S WINDOW_S
// Supervises WORKERS children at once; prints CPU share, RSS and event-loop lag (p99) over
// a window once all are running. CPU and RSS are the Node process's plus its job server's
// (the Python supervisor that judges the jobs), each also on its own.
const path = require('path');
const { monitorEventLoopDelay } = require('perf_hooks');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const [python, code, n, runS, warmupS, windowS] = process.argv.slice(2);
const rssBefore = process.memoryUsage().rss;
const jobs = [];
const fs = require('fs');

/** This process's job servers (bridge/jobserve.py): CPU seconds and RSS bytes, from /proc. */
function servers() {
  let cpu = 0;
  let rss = 0;
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[1]) !== process.pid) continue;
      if (!fs.readFileSync(`/proc/${name}/cmdline`, 'latin1').includes('trainbridge.bridge.jobserve')) continue;
      cpu += (Number(f[11]) + Number(f[12])) / 100;
      rss += Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${name}/status`, 'latin1'))[1]) * 1024;
    } catch { /* gone */ }
  }
  return { cpu, rss };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  // The same loop's lag before any job exists: the baseline.
  const idle = monitorEventLoopDelay({ resolution: 10 });
  idle.enable();
  await sleep(1000);
  idle.disable();
  for (let i = 0; i < Number(n); i += 1) {
    jobs.push(launch({ command: python, args: ['-c', code, runS], cwd: path.join(__dirname, '..'),
      timeouts: { startupTimeout: Number(warmupS), heartbeatTimeout: 30 } }));
  }
  const until = Date.now() + Number(warmupS) * 1000;
  while (Date.now() < until && !jobs.every((j) => j.state === 'running')) await sleep(200);
  const running = jobs.filter((j) => j.state === 'running').length;
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const c0 = process.cpuUsage();
  const s0 = servers();
  const t0 = process.hrtime.bigint();
  await sleep(Number(windowS) * 1000);
  const c = process.cpuUsage(c0);
  const s1 = servers(); // the supervisor's share: the job server judges the jobs
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  lag.disable();
  const rss = process.memoryUsage().rss;
  for (const j of jobs) j.cancel({ grace: 0.5 });
  await Promise.all(jobs.map((j) => j.done));
  console.log(JSON.stringify({ cpu_share: ((c.user + c.system) / 1e6 + s1.cpu - s0.cpu) / seconds,
    rss_mib: (rss + s1.rss) / 2 ** 20, node_cpu_share: (c.user + c.system) / 1e6 / seconds,
    server_cpu_share: (s1.cpu - s0.cpu) / seconds, node_rss_mib: rss / 2 ** 20, server_rss_mib: s1.rss / 2 ** 20,
    rss_before_mib: rssBefore / 2 ** 20, lag_p99_ms: lag.percentile(99) / 1e6,
    lag_idle_p99_ms: idle.percentile(99) / 1e6, running }));
  process.exit(0);
})();
