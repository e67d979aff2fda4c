"""Files only their owner can read, written where nobody else can redirect them
(docs/SECURITY.md). Every file trainbridge writes that holds output or keys goes through here:
reports, logs, the --rank-env file, the job store, a job's events.

Three rules, for a machine that other accounts share:
- Created 0600 (directories 0700) by the mode given to open(2), never chmod afterwards: there
  is no moment when another account can open it.
- Never through a symbolic link that someone else could have planted: a whole file is written
  to a fresh temporary file beside the target (O_EXCL, so it never follows a link) and renamed
  over it; a file appended to is opened with O_NOFOLLOW.
- Never into a file another account owns (as root, that would hand them what is written).

Standard library only: the keeper, the CLI and the store helper use it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import Optional

FILE_MODE = 0o600
DIR_MODE = 0o700


class PrivateFileError(OSError):
    """A file or directory trainbridge will not write: it says which, why and what to do."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def error_text(exc: OSError) -> str:
    """'No space left on device (ENOSPC)': what went wrong, with the name to search for."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


def _refuse(path: str, why: str, what_to_do: str) -> PrivateFileError:
    return PrivateFileError(errno.EPERM, f"{why}; {what_to_do}", path)


def check_owned(path: str, st: os.stat_result) -> None:
    """Refuse a file or directory that another account owns."""
    if st.st_uid != os.geteuid():
        raise _refuse(
            path,
            f"it belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}), who "
            "would be able to read what trainbridge writes there",
            "choose a path of your own",
        )


def write_atomic(path: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace `path` with `data`, readable by this user only. The bytes go to a new
    temporary file in the same directory (created with O_EXCL: a link planted under its name
    makes it fail, never followed), then rename(2) puts it in place. A symbolic link at `path`
    is replaced, not followed; so is a file another account owns (the new file is this
    user's, 0600). Raises OSError; leaves no temporary file behind."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        try:
            if mode != FILE_MODE:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_append(path: str) -> int:
    """An fd that appends to `path` (a log), created 0600 if it is new. Refuses a symbolic
    link (ELOOP: a link planted in a shared directory would send the output elsewhere) and a
    file another account owns. The fd is close-on-exec."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(
                path,
                "it is a symbolic link, which trainbridge does not write through",
                "give the path of the file itself",
            ) from None
        raise
    try:
        st = os.fstat(fd)
        check_owned(path, st)
        if (
            not stat.S_ISREG(st.st_mode)
            and not stat.S_ISFIFO(st.st_mode)
            and not stat.S_ISCHR(st.st_mode)
        ):
            raise _refuse(path, "it is not a regular file", "give the path of a file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_exclusive(path: str, data: bytes, marker: bytes) -> None:
    """Write a secret file (keys) readable by this user only. A file already at `path` is
    replaced only when check_replaceable() allows it."""
    check_replaceable(path, marker)
    write_atomic(path, data)


def check_replaceable(path: str, marker: bytes) -> None:
    """Refuse (PrivateFileError) anything at `path` but nothing or a regular file this user
    owns that starts with `marker` (a file trainbridge wrote before): trainbridge will not put
    keys into a file whose readers it did not choose."""
    try:
        st: Optional[os.stat_result] = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(
                path, "it exists and is not a regular file", "remove it or choose another path"
            )
        check_owned(path, st)
        with open(path, "rb", opener=_nofollow_opener) as f:
            head = f.read(len(marker))
        if head != marker:
            raise _refuse(
                path,
                "it exists and trainbridge did not write it",
                "remove it or choose a new path for the file",
            )


def _nofollow_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def tighten(path: str, mode: int) -> bool:
    """Take group and other permissions off a file or directory that has them. Returns True
    when it changed the mode; a missing path is left alone (False). Raises PrivateFileError
    for a symbolic link, and for loose modes on what another account owns (only its owner
    could tighten them)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(
            path, "it is a symbolic link", "give the path of the store itself, not a link to it"
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        check_owned(path, st)
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
        return True
    return False
