"""Spawning a job's process and ending its tree. Thin OS code, no job logic.

- The child gets its own session (so its own process group), stdin from /dev/null, stdout
  and stderr as pipes, and an environment with the trainbridge variables (PROTOCOL.md
  section 2) and the Python settings that make its output and crashes visible.
- Exit is learned from the OS through a pidfd the reactor polls (os.pidfd_open, Linux 5.3+);
  elsewhere a waiting thread reports it.
- The tree is the process group plus every descendant seen so far (read from /proc), so
  children that escaped with setsid() are signalled too.
"""

from __future__ import annotations

import math
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Callable, NamedTuple, Optional

from trainbridge.bridge import procfs

# What every child gets: unbuffered UTF-8 output and faulthandler on fatal signals, so the
# last lines and a native crash's Python stack reach us even when nothing else does.
PYTHON_ENV = {
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONUTF8": "1",
    "PYTHONFAULTHANDLER": "1",
}


class LaunchError(Exception):
    """The command could not be started (not found, not executable, bad cwd)."""


def child_env(
    base: Optional[Mapping[str, str]], trainbridge: Mapping[str, str], python_env: bool = True
) -> dict[str, str]:
    """The child's environment: the caller's (or ours), the Python settings (unless
    `python_env` is off: transparent mode keeps the caller's), our variables."""
    env = dict(os.environ if base is None else base)
    if python_env:
        env.update(PYTHON_ENV)
    env.update(trainbridge)
    return env


INJECT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inject")


def add_zero_code_hook(env: dict[str, str]) -> None:
    """Put bridge/inject (its sitecustomize loads worker.auto) first on PYTHONPATH."""
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = INJECT_DIR + (os.pathsep + rest if rest else "")


STDIN_MODES = {"devnull": subprocess.DEVNULL, "pipe": subprocess.PIPE, "inherit": None}


def job_env(
    base: Optional[Mapping[str, str]],
    variables: Mapping[str, str],
    server_key: Optional[str],
    python_env: bool = True,
    zero_code: bool = True,
) -> dict[str, str]:
    """A job's whole environment: the caller's `base` with the job's TRAINBRIDGE_*
    `variables` (bridge/jobenv.py), the hub's CurveZMQ key on tcp, the Python settings, and
    the zero-code hook. The one recipe of a Job and of a process spawned before its Job
    (bridge/jobserve.py's first launch)."""
    variables = dict(variables)
    if server_key:  # the tcp fallback: the worker must authenticate (hub.py)
        variables["TRAINBRIDGE_SERVER_KEY"] = server_key
    env = child_env(base, variables, python_env=python_env)
    if not server_key:  # an outer job's key must not reach this one's worker
        env.pop("TRAINBRIDGE_SERVER_KEY", None)
    # An outer job's setting, inherited through `base`, must not decide for this one.
    env.pop("TRAINBRIDGE_DETACHED", None)
    if zero_code:
        add_zero_code_hook(env)
    return env


def spawn(
    cmd: Sequence[str], cwd: Optional[str], env: Mapping[str, str], stdin: str = "devnull"
) -> subprocess.Popen[bytes]:
    """Start cmd in a new session with piped, unbuffered stdout/stderr. stdin is
    "devnull", "pipe" (proc.stdin is writable) or "inherit" (this process's stdin)."""
    if isinstance(cmd, (str, bytes)) or not cmd:
        raise LaunchError("the command must be a non-empty list of arguments (no shell strings)")
    if stdin not in STDIN_MODES:
        raise LaunchError(f"stdin must be one of {sorted(STDIN_MODES)}, not {stdin!r}")
    try:
        return subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=dict(env),
            stdin=STDIN_MODES[stdin],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError) as exc:
        raise LaunchError(f"cannot start {cmd[0]!r}: {exc}") from exc


def open_pidfd(pid: int) -> Optional[int]:
    """A pollable fd that becomes readable when pid exits, or None where unsupported."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except OSError:
        return None
    return fd


def watch_exit_in_thread(
    proc: subprocess.Popen[bytes], on_exit: Callable[[], None]
) -> threading.Thread:
    """Fallback without pidfd: a thread blocks in wait() and calls on_exit()."""

    def wait() -> None:
        proc.wait()
        on_exit()

    thread = threading.Thread(target=wait, name=f"trainbridge-wait-{proc.pid}", daemon=True)
    thread.start()
    return thread


def exit_status(returncode: int) -> tuple[Optional[int], Optional[str]]:
    """Popen's returncode -> (exit code, signal name): exactly one is set."""
    if returncode < 0:
        try:
            return None, signal.Signals(-returncode).name
        except ValueError:
            return None, f"SIG{-returncode}"
    return returncode, None


