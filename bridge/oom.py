"""The kernel's OOM killer, seen through the job's memory cgroup (v2 memory.events, v1
memory.oom_control): read the kill count before launch and after exit; a rise while the job
died of SIGKILL means the kernel killed it for memory.

The one implementation (a Node job's count is read here too, through bridge/jobserve.py).
"""

from __future__ import annotations

import os
from typing import Optional

from trainbridge.bridge import procfs


def cgroup_dirs(pid: Optional[int]) -> list[str]:
    """Candidate memory cgroup directories of `pid` (v2 unified first, then v1)."""
    text = procfs.read(f"/proc/{pid or 'self'}/cgroup") or ""
    dirs = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            dirs.append(("v2", "/sys/fs/cgroup" + path))
            dirs.append(("v2", "/sys/fs/cgroup/unified" + path))
        elif "memory" in controllers.split(","):
            dirs.append(("v1", "/sys/fs/cgroup/memory" + path))
    return [d for _, d in sorted(dirs, key=lambda x: x[0] != "v2")]


def oom_kill_count(pid: Optional[int] = None) -> Optional[int]:
    """The cgroup's count of processes the OOM killer has killed, or None if unreadable.

    Read it before launch and after exit: a rise while the job died of SIGKILL means the
    kernel killed it for memory. cgroup v2: memory.events; v1: memory.oom_control."""
    for d in cgroup_dirs(pid):
        for name in ("memory.events", "memory.oom_control"):
            text = procfs.read(os.path.join(d, name))
            if not text:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    try:
                        return int(value)
                    except ValueError:
                        return None
    return None


def oom_killed(before: Optional[int], after: Optional[int]) -> Optional[bool]:
    """Pure: did the OOM killer act between two readings? None when either is unknown."""
    if before is None or after is None:
        return None
    return after > before


def kills_since(before: Optional[int], code: Optional[int], signal: Optional[str]) -> Optional[int]:
    """How many processes the OOM killer took in our cgroup while a job that ended badly ran
    (a DataLoader worker killed while the main process lived); None when unknown or clean."""
    if before is None or (code == 0 and not signal):
        return None
    after = oom_kill_count()
    return None if after is None else max(0, after - before)
