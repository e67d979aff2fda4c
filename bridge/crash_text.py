"""What a job's crash file says, read from its text: which process's SIGUSR1 dump is where
(each begins with its "[trainbridge] pid N: stacks on SIGUSR1" line and ends at the next
"[trainbridge]" line), and which lines are stacks at all (the worker's own banner lines are
not). Pure: text in, values out; the file itself is read by bridge/report_files.py (when the
job ends) and bridge/job_dumps.py (while it hangs)."""

from __future__ import annotations

import re
from typing import Optional

SIGNAL_DUMP_MARK = re.compile(r"^\[trainbridge\] pid (\d+): stacks on SIGUSR1$", re.M)
_ANY_MARK = re.compile(r"^\[trainbridge\] ", re.MULTILINE)


def stacks_only(text: str) -> Optional[str]:
    """The crash file's text without the worker's "[trainbridge] ..." banner lines, keeping
    the line that heads each SIGUSR1 dump (it says whose the dump is); None when nothing is
    left. Only dumps count as stacks."""
    kept = "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith("[trainbridge]") or SIGNAL_DUMP_MARK.match(line)
    ).strip()
    return kept or None


def sigusr1_sections(text: str) -> dict[int, str]:
    """pid -> the stacks its SIGUSR1 handler wrote, from crash file text."""
    out: dict[int, str] = {}
    for m in SIGNAL_DUMP_MARK.finditer(text):
        rest = text[m.end() + 1 :]
        end = _ANY_MARK.search(rest)
        out[int(m.group(1))] = rest[: end.start()] if end else rest
    return out


def signal_dumped_in(text: Optional[str]) -> set[int]:
    """The processes whose SIGUSR1 handler wrote its stacks into this crash file text: their
    main thread ran Python, however late."""
    return {int(m) for m in SIGNAL_DUMP_MARK.findall(text or "")}
