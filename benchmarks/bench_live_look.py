"""Live look: what one refresh of a stalled job's live diagnosis costs the client
(evidence.live(pid, mark) plus the diagnosis rules), against one psutil snapshot of the same
process (Process.as_dict(), the usual way a parent reads a child), in ms per look.

The client refreshes every stalled job every LIVE_DIAGNOSIS_S (2 s): 200 stalled jobs at once
stay under half a core while a look costs under 5 ms."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from benchmarks.harness import Row, interleave, median

LOOKS = 200


def run(rounds: int = 9) -> list:
    from trainbridge.bridge import diagnosis, evidence

    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('r', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # the child is up and asleep, as a stalled job would be
        mark = evidence.live(proc.pid)["mark"]

        def look() -> float:
            t = time.perf_counter()
            for _ in range(LOOKS):
                ev = evidence.live(proc.pid, mark)
                diagnosis.diagnose_hang({"reason": "stall", "evidence": ev, "idle_s": 3})
            return (time.perf_counter() - t) / LOOKS * 1e3

        child = psutil.Process(proc.pid)

        def snapshot() -> float:
            t = time.perf_counter()
            for _ in range(LOOKS):
                child.as_dict()
            return (time.perf_counter() - t) / LOOKS * 1e3

        samples = interleave({"look": look, "psutil": snapshot}, rounds)
    finally:
        proc.kill()
        proc.wait()
    ours, base = median(samples["look"]), median(samples["psutil"])
    return [
        Row(
            "live look",
            "one live look at a stalled job: evidence + rules (ms/look)",
            ours,
            "psutil Process.as_dict()",
            base,
            ours / base,
            "< 5 ms (200 stalled jobs / 2 s under half a core)",
            ours < 5.0,
        )
    ]
