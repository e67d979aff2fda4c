"""torchrun on two hosts: 4 ranks x 2 hosts, each host a network namespace
of this machine (tests/distributed/hosts.py), c10d rendezvous and gloo over the veth pair.
A small DDP loop (benchmarks/ddp_train.py, unmodified) unsupervised vs supervised: host A's
torchrun under the Python client (zero-code), host B's ranks connecting over tcp with
CurveZMQ (Job.remote_env), loop time only, start-up excluded; and the client's CPU time
per rank. Needs root (namespaces); without it the rows say why and are not met."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from benchmarks.harness import ROOT, Row, child_env, interleave, median, paired

SCRIPT = os.path.join(ROOT, "benchmarks", "ddp_train.py")
DRIVER = os.path.join(ROOT, "tests", "distributed", "twohost", "driver.py")
STEPS = 200
NPROC = 4
RANKS = 2 * NPROC
CPU: list = []  # (client CPU s, job wall s) per supervised run
PORT = 29000 + os.getpid() % 1000


def _env(tmp: str, veth: str) -> dict[str, str]:
    return child_env(OMP_NUM_THREADS="1", TMPDIR=tmp, GLOO_SOCKET_IFNAME=veth)


def _loop_s(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("LOOP_S="):
            return float(line[len("LOOP_S=") :])
    raise RuntimeError(f"no LOOP_S line in {text[-500:]}")


def _torchrun(h, on_b: bool) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *h.torchrun_args(on_b, PORT, NPROC)]


def plain(h) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        b = subprocess.Popen(
            h.exec_b(*_torchrun(h, True), SCRIPT, str(STEPS)),
            env=_env(tmp, h.veth_b),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        a = subprocess.run(
            h.exec_a(*_torchrun(h, False), SCRIPT, str(STEPS)),
            env=_env(tmp, h.veth_a),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        out_b = b.communicate(timeout=120)[0]
    return _loop_s(a.stdout + out_b)  # rank 0 is on either host


def supervised(h) -> float:
    from trainbridge.bridge import launcher

    config = {"startup_timeout": 300, "heartbeat_timeout": 60, "stall_timeout": None}
    with tempfile.TemporaryDirectory() as tmp:
        driver = subprocess.Popen(
            h.exec_a(sys.executable, DRIVER, h.addr_a, json.dumps(config), *_torchrun(h, False))
            + [SCRIPT, str(STEPS)],
            env=_env(tmp, h.veth_a),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            remote = json.loads(driver.stdout.readline())
            # zero-code on host B too: trainbridge's inject directory first on PYTHONPATH
            env_b = dict(_env(tmp, h.veth_b), **remote, PYTHONPATH=launcher.INJECT_DIR)
            b = subprocess.Popen(
                h.exec_b(*_torchrun(h, True), SCRIPT, str(STEPS)),
                env=env_b,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            report = json.loads(driver.stdout.readline())
            usage = json.loads(driver.stdout.readline())
            out_b = b.communicate(timeout=120)[0]
        finally:
            if driver.poll() is None:
                driver.kill()
            driver.wait()
    assert report["outcome"] == "succeeded", report["summary"]
    remote_ranks = [r for r in report["ranks"] if r.get("addr") == h.addr_b and r["role"] == "rank"]
    assert len(remote_ranks) == NPROC, f"host B's ranks did not all join: {report['ranks']}"
    CPU.append((usage["client_cpu_s"], report["duration_s"]))
    return _loop_s("\n".join(report["log_tail"]) + "\n" + out_b)


def run(rounds: int = 5) -> list:
    from tests.distributed import hosts

    try:
        h = hosts.make()
    except OSError as exc:
        return [Row("torchrun 2 hosts", "skipped", 0.0, "-", 0.0, 0.0, met=False, note=str(exc))]
    try:
        s = interleave(
            {"unsupervised": lambda: plain(h), "supervised": lambda: supervised(h)}, rounds
        )
    finally:
        hosts.remove(h)
    ours, base = median(s["supervised"]) * 1000, median(s["unsupervised"]) * 1000
    ratio = ours / base
    cpu = median([c for c, _ in CPU])
    wall = median([d for _, d in CPU])
    procs = RANKS + 2  # the ranks of both hosts and both launchers (zero-code) say hello
    return [
        Row(
            "torchrun 2 hosts",
            f"{STEPS} DDP steps x {NPROC} ranks x 2 hosts, supervised (ms)",
            ours,
            "unsupervised (ms)",
            base,
            ratio,
            "< 1% overhead",
            ratio < 1.01,
            note=f"overhead {100 * (ratio - 1):+.2f}%; "
            f"{paired(s['supervised'], s['unsupervised'])}; medians of {rounds} interleaved runs "
            f"each: supervised {[round(x * 1000) for x in s['supervised']]}, "
            f"unsupervised {[round(x * 1000) for x in s['unsupervised']]}",
        ),
        Row(
            "torchrun 2 hosts",
            "client CPU per worker process over a supervised run (ms)",
            cpu * 1000 / procs,
            "job wall time (ms)",
            wall * 1000,
            cpu / procs / wall if wall else 0.0,
            "< 2% of a core per process",
            cpu / procs / wall < 0.02 if wall else False,
            note=f"{RANKS} ranks + 2 launchers, half over tcp; client CPU / {procs}",
        ),
    ]
