'use strict';
// node benchmarks/node_scale.js PYTHON CHILD_CODE WORKERS RUN_S WARMUP_S WINDOW_S
// Supervises WORKERS children at once; prints CPU share, RSS and event-loop lag (p99) over
// a window once all are running.
const path = require('path');
const { monitorEventLoopDelay } = require('perf_hooks');
const { launch } = require(path.join(__dirname, '..', 'node-client'));

const [python, code, n, runS, warmupS, windowS] = process.argv.slice(2);
const rssBefore = process.memoryUsage().rss;
const jobs = [];
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
  const t0 = process.hrtime.bigint();
  await sleep(Number(windowS) * 1000);
  const c = process.cpuUsage(c0);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  lag.disable();
  const rss = process.memoryUsage().rss;
  for (const j of jobs) j.cancel({ grace: 0.5 });
  await Promise.all(jobs.map((j) => j.done));
  console.log(JSON.stringify({ cpu_share: (c.user + c.system) / 1e6 / seconds, rss_mib: rss / 2 ** 20,
    rss_before_mib: rssBefore / 2 ** 20, lag_p99_ms: lag.percentile(99) / 1e6,
    lag_idle_p99_ms: idle.percentile(99) / 1e6, running }));
  process.exit(0);
})();