class Process(NamedTuple):
    """One process of a job's tree: its pid and its start time (procfs.started), which
    together name it even once the pid is reused."""

    pid: int
    created: float


class Tree:
    """The processes of one job: its group plus descendants seen so far (pid, start time:
    procfs.started), so a reused pid is never signalled and setsid() escapees are not
    forgotten."""

    def __init__(self, pid: int, job_id: Optional[str] = None):
        self.pid = pid
        self.job_id = job_id
        # spawn(): the child leads its own group. One spawned by `run --transparent` in
        # the terminal's foreground group shares the wrapper's: that group is never ours
        # to signal, so only the processes themselves are.
        try:
            own_group = os.getpgid(pid) == pid
        except OSError:  # gone already: as spawned
            own_group = True
        self.pgid: Optional[int] = pid if own_group else None
        self.known: dict[int, float] = {}
        self._full_at = -math.inf  # when the whole process table was last read for it
        self.refresh()

    def refresh(self, max_age: float = 0.0) -> None:
        """Remember the current descendants and group members (call while the root is
        alive, and often). A periodic refresh (max_age > 0) walks only the tree's own
        processes (procfs.descendants: below the root and every process seen so far), and
        reads the whole table for group members orphaned before they were seen at most
        every FULL_TABLE_EVERY_S: 200 keepers each reading all of /proc every second was
        the machine's busiest work. 0 (signals, a hello's check) reads the table now."""
        now = time.monotonic()
        if max_age > 0 and now - self._full_at < FULL_TABLE_EVERY_S:
            found = procfs.descendants([self.pid, *self.known])
            if found is not None:
                self._remember(found)
                return
        self._full_at = now
        table = process_table(max_age)
        if table is None:  # no /proc: nothing more to know (the supervisor is Linux-only)
            return
        parents, children = table
        tree = [self.pid] if self.pid in parents else []
        for pid in tree:  # grows while walked: every descendant
            tree.extend(children.get(pid, ()))
        if self.pgid is not None:
            # A descendant that was orphaned before we saw it may still be in the group.
            tree.extend(pid for pid, (_, pgid) in parents.items() if pgid == self.pgid)
        self._remember(tree)

    def _remember(self, pids: Iterable[int]) -> None:
        for pid in pids:
            if pid not in self.known:
                created = procfs.started(pid)
                if created is not None:  # else gone already
                    self.known[pid] = created

    def adopt_escapees(self) -> None:
        """Find processes that left both the tree and the group (setsid, then orphaned)
        by the job id they inherited in their environment. Costs a scan of /proc: call it
        when the job ends, not on every tick. The environment is searched as bytes, not
        parsed (a parsed environment made this scan ~15x slower: 6.5 vs 0.4 ms for 90
        processes), since it is on the path from a death to its report."""
        if not self.job_id:
            return
        self._remember(job_marked_pids(self.job_id, skip=self.known))

    def alive(self, include_root: bool = True) -> list[Process]:
        """Known processes that still run: the same start time (not a reused pid), not a
        zombie."""
        out = []
        for pid, created in list(self.known.items()):
            if pid == self.pid and not include_root:
                continue
            if procfs.running_since(pid) == created:
                out.append(Process(pid, created))
        return out

    def signal(self, sig: int, include_root: bool = True) -> int:
        """Send sig to the group and every known live descendant; returns how many got it."""
        self.refresh()
        sent = 0
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, sig)
                sent += 1
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.alive(include_root):
            try:
                if os.getpgid(proc.pid) == self.pgid:
                    continue  # already signalled through the group
                os.kill(proc.pid, sig)
                sent += 1
            except OSError:
                continue  # gone meanwhile
        return sent

    def wait_gone(self, timeout: float, include_root: bool = True) -> list[Process]:
        """Wait up to `timeout` s until the known processes have ended; those still running
        then. A SIGKILLed process is not gone at once: it frees its memory first (about
        0.2 s for 1 GiB here), longer in an uninterruptible wait or on a starved machine."""
        deadline = time.monotonic() + timeout
        fds = [open_pidfd(proc.pid) for proc in self.alive(include_root)]
        waiting = [fd for fd in fds if fd is not None]  # None: gone already, or no pidfd here
        try:
            poller = select.poll()
            for fd in waiting:
                poller.register(fd, select.POLLIN)  # readable once the process has ended
            running = len(waiting)
            while running and time.monotonic() < deadline:
                for fd, _ in poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                    poller.unregister(fd)
                    running -= 1
        finally:
            for fd in waiting:
                os.close(fd)
        left = self.alive(include_root)
        while left and time.monotonic() < deadline:  # kernels without pidfd (< 5.3)
            time.sleep(0.01)
            left = self.alive(include_root)
        return left


