"""Who holds the file lock a job waits for (the wait chain followed to its end).
A main thread blocked in flock()/fcntl(F_SETLKW), or polling a lock as the filelock package
does (huggingface_hub's download cache, a dataset cache), waits for another process: the
verdict names that process, its command line and its state, not the waiting frame alone.

Only procfs is read, never the filesystem itself (a lock file on a hung network mount must
not hold up the hang's evidence): /proc/locks for the locks and their holders,
/proc/<pid>/fdinfo/<fd> (mnt_id, ino) and /proc/<pid>/mountinfo (mnt_id -> device) for the
files the job has open, /proc/<pid>/fd/<fd> for their names. The one implementation; the
verdict's words are bridge/diagnosis_hang.py's.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

from trainbridge.bridge.procfs import process_facts, read

_IDENT = re.compile(r"^([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9]+)$")  # major:minor:inode
_PID = re.compile(r"^-?[0-9]+$")
_NO_INO = "file locks not matched: /proc/<pid>/fdinfo has no ino (a kernel before 5.13)"
LOCKS_SAID = 4  # locks named in the evidence, at most
FDS_READ = 4096  # open files looked at, at most


LOCKS_READS = 4  # /proc/locks reads at most, for one list (read_locks)


def read_locks() -> Optional[str]:
    """/proc/locks, read until a read adds no line the others did not have (LOCKS_READS at
    most), the lines of all (each lock once); None when unreadable. The kernel hands the
    file out a page per read() and lets go of its lock list between pages, so a lock held
    all along is skipped when locks listed before it go meanwhile: beside a process that
    took and released 400 flocks in turn, 6 of 5,000 single reads missed a lock held
    throughout (a matrix row judged a file lock wait `sleeping` once while the test suite
    ran beside it), and double reads still missed it 1 time in 5,000 on a loaded machine
    (a flake hunt). A quiet list costs two reads; a churning one, four."""
    first = read("/proc/locks")
    if first is None:
        return None
    lines = first.splitlines()
    seen = {_unnumbered(line) for line in lines}
    for _ in range(LOCKS_READS - 1):
        added = False
        for line in (read("/proc/locks") or "").splitlines():
            if _unnumbered(line) not in seen:
                seen.add(_unnumbered(line))
                lines.append(line)
                added = True
        if not added:
            break
    return "\n".join(lines) + ("\n" if lines else "")


def _unnumbered(line: str) -> str:
    """A /proc/locks line without its ordinal ("12:"), which a second read may change."""
    return line.partition(":")[2]


def parse_locks(text: str) -> list[dict[str, Any]]:
    """/proc/locks -> [{"type", "access", "pid", "dev": [major, minor], "inode", "waiting"}]:
    "1: FLOCK  ADVISORY  WRITE 28502 fe:00:2146408 0 EOF" holds; "1: -> FLOCK ..." waits
    for it. The device is hexadecimal there; an open file description's lock has pid -1."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        waiting = len(parts) > 1 and parts[1] == "->"
        rest = parts[2:] if waiting else parts[1:]
        if len(rest) < 5:
            continue
        kind, _mode, access, pid, ident = rest[:5]
        m = _IDENT.match(ident)
        if m is None or _PID.match(pid) is None:
            continue
        out.append(
            {
                "type": kind,
                "access": access,
                "pid": int(pid),
                "dev": [int(m.group(1), 16), int(m.group(2), 16)],
                "inode": int(m.group(3)),
                "waiting": waiting,
            }
        )
    return out


def parse_mounts(text: str) -> dict[int, list[int]]:
    """/proc/<pid>/mountinfo -> {mnt_id: [major, minor]}."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        try:
            major, minor = parts[2].split(":")
            out[int(parts[0])] = [int(major), int(minor)]
        except (ValueError, IndexError):
            continue
    return out


def parse_fdinfo(text: str) -> Optional[tuple[int, int]]:
    """/proc/<pid>/fdinfo/<fd> -> (mnt_id, ino), or None (a kernel before 5.13 has no ino)."""
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    try:
        return int(fields["mnt_id"]), int(fields["ino"])
    except (KeyError, ValueError):
        return None


def _open_files(
    pid: int, mounts: dict[int, list[int]], notes: list[str]
) -> dict[tuple[int, int, int], str]:
    """(major, minor, inode) -> path of the files `pid` has open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")[:FDS_READ]
    except OSError:
        return {}
    out = {}
    for fd in fds:
        try:
            path = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        info = parse_fdinfo(read(f"/proc/{pid}/fdinfo/{fd}") or "")
        if path.startswith("/") and info is None and _NO_INO not in notes:
            notes.append(_NO_INO)  # a kernel before 5.13: no lock can be matched to a file
        if not path.startswith("/") or info is None or info[0] not in mounts:
            continue
        major, minor = mounts[info[0]]
        out[(major, minor, info[1])] = path
    return out


def _holder(pid: int) -> dict[str, Any]:
    facts = process_facts(pid)
    return {"holder_cmd": facts["cmd"], "holder_state": facts["state"]}


def file_locks(
    pid: int, own: list[int], notes: list[str], text: Optional[str] = None
) -> list[dict[str, Any]]:
    """The locks other processes hold on files `pid` has open: [{"path", "lock", "access",
    "holder_pid" (None for an open file description's lock), "holder_cmd", "holder_state",
    "in_job" (the holder is one of `own`, the job's processes), "blocked" (`pid` is queued
    for it in the kernel)}], those it is blocked on first. `text`: /proc/locks, read already."""
    text = read_locks() if text is None else text
    if text is None:
        notes.append("/proc/locks not readable")
        return []
    locks = parse_locks(text)
    if not locks:
        return []
    files = _open_files(pid, parse_mounts(read(f"/proc/{pid}/mountinfo") or ""), notes)
    queued = {(*lk["dev"], lk["inode"]) for lk in locks if lk["waiting"] and lk["pid"] == pid}
    out = []
    for lk in locks:
        key = (lk["dev"][0], lk["dev"][1], lk["inode"])
        if lk["waiting"] or lk["pid"] == pid or key not in files:
            continue
        holder = lk["pid"] if lk["pid"] > 0 else None
        entry = {
            "path": files[key],
            "lock": lk["type"],
            "access": lk["access"],
            "holder_pid": holder,
            "in_job": holder in own,
            "blocked": key in queued,
            **(_holder(holder) if holder else {"holder_cmd": None, "holder_state": None}),
        }
        if entry not in out:
            out.append(entry)
    out.sort(key=lambda e: not e["blocked"])
    return out[:LOCKS_SAID]
