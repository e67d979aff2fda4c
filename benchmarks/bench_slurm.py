"""A Slurm job's cost on the submitting host and on its nodes (docs/SCALE.md "Measured").

The two-node cluster of tests/slurm/cluster.py runs the same 2-task job (tests/slurm/
scenarios/task.py: a step every 0.2 s, with progress) two ways, interleaved:
- ours: Scheduler(backend="slurm").submit(srun ...): the keeper and the runner on the
  submitting host, the zero-code worker in each task;
- baseline: `sbatch --wait` of the same command, no trainbridge: Slurm's own way to submit a
  job and wait for its end (what a script around sbatch costs).
Over a WINDOW_S window while the tasks run: CPU (% of one core) and RSS of what waits on the
submitting host (keeper + runner, against sbatch --wait), and the tasks' CPU on the nodes
(with the worker, against without).

    .venv/bin/python -m benchmarks --only slurm
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from benchmarks.bench_keepers import _proc
from benchmarks.harness import ROOT, Row, child_env, median

WINDOW_S = 10.0
TASK = os.path.join(ROOT, "tests", "slurm", "scenarios", "task.py")
STEPS = "150"  # 30 s of steps: the window fits after the start


def _tasks(cluster) -> list[int]:
    """The task processes of this cluster's job (another cluster may run beside it)."""
    out = []
    for pid in cluster.processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if TASK.encode() in f.read():
                    out.append(pid)
        except OSError:
            continue  # gone meanwhile
    return out


def _window(pids: list[int]) -> dict[str, float]:
    """The processes' CPU % (summed) over WINDOW_S and their RSS (MiB, summed) at its end."""
    t0 = time.monotonic()
    first = {p: _proc(p)["cpu"] for p in pids}
    time.sleep(WINDOW_S)  # the measured window itself, not a synchronisation
    dt = time.monotonic() - t0
    after = {p: _proc(p) for p in pids}
    return {
        "cpu": sum(100 * (after[p]["cpu"] - first[p]) / dt for p in pids),
        "rss": sum(after[p]["rss"] for p in pids),
    }


def _wait(what: str, ready, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        got = ready()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s")
        time.sleep(0.2)


def _ours(cluster, tmp: str, env: dict[str, str]) -> tuple[dict, dict]:
    from trainbridge import bridge

    cmd = ["srun", "--nodes=2", "--ntasks-per-node=1", sys.executable, TASK]
    with bridge.Scheduler(
        store=os.path.join(tmp, f"jobs-{time.monotonic_ns()}.db"),
        backend="slurm",
        slurm={"listen": cluster.head_addr},
        tick=None,
    ) as sched:
        job_id = sched.submit(cmd, env=env, slurm={"nodes": 2})
        row = _wait("the job's first step", lambda: (
            (lambda r: r if (r["progress"] or {}).get("step") else None)(sched.get(job_id))
        ))  # fmt: skip
        host = _window([row["keeper_pid"], row["job_pid"]])
        tasks = _window(_tasks(cluster))
        _wait("the job's end", lambda: sched.get(job_id)["state"] == "ended", 180)
    return host, tasks


def _baseline(cluster, env: dict[str, str]) -> tuple[dict, dict]:
    plain = {k: v for k, v in env.items() if not k.startswith("TRAINBRIDGE_")}
    plain["PYTHONPATH"] = ROOT  # task.py imports trainbridge.worker: unsupervised, it does nothing
    cmd = ["sbatch", "--wait", "--nodes=2", "--output=/dev/null", "--wrap",
           f"srun --nodes=2 --ntasks-per-node=1 {sys.executable} {TASK}"]  # fmt: skip
    waiter = subprocess.Popen(cmd, env=plain, stdout=subprocess.DEVNULL)
    try:
        _wait("the baseline's tasks", lambda: len(_tasks(cluster)) >= 2)
        time.sleep(2)  # past the tasks' start (imports): the running state is what is measured
        host = _window([waiter.pid])
        tasks = _window(_tasks(cluster))
        waiter.wait(timeout=180)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    return host, tasks


def run(rounds: int = 2) -> list:
    from tests.slurm import cluster as slurm_cluster

    why = slurm_cluster.cannot_make()
    if why is not None:
        return [Row("slurm", "skipped", 0.0, "-", 0.0, 0.0, met=False, note=why)]
    cluster = slurm_cluster.up()
    tmp = tempfile.mkdtemp(prefix="tb-bench-slurm-")
    saved = dict(os.environ)
    os.environ.update(cluster.env)  # the keeper calls scontrol too
    samples: dict[str, list[dict]] = {"ours": [], "ours_tasks": [], "base": [], "base_tasks": []}
    try:
        env = child_env(**cluster.env, TASK_STEPS=STEPS)
        for _ in range(rounds):
            host, tasks = _ours(cluster, tmp, env)
            samples["ours"].append(host)
            samples["ours_tasks"].append(tasks)
            host, tasks = _baseline(cluster, env)
            samples["base"].append(host)
            samples["base_tasks"].append(tasks)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        cluster.down()

    def med(name: str, key: str) -> float:
        return median([s[key] for s in samples[name]])

    rows = []
    for metric, ours, base, base_name in (
        ("waiting on the submitting host: CPU (% of a core)", med("ours", "cpu"),
         med("base", "cpu"), "sbatch --wait"),
        ("waiting on the submitting host: RSS (MiB)", med("ours", "rss"), med("base", "rss"),
         "sbatch --wait"),
        ("the 2 tasks on the nodes: CPU (% of a core)", med("ours_tasks", "cpu"),
         med("base_tasks", "cpu"), "the same tasks, no worker"),
        ("the 2 tasks on the nodes: RSS (MiB)", med("ours_tasks", "rss"),
         med("base_tasks", "rss"), "the same tasks, no worker"),
    ):  # fmt: skip
        rows.append(
            Row(
                "slurm",
                metric,
                round(ours, 2),
                base_name,
                round(base, 2),
                round(ours / base, 2) if base else 0.0,
                note=f"{rounds} rounds, {WINDOW_S:g} s windows; ours: keeper + runner",
            )
        )
    return rows
