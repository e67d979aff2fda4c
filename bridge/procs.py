"""Process identity for the store: a pid is only trusted with its start time (pid reuse),
and the names of the files in a job's directory (docs/STORE.md)."""

from __future__ import annotations

from typing import Optional

import psutil

ENV_FILE = "env.json"          # the job's environment, 0600, read and deleted by its keeper
EVENTS_FILE = "events.jsonl"   # every event, one ASCII JSON line each
OUTPUT_FILE = "output.log"     # the job's output (launch()'s log_path)
KEEPER_LOG = "keeper.log"      # the keeper's own stdout/stderr


def process_start(pid: int) -> Optional[float]:
    """The process's start time (psutil create_time), or None when it is gone or a zombie."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except psutil.Error:
        return None


def same_process(pid: Optional[int], start: Optional[float]) -> bool:
    """True when pid still runs and is the process that started at `start` (pid reuse)."""
    if not pid or start is None:
        return False
    now = process_start(pid)
    return now is not None and abs(now - start) < 0.01
