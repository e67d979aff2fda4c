"""The Python stacks of this process's forks (a torch DataLoader's workers, which say no
hello), for its answer to dump_stacks, where the supervisor cannot get them itself: a rank of
another host, whose supervisor has no crash file here, cannot read this host's files nor
signal its pids. This process then keeps a private file on its own host for the dumps that
its SIGUSR1 handler (worker/hooks.py) writes, a handler its forks inherit with the file; when
asked for its stacks it signals its forked DataLoader workers and adds what each wrote to its
own entry of the answer's `children` (docs/PROTOCOL.md "reply"). The file has no name on disk
(O_TMPFILE, or unlinked as it is made): however the process ends, SIGKILL included, nothing
of it is left behind."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import tempfile
import time
from typing import Any, Optional, TextIO

DATALOADER_WORKER = "pt_data_worker"  # /proc/<pid>/comm of a torch DataLoader worker
WAIT_S = 0.5  # how long the answer waits for the forks' dumps (a held GIL gives none)
LOOK_S = 0.02  # how often the file is read meanwhile
STACK_MAX = 8000  # characters of one fork's stacks kept in the answer
# ... and of all of them: the answer, with the process's own stacks (up to 256 KiB), stays
# well inside a message's 1 MiB (protocol/limits.py).
STACKS_MAX = 128 * 1024
MARK = re.compile(r"^\[trainbridge\] pid (\d+): stacks on SIGUSR1\n", re.M)

_file: Optional[TextIO] = None


def open_file() -> TextIO:
    """This process's private dump file, in TMPDIR with no name (0600), opened for appending
    (the handler's os.write, its forks' too: O_APPEND) and for reading here (os.pread)."""
    global _file
    f = tempfile.TemporaryFile(
        "w+", buffering=1, encoding="ascii", errors="backslashreplace", prefix="trainbridge-dumps-"
    )
    fd = f.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    _file = f
    return f


def add_stacks(children: list[dict[str, Any]], wait_s: float = WAIT_S) -> None:
    """SIGUSR1 to each child that is a DataLoader worker with the handler (inherited from
    this process), then, for at most wait_s, what each wrote into the file: its `stack`. A
    worker asked that has none says why in `stack_missing` (no dump in time, or the answer's
    room for the forks' stacks spent): nothing is left out unsaid."""
    if _file is None:
        return
    targets = {
        c["pid"]: c
        for c in children
        if c.get("name") == DATALOADER_WORKER and isinstance(c.get("pid"), int)
        and _catches_sigusr1(c["pid"])
    }  # fmt: skip
    if not targets:
        return
    fd = _file.fileno()
    try:
        start = os.fstat(fd).st_size
    except OSError:
        return
    for pid in targets:
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass  # gone since the listing
    deadline = time.monotonic() + wait_s
    found: dict[int, str] = {}
    while True:
        found = _sections(_read_from(fd, start), set(targets))
        if len(found) == len(targets) or time.monotonic() >= deadline:
            break
        time.sleep(LOOK_S)
    room = STACKS_MAX
    for pid in sorted(targets):
        text = found.get(pid, "")[: min(STACK_MAX, room)]
        if text:
            targets[pid]["stack"] = text
            room -= len(text)
        elif pid in found:
            targets[pid]["stack_missing"] = f"left out: {STACKS_MAX // 1024} KiB of stacks sent"
        else:
            targets[pid]["stack_missing"] = f"no dump within {wait_s:g} s"


def _read_from(fd: int, offset: int) -> str:
    chunks = []
    try:
        while chunk := os.pread(fd, 1 << 16, offset):
            chunks.append(chunk)
            offset += len(chunk)
    except OSError:
        pass
    return b"".join(chunks).decode("ascii", "replace")


def _sections(text: str, pids: set[int]) -> dict[int, str]:
    """pid -> its whole dump (the handler ends each with a blank line), for the pids asked."""
    out: dict[int, str] = {}
    for m in MARK.finditer(text):
        pid = int(m.group(1))
        body = text[m.end() :]
        end = body.find("\n\n")
        if pid in pids and end >= 0:
            out[pid] = body[: end + 1]
    return out


def _catches_sigusr1(pid: int) -> bool:
    """Whether `pid` has a handler for SIGUSR1 (/proc/<pid>/status SigCgt): one without
    would be killed by it."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGUSR1 - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False
