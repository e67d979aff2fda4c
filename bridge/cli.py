"""`trainbridge`: the command line. `trainbridge run [options] -- CMD...` supervises CMD.

Exit status of `trainbridge run` (also in docs/CLIENT.md and --help), as env(1) and
timeout(1) have them:
  the child's own exit status when it exited by itself (0 = succeeded);
  1 when it failed but exited 0 (a fatal error was reported, or the worker was refused);
  128+N when it died by signal N (crashed: SIGSEGV -> 139, SIGKILL -> 137);
  124 when it was declared hung and stopped (like timeout(1));
  130 when it was cancelled (Ctrl-C, SIGTERM or SIGHUP to trainbridge);
  126 when the command was found but could not be executed (permissions, not a program);
  127 when the command was not found;
  125 when trainbridge itself failed (a bad cwd, the client cannot load);
  2 for a usage error.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Optional

from trainbridge.bridge import machine

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


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """'90' or '90s' -> 90.0, '10m' -> 600.0, '1h' -> 3600.0, '2.5' -> 2.5 (seconds, >= 0)."""
    raw = text.strip().lower()
    scale = _UNITS.get(raw[-1:], None) if raw else None
    number = raw[:-1] if scale is not None else raw
    try:
        value = float(number) * (scale or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give seconds (90, 2.5) or 90s, 10m, 1h"
        ) from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be >= 0 and finite")
    return value


def _seconds(text: str) -> Optional[float]:
    return parse_duration(text) or None


def build_parser(light: bool = False) -> argparse.ArgumentParser:
    """The CLI's parser; `light` leaves out subcommands with heavy imports (doctor, the
    job store's), for `run --transparent`, which must spawn its command fast."""
    parser = argparse.ArgumentParser(
        prog="trainbridge",
        description="Supervise a training process: always know if it is progressing, "
        "stalled, hung, crashed or failed, where and why.",
    )
    from trainbridge import __version__

    parser.add_argument(
        "--version",
        "-V",
        action="version",
        version=f"trainbridge {__version__} (Python {sys.version.split()[0]})",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    run = sub.add_parser(
        "run",
        help="run a command under supervision",
        description="Run CMD under supervision with a live view; exit with its status.",
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = machine.DEFAULTS
    run.add_argument(
        "--startup-timeout",
        type=_seconds,
        default=d["startup_timeout"],
        metavar="S",
        help="hung if the worker has not said hello after S seconds "
        f"(default {d['startup_timeout']:g}); only counts for scripts that import "
        "worker, others are never in 'starting' long",
    )
    run.add_argument(
        "--stall-timeout",
        type=_seconds,
        default=d["stall_timeout"],
        metavar="S",
        help="hung if no progress or stage change for S seconds once the script "
        "reported any (default: off)",
    )
    run.add_argument(
        "--heartbeat-timeout",
        type=_seconds,
        default=d["heartbeat_timeout"],
        metavar="S",
        help="hung if the worker's heartbeat is silent for S seconds "
        f"while the process lives (default {d['heartbeat_timeout']:g})",
    )
    run.add_argument(
        "--kill-grace",
        type=parse_duration,
        default=d["kill_grace"],
        metavar="S",
        help=f"seconds between SIGTERM and SIGKILL (default {d['kill_grace']:g})",
    )
    run.add_argument(
        "--log",
        metavar="FILE",
        help="append every output line to FILE (UTF-8), and the final summary at the end",
    )
    run.add_argument(
        "--log-timestamps",
        action="store_true",
        help="start each line of the --log file with its UTC time",
    )
    run.add_argument(
        "--report",
        metavar="FILE",
        help="write the final report to FILE (ASCII JSON, docs/report.schema.json)",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="print events as JSON lines (ASCII) instead of the live view; "
        "the last line is the end event with the report",
    )
    run.add_argument(
        "--no-zero-code",
        dest="zero_code",
        action="store_false",
        help="do not load the worker into the command's Python processes; only "
        "scripts that import trainbridge.worker themselves then say hello",
    )
    run.add_argument(
        "--listen",
        metavar="ADDR[:PORT]",
        help="also accept ranks of other hosts (torchrun --nnodes>1) on tcp ADDR:PORT, "
        "authenticated with CurveZMQ; needs --rank-env (docs/CLIENT.md, Other hosts)",
    )
    run.add_argument(
        "--rank-env",
        metavar="FILE",
        help="with --listen: write the variables the other hosts' torchrun needs to FILE "
        "(mode 0600); there, `. FILE` before torchrun",
    )
    _add_transparent(run)
    run.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments"
    )
    if not light:
        _add_doctor(sub)
        _add_job_commands(sub)
    return parser


def _add_job_commands(sub) -> None:
    """submit, jobs, attach, cancel, logs: the job store's verbs (bridge/cli_jobs.py)."""
    from trainbridge.bridge import cli_jobs

    cli_jobs.add_commands(sub)


def _transparent_run(argv: list[str]) -> bool:
    """`run ... --transparent ... -- CMD`: the flag among the options, before the command."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return bool(options) and options[0] == "run" and "--transparent" in options


def _add_transparent(run) -> None:
    """`run --transparent` and its options (bridge/transparent.py owns them)."""
    from trainbridge.bridge import transparent

    transparent.add_arguments(run)


def _add_doctor(sub) -> None:
    """`trainbridge doctor`, when bridge.doctor is there (another module owns it)."""
    try:
        from trainbridge.bridge import doctor
    except ImportError:
        return
    parser = sub.add_parser(
        "doctor",
        help="check this machine and environment before a run",
        description=(doctor.__doc__ or "").strip().splitlines()[0] if doctor.__doc__ else None,
    )
    doctor.add_arguments(parser)
    parser.set_defaults(handler=doctor.run_cli)


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(light=_transparent_run(argv))
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is not None:
        return int(handler(args) or 0)
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        parser.error("run: no command given (trainbridge run [options] -- CMD ...)")
    if bool(getattr(args, "listen", None)) != bool(getattr(args, "rank_env", None)):
        parser.error("run: --listen and --rank-env go together (docs/CLIENT.md, Other hosts)")
    if getattr(args, "listen", None):
        if getattr(args, "transparent", False):
            parser.error("run: --listen is not available with --transparent")
        from trainbridge.bridge import remote

        try:
            args.listen_at = remote.parse_listen(args.listen)
        except ValueError as exc:
            parser.error(f"run: {exc}")
    if getattr(args, "transparent", False):
        from trainbridge.bridge import transparent

        return transparent.run(args, cmd)
    return run(args, cmd)


def run(args: argparse.Namespace, cmd: list[str]) -> int:
    from trainbridge import bridge

    json_mode = bool(args.json)
    view = JsonView() if json_mode else make_view(cmd, args.log)
    try:
        job = bridge.launch(
            cmd,
            startup_timeout=args.startup_timeout,
            stall_timeout=args.stall_timeout,
            heartbeat_timeout=args.heartbeat_timeout,
            kill_grace=args.kill_grace,
            log_path=args.log,
            zero_code=args.zero_code,
            log_timestamps=args.log_timestamps,
        )
    except (bridge.LaunchError, OSError) as exc:
        message = (
            f"trainbridge: could not start the command: {exc}. Check the path and that "
            f"it is executable (use the full path, e.g. .venv/bin/python)."
        )
        from trainbridge.bridge.job import LogFileError

        if isinstance(exc, LogFileError):  # not the command's fault: say what is wrong
            message = f"trainbridge: {exc} (--log)."
        if json_mode:
            print(
                json.dumps({"event": "launch_failed", "message": message}, ensure_ascii=True),
                flush=True,
            )
        else:
            print(message, file=sys.stderr)
        return launch_failure_status(exc)
    if args.listen:
        _open_to_other_hosts(job, args, json_mode)
    restore = _forward_stop_signals(job)
    try:
        report = view.follow(job)
    finally:
        restore()
    problem = _write_report(args.report, report) if args.report else None
    view.close(report)
    if problem:
        print(f"trainbridge: warning: {problem}", file=sys.stderr, flush=True)
    return exit_status(report)


def _open_to_other_hosts(job, args: argparse.Namespace, json_mode: bool) -> None:
    """--listen: listen for the other hosts' ranks and write the --rank-env file. A failure
    cancels the job: without its other nodes it would only wait in its rendezvous."""
    from trainbridge.bridge import remote

    try:
        variables = job.remote_env(*args.listen_at)
        remote.write_env_file(args.rank_env, variables)
    except (ValueError, OSError, RuntimeError) as exc:
        job.cancel(grace=0, reason=f"--listen failed: {exc}")
        print(f"trainbridge: --listen failed, the job is cancelled: {exc}", file=sys.stderr)
        return
    endpoint = variables["TRAINBRIDGE_ENDPOINT"]
    if json_mode:
        event = {"event": "rank_env", "path": args.rank_env, "endpoint": endpoint}
        print(json.dumps(event, ensure_ascii=True), flush=True)
    else:
        print(
            f"trainbridge: ranks of other hosts connect to {endpoint}; copy {args.rank_env} "
            f"to each (mode 0600) and there run `. {args.rank_env}` before torchrun",
            file=sys.stderr,
            flush=True,
        )


def launch_failure_status(exc: BaseException) -> int:
    """127 not found, 126 found but not executable, 125 trainbridge's own (as env(1))."""
    from trainbridge.bridge.job import LogFileError
    from trainbridge.bridge.launcher import LaunchError

    if not isinstance(exc, LaunchError) or isinstance(exc, LogFileError):
        return EXIT_LAUNCH_FAILED  # ours, e.g. the --log file cannot be opened
    cause = exc.__cause__
    if isinstance(cause, FileNotFoundError):
        return EXIT_NOT_FOUND
    if (
        isinstance(cause, (PermissionError, IsADirectoryError))
        or getattr(cause, "errno", None) == errno.ENOEXEC
    ):  # not a program
        return EXIT_NOT_EXECUTABLE
    return EXIT_LAUNCH_FAILED


def _forward_stop_signals(job) -> Any:
    """Ctrl-C, SIGTERM, SIGHUP: cancel the job (a second one skips the in-band grace)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    count = [0]

    def handler(signum, frame):
        count[0] += 1
        job.cancel(
            grace=None if count[0] == 1 else 0,
            reason=f"{signal.Signals(signum).name} to trainbridge",
        )

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, handler)

    def restore():
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def _write_report(path: str, report: dict[str, Any]) -> Optional[str]:
    """Write the report atomically (a temp file renamed over `path`). A disk that refuses
    it (read-only, full) changes neither the job's exit status nor its summary: returns
    what went wrong, for one warning, and leaves no temp file behind."""
    from trainbridge.bridge.job import os_error_text
    from trainbridge.bridge.report import to_json

    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="ascii") as f:
            f.write(to_json(report) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return (
            f"could not write the report to {path}: {os_error_text(exc)}; the job's outcome "
            f"and exit status are as shown (use --json to get the report on stdout)"
        )
    return None


# --- views ----------------------------------------------------------------------------
class JsonView:
    """One ASCII JSON object per event on stdout; the last is "end" with the report."""

    def follow(self, job) -> dict[str, Any]:
        report = None
        while report is None:
            event = job.next_event(0.2)
            if event is None:
                continue
            print(json.dumps(event, ensure_ascii=True, default=str), flush=True)
            if event["event"] == "end":
                report = event["report"]
        return report

    def close(self, report: dict[str, Any]) -> None:
        pass


def make_view(cmd: list[str], log_path: Optional[str] = None):
    from rich.console import Console

    console = Console()
    return LiveView(console, cmd) if console.is_terminal else PlainView(console, log_path)


class ViewModel:
    """What the views show, updated from events (pure bookkeeping, no terminal)."""

    def __init__(self, lines: int = 8):
        self.state = "starting"
        self.pid: Optional[int] = None
        self.stages: list[str] = []
        self.step = self.total = None
        self.metrics: dict[str, Any] = {}
        self.rate: Optional[float] = None
        self._samples: collections.deque = collections.deque(maxlen=20)
        self.beat_t: Optional[float] = None
        self.worker = False
        self.notes: list[str] = []
        self.lines: collections.deque = collections.deque(maxlen=lines)
        self.started = time.monotonic()
        self.progress_t: Optional[float] = None  # when the last progress came
        self.output_t: Optional[float] = None  # when the last output line came
        self.live: Optional[dict[str, Any]] = None  # the diagnosis while stalled (issue 12)
        self.ranks: dict[int, dict[str, Any]] = {}  # rank -> its own stage, step, state

    def update(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "state":
            self.state = event["state"]
            if self.state != "stalled":
                self.live = None
        elif kind == "stalled":
            self.live = event.get("diagnosis")
        elif kind == "output":
            self.output_t = time.monotonic()
            if self.lines and self.lines[-1][1] == "cr":
                self.lines.pop()  # a progress bar redrawing itself
            self.lines.append((event["text"], event["end"], event["stream"]))
        elif kind == "message":
            self.beat_t = time.monotonic()
            body = event["body"]
            if not (event.get("sender") or {}).get("lead", True):
                self._other(event)  # another process of the job: its own line, not the job's
                return
            if event["kind"] == "hello":
                self.worker = True
                self.pid = body.get("pid")
            elif event["kind"] == "stage":
                key = (body["name"], body.get("depth"))
                if body["event"] == "begin":
                    self.stages.append(key)
                elif key in self.stages:
                    del self.stages[len(self.stages) - 1 - self.stages[::-1].index(key) :]
            elif event["kind"] == "progress":
                self.step, self.total = body.get("step"), body.get("total")
                self.metrics = body.get("metrics") or {}
                now = self.progress_t = time.monotonic()
                self._samples.append((now, self.step))
                t0, s0 = self._samples[0]
                if now > t0 and isinstance(self.step, (int, float)) and self.step > s0:
                    self.rate = (self.step - s0) / (now - t0)
        elif kind == "hang":
            self.notes.append(
                f"hung ({event['reason'].replace('_', ' ')}): collecting stacks, "
                "then stopping the process tree"
            )
        elif kind == "signal":
            self.notes.append(f"sent {event['signal']}")
        elif kind == "log_error":
            self.notes.append(loss_note(event, None))

    def _other(self, event: dict[str, Any]) -> None:
        """A process that does not lead: a distributed rank's stage, step and failure are
        kept for its own compact line, never mixed into the job's."""
        sender, body = event["sender"], event["body"]
        if sender.get("rank") is None:
            return
        mine = self.ranks.setdefault(
            sender["rank"], {"stage": None, "step": None, "state": "running"}
        )
        if event["kind"] == "stage":
            mine["stage"] = body["name"] if body["event"] == "begin" else None
        elif event["kind"] == "progress":
            mine["step"] = body.get("step")
        elif event["kind"] == "error" and body.get("fatal"):
            mine["state"] = "failed"

    def ranks_line(self) -> Optional[str]:
        """'1 data 40 | 2 failed | 3 train 41': the other ranks, compactly (the lead's are
        the job's stage and progress above)."""
        if not self.ranks:
            return None
        parts = []
        for rank in sorted(self.ranks)[:8]:
            r = self.ranks[rank]
            bits = [str(rank), "failed" if r["state"] == "failed" else (r["stage"] or "-")]
            if r["step"] is not None and r["state"] != "failed":
                bits.append(_fmt(r["step"]))
            parts.append(" ".join(bits))
        more = len(self.ranks) - 8
        return " | ".join(parts) + (f" | +{more} more" if more > 0 else "")

    def eta(self, now: Optional[float] = None) -> Optional[float]:
        rate = self.rate_now(now)
        if rate and self.total and isinstance(self.step, (int, float)):
            return max(0.0, (self.total - self.step) / rate)
        return None

    def idle_s(self, now: Optional[float] = None) -> Optional[float]:
        """Seconds since the last progress (None before any)."""
        if self.progress_t is None:
            return None
        return max(0.0, (now if now is not None else time.monotonic()) - self.progress_t)

    def rate_now(self, now: Optional[float] = None) -> Optional[float]:
        """The rate over the recent samples measured up to now, not up to the last sample:
        during a stall it falls instead of freezing (issue 12 item 8: "38.77 step/s" was
        shown while nothing moved)."""
        now = now if now is not None else time.monotonic()
        if not self._samples or not isinstance(self.step, (int, float)):
            return None
        t0, s0 = self._samples[0]
        if now <= t0 or self.step <= s0:
            return 0.0 if self.rate else None
        return (self.step - s0) / (now - t0)

    def progress_text(self, now: Optional[float] = None) -> str:
        """'301/?  12.40 step/s  loss=2.31' (no ETA without a total; metadata keys such as
        source=optimizer are not metrics), plus 'idle 14 s' once progress stops."""
        now = now if now is not None else time.monotonic()
        info = f"{_fmt(self.step)}/{_fmt(self.total) if self.total else '?'}"
        rate = self.rate_now(now)
        if rate is not None:
            info += f"  {rate:.2f} step/s"
        eta = self.eta(now)
        if eta is not None:
            info += f"  ETA {_clock(eta)}"
        idle = self.idle_s(now)
        if idle is not None and (idle >= 2 or self.state == "stalled"):
            info += f"  idle {idle:.0f} s"
        shown = [(k, v) for k, v in self.metrics.items() if k not in _PROGRESS_METADATA]
        metrics = "  ".join(f"{k}={_fmt(v)}" for k, v in shown[:4])
        return f"{info}  {metrics}".rstrip()


class LiveView:
    """rich live view: state, stage, progress bar with rate and ETA, heartbeat age, output."""

    def __init__(self, console, cmd: list[str]):
        self.console = console
        self.cmd = cmd
        self.model = ViewModel()
        self.job = None

    def follow(self, job) -> dict[str, Any]:
        from rich.live import Live

        self.job = job
        report = None
        # Not transient: the last frame (stage, progress) stays on screen above the summary.
        with Live(self, console=self.console, refresh_per_second=8, transient=False) as live:
            while report is None:
                event = job.next_event(0.2)
                if event is None:
                    continue
                self.model.update(event)
                if event["event"] == "output" and event["end"] != "cr":
                    self._print_above(live.console, event)
                if event["event"] == "end":
                    report = event["report"]
        return report

    @staticmethod
    def _print_above(console, event: dict[str, Any]) -> None:
        """A finished output line goes above the live view (as rich and tqdm print), so the
        terminal's scrollback keeps every line; only a bar's redraw stays in the view."""
        from rich.text import Text

        console.print(
            Text(event["text"], style="red" if event["stream"] == "stderr" else ""),
            soft_wrap=True,
            highlight=False,
            markup=False,
            emoji=False,
        )

    def __rich__(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        m = self.model
        colours = {"starting": "yellow", "running": "green", "stalled": "magenta", "ended": "cyan"}
        head = Text.assemble(
            ("trainbridge ", "bold"),
            (m.state, f"bold {colours.get(m.state, '')}"),
            f"  pid {self.job.pid if self.job else '?'}",
            f"  {_clock(time.monotonic() - m.started)}  ",
            (" ".join(self.cmd)[:80], "dim"),
        )
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        grid.add_row("stage", " > ".join(name for name, _ in m.stages) if m.stages else "-")
        if m.step is not None:
            row = Table.grid(padding=(0, 1))
            if m.total:
                row.add_row(
                    ProgressBar(total=float(m.total), completed=float(m.step), width=30),
                    Text(m.progress_text()),
                )
            else:  # an unknown total is no bar at all, not a full one
                row.add_row(Text(m.progress_text() + "  (total unknown)"))
            grid.add_row("progress", row)
        elif m.output_t is not None:
            grid.add_row("output", f"last output {time.monotonic() - m.output_t:.0f} s ago")
        if m.state == "stalled" and m.live:
            grid.add_row(
                "why", Text(f"{m.live.get('kind')}: {m.live.get('summary')}", style="magenta")
            )
        if m.worker:
            age = time.monotonic() - m.beat_t if m.beat_t else None
            grid.add_row("heartbeat", f"{age:.1f} s ago" if age is not None else "-")
        else:
            grid.add_row("heartbeat", Text("no worker in this process (yet)", style="dim"))
        ranks = m.ranks_line()
        if ranks:
            grid.add_row("ranks", ranks)
        for note in m.notes[-2:]:
            grid.add_row("note", Text(note, style="red"))
        out = Text()
        if m.lines and m.lines[-1][1] == "cr":  # a bar redrawing itself; full lines are above
            text, _, stream = m.lines[-1]
            out.append_text(_screen_line(text, self.console.width - 4, stream == "stderr"))
            out.append("\n")
        return Group(head, grid, Text("-" * min(60, self.console.width), style="dim"), out)

    def close(self, report: dict[str, Any]) -> None:
        print_summary(self.console, report)


def loss_note(
    event: dict[str, Any], log_path: Optional[str], log_error: Optional[dict[str, Any]] = None
) -> str:
    """What a `dropped` or `log_error` event means for the user, and where to look
    (`log_error`: the log file itself stopped at some line)."""
    if event["event"] == "log_error":
        return (
            f"warning: the log file {event['path']} is incomplete from line "
            f"{event['from_line']} on: {event['error']}"
        )
    spans = [
        f"{stream} lines {first}-{last}" if first != last else f"{stream} line {first}"
        for stream, (first, last) in sorted((event.get("lines") or {}).items())
    ]
    kinds = event.get("kinds") or {}
    other = event["count"] - kinds.get("output", 0)
    missed = ", ".join(spans) if spans else "no output lines"
    if other:
        missed += f" and {other} other event{'s' if other != 1 else ''}"
    if log_path and log_error:
        where = (
            f"{log_path} has the lines before its line {log_error['from_line']} only "
            f"({log_error['error']})"
        )
    elif log_path:
        where = f"every line is in {log_path}"
    else:
        where = "run with --log FILE to keep every line"
    return f"not shown here: {missed} (this view fell behind the job's output); {where}"


class PlainView:
    """No terminal (a pipe or a file): output lines as they come, then the summary. What it
    could not keep up with is said, exactly (loss_note), never skipped silently."""

    def __init__(self, console, log_path: Optional[str] = None):
        self.console = console
        self.log_path = log_path
        self.log_error: Optional[dict[str, Any]] = None

    def follow(self, job) -> dict[str, Any]:
        while True:
            event = job.next_event(0.2)
            if event is None:
                continue
            kind = event["event"]
            if kind == "output" and event["end"] != "cr":
                stream = sys.stdout if event["stream"] == "stdout" else sys.stderr
                stream.write(
                    event["text"].encode("utf-8", "backslashreplace").decode("utf-8") + "\n"
                )
                stream.flush()
            elif (
                kind == "message" and event["kind"] == "stage" and event["body"]["event"] == "begin"
            ):
                self._note(f"stage {event['body']['name']}")
            elif kind == "hang":
                self._note(f"hung ({event['reason']}): collecting stacks, then stopping the tree")
            elif kind in ("dropped", "log_error"):
                self._note(loss_note(event, self.log_path, self.log_error))
                if kind == "log_error":
                    self.log_error = event
            elif kind == "end":
                return event["report"]

    def _note(self, text: str) -> None:
        sys.stderr.write(f"[trainbridge] {text}\n")
        sys.stderr.flush()

    def close(self, report: dict[str, Any]) -> None:
        print_summary(self.console, report)


def print_summary(console, report: dict[str, Any]) -> None:
    from rich.text import Text

    colours = {
        "succeeded": "bold green",
        "failed": "bold red",
        "crashed": "bold red",
        "hung": "bold magenta",
        "cancelled": "bold yellow",
    }
    text = Text("trainbridge: ", style="bold")
    text.append(report.get("summary", ""), style=colours.get(report.get("outcome"), ""))
    # soft_wrap: never hard-wrapped (a pipe or a file has no width; a terminal wraps itself).
    console.print(text, soft_wrap=True)


# Progress metrics that describe the source, not the training (zero-code's source=optimizer,
# a tqdm bar's name and unit): shown elsewhere or not at all.
_PROGRESS_METADATA = frozenset({"source", "bar", "unit"})


def _screen_line(text: str, width: int, stderr: bool):
    """One output line for the live view: its terminal escapes become styles (never cut in
    the middle, which left a stray "[1" on screen), cut to `width` cells."""
    from rich.text import Text

    line = Text.from_ansi(text, no_wrap=True)
    line.truncate(max(1, width))
    if stderr:
        line.stylize("red")
    return line


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
