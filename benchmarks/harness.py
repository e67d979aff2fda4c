"""Side-by-side measurement: every figure is ours against a named baseline from the same run.

The machine is shared and noisy, so variants are interleaved (A B A B ...) and each is
summarised by its median; results are reported as ratios, never as absolute pass/fail.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable


@dataclass
class Row:
    bench: str  # which benchmark
    metric: str  # what is measured, with its unit
    ours: float
    baseline_name: str
    baseline: float
    ratio: float  # ours / baseline (or baseline / ours where "higher is better")
    target: str = ""  # e.g. "<= 0.5x tqdm"
    met: Optional[bool] = None
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def interleave(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run each variant once per round, in rotating order; return every sample."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            samples[name].append(variants[name]())
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


def paired(ours: list[float], base: list[float]) -> str:
    """The per-round ratios ours/base of two interleaved variants (round i of each ran
    side by side): their median and quartiles. A 1% overhead is smaller than this
    machine's round-to-round spread; pairing the rounds shows how far the ratio moves."""
    ratios = sorted(o / b for o, b in zip(ours, base) if b)
    if not ratios:
        return "no paired rounds"
    return (
        f"paired ratio {median(ratios):.4f} (quartiles {percentile(ratios, 25):.4f}-"
        f"{percentile(ratios, 75):.4f}, {len(ratios)} rounds)"
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def child_env(**extra: str) -> dict[str, str]:
    """The environment a real user has. This machine sets PYTHONUNBUFFERED and
    PYTHONDONTWRITEBYTECODE (no .pyc files: every import looks ~3 ms slower); users don't."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
        and not k.startswith("TRAINBRIDGE_")
    }
    env.update(extra)
    return env


def run_py(code: str, env: Optional[dict[str, str]] = None, timeout: float = 120.0) -> str:
    out = subprocess.run(
        [PYTHON, "-c", code],
        env=env or child_env(),
        capture_output=True,
        timeout=timeout,
        check=True,
        text=True,
        cwd=ROOT,
    )
    return out.stdout


def machine() -> dict[str, str]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "node": _node_version(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _node_version() -> str:
    try:
        return subprocess.run(
            ["node", "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "not found"


def write_results(rows: list[Row], path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="ascii") as f:
        json.dump(
            {"machine": machine(), "rows": [asdict(r) for r in rows]},
            f,
            indent=1,
            ensure_ascii=True,
        )
        f.write("\n")


def table(rows: list[Row]) -> str:
    lines = [
        "| bench | metric | ours | baseline | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "" if r.met is None else ("yes" if r.met else "NO")
        lines.append(
            f"| {r.bench} | {r.metric} | {_fmt(r.ours)} | {r.baseline_name}: {_fmt(r.baseline)} | "
            f"{r.ratio:.2f}x | {r.target} | {met} |"
        )
    return "\n".join(lines)


def _fmt(x: float) -> str:
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"
