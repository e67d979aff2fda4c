"""Process identity for the store: a pid is only trusted with its start time (pid reuse),
and the names of the files in a job's directory (docs/STORE.md)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
from typing import Optional

from trainbridge.bridge import procfs
from trainbridge.bridge.launcher import RUNTIME_PREFIX

ENV_FILE = "env.json"  # the job's environment, 0600, read and deleted by its keeper
EVENTS_FILE = "events.jsonl"  # every event, one ASCII JSON line each
REQUESTS_DIR = "requests"  # ping / send asked of the keeper, one file each (scheduled.request)
OUTPUT_FILE = "output.log"  # the job's output (launch()'s log_path)
KEEPER_LOG = "keeper.log"  # the keeper's own stdout/stderr
RESERVE_FILE = "reserve"  # space its keeper keeps free for the job's end (a full disk)
JOB_VARIABLE = "TRAINBRIDGE_STORE_JOB"  # set in a scheduled job's environment: its store id


# A start a store holds past this is seconds since the epoch, as trainbridge 0.2.0 wrote
# it (psutil's create_time); since, seconds after boot (procfs.started), which 31 years of
# uptime would not reach.
_EPOCH_START = 1e9


def process_start(pid: int) -> Optional[float]:
    """The process's start time in seconds after boot (procfs.started: the unit of the store's
    keeper_start and job_start), or None when it is gone or a zombie."""
    return procfs.running_since(pid)


def same_process(pid: Optional[int], start: Optional[float]) -> bool:
    """True when pid still runs and is the process that started at `start` (pid reuse),
    whatever the wall clock did meanwhile. A store's rows name processes of the boot its
    scheduler last saw (scheduler.reconcile ends the rest)."""
    if not pid or start is None:
        return False
    now = process_start(pid)
    if now is None:
        return False
    if start > _EPOCH_START:  # a row an older trainbridge wrote, its keeper still running
        booted = procfs.boot_time()
        return booted is not None and abs(now + booted - start) < 0.01
    return abs(now - start) < 0.005  # half a clock tick


def processes_of(job_id: str) -> list[int]:
    """Pids of live processes that carry JOB_VARIABLE=job_id (a scan of /proc: call it
    rarely). Finds a lost job's processes, those that escaped its group included."""
    marker = f"{JOB_VARIABLE}={job_id}".encode() + b"\0"
    me = os.getpid()
    out: list[int] = []
    if not os.path.isdir("/proc"):
        return out  # no /proc (macOS): the group kill and the worker's own watch remain
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker in f.read() and process_start(int(name)) is not None:
                    out.append(int(name))
        except OSError:
            continue
    return out


def kill_job_processes(job_id: str, pid: Optional[int], start: Optional[float]) -> int:
    """SIGKILL what is left of a job whose keeper is gone: its group (when its lead process
    is still the one recorded) and every process that carries its id. Returns how many."""
    killed = 0
    if pid is not None and same_process(pid, start):
        try:
            os.killpg(pid, signal.SIGKILL)  # the job leads its own process group
            killed += 1
        except OSError:
            pass
    for other in processes_of(job_id):
        try:
            os.kill(other, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed


def remove_runtime_dir(endpoint: Optional[str]) -> bool:
    """Remove the runtime directory of a dead keeper's hub (its socket and per-job files),
    which its atexit cleanup never removed: the directory of its ipc endpoint, when that is
    one of this user's trainbridge-* directories. Call it only once the keeper is known to be
    gone (pid + start time). A tcp endpoint names no directory: nothing is removed."""
    if not endpoint or not endpoint.startswith("ipc://"):
        return False
    path = os.path.dirname(endpoint[len("ipc://") :])
    if not os.path.basename(path).startswith(RUNTIME_PREFIX):
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True
