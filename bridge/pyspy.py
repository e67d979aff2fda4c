"""py-spy, when installed, for the evidence: a dump of every Python thread's stack taken from
outside, started at the beginning of the evidence window and read at its end. Optional: the
worker's own SIGUSR1 dump is the stack the diagnosis reads first.

A Node job gets it too (its evidence is read here, through bridge/jobserve.py) when py-spy
is installed for the supervisor's Python.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Optional

TIMEOUT_S = 0.25  # on top of the evidence window, so collect() stays bounded


def start(pid: int) -> Optional[subprocess.Popen[bytes]]:
    """Start `py-spy dump --pid` on `pid`, or None when py-spy is not installed."""
    exe = shutil.which("py-spy")
    if not exe:
        return None
    try:
        return subprocess.Popen(
            [exe, "dump", "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    except OSError:
        return None


def finish(
    proc: Optional[subprocess.Popen[bytes]], deadline: float, notes: list[str]
) -> Optional[str]:
    """The dump's text, read by `deadline` (monotonic), or None with a note why."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=max(0.01, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        notes.append("py-spy dump timed out")
        return None
    text: str = out.decode("utf-8", "replace")
    if proc.returncode != 0:
        notes.append(f"py-spy dump failed: {text.strip()[:200]}")
        return None
    return text
