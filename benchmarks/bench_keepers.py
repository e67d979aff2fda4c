"""What a store full of jobs costs the machine: N jobs submitted, `running` of them
in slots and the rest queued (a queued job has no process), each running one under its
keeper; the jobs are a user's idle training processes (Python with the zero-code worker,
sleeping: the worker's beacon is their only activity).

Per keeper, while every running job idles: RSS and PSS (shared pages counted once), CPU
(% of one core) and wake-ups per second (voluntary context switches of all its threads),
over a WINDOW_S window. Baseline: the job's own process beside it (Python plus the worker,
whose beacon beats at 1 Hz); RSS also against a bare `python -c` that sleeps.

    .venv/bin/python -m benchmarks --only keepers            # 200 jobs, 150 running
    TB_BENCH_KEEPERS=20/15 .venv/bin/python -m benchmarks --only keepers --quick
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.harness import Row, median

WINDOW_S = 10.0
IDLE = [sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"]
TICKS = os.sysconf("SC_CLK_TCK")


def _sizes() -> tuple[int, int]:
    text = os.environ.get("TB_BENCH_KEEPERS", "200/150")
    total, running = (int(x) for x in text.split("/"))
    return total, running


def _proc(pid: int) -> dict[str, float]:
    """RSS and PSS (MiB), CPU seconds and voluntary switches (all threads) of one process."""
    out = {"rss": 0.0, "pss": 0.0, "cpu": 0.0, "wakeups": 0.0}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                out["rss"] = int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                out["pss"] = int(line.split()[1]) / 1024
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    out["cpu"] = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        out["wakeups"] += int(line.split()[1])
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def _window(pids: list[int]) -> list[dict[str, float]]:
    """Each process's RSS/PSS at the end, and its CPU % and wake-ups/s over about WINDOW_S
    (each process over the time between its own two reads: reading 300 processes takes a
    while on a busy machine)."""
    before = {pid: (time.monotonic(), _proc(pid)) for pid in pids}
    time.sleep(WINDOW_S)  # the measured window itself, not a synchronisation
    out = []
    for pid in pids:
        t0, first = before[pid]
        after = _proc(pid)
        dt = time.monotonic() - t0
        out.append(
            {
                "rss": after["rss"],
                "pss": after["pss"],
                "cpu": 100 * (after["cpu"] - first["cpu"]) / dt,
                "wakeups": (after["wakeups"] - first["wakeups"]) / dt,
            }
        )
    return out


def run(rounds: int = 1) -> list:
    from trainbridge import bridge

    total, running = _sizes()
    rows: list = []
    tmp = tempfile.mkdtemp(prefix="tb-bench-keepers-")
    bare = subprocess.Popen(IDLE)
    sched = bridge.Scheduler(
        store=os.path.join(tmp, "jobs.db"), slots={"jobs": running, "gpus": []}, tick=None
    )
    ids = []
    try:
        t0 = time.perf_counter()
        ids = [sched.submit(IDLE, env={**os.environ}) for _ in range(total)]
        submit_s = time.perf_counter() - t0
        deadline = time.monotonic() + 60 + total  # ~0.5 s of CPU each to start, on 2 cores
        while True:
            rows_now = sched.jobs()
            up = [r for r in rows_now if r["state"] == "running"]
            if len(up) == running:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(up)} of {running} jobs running after the deadline")
            time.sleep(0.5)
        started_s = time.perf_counter() - t0
        queued = sum(r["state"] == "queued" for r in rows_now)
        time.sleep(5)  # past every start: the idle state is what is measured
        keepers = [r["keeper_pid"] for r in up]
        jobs = [r["job_pid"] for r in up]
        measured = _window(keepers + jobs + [bare.pid])
        k, j, b = measured[: len(keepers)], measured[len(keepers) : -1], measured[-1]

        def med(values, key):
            return median([v[key] for v in values])

        note = (
            f"{total} submitted, {running} running, {queued} queued (no process); "
            f"submit {1000 * submit_s / total:.1f} ms each; all running after {started_s:.0f} s"
        )
        extra = {
            "keepers_rss_total_mib": round(sum(v["rss"] for v in k), 1),
            "keepers_pss_total_mib": round(sum(v["pss"] for v in k), 1),
            "keepers_cpu_total_pct": round(sum(v["cpu"] for v in k), 2),
        }
        for metric, key, base, base_name in (
            (
                "keeper RSS (MiB, median)",
                "rss",
                med(j, "rss"),
                "the job's process (python + worker)",
            ),
            (
                "keeper PSS (MiB, median)",
                "pss",
                med(j, "pss"),
                "the job's process (python + worker)",
            ),
            ("keeper RSS vs bare python (MiB)", "rss", b["rss"], "python -c sleep"),
            (
                "keeper CPU idle (% of a core)",
                "cpu",
                med(j, "cpu"),
                "the job's process (1 Hz beacon)",
            ),
            (
                "keeper wake-ups/s idle",
                "wakeups",
                med(j, "wakeups"),
                "the job's process (1 Hz beacon)",
            ),
        ):
            ours = med(k, key)
            rows.append(
                Row(
                    "keepers",
                    metric,
                    round(ours, 3),
                    base_name,
                    round(base, 3),
                    ours / base if base else float("nan"),
                    note=note,
                    extra=extra,
                )
            )
    finally:
        for job_id in ids:
            try:
                sched.cancel(job_id, grace=1)
            except Exception:  # noqa: BLE001 - ended already
                pass
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sched.jobs(state="active"):
            time.sleep(0.5)
        sched.close()
        bare.kill()
        bare.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows
