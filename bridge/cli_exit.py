"""How a CLI run ends: its exit status (EXIT_HELP says each; exit_status turns a report into
one) and its report file (write_report). Below the CLI's commands (cli.py: run; cli_jobs.py:
the scheduler's; transparent.py: run --transparent), which all end this way."""

from __future__ import annotations

import signal
from typing import Any, Optional

EXIT_HUNG = 124
EXIT_LAUNCH_FAILED = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
EXIT_CANCELLED = 130
EXIT_FAILED_ZERO = 1

EXIT_HELP = """\
exit status:
  child's status  the child exited by itself (0 = succeeded)
  1               failed although the child exited 0 (it reported a fatal error)
  128+N           crashed: died by signal N (139 = SIGSEGV, 137 = SIGKILL)
  124             hung: a deadline passed; stacks were taken and the tree was stopped
  130             cancelled (Ctrl-C, SIGTERM or SIGHUP to trainbridge)
  126             the command was found but cannot be executed (permissions?)
  127             the command was not found
  125             trainbridge itself failed (bad cwd, the client cannot load)
  2               usage error

Durations are seconds (90, 2.5) or take a unit: 90s, 10m, 1h. A timeout of 0
disables that deadline.
"""


def exit_status(report: dict[str, Any]) -> int:
    """The CLI's exit status for a finished job (see EXIT_HELP)."""
    outcome = report.get("outcome")
    if outcome == "hung":
        return EXIT_HUNG
    if outcome == "cancelled":
        return EXIT_CANCELLED
    sig = report.get("signal")
    if sig:
        try:
            return 128 + int(getattr(signal, sig))
        except (AttributeError, TypeError, ValueError):
            return 128 + int(sig[3:]) if sig[3:].isdigit() else 1
    code = report.get("exit_code")
    if outcome == "failed" and not code:
        return EXIT_FAILED_ZERO
    return int(code or 0) & 0xFF


def write_report(path: str, report: dict[str, Any]) -> Optional[str]:
    """Write the report atomically, readable by this user only (a new temp file beside it,
    renamed over `path`: bridge/private_files.py). A disk that refuses
    it (read-only, full) changes neither the job's exit status nor its summary: returns
    what went wrong, for one warning, and leaves no temp file behind."""
    from trainbridge.bridge.job_output import os_error_text
    from trainbridge.bridge.private_files import write_atomic
    from trainbridge.bridge.report_text import to_json

    try:
        write_atomic(path, (to_json(report) + "\n").encode("ascii"))
    except OSError as exc:
        return (
            f"could not write the report to {path}: {os_error_text(exc)}; the job's outcome "
            f"and exit status are as shown (use --json to get the report on stdout)"
        )
    return None