SHARED_TABLE_S = 0.5  # a periodic refresh reuses a /proc table this young (Tree.refresh)
FULL_TABLE_EVERY_S = 10.0  # a periodic refresh reads the whole table at most this often
_table: Optional[tuple[float, tuple[dict[int, tuple[int, int]], dict[int, list[int]]]]] = None


def process_table(
    max_age: float = 0.0,
) -> Optional[tuple[dict[int, tuple[int, int]], dict[int, list[int]]]]:
    """({pid: (ppid, pgid)}, {ppid: [child pids]}) of every process but this one, from one
    read of each /proc/PID/stat; None without /proc. A table younger than max_age seconds
    is returned again (one read of /proc per round for all jobs, not one per job)."""
    global _table
    now = time.monotonic()
    taken = _table
    if taken is not None and max_age > 0 and now - taken[0] < max_age:
        return taken[1]
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    me = os.getpid()
    parents: dict[int, tuple[int, int]] = {}
    children: dict[int, list[int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split(b" ", 3)
        pid = int(name)
        if pid == me or len(fields) < 3 or fields[0] == b"Z":
            continue  # zombies are gone (their parent reaps them)
        ppid, pgid = int(fields[1]), int(fields[2])
        parents[pid] = (ppid, pgid)
        children.setdefault(ppid, []).append(pid)
    _table = (now, (parents, children))
    return parents, children


def job_marked_pids(job_id: str, skip: Iterable[int] = ()) -> list[int]:
    """Pids (other than ours and those in skip) whose environment holds
    TRAINBRIDGE_JOB_ID=job_id: one listing of /proc and one read per process."""
    entry = f"TRAINBRIDGE_JOB_ID={job_id}\0".encode("ascii", "backslashreplace")
    marker = b"\0" + entry
    skipped = set(skip)
    skipped.add(os.getpid())
    try:
        names = os.listdir("/proc")
    except OSError:
        return []  # no /proc (macOS): the group kill and the worker's own watch remain
    out = []
    for name in names:
        if not name.isdigit() or int(name) in skipped:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue  # gone, or another user's
        if data.startswith(entry) or marker in data:
            out.append(int(name))
    return out


def signal_process(pid: int, sig: int) -> bool:
    """Send sig to one process (SIGUSR1 stack dumps never go to the whole tree)."""
    try:
        os.kill(pid, sig)
        return True
    except OSError:
        return False


# --- the runtime directory ---------------------------------------------------------------
RUNTIME_PREFIX = "trainbridge-"
OWNER_FILE = "client.pid"  # "<pid> <start time in clock ticks>" of the client that made it


def make_runtime_dir() -> str:
    """A private directory (0700) for ipc sockets and per-job files. Directories left by
    dead clients of this user (SIGKILLed: no atexit ran) are swept first. The hub removes
    it when it closes."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.path.isdir(base) or not os.access(base, os.W_OK):
        base = tempfile.gettempdir()
    sweep_dead_runtime_dirs(base)
    path = tempfile.mkdtemp(prefix=RUNTIME_PREFIX, dir=base)  # mkdtemp creates it 0700
    os.chmod(path, 0o700)
    with open(os.path.join(path, OWNER_FILE), "w", encoding="ascii") as f:
        f.write(f"{os.getpid()} {process_start(os.getpid())}\n")
    return path


def process_start(pid: int) -> Optional[str]:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with
    the pid, it names one process; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return fields[19]


def sweep_dead_runtime_dirs(base: str) -> int:
    """Remove the runtime directories in `base` that this user's dead clients left (both
    clients write the same OWNER_FILE). A directory without one (being made, or from an
    older version) or of a live client is left alone. Returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    uid = os.getuid()
    for name in names:
        if not name.startswith(RUNTIME_PREFIX):
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
            with open(os.path.join(path, OWNER_FILE), encoding="ascii") as f:
                pid_text, start = f.read().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or pid == os.getpid():
            continue
        if process_start(pid) == start:
            continue  # its client lives
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed
