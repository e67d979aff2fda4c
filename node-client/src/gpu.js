'use strict';
/**
 * The GPU facts of the evidence: utilisation and memory per NVIDIA device, and whether the
 * job's processes use it; or a note saying why there are none. The Python twin is
 * bridge/gpu.py, which asks NVML through pynvml; Node has no NVML binding without a native
 * module, so this asks `nvidia-smi` (the same NVML readings, memory in MiB).
 *
 * start(pids) begins the query without blocking (two `nvidia-smi` runs, each cut off after
 * QUERY_TIMEOUT_MS); facts(handle) gives {gpu, gpu_note} as far as it has answered. The
 * evidence starts it with sample() and reads it in measure(), so the window pays for it.
 * parse() is pure: nvidia-smi's CSV in, the facts out.
 */

const { execFile } = require('node:child_process');

const QUERY_TIMEOUT_MS = 2000;
const MIB = 1024 * 1024;
const GPU_QUERY = ['--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'];
const APPS_QUERY = ['--query-compute-apps=pid,gpu_uuid', '--format=csv,noheader,nounits'];

let unavailable = null; // cached, as bridge/gpu.py: a missing nvidia-smi stays missing in a run

const rows = (text) => String(text || '').split('\n').map((l) => l.trim()).filter(Boolean).map((l) => l.split(',').map((f) => f.trim()));
const number = (text) => (/^\d+(\.\d+)?$/.test(text) ? Number(text) : null);

/**
 * nvidia-smi's answers -> {gpu: [{index, name, util_percent, mem_used, mem_total,
 * used_by_job}], gpu_note}, the fields of bridge/gpu.py. `appsText` null: the compute-apps
 * query failed (not supported on every GPU), so used_by_job stays unknown.
 */
function parse(gpuText, appsText = null, pids = null) {
  const busy = new Set();
  if (appsText !== null) for (const [pid, uuid] of rows(appsText)) if (pids && pids.includes(Number(pid))) busy.add(uuid);
  const devices = [];
  for (const [index, uuid, name, util, used, total] of rows(gpuText)) {
    if (number(index) === null) continue; // not a device line ("No devices were found", a warning)
    const entry = { index: number(index), util_percent: number(util), mem_used: null, mem_total: null, name };
    if (number(used) !== null) entry.mem_used = number(used) * MIB;
    if (number(total) !== null) entry.mem_total = number(total) * MIB;
    if (pids && appsText !== null) entry.used_by_job = busy.has(uuid);
    devices.push(entry);
  }
  if (!devices.length) return { gpu: null, gpu_note: 'no NVIDIA GPU (nvidia-smi: 0 devices)' };
  return { gpu: devices, gpu_note: null };
}

function run(args, done) {
  let child;
  try {
    child = execFile('nvidia-smi', args, { encoding: 'latin1', timeout: QUERY_TIMEOUT_MS, killSignal: 'SIGKILL' }, done);
  } catch (err) {
    done(err, '', '');
    return;
  }
  child.unref(); // a query still running never keeps the process alive
  for (const stream of [child.stdout, child.stderr, child.stdin]) if (stream && stream.unref) stream.unref();
}

/** Why a query failed, in a few words: not found, no answer, or what nvidia-smi said. */
function describe(err, stderr) {
  if (err.code === 'ENOENT') return 'not found';
  if (err.killed) return `no answer in ${QUERY_TIMEOUT_MS} ms`;
  const said = String(stderr || '').trim().split('\n')[0];
  return said ? `exit ${err.code}: ${said.slice(0, 200)}` : `exit ${err.code}`;
}

/**
 * Begin asking nvidia-smi about the GPUs and which of `pids` use them; never throws. The
 * handle's `done` resolves once `result` is set (for a caller that can wait; the evidence
 * does not).
 */
function start(pids = null) {
  let settle;
  const handle = { result: null, done: new Promise((resolve) => { settle = resolve; }) };
  const finish = (result) => { handle.result = result; settle(result); };
  if (unavailable) {
    finish({ gpu: null, gpu_note: unavailable });
    return handle;
  }
  run(GPU_QUERY, (err, gpuText, stderr) => {
    if (err) {
      const note = `no NVIDIA GPU (nvidia-smi: ${describe(err, stderr)})`;
      if (err.code === 'ENOENT') unavailable = note;
      finish({ gpu: null, gpu_note: note });
    } else if (!pids) {
      finish(parse(gpuText));
    } else {
      run(APPS_QUERY, (appsErr, appsText) => finish(parse(gpuText, appsErr ? null : appsText, pids)));
    }
  });
  return handle;
}

/** What start() has learnt so far, as {gpu, gpu_note}. */
function facts(handle) {
  return handle.result || { gpu: null, gpu_note: 'nvidia-smi did not answer within the evidence window' };
}

module.exports = { parse, start, facts };
