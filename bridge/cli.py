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
import errno
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from trainbridge.bridge import jsonform, machine
from trainbridge.bridge.cli_exit import (
    EXIT_HELP,
    EXIT_LAUNCH_FAILED,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    exit_status,
    write_report,
)
from trainbridge.bridge.cli_views import JsonView, make_view

if TYPE_CHECKING:
    from types import FrameType

    from trainbridge.bridge.job import Job

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
    _add_run(sub)
    if not light:
        _add_doctor(sub)
        _add_job_commands(sub)
    return parser


def _add_run(sub: Any) -> None:
    """`run`: the command, how long it may be silent, where its output goes."""
    run = sub.add_parser(
        "run",
        help="run a command under supervision",
        description="Run CMD under supervision with a live view; exit with its status.",
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_deadlines(run)
    _add_run_outputs(run)
    run.add_argument(
        "--no-zero-code",
        dest="zero_code",
        action="store_false",
        help="do not load the worker into the command's Python processes; only "
        "scripts that import trainbridge.worker themselves then say hello",
    )
    run.add_argument(
        "--stop-on-nan",
        action="append",
        metavar="METRIC",
        help="cancel the job when METRIC (a name the job reports, e.g. loss) first becomes NaN "
        "or infinite; repeat for more, '*' for every metric. Without it the job goes on and the "
        "report's training health says it",
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


def _add_run_deadlines(run: argparse.ArgumentParser) -> None:
    """The deadlines a hang is judged by (machine.DEFAULTS), and the kill's grace."""
    d = machine.DEFAULTS
    run.add_argument(
        "--startup-timeout",
        type=_seconds,
        default=d["startup_timeout"],
        metavar="S",
        help="after S seconds with no hello from any process of the command (default "
        f"{d['startup_timeout']:g}; 0 disables), look at its processes for a second: a "
        "tree with no Python yet (a shell script preparing data), or one using CPU, "
        "reading, writing or printing, is starting and gets S more; a Python process doing "
        "nothing is hung. In zero-code mode every Python process says hello as it starts. "
        "A process that loaded the worker but has not said hello yet is held to "
        "--heartbeat-timeout instead",
    )
    run.add_argument(
        "--stall-timeout",
        type=_seconds,
        default=d["stall_timeout"],
        metavar="S",
        help="hung if no progress or stage change for S seconds once the script "
        "reported any (default: off). backward() calls the zero-code hook counts are "
        "progress too, and at the deadline a busy main thread that moved through the "
        "script's own functions is computing, not hung: S more from when it last moved",
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


def _add_run_outputs(run: argparse.ArgumentParser) -> None:
    """Where the run's output, report and events go."""
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


def _add_job_commands(sub: Any) -> None:  # argparse's subparsers
    """submit, jobs, attach, cancel, logs: the job store's verbs (bridge/cli_jobs.py)."""
    from trainbridge.bridge import cli_jobs

    cli_jobs.add_commands(sub)


def _transparent_run(argv: list[str]) -> bool:
    """`run ... --transparent ... -- CMD`: the flag among the options, before the command."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return bool(options) and options[0] == "run" and "--transparent" in options


def _add_transparent(run: argparse.ArgumentParser) -> None:
    """`run --transparent` and its options (bridge/transparent.py owns them)."""
    from trainbridge.bridge import transparent

    transparent.add_arguments(run)


def _add_doctor(sub: Any) -> None:
    """`trainbridge doctor`, when bridge.doctor is there (another module owns it)."""
    try:
        from trainbridge.bridge import doctor
        from trainbridge.bridge.doctor import cli as doctor_cli
    except ImportError:
        return
    parser = sub.add_parser(
        "doctor",
        help="check this machine and environment before a run",
        description=(doctor.__doc__ or "").strip().splitlines()[0] if doctor.__doc__ else None,
    )
    doctor_cli.add_arguments(parser)
    parser.set_defaults(handler=doctor_cli.run_cli)


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(light=_transparent_run(argv))
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is not None:
        from trainbridge.bridge.store_errors import StoreError

        try:
            return int(handler(args) or 0)
        except StoreError as exc:  # one sentence with the cause and the fix, no traceback
            from trainbridge.bridge.cli_jobs import EXIT_STORE

            print(f"trainbridge {args.command}: {exc}", file=sys.stderr)
            return EXIT_STORE
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
        from trainbridge.bridge import listen, remote

        try:
            args.listen_at = listen.parse_listen(args.listen)
            remote.check_local(args.listen_at[0])
            remote.check_env_file(args.rank_env)
        except ValueError as exc:
            parser.error(f"run: {exc}")
        except OSError as exc:
            parser.error(f"run: --rank-env {exc}")
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
            stop_on_nan=args.stop_on_nan,
        )
    except (bridge.LaunchError, OSError) as exc:
        message = (
            f"trainbridge: could not start the command: {exc}. Check the path and that "
            f"it is executable (use the full path, e.g. .venv/bin/python)."
        )
        from trainbridge.bridge.job_output import LogFileError

        if isinstance(exc, LogFileError):  # not the command's fault: say what is wrong
            message = f"trainbridge: {exc} (--log)."
        if json_mode:
            print(
                jsonform.dumps({"event": "launch_failed", "message": message}),
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
    problem = write_report(args.report, report) if args.report else None
    view.close(report)
    if problem:
        print(f"trainbridge: warning: {problem}", file=sys.stderr, flush=True)
    return exit_status(report)


def _open_to_other_hosts(job: Job, args: argparse.Namespace, json_mode: bool) -> None:
    """--listen: listen for the other hosts' ranks and write the --rank-env file. A failure
    cancels the job: without its other nodes it would only wait in its rendezvous."""
    from trainbridge.bridge import remote

    try:
        variables = job.remote_env(*args.listen_at)
        remote.write_env_file(args.rank_env, variables)
    except Exception as exc:  # noqa: BLE001 -- ValueError, OSError, zmq.ZMQError: said in words
        job.cancel(grace=0, reason=f"--listen failed: {exc}")
        print(f"trainbridge: --listen failed, the job is cancelled: {exc}", file=sys.stderr)
        return
    endpoint = variables["TRAINBRIDGE_ENDPOINT"]
    if json_mode:
        event = {"event": "rank_env", "path": args.rank_env, "endpoint": endpoint}
        print(jsonform.dumps(event), flush=True)
    else:
        print(
            f"trainbridge: ranks of other hosts connect to {endpoint}; copy {args.rank_env} "
            f"to each (mode 0600) and there run `. {args.rank_env}` before torchrun",
            file=sys.stderr,
            flush=True,
        )


def launch_failure_status(exc: BaseException) -> int:
    """127 not found, 126 found but not executable, 125 trainbridge's own (as env(1))."""
    from trainbridge.bridge.job_output import LogFileError
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


def _forward_stop_signals(job: Job) -> Callable[[], None]:
    """Ctrl-C, SIGTERM, SIGHUP: cancel the job (a second one skips the in-band grace)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    count = [0]

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        count[0] += 1
        job.cancel(
            grace=None if count[0] == 1 else 0,
            reason=f"{signal.Signals(signum).name} to trainbridge",
        )

    previous: dict[signal.Signals, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


if __name__ == "__main__":
    sys.exit(main())
