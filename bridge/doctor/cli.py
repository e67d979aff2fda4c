"""`trainbridge doctor` on the command line: its arguments, the readable table, --json,
and the exit status (0 when nothing would stop a training job, 1 otherwise)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional, TextIO

from . import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, doctor

_DESCRIPTION = "`trainbridge doctor`: a hang-proof environment preflight for a training venv."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="interpreter of the training venv to check (default: this one)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as ASCII JSON")
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="deadline of each check, seconds (default %(default)s); past it: hung",
    )
    parser.add_argument(
        "--connect-timeout",
        metavar="S",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        help="deadline of each host probe, seconds (default %(default)s)",
    )
    parser.add_argument(
        "--host",
        metavar="HOST",
        action="append",
        default=[],
        help="also probe this host (URL, host:port or host); repeatable",
    )


VERDICT_STYLE = {
    "ok": "green",
    "warn": "yellow",
    "fail": "bold red",
    "hung": "bold magenta",
    "skip": "dim",
}


def render(report: dict[str, Any], file: Optional[TextIO] = None) -> None:
    """The readable table: one row per check, then the stacks of hung checks (plain lines
    where rich is not installed: it is optional)."""
    out = file or sys.stdout
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        _render_plain(report, out)
        return
    console = Console(file=out, highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = 140  # a pipe or a log file: do not squeeze details into 80 columns
    safe = _safe_for(out)
    table = Table(title=safe("trainbridge doctor: %s" % report["python"]), show_lines=False)
    for col in ("check", "verdict", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for row in report["checks"]:
        table.add_row(
            safe(row["name"]),
            Text(row["verdict"], style=VERDICT_STYLE.get(row["verdict"], "")),
            safe(row["detail"]),
            safe(row["fix"] or ""),
        )
    console.print(table)
    for row in report["checks"]:
        if row["stack"]:
            console.print(
                Text(safe("--- %s: %s\n%s" % (row["name"], row["verdict"], row["stack"].rstrip())))
            )
    console.print(Text(_closing(report)))


def _closing(report: dict[str, Any]) -> str:
    s = report["summary"]
    return "%d ok, %d warn, %d fail, %d hung, %d skip in %.1f s: %s" % (
        s["ok"],
        s["warn"],
        s["fail"],
        s["hung"],
        s["skip"],
        report["duration_s"],
        "nothing here would stop a training job"
        if report["ok"]
        else "fix the fail/hung rows before training",
    )


def _safe_for(out: TextIO) -> Callable[[str], str]:
    """Text as `out` can print it: a GBK or ASCII console must not crash doctor on a
    non-ASCII path in a stack."""
    encoding = getattr(out, "encoding", None) or "ascii"
    return lambda text: text.encode(encoding, "backslashreplace").decode(encoding)


def _render_plain(report: dict[str, Any], out: TextIO) -> None:
    safe = _safe_for(out)
    print(safe("trainbridge doctor: %s" % report["python"]), file=out)
    for row in report["checks"]:
        fix = f" (fix: {row['fix']})" if row["fix"] else ""
        print(safe(f"  {row['verdict']:<4}  {row['name']}: {row['detail']}{fix}"), file=out)
    for row in report["checks"]:
        if row["stack"]:
            print(
                safe("--- %s: %s\n%s" % (row["name"], row["verdict"], row["stack"].rstrip())),
                file=out,
            )
    print(_closing(report), file=out)


def run_cli(args: argparse.Namespace) -> int:
    """Run doctor with parsed arguments, print the table or JSON; returns the exit status."""
    report = doctor(args.python, args.timeout, args.host, connect_timeout=args.connect_timeout)
    if args.json:
        sys.stdout.write(json.dumps(report, ensure_ascii=True, indent=2) + "\n")
        sys.stdout.flush()
    else:
        render(report)
    code: int = report["exit_code"]
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="trainbridge doctor", description=_DESCRIPTION)
    add_arguments(parser)
    return run_cli(parser.parse_args(argv))
