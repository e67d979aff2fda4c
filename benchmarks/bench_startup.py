"""Worker start-up: `import worker` (+ hello) vs `python -c pass` (ms), and the RSS it adds.

All variants are separate interpreter starts, interleaved. "to hello" is spawn -> the
receiver holding the hello; "whole run" includes the bye and its ack at exit."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.harness import ROOT, Row, child_env, interleave, median
from benchmarks.receiver import Receiver

RSS = "import re\nprint(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"


def _run(code, env):
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=60,
    )
    return (time.perf_counter() - t) * 1000


def _to_hello(receiver, env):
    receiver.hello.clear()
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from trainbridge import worker; import time; time.sleep(30)"],
        env=env,
        cwd=ROOT,
    )
    try:
        if not receiver.hello.wait(30):
            raise RuntimeError("no hello within 30 s")
        return (time.perf_counter() - t) * 1000
    finally:
        proc.kill()
        proc.wait()


def _rss_kib(code, env):
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return int(out.split()[-1])


def run(rounds: int = 15) -> list:
    receiver = Receiver()
    try:
        on, off = child_env(**receiver.env()), child_env()
        samples = interleave(
            {
                "pass": lambda: _run("pass", off),
                "import worker (no client)": lambda: _run("from trainbridge import worker", off),
                "import worker (supervised, whole run)": lambda: _run(
                    "from trainbridge import worker", on
                ),
                "spawn -> hello": lambda: _to_hello(receiver, on),
            },
            rounds,
        )
        rss = interleave(
            {
                "pass": lambda: _rss_kib(RSS, off),
                "worker": lambda: _rss_kib(
                    "from trainbridge import worker; import time; time.sleep(0.5)\n" + RSS, on
                ),
            },
            5,
        )
    finally:
        receiver.close()
    m = {k: median(v) for k, v in samples.items()}
    base = m["pass"]
    rows = []
    for name in (
        "import worker (no client)",
        "import worker (supervised, whole run)",
        "spawn -> hello",
    ):
        rows.append(
            Row(
                "start-up",
                f"{name} (ms, over python -c pass)",
                m[name] - base,
                "python -c pass",
                base,
                m[name] / base,
                note=f"absolute {m[name]:.1f} ms",
            )
        )
    added = (median(rss["worker"]) - median(rss["pass"])) / 1024
    rows.append(
        Row(
            "start-up",
            "RSS added by a running worker (MiB)",
            added,
            "python -c pass (MiB)",
            median(rss["pass"]) / 1024,
            (median(rss["worker"]) / median(rss["pass"])),
        )
    )
    return rows
