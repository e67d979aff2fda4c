"""torchrun scale-out (issue 16 item 7): a small DDP loop (2 ranks, gloo, CPU) unsupervised
vs supervised in zero-code mode (loop time only, start-up excluded), and the client's CPU
time per rank over a supervised run. A third variant, supervised with zero-code off (no
worker in any process: the client only watches the tree and reads the pipes), splits the
overhead between the client and the workers."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile

from benchmarks.harness import ROOT, Row, child_env, interleave, median, paired

SCRIPT = os.path.join(ROOT, "benchmarks", "ddp_train.py")
STEPS = 1000  # ~1.7 s of loop: at 300 (~0.5 s) the rounds' spread was several %; at 3,000 (~5 s)
# single runs still differ by 10-20% on 2 vCPUs (where the scheduler puts 8 busy threads)
RANKS = 2
CPU_S: list = []


def _cmd():
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={RANKS}",
        SCRIPT,
        str(STEPS),
    ]


def _env(tmp: str):
    return child_env(OMP_NUM_THREADS="1", TMPDIR=tmp)


def _loop_s(lines) -> float:
    for line in lines:
        if line.startswith("LOOP_S="):
            return float(line[len("LOOP_S=") :])
    raise RuntimeError(f"no LOOP_S line in {lines[-5:]}")


def plain() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            _cmd(), env=_env(tmp), cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
        )
    return _loop_s(out.stdout.splitlines())


def supervised(zero_code: bool = True) -> float:
    from trainbridge import bridge

    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_SELF)
        job = bridge.launch(
            _cmd(),
            env=_env(tmp),
            cwd=ROOT,
            startup_timeout=120,
            heartbeat_timeout=60,
            stall_timeout=None,
            zero_code=zero_code,
        )
        report = job.wait(300)
        after = resource.getrusage(resource.RUSAGE_SELF)
    assert report["outcome"] == "succeeded", report["summary"]
    if not zero_code:
        return _loop_s(report["log_tail"])
    CPU_S.append(
        (
            (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            report["duration_s"],
        )
    )
    return _loop_s(report["log_tail"])


def run(rounds: int = 15) -> list:
    s = interleave(
        {
            "unsupervised": plain,
            "supervised": supervised,
            "no worker": lambda: supervised(zero_code=False),
        },
        rounds,
    )
    ours, base = median(s["supervised"]) * 1000, median(s["unsupervised"]) * 1000
    ratio = ours / base
    bare = median(s["no worker"]) * 1000
    cpu = median([c for c, _ in CPU_S])
    wall = median([d for _, d in CPU_S])
    return [
        Row(
            "torchrun DDP",
            f"{STEPS} DDP steps x {RANKS} ranks, supervised (ms)",
            ours,
            "unsupervised (ms)",
            base,
            ratio,
            "< 1% overhead",
            ratio < 1.01,
            note=f"overhead {100 * (ratio - 1):+.2f}%; "
            f"{paired(s['supervised'], s['unsupervised'])}",
        ),
        Row(
            "torchrun DDP",
            f"{STEPS} DDP steps x {RANKS} ranks, supervised without workers (ms)",
            bare,
            "unsupervised (ms)",
            base,
            bare / base,
            note=f"the client's share of the overhead: zero-code off, no worker in any "
            f"process; {paired(s['no worker'], s['unsupervised'])}",
        ),
        Row(
            "torchrun DDP",
            "client CPU per rank over a supervised run (ms)",
            cpu * 1000 / (RANKS + 1),
            "job wall time (ms)",
            wall * 1000,
            cpu / (RANKS + 1) / wall if wall else 0.0,
            "< 2% of a core per process",
            cpu / (RANKS + 1) / wall < 0.02 if wall else False,
            note=f"{RANKS} ranks + the launcher; the client's whole CPU time / 3",
        ),
    ]
