"""The hang-time stack of a child the job may be waiting on.

When the main thread waits on a child (a DataLoader worker behind a multiprocessing
connection, a subprocess), the diagnosis names that child; this module adds where the child
itself is to its evidence entry: `kernel_stack` (the function names of /proc/<pid>/stack,
innermost first: readable by root only) and, when py-spy is installed, `py_stack` (its
`py-spy dump --nonblocking` text: reads a stopped process too). A child that runs a worker
answers the hang-time dump_stacks itself (bridge/report.py passes those as process_stacks),
and its wchan is already in the entry. The rule that reads all of it is
diagnosis_hang.child_stack. The one implementation (a Node job's evidence is read here too).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any, Optional

# The children worth a look: the unix-socket peer first, then stopped or stuck ones.
SUSPECT = ("stopped", "tracing-stop", "disk-sleep", "zombie")
MOST = 4  # children looked at, at most
PY_SPY_TIMEOUT_S = 1.0


def kernel_stack(pid: int) -> Optional[list[str]]:
    """Function names of /proc/<pid>/stack, innermost first ("[<0>] do_signal_stop+0x16f/
    0x210" -> "do_signal_stop"), or None (not root, gone, or empty)."""
    try:
        with open(f"/proc/{pid}/stack", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    names = []
    for line in text.splitlines():
        parts = line.split()
        if parts:
            names.append(parts[-1].split("+", 1)[0])
    return names or None


def py_spy_dump(pid: int, notes: list[str]) -> Optional[str]:
    exe = shutil.which("py-spy")
    if not exe:
        return None
    try:
        done = subprocess.run(
            [exe, "dump", "--nonblocking", "--pid", str(pid)],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=PY_SPY_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"py-spy dump of child {pid} failed: {type(exc).__name__}")
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace")


def add(
    children: list[dict[str, Any]], peer: Optional[int], notes: list[str], py_spy: bool = True
) -> None:
    """Add kernel_stack / py_stack to the children the diagnosis may name (in place). The
    live look (every few seconds while stalled) passes py_spy=False: a file read only."""
    chosen = [c for c in children if c.get("pid") == peer]
    chosen += [c for c in children if c.get("status") in SUSPECT and c not in chosen]
    for child in chosen[:MOST]:
        pid = child.get("pid")
        if not isinstance(pid, int):
            continue
        stack = kernel_stack(pid)
        if stack:
            child["kernel_stack"] = stack
        text = py_spy_dump(pid, notes) if py_spy else None
        if text:
            child["py_stack"] = text
