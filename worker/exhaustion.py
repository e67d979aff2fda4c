"""What the process had of memory and disk when it failed: facts for the supervisor's verdict
on an error that is really a resource running out (docs/DIAGNOSIS.md "Out of host memory,
disk full"). Read once, in the process, at its fatal error: after it, the process and its
limits are gone.

at_error(exc) -> {"memory": {...}, "disk": {...}?}; the supervisor decides from the error's
words whether memory or the disk ran out (bridge/diagnosis_end.py); these are the numbers it
names. Nothing here blocks on the network: memory comes from getrlimit, getrusage and procfs
and cgroupfs (which never wait on a disk), and statvfs runs only for an error that speaks of
writing or of space (a hung network mount must not hold up a crash report).
"""

from __future__ import annotations

import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_WORDS = ("space", "write", "unexpected pos", "quota")


def _limit(which: int) -> Optional[int]:
    import resource

    soft = resource.getrlimit(which)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _status_bytes(field: str) -> Optional[int]:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field.encode() + b":"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_limit() -> Optional[int]:
    """The memory limit of this process's cgroup (v2 memory.max), None when unlimited or not
    known."""
    try:
        with open("/proc/self/cgroup", encoding="ascii", errors="replace") as f:
            path = next(line.split("::", 1)[1].strip() for line in f if line.startswith("0::"))
        with open(f"/sys/fs/cgroup{path}/memory.max", encoding="ascii") as f:
            text = f.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError, StopIteration):
        return None


def memory() -> dict[str, Any]:
    import resource

    return {
        "as_limit_bytes": _limit(resource.RLIMIT_AS),
        "data_limit_bytes": _limit(resource.RLIMIT_DATA),
        "vm_bytes": _status_bytes("VmSize"),
        "rss_bytes": _status_bytes("VmRSS"),
        "peak_rss_bytes": _status_bytes("VmHWM"),
        "cgroup_limit_bytes": _cgroup_limit(),
    }


def _chain(exc: BaseException) -> list[BaseException]:
    found, current = [exc], exc
    while len(found) < 16:
        nxt = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if nxt is None or nxt in found:
            break
        found.append(nxt)
        current = nxt
    return found


def _mount_of(path: str) -> str:
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


_CANDIDATES = 32  # paths looked at, at most


def _paths_written(exc: BaseException) -> list[str]:
    """Where the failed write may have gone, innermost first: the OSError's file, then what
    the traceback's frames held (an open file's name, a string that names a path in an
    existing folder: the file a `with open(path, "wb")` or a torch.save(obj, path) wrote).
    A write error itself carries no file name, and by the time the error is reported the
    `with` block has closed the file."""
    import io

    found: list[str] = []

    def add(value: object) -> None:
        if isinstance(value, io.IOBase):
            value = getattr(value, "name", None)
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if (
            isinstance(value, str)
            and os.sep in value
            and len(value) < 4096
            and value not in found
            and os.path.isdir(os.path.dirname(os.path.abspath(value)) or os.sep)
        ):
            found.append(value)

    chain = _chain(exc)
    for e in chain:
        if isinstance(e, OSError):
            add(e.filename)
    for e in chain:
        tb, frames = e.__traceback__, []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for frame in reversed(frames):
            for value in list(frame.f_locals.values()):
                if len(found) >= _CANDIDATES:
                    return found
                add(value)
    return found


def disk(exc: BaseException) -> Optional[dict[str, Any]]:
    """The filesystem the failed write went to and its free space: of the paths the error
    and its frames name, the one on the fullest filesystem (the working directory when none
    does); None for an error that speaks neither of writing nor of space."""
    speaks = False
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in _DISK_ERRNOS:
            speaks = True
        text = str(e).lower() if not isinstance(e, OSError) else ""
        speaks = speaks or any(word in text for word in _DISK_WORDS)
    if not speaks:
        return None
    best: Optional[dict[str, Any]] = None
    candidates: list[Optional[str]] = list(_paths_written(exc)) or [None]
    for path in candidates:
        where = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
        if best is None or free < best["free_bytes"]:
            best = {
                "path": path,
                "filesystem": _mount_of(where),
                "free_bytes": free,
                "total_bytes": st.f_blocks * st.f_frsize,
            }
    return best


def at_error(exc: BaseException) -> dict[str, Any]:
    """The facts for a fatal error; each part that cannot be read is left out."""
    out: dict[str, Any] = {}
    if sys.platform.startswith("linux"):
        try:
            out["memory"] = memory()
        except Exception:  # noqa: BLE001 - a fact we cannot read is one the verdict goes without
            pass
    found, said = _disk_in_time(exc)
    if found is not None:
        out["disk"] = found
    elif said:
        out["disk"] = {"unknown": said}
    return out


DISK_LOOK_S = 2.0  # how long the crash report waits for the filesystem to answer statvfs


def _disk_in_time(exc: BaseException) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """disk(exc) on a thread of its own, waited for DISK_LOOK_S: a path on a hung network
    mount blocks statvfs (and realpath) in the kernel, and the crash report must not wait
    on it. (found, None), or (None, why) when it did not answer in time."""
    import threading

    box: list[Optional[dict[str, Any]]] = []

    def look() -> None:
        try:
            box.append(disk(exc))
        except Exception:  # noqa: BLE001 - a fact we cannot read is one the verdict goes without
            box.append(None)

    thread = threading.Thread(target=look, name="trainbridge-disk", daemon=True)
    thread.start()
    thread.join(DISK_LOOK_S)
    if not box:
        return None, f"the filesystem did not answer statvfs in {DISK_LOOK_S:g} s (a hung mount?)"
    return box[0], None
