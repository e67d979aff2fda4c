"""torch.distributed.elastic (torchrun) interop, without importing torch.

- A rank's fatal error goes to TORCHELASTIC_ERROR_FILE in torchelastic's own format
  (torch/distributed/elastic/multiprocessing/errors/error_handler.py), so torchrun's failure
  summary shows the real error, and picks the root cause by its timestamp, as it does for a
  script decorated with @record. A file the script's own @record wrote first is kept.
- The launcher's ChildFailedError carries torchrun's view of each failed rank (exit code,
  pid, the error file torchrun read): `failures_of` turns it into values for the error body,
  so a rank that never said hello still has its error in the report.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs milliseconds at `import worker`
if TYPE_CHECKING:
    from typing import Any, Optional

ERROR_FILE_VAR = "TORCHELASTIC_ERROR_FILE"


def error_file_record(body: dict[str, Any], now: float) -> dict[str, Any]:
    """The JSON torchelastic's ErrorHandler.record_exception writes, from an error body.
    Its message is "<class name>: <message>", the callstack the printed traceback, the
    timestamp whole seconds as a string (ChildFailedError compares them as ints)."""
    short = str(body.get("type") or "Error").rsplit(".", 1)[-1]
    return {
        "message": {
            "message": f"{short}: {body.get('message', '')}",
            "extraInfo": {"py_callstack": body.get("traceback") or "", "timestamp": str(int(now))},
        }
    }


def write_error_file(
    body: dict[str, Any], now: float, environ: Optional[dict[str, str]] = None
) -> Optional[str]:
    """Write `body` to the error file torchrun named, unless there is none or it exists
    already (the script's @record wrote it: its words stand). Returns the path written.
    Raises OSError when the file cannot be written; the caller reports that."""
    path = (environ if environ is not None else os.environ).get(ERROR_FILE_VAR)
    if not path:
        return None
    import json

    if os.path.exists(path):
        return None
    # Whole or not at all: torchrun's agent SIGTERMs the other ranks as soon as one dies,
    # maybe mid-write, and an empty or cut file makes torchrun itself raise JSONDecodeError
    # instead of reporting the failure (seen in a two-host loop of rank kills). The record
    # is written to a file of our own and linked into place complete; link() fails if the
    # script's own @record got there first (its words stand).
    temp = f"{path}.{os.getpid()}.tmp"
    # 0600: it holds the traceback; torchrun reads it as the same user (docs/SECURITY.md)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii", errors="backslashreplace") as out:
            json.dump(error_file_record(body, now), out)
        os.link(temp, path)
    except FileExistsError:
        return None
    finally:
        os.unlink(temp)
    return path


def is_child_failed(exc: BaseException) -> bool:
    for cls in type(exc).__mro__:
        if cls.__name__ == "ChildFailedError" and str(cls.__module__).startswith(
            "torch.distributed.elastic"
        ):
            return True
    return False


def failures_of(exc: BaseException) -> list[dict[str, Any]]:
    """torchrun's record of each failed rank, from its ChildFailedError: rank, local_rank,
    pid, exit code, the failure's own timestamp (s), the error file and what it held."""
    out: list[dict[str, Any]] = []
    failures = getattr(exc, "failures", None)
    if not isinstance(failures, dict):
        return out
    for rank, failure in sorted(failures.items(), key=lambda item: str(item[0])):
        message = getattr(failure, "message", "")
        traceback = None
        if isinstance(message, dict):  # the error file's own record
            traceback = (message.get("extraInfo") or {}).get("py_callstack")
            message = message.get("message", "")
        error_file = getattr(failure, "error_file", None)
        out.append(
            {
                "rank": rank if isinstance(rank, int) else None,
                "local_rank": _int_or_none(getattr(failure, "local_rank", None)),
                "pid": _int_or_none(getattr(failure, "pid", None)),
                "exit_code": _int_or_none(getattr(failure, "exitcode", None)),
                "time": _int_or_none(getattr(failure, "timestamp", None)),
                "error_file": error_file if isinstance(error_file, str) else None,
                "message": str(message),
                "traceback": traceback if isinstance(traceback, str) else None,
            }
        )
    return out


def _int_or_none(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
