"""The job's files the report reads, when the job ends: the crash file (faulthandler's dumps,
the newest CRASH_TEXT_MAX bytes), the stage box a worker process writes beside it and the count
of records it never sent at exit; and,
while the job runs, where a SIGUSR1 dump starts and which processes answered it. The only
I/O of the report; bridge/report.py's build() is pure and gets what read_files() read."""

from __future__ import annotations

import os
from typing import Any, Optional

from trainbridge.bridge import crash_text
from trainbridge.protocol import codec

CRASH_TEXT_MAX = 256 * 1024  # bytes of the crash file kept (its end: the newest dumps)


def read_files(crash_file: Optional[str], pid: Optional[int]) -> dict[str, Any]:
    """What build() needs from the job's files, read by the shell when the job ends (before
    the runtime directory goes): the crash file's stack text, and the stages that `pid`
    (the lead, else the launched process) had open in its stage box."""
    return {
        "crash_text": read_crash_file(crash_file),
        "stage_box": read_stage_box(crash_file, pid),
        "unsent": read_unsent(crash_file),
    }


def read_unsent(crash_file: Optional[str]) -> int:
    """How many records the job's worker processes queued at exit and never sent (their
    client took nothing for a whole ack timeout): the numbers they wrote beside the crash
    file (<crash file>.unsent.<pid>, worker/runtime.py), added up."""
    if not crash_file:
        return 0
    directory, prefix = os.path.dirname(crash_file), os.path.basename(crash_file) + ".unsent."
    total = 0
    try:
        names = [n for n in os.listdir(directory or ".") if n.startswith(prefix)]
    except OSError:
        return 0
    for name in names:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                total += int(f.read(32).strip() or 0)
        except (OSError, ValueError):
            continue  # a torn or foreign file: the worker's stderr line said it too
    return total


def read_stage_box(crash_file: Optional[str], pid: Optional[int]) -> Optional[list[str]]:
    """The stages a worker process had open when it last changed stage, from the file it
    writes synchronously beside the crash file (worker/runtime.py, PROTOCOL.md section 2),
    outermost first; None when there is none. Newer than the stage messages, which wait up
    to 50 ms for the beacon: a native crash right after a stage began is placed in it."""
    if not crash_file or pid is None:
        return None
    try:
        with open(f"{crash_file}.stages.{pid}", "rb") as f:
            data = f.read(64 * 1024)
    except OSError:
        return None
    names: list[str] = []
    for line in data.decode("ascii", "replace").split("\n"):
        if line == ".":
            return names
        try:
            names.append(codec.unescape(line))
        except codec.ProtocolError:
            names.append(line)
    return None  # no closing line: a torn or foreign file


def read_crash_file(path: Optional[str]) -> Optional[str]:
    """What faulthandler wrote (native crash, SIGUSR1 dump, freeze watchdog), or None."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - CRASH_TEXT_MAX))
            data = f.read()
    except OSError:
        return None
    return crash_text.stacks_only(data.decode("utf-8", "surrogateescape"))


def crash_file_size(path: Optional[str]) -> Optional[int]:
    """Where the next dump will start in the crash file (None: there is none yet)."""
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def signal_dumped_pids(path: Optional[str], since: Optional[int]) -> set[int]:
    """The processes whose SIGUSR1 handler wrote its stacks after offset `since` of the crash
    file (each marks its dump with a "[trainbridge] pid N: stacks on SIGUSR1" line)."""
    if not path:
        return set()
    try:
        with open(path, "rb") as f:
            f.seek(since or 0)
            data = f.read(CRASH_TEXT_MAX)
    except OSError:
        return set()
    return crash_text.signal_dumped_in(data.decode("ascii", "replace"))
