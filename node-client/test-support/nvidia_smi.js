'use strict';
/** A fake nvidia-smi for the tests of GPU figures on a machine without a GPU. */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/**
 * A fake nvidia-smi (a Python script, as $TRAINBRIDGE_NVIDIA_SMI): the supervisor that runs it
 * has the job as its other children, each holding 1.5 GiB on GPU-aaaa (87% busy); a process
 * of another user holds GPU-bbbb. `machine`: 'used' (that), 'idle' (the two GPUs, nothing of
 * the job's on them), 'none' (a driver that sees no GPU: it prints nothing).
 */
function fakeNvidiaSmi(t, python, machine = 'used') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-nvsmi-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'nvidia-smi');
  fs.writeFileSync(file, [
    `#!${python}`,
    'import os, sys',
    'def parent(pid):',
    '    try:',
    '        with open(f"/proc/{pid}/stat") as f:',
    '            return int(f.read().rsplit(")", 1)[1].split()[1])',
    '    except (OSError, ValueError, IndexError):',
    '        return None',
    'me, supervisor = os.getpid(), os.getppid()',
    'job = [d for d in os.listdir("/proc") if d.isdigit() and int(d) != me and parent(d) == supervisor]',
    `machine = ${JSON.stringify(machine)}`,
    'if machine == "none":',
    '    sys.exit(0)',
    'if sys.argv[1].startswith("--query-compute-apps"):',
    '    if machine == "used":',
    '        for pid in job: print(f"{pid}, 1536, GPU-aaaa")',
    '    print("999999, 100, GPU-bbbb")',
    'elif sys.argv[1].startswith("--query-gpu"):',
    '    print("GPU-aaaa, 87"); print("GPU-bbbb, 5")',
  ].join('\n'), { mode: 0o755 });
  return file;
}

module.exports = { fakeNvidiaSmi };
