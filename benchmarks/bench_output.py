"""Output throughput: a child that prints a flood of lines, supervised, against reading it
plainly, side by side (interleaved rounds, medians; issue 35).

The child is a user's script with nothing of ours in it: `print()` in a loop, block-buffered
into the pipe as a real user's is (PYTHONUNBUFFERED removed). Baselines:
- `python flood.py | cat > /dev/null`: the shell's pipe, the floor;
- `subprocess` + a reader thread: Popen(stdout=PIPE) read in 64 KiB chunks by a thread, what
  a Python GUI does without us;
- python-shell (Node): PythonShell in text mode counting its 'message' events, what a Node
  GUI does without us.
Ours (the same child): `trainbridge run --transparent` (> /dev/null), the same with --log,
the CLI's plain view (`trainbridge run`, not a terminal), the same with --log, the Python API
(`bridge.launch(...).wait()`) and the Node client (`launch()`, awaiting `done`). Every --log
variant's file is checked to hold every line.

    python -m benchmarks.bench_output [ROUNDS]"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks.harness import ROOT, Row, child_env, interleave, median

FLOOD = "import sys\nfor i in range(int(sys.argv[1])):\n    print(sys.argv[2] % i)\n"
SHORT = "line %d of the flood"  # ~20 bytes
LONG = "step %d " + "x" * 190  # ~200 bytes
NODE = os.path.join(ROOT, "benchmarks", "node_output.js")
TB = [sys.executable, "-m", "trainbridge", "run"]
TARGETS = {"transparent": 1.5, "transparent --log": 1.5, "api": 2.0, "node launch": 2.0}


def _timed(argv: list[str], env: dict[str, str], cwd: str = ROOT) -> float:
    t = time.perf_counter()
    quiet = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
    }
    done = subprocess.run(argv, env=env, cwd=cwd, timeout=600, **quiet)
    elapsed = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:6]} exited {done.returncode}")
    return elapsed


def _reader_thread(child: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    proc = subprocess.Popen(child, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    counted = [0]

    def read() -> None:
        while chunk := proc.stdout.read1(65536):  # type: ignore[union-attr]
            counted[0] += chunk.count(b"\n")

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    proc.wait()
    return time.perf_counter() - t


def _logged(log: str, lines: int) -> None:
    """Every line of the flood is in the log file (the footer comes after them)."""
    with open(log, "rb") as f:
        got = sum(1 for line in f if line.startswith((b"line ", b"step ")))
    if got != lines:
        raise AssertionError(f"{log} holds {got} of the {lines} lines")


def variants(lines: int, text: str, tmp: str, node: bool) -> dict:
    env = child_env()
    script = os.path.join(tmp, "flood.py")
    with open(script, "w", encoding="ascii") as f:
        f.write(FLOOD)
    child = [sys.executable, script, str(lines), text]
    shell = " ".join(f"'{a}'" for a in child) + " | cat > /dev/null"
    log = os.path.join(tmp, "flood.log")

    def with_log(argv: list[str]) -> float:
        if os.path.exists(log):
            os.unlink(log)
        took = _timed(argv, env)
        _logged(log, lines)
        return took

    api = (
        "import sys; from trainbridge import bridge\n"
        "r = bridge.launch(sys.argv[1:], python_env=False).wait()\n"
        "sys.exit(r['outcome'] != 'succeeded')\n"
    )
    out = {
        "| cat": lambda: _timed(["bash", "-c", shell], env),
        "subprocess + reader thread": lambda: _reader_thread(child, env),
        "transparent": lambda: _timed([*TB, "--transparent", "--", *child], env),
        "transparent --log": lambda: with_log([*TB, "--transparent", "--log", log, "--", *child]),
        "plain view": lambda: _timed([*TB, "--", *child], env),
        "plain view --log": lambda: with_log([*TB, "--log", log, "--", *child]),
        "api": lambda: _timed([sys.executable, "-c", api, *child], env),
    }
    if node:
        out["python-shell"] = lambda: _timed(["node", NODE, "python-shell", *child], env)
        out["node launch"] = lambda: _timed(["node", NODE, "launch", *child], env)
    return out


def run(
    rounds: int = 3,
    sizes: tuple = ((300_000, "short"), (300_000, "long"), (3_000_000, "short")),
    big_rounds: int = 1,
) -> list:
    """`big_rounds`: the rounds of a size of 1,000,000 lines or more (a round of every variant
    at 3,000,000 lines takes minutes)."""
    node = shutil.which("node") is not None
    rows = []
    for lines, kind in sizes:
        tmp = tempfile.mkdtemp(prefix="tb-bench-output-")
        try:
            chosen = variants(lines, SHORT if kind == "short" else LONG, tmp, node)
            n = big_rounds if lines >= 1_000_000 else rounds
            samples = interleave(chosen, n)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        cat = median(samples["| cat"])
        for name, values in samples.items():
            if name == "| cat":
                continue
            took = median(values)
            target = TARGETS.get(name)
            rows.append(
                Row(
                    "output",
                    f"{lines:,} {kind} lines: {name} (s)",
                    took,
                    "python flood.py | cat",
                    cat,
                    took / cat,
                    target=f"<= {target:g}x | cat" if target else "",
                    met=(took / cat <= target) if target else None,
                    note=f"{n} round(s), load {os.getloadavg()[0]:.1f}",
                )
            )
    return rows


if __name__ == "__main__":
    from benchmarks.harness import table

    print(table(run(int(sys.argv[1]) if len(sys.argv) > 1 else 3)))
