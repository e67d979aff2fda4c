'use strict';
/**
 * CPU, RSS and GPU use of each job's process tree, sampled from the client side.
 *
 * CPU and RSS come from /proc (Linux; elsewhere they are null). GPU memory and utilisation come
 * from NVML through its command-line front end, nvidia-smi (`--query-compute-apps` for the
 * memory of each process, `--query-gpu` for each device's utilisation): memory is the job's
 * processes' sum, utilisation the busiest device the job uses (NVML has no per-process
 * utilisation that all drivers report). Without nvidia-smi (no GPU) the GPU fields are null.
 * $TRAINBRIDGE_NVIDIA_SMI names another program (the tests use a fake).
 */

const fs = require('node:fs');
const { execFile } = require('node:child_process');

const TICKS = 100; // USER_HZ
const PAGE = 4096;

function readStat(pid) {
  let text;
  try { text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1'); } catch { return null; }
  const f = text.slice(text.lastIndexOf(')') + 2).trim().split(' ');
  return { ppid: Number(f[1]), cpu_s: (Number(f[11]) + Number(f[12])) / TICKS, rss_bytes: Number(f[21]) * PAGE };
}

/** Every process's stat, once per sampling round: {pid: {ppid, cpu_s, rss_bytes}}. */
function scanProc() {
  let names;
  try { names = fs.readdirSync('/proc'); } catch { return null; }
  const out = new Map();
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue;
    const s = readStat(n);
    if (s) out.set(Number(n), s);
  }
  return out;
}

/** The pid and all its descendants found in a scan. */
function tree(scan, root) {
  const children = new Map();
  for (const [pid, s] of scan) {
    if (!children.has(s.ppid)) children.set(s.ppid, []);
    children.get(s.ppid).push(pid);
  }
  const out = [];
  const todo = scan.has(root) ? [root] : [];
  while (todo.length) {
    const p = todo.pop();
    out.push(p);
    for (const c of children.get(p) || []) todo.push(c);
  }
  return out;
}

/** Parse `nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits`. */
function parseApps(text) {
  const out = [];
  for (const line of String(text).split('\n')) {
    const [pid, mem, uuid] = line.split(',').map((s) => s.trim());
    if (!pid || !/^\d+$/.test(pid)) continue;
    out.push({ pid: Number(pid), mem_bytes: /^\d+$/.test(mem) ? Number(mem) * 1048576 : null, uuid: uuid || null });
  }
  return out;
}

/** Parse `nvidia-smi --query-gpu=uuid,utilization.gpu --format=csv,noheader,nounits`. */
function parseGpus(text) {
  const out = new Map();
  for (const line of String(text).split('\n')) {
    const [uuid, util] = line.split(',').map((s) => s.trim());
    if (uuid && /^\d+$/.test(util || '')) out.set(uuid, Number(util));
  }
  return out;
}

function run(program, args) {
  return new Promise((resolve) => {
    execFile(program, args, { timeout: 3000, encoding: 'latin1' }, (err, stdout) => resolve(err ? null : stdout));
  });
}

/** A GPU probe: async () => {apps, gpus} | null (no GPU, no nvidia-smi). */
function nvidiaSmiProbe(program = process.env.TRAINBRIDGE_NVIDIA_SMI || 'nvidia-smi') {
  let missing = false;
  return async () => {
    if (missing) return null;
    const [apps, gpus] = await Promise.all([
      run(program, ['--query-compute-apps=pid,used_memory,gpu_uuid', '--format=csv,noheader,nounits']),
      run(program, ['--query-gpu=uuid,utilization.gpu', '--format=csv,noheader,nounits']),
    ]);
    if (apps === null && gpus === null) {
      missing = true; // not there: asked once, not every second
      return null;
    }
    return { apps: parseApps(apps || ''), gpus: parseGpus(gpus || '') };
  };
}

/**
 * A sampler for many jobs: sample(pids) -> Map(rootPid -> {cpu_percent, rss_bytes, gpu_mem_bytes,
 * gpu_util, processes, gpus}); CPU is the tree's CPU time since the previous sample of that root over
 * the wall time (100 = one core).
 */
function createSampler({ gpuProbe = nvidiaSmiProbe(), clock = () => Date.now() } = {}) {
  const last = new Map(); // root -> {t, cpu_s}
  return async function sample(roots) {
    const scan = scanProc();
    const gpu = roots.length ? await gpuProbe() : null;
    const t = clock();
    const out = new Map();
    for (const root of roots) {
      const s = { cpu_percent: null, rss_bytes: null, gpu_mem_bytes: null, gpu_util: null, processes: 0,
        gpus: gpu ? gpu.gpus.size : 0 }; // the devices nvidia-smi sees: 0 says "no GPU" plainly
      let pids = [root];
      if (scan) {
        pids = tree(scan, root);
        s.processes = pids.length;
        if (pids.length) {
          const cpu = pids.reduce((a, p) => a + scan.get(p).cpu_s, 0);
          s.rss_bytes = pids.reduce((a, p) => a + scan.get(p).rss_bytes, 0);
          const prev = last.get(root);
          if (prev && t > prev.t) s.cpu_percent = Math.round(Math.max(0, ((cpu - prev.cpu_s) * 100000) / (t - prev.t)));
          last.set(root, { t, cpu_s: cpu });
        }
      }
      if (gpu) {
        const mine = gpu.apps.filter((a) => pids.includes(a.pid));
        if (mine.length) {
          s.gpu_mem_bytes = mine.reduce((a, x) => a + (x.mem_bytes || 0), 0);
          const utils = mine.map((x) => gpu.gpus.get(x.uuid)).filter((u) => u !== undefined);
          s.gpu_util = utils.length ? Math.max(...utils) : null;
        }
      }
      out.set(root, s);
    }
    for (const root of last.keys()) if (!roots.includes(root)) last.delete(root);
    return out;
  };
}

module.exports = { createSampler, nvidiaSmiProbe, parseApps, parseGpus, tree, scanProc };
