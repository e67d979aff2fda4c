"""What went wrong with the job store, in one sentence that names the cause and the fix.

Every failure of the store file (SQLite's errors, and the OSError of making its files) becomes
a StoreError subclass whose `kind` a program can test (the CLI prints the sentence and exits
EXIT_STORE; Node's helper passes `kind` on, and Node raises a StoreError with it):

  corrupt    the file is damaged or not a store: move it aside, a new one is made
  read_only  a read-only file system or file: reads work, writes need write access
  full       the disk is full: free space, or put the store on another disk
  access     the store or its folder cannot be opened by this user
  missing    no store at a path given for reading (a mistyped --store?)
  too_new    written by a newer trainbridge
  failed     anything else, said as SQLite says it

Only the standard library (a keeper imports it).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from typing import Union

from trainbridge.bridge import private_files


class StoreError(Exception):
    """The store cannot be used; `kind` says why (see the module's table), `path` which."""

    kind = "failed"

    def __init__(self, message: str, path: str = ""):
        super().__init__(message)
        self.path = path


class StoreCorrupt(StoreError):
    kind = "corrupt"


class StoreReadOnly(StoreError):
    kind = "read_only"


class StoreFull(StoreError):
    kind = "full"


class StoreAccess(StoreError):
    kind = "access"


class StoreNotPrivate(StoreAccess):
    """Another account owns the store, or may write it: refused, never read (SECURITY.md)."""


class StoreMissing(StoreError):
    kind = "missing"


class StoreTooNew(StoreError):
    kind = "too_new"


def explain(path: str, exc: Union[sqlite3.Error, OSError]) -> StoreError:
    """The StoreError for `exc`, met while using the store at `path`."""
    folder = os.path.dirname(path) or "."
    if isinstance(exc, OSError):
        code, text = exc.errno, private_files.error_text(exc)
    else:
        code, text = None, str(exc)
    low = text.lower()
    if code == errno.ENOSPC or "disk is full" in low or ("disk i/o error" in low and _full(folder)):
        return StoreFull(
            f"the disk holding the job store {path} is full ({text}): free some space there "
            f"(df -h {folder}), or use a store on another disk (--store or TRAINBRIDGE_STORE)",
            path,
        )
    if code == errno.EROFS or "readonly" in low or "read-only" in low:
        return StoreReadOnly(
            f"the job store {path} is read-only ({text}): listing and attaching work, but "
            f"submit, cancel and forget need write access to it and to {folder}",
            path,
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return StoreCorrupt(
            f"the job store {path} is damaged ({text}): move it aside (mv {path} "
            f"{path}.broken) and trainbridge makes a new, empty one; the jobs' files stay in "
            f"{os.path.join(folder, 'jobs')}",
            path,
        )
    if code in (errno.EACCES, errno.EPERM) or "unable to open" in low:
        return StoreAccess(
            f"cannot open the job store {path} ({text}): check that {folder} exists and that "
            f"this user can read and write it and the store's files",
            path,
        )
    return StoreError(f"the job store {path} failed: {text}", path)


def missing(path: str) -> StoreMissing:
    return StoreMissing(
        f"there is no job store at {path}: check the path (a mistyped --store?); "
        f"`trainbridge submit --store {path}` makes one there",
        path,
    )


def _full(folder: str) -> bool:
    """Whether the file system holding `folder` has no space left (SQLite says only "disk
    I/O error" for a write that ran out of it)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail == 0
