"""`trainbridge submit | jobs | attach | cancel | logs`: the CLI over the job store.

    trainbridge submit --gpus 1 -- python train.py     # prints the job id
    trainbridge jobs                                   # a table of the store's jobs
    trainbridge attach ID [--now | --from N]           # the live view of `run`, from the start
                                                       # (Ctrl-C detaches; the job goes on)
    trainbridge cancel ID
    trainbridge logs ID [-f]

Every verb takes --store PATH (default $TRAINBRIDGE_STORE or the per-user data directory,
docs/STORE.md). `attach` exits with the job's status, as `run` does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import TYPE_CHECKING, Any, Optional

from trainbridge.bridge import jsonform

if TYPE_CHECKING:
    from trainbridge.bridge.scheduler import Scheduler

EXIT_NOT_FOUND = 3
EXIT_STORE = 4  # the job store cannot be used (bridge/store_errors.py says why)


def add_commands(sub: Any) -> None:  # argparse's subparsers
    """The store's verbs, each with its options."""
    for add in (_add_submit, _add_jobs, _add_attach, _add_verbs_on_one_job, _add_queue_verbs):
        add(sub)


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="the job store (default: $TRAINBRIDGE_STORE or ~/.local/share/trainbridge/jobs.db)",
    )


def _add_submit(sub: Any) -> None:
    from trainbridge.bridge import machine

    p = sub.add_parser(
        "submit",
        help="queue a command in the job store (runs under a keeper)",
        description="Queue CMD; it starts at once when its slots are free and "
        "runs under its own keeper, whatever happens to this shell.",
    )
    _store_option(p)
    d = machine.DEFAULTS
    p.add_argument("--gpus", type=int, default=0, metavar="N", help="GPUs the job needs")
    p.add_argument("--priority", type=int, default=0, help="higher starts first (default 0)")
    p.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="N",
        help="restart a failed attempt up to N times (default 0)",
    )
    p.add_argument(
        "--restart-backoff",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds before the first restart, doubled each time (default 1)",
    )
    for name in ("startup_timeout", "stall_timeout", "heartbeat_timeout"):
        p.add_argument(
            "--" + name.replace("_", "-"),
            type=float,
            default=None,
            metavar="S",
            help=f"as for run (default {d[name]}; 0 disables)",
        )
    p.add_argument(
        "--no-zero-code",
        dest="zero_code",
        action="store_false",
        help="as for run: only scripts that import trainbridge.worker say hello",
    )
    p.add_argument(
        "--stop-on-nan",
        action="append",
        metavar="METRIC",
        help="as for run: cancel the job when METRIC (e.g. loss) first becomes NaN or infinite; "
        "repeat for more, '*' for every metric",
    )
    p.add_argument("--name", help="a name for the job, shown by `jobs`")
    p.add_argument(
        "--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeat for more)"
    )
    p.add_argument("--meta", metavar="JSON", help="free metadata, a JSON object, kept in the row")
    p.add_argument("--log", dest="log_path", metavar="PATH", help="write the output log there")
    p.add_argument("--cwd", help="working directory (default: this one)")
    p.add_argument("--attach", action="store_true", help="then follow it like `attach`")
    p.add_argument("--json", action="store_true", help="print {\"id\": ...} as JSON")
    slurm_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(handler=submit)


def _add_jobs(sub: Any) -> None:
    p = sub.add_parser("jobs", help="list the store's jobs")
    _store_option(p)
    p.add_argument(
        "--state",
        help="only this state (queued, running, ended, ...; 'active' for every unfinished one)",
    )
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    p.add_argument("--tag", help="only the jobs submitted with this tag")
    p.add_argument("--json", action="store_true", help="the rows as a JSON list")
    p.set_defaults(handler=jobs)


def _add_attach(sub: Any) -> None:
    p = sub.add_parser("attach", help="follow a stored job with the live view of run")
    _store_option(p)
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="events as JSON lines, as run --json")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--now",
        action="store_true",
        help="start from the job's state and last status, not its first event (a long log)",
    )
    where.add_argument(
        "--from",
        dest="from_seq",
        type=int,
        metavar="N",
        help="start from event number N of the job's feed (each --json event has its 'seq')",
    )
    p.set_defaults(handler=attach)


def _add_verbs_on_one_job(sub: Any) -> None:
    """cancel, rerun, forget and logs: each names one job."""
    p = sub.add_parser("cancel", help="cancel a queued or running job")
    _store_option(p)
    p.add_argument("id")
    p.add_argument("--wait", action="store_true", help="wait until it has ended")
    p.set_defaults(handler=cancel)

    p = sub.add_parser("rerun", help="queue a new job with a stored job's spec")
    _store_option(p)
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="print {\"id\": ...} as JSON")
    p.set_defaults(handler=rerun)

    p = sub.add_parser("forget", help="delete an ended job's row and files")
    _store_option(p)
    p.add_argument("id")
    p.set_defaults(handler=forget)

    p = sub.add_parser("logs", help="print a stored job's output")
    _store_option(p)
    p.add_argument("id")
    p.add_argument("-f", "--follow", action="store_true", help="go on until the job ends")
    p.set_defaults(handler=logs)


def _add_queue_verbs(sub: Any) -> None:
    """pause, resume and retention: the store's own settings, for every process on it."""
    for verb, text in (
        ("pause", "start no queued job until resume (running jobs go on)"),
        ("resume", "start queued jobs again"),
    ):
        p = sub.add_parser(verb, help=text)
        _store_option(p)
        p.set_defaults(handler=pause_or_resume)

    p = sub.add_parser(
        "retention", help="show or set how many ended jobs the store keeps (for every process)"
    )
    _store_option(p)
    p.add_argument(
        "keep",
        nargs="?",
        metavar="N|all",
        help="keep the newest N ended jobs, forgetting older ones with their files; all: keep all",
    )
    p.set_defaults(handler=retention)


SLURM_FLAGS = (
    "nodes",
    "ntasks_per_node",
    "cpus_per_task",
    "gres",
    "time",
    "partition",
    "account",
    "qos",
)


def slurm_options(p: argparse.ArgumentParser) -> None:
    """submit --slurm: the job goes to Slurm with sbatch (docs/SCALE.md)."""
    g = p.add_argument_group("Slurm (docs/SCALE.md)")
    g.add_argument("--slurm", action="store_true", help="submit it to Slurm with sbatch")
    g.add_argument(
        "--listen",
        metavar="ADDR",
        help="with --slurm: this host's address that the nodes reach (the job's processes "
        "connect back to it)",
    )
    for name, kind, text in (
        ("nodes", int, "nodes"),
        ("ntasks_per_node", int, "tasks per node"),
        ("cpus_per_task", int, "CPUs per task"),
        ("gres", str, "generic resources, e.g. gpu:2"),
        ("time", str, "time limit, as sbatch reads it (e.g. 2:00:00)"),
        ("partition", str, "partition"),
        ("account", str, "account"),
        ("qos", str, "quality of service"),
    ):
        g.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            metavar="N" if kind is int else name.upper(),
            help=f"with --slurm: {text}",
        )
    g.add_argument(
        "--sbatch",
        action="append",
        metavar="OPTION",
        help="with --slurm: one more sbatch option, e.g. --sbatch=--mem=8G (repeat for more)",
    )


def _slurm(args: argparse.Namespace) -> Optional[dict[str, Any]]:
    names = (*SLURM_FLAGS, "sbatch", "listen")
    given = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if not args.slurm:
        if given:
            raise ValueError(f"--{sorted(given)[0].replace('_', '-')} goes with --slurm")
        return None
    return given


def _scheduler(args: argparse.Namespace, create: bool = False, backend: str = "local") -> Scheduler:
    """The store's Scheduler. A store is made only by submit, or at the default path: a
    --store path that is not there (mistyped?) is an error for the other verbs."""
    from trainbridge.bridge.scheduler import Scheduler

    sched = Scheduler(
        store=args.store, tick=None, create=create or args.store is None, backend=backend
    )
    if sched.tick_error is not None:
        print(f"trainbridge: {sched.tick_error} (the rows may be stale)", file=sys.stderr)
    return sched


def _missing(args: argparse.Namespace, sched: Scheduler) -> int:
    print(
        f"trainbridge: no job {args.id!r} in {sched.path}; `trainbridge jobs` lists them",
        file=sys.stderr,
    )
    return EXIT_NOT_FOUND


def submit(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print(
            "trainbridge submit: no command given (trainbridge submit [options] -- CMD ...)",
            file=sys.stderr,
        )
        return 2
    timeouts = {
        name: (getattr(args, name) or None)
        for name in ("startup_timeout", "stall_timeout", "heartbeat_timeout")
        if getattr(args, name) is not None
    }
    try:
        meta = None if args.meta is None else json.loads(args.meta)
    except ValueError as exc:
        print(f"trainbridge submit: --meta is not JSON: {exc}", file=sys.stderr)
        return 2
    try:
        on_slurm = _slurm(args)
    except ValueError as exc:
        print(f"trainbridge submit: {exc}", file=sys.stderr)
        return 2
    with _scheduler(
        args, create=True, backend="slurm" if on_slurm is not None else "local"
    ) as sched:
        try:
            job_id = sched.submit(
                cmd,
                cwd=args.cwd,
                timeouts=timeouts,
                resources={"gpus": args.gpus},
                priority=args.priority,
                max_restarts=args.max_restarts,
                restart_backoff=args.restart_backoff,
                zero_code=args.zero_code,
                stop_on_nan=args.stop_on_nan,
                name=args.name,
                tags=args.tags,
                meta=meta,
                log_path=args.log_path,
                slurm=on_slurm,
            )
        except ValueError as exc:
            print(f"trainbridge submit: {exc}", file=sys.stderr)
            return 2
        row = sched.get(job_id)
        assert row is not None  # just submitted (forget refuses an active job)
        state = row["state"]
    if args.json:
        print(json.dumps({"id": job_id, "state": state}))
    else:
        print(job_id)
        if state == "queued":
            print(
                f"trainbridge: {job_id} is queued; it starts when a running job ends (or a "
                f"Scheduler frees its slots)",
                file=sys.stderr,
            )
    if args.attach:  # attach's own options at their defaults: from the start
        args.id, args.now, args.from_seq = job_id, False, None
        return attach(args)
    return 0


# `jobs`' table: its columns, and the colour of each state and outcome word in a terminal.
JOBS_COLUMNS = (
    "ID",
    "NAME",
    "STATE",
    "OUTCOME",
    "STAGE",
    "PROGRESS",
    "TRY",
    "GPUS",
    "SUBMITTED",
    "COMMAND",
)
WORD_COLOURS = {
    "running": "green",
    "stalled": "magenta",
    "queued": "yellow",
    "succeeded": "green",
    "failed": "red",
    "crashed": "red",
    "hung": "magenta",
    "lost": "red",
    "cancelled": "yellow",
}


def jobs(args: argparse.Namespace) -> int:
    with _scheduler(args) as sched:
        rows = sched.jobs(args.state, args.limit, args.tag)
        retained = sched.forgotten()
    if retained.get("count"):  # jobs a list no longer shows: said, on stderr
        print(f"trainbridge: {forgotten_line(retained)}", file=sys.stderr)
    if args.json:
        print(jsonform.dumps(rows, default=str))
    elif not rows:
        print("no jobs" + (f" in state {args.state}" if args.state else ""))
    else:
        _print_table([_job_cells(row) for row in rows])
    return 0


def _job_cells(row: dict[str, Any]) -> list[str]:
    """One row of the store as the table's cells, in JOBS_COLUMNS' order."""
    progress = row.get("progress") or {}
    step = progress.get("step")
    total = progress.get("total")
    gpus = ",".join(map(str, (row.get("assigned") or {}).get("gpus") or [])) or (
        str((row.get("resources") or {}).get("gpus") or "") or "-"
    )
    return [
        row["id"],
        row.get("name") or "-",
        row["state"],
        row["outcome"] or "-",
        row.get("stage") or "-",
        "-" if step is None else f"{step}/{total}" if total else str(step),
        str(row.get("attempt") or 0),
        gpus,
        datetime.datetime.fromtimestamp(row["submitted_at"]).strftime("%m-%d %H:%M:%S"),
        " ".join(row["command"]),
    ]


def _print_table(cells: list[list[str]]) -> None:
    """The table with rich (state and outcome in colour), or plain columns without it."""
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:  # rich is optional: the same columns, plain
        lines = [list(JOBS_COLUMNS), *cells]
        widths = [max(len(c[i]) for c in lines) for i in range(len(JOBS_COLUMNS))]
        for line in lines:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
        return
    table = Table(box=None, header_style="bold")
    for name in JOBS_COLUMNS:
        table.add_column(name, no_wrap=True, overflow="ellipsis" if name == "COMMAND" else "fold")
    for line in cells:
        state, outcome = line[2], line[3]
        table.add_row(
            *line[:2],
            Text(state, style=WORD_COLOURS.get(state, "")),
            Text(outcome, style=WORD_COLOURS.get(outcome, "")),
            *line[4:],
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a pipe: whole ids and commands, not ellipses
    console.print(table)


def attach(args: argparse.Namespace) -> int:
    from trainbridge.bridge import cli_exit, cli_views

    with _scheduler(args) as sched:
        if sched.get(args.id) is None:
            return _missing(args, sched)
        since = args.from_seq if args.from_seq is not None else "now" if args.now else "start"
        try:
            job = sched.attach(args.id, since=since)
        except ValueError as exc:  # a bad number, or a feed an older release wrote
            print(f"trainbridge: attach {args.id}: {exc}", file=sys.stderr)
            return 2  # usage error (cli_exit.EXIT_HELP)
    view = cli_views.JsonView() if args.json else cli_views.make_view(job.cmd)
    # Ctrl-C stops following, not the job: it runs under its keeper for whoever comes next.
    try:
        report = view.follow(job)
    except KeyboardInterrupt:
        print(
            f"\ntrainbridge: stopped following {args.id}; it goes on under its keeper "
            f"(trainbridge cancel {args.id} stops it"
            + (
                f"; trainbridge attach {args.id} --from {job.position + 1} goes on from here)"
                if job.position is not None
                else ")"
            ),
            file=sys.stderr,
        )
        return cli_exit.EXIT_CANCELLED
    finally:
        job.close()
    view.close(report)
    return cli_exit.exit_status(report)


def cancel(args: argparse.Namespace) -> int:
    with _scheduler(args) as sched:
        row = sched.get(args.id)
        if row is None:
            return _missing(args, sched)
        if not sched.cancel(args.id):
            print(f"trainbridge: {args.id} already ended ({row['outcome']})", file=sys.stderr)
            return 0
        if args.wait:
            report = sched.attach(args.id).wait()
            assert report is not None  # waited without a timeout: the end's report
            print(f"trainbridge: {args.id} {report.get('outcome')}")
    return 0


def rerun(args: argparse.Namespace) -> int:
    with _scheduler(args) as sched:
        if sched.get(args.id) is None:
            return _missing(args, sched)
        try:
            job_id = sched.rerun(args.id)
        except ValueError as exc:  # its log folder is gone, say
            print(f"trainbridge rerun: {exc}", file=sys.stderr)
            return 2
    print(json.dumps({"id": job_id}) if args.json else job_id)
    return 0


def forget(args: argparse.Namespace) -> int:
    with _scheduler(args) as sched:
        row = sched.get(args.id)
        if row is None:
            return _missing(args, sched)
        if row["state"] != "ended":
            print(
                f"trainbridge forget: {args.id} is {row['state']}, not ended: cancel it first "
                f"(trainbridge cancel --wait {args.id})",
                file=sys.stderr,
            )
            return 2
        sched.forget(args.id)
    print(f"trainbridge: forgot {args.id} (its row, attempts and files)")
    return 0


def retention(args: argparse.Namespace) -> int:
    keep = args.keep
    if keep is not None and keep != "all" and not keep.isdigit():
        print(f"trainbridge retention: {keep!r} is not a number of jobs or 'all'", file=sys.stderr)
        return 2
    with _scheduler(args) as sched:
        if keep is not None:
            sched.keep_ended = None if keep == "all" else int(keep)
            sched.tick()  # applied now, not at some process's next tick
        current = sched.keep_ended
        retained = sched.forgotten()
    said = "every ended job" if current is None else f"the newest {current} ended jobs"
    print(f"trainbridge: the store keeps {said}, in every process that uses it")
    if retained.get("count"):
        print(f"trainbridge: {forgotten_line(retained)}")
    return 0


def forgotten_line(retained: dict[str, Any]) -> str:
    import datetime

    at = datetime.datetime.fromtimestamp(retained.get("at") or 0).strftime("%Y-%m-%d %H:%M")
    return (
        f"{retained['count']} older ended job(s) forgotten by retention so far (keep_ended="
        f"{retained.get('keep_ended')}), the last at {at}; `trainbridge retention all` keeps "
        "every job"
    )


def pause_or_resume(args: argparse.Namespace) -> int:
    with _scheduler(args) as sched:
        if args.command == "pause":
            sched.pause()
            print("trainbridge: the queue is paused: no queued job starts until `resume`")
        else:
            sched.resume()
            print("trainbridge: the queue runs again")
    return 0


def logs(args: argparse.Namespace) -> int:
    with _scheduler(args) as sched:
        row = sched.get(args.id)
        if row is None:
            return _missing(args, sched)
        out = sys.stdout
        try:
            f = open(row["log_path"], encoding="utf-8", errors="backslashreplace")
        except FileNotFoundError:
            f = None
        try:
            while True:
                if f is not None:
                    chunk = f.read()
                    if chunk:
                        out.write(chunk)
                        out.flush()
                        continue
                if not args.follow or (sched.get(args.id) or {}).get("state") == "ended":
                    if f is not None:
                        out.write(f.read())  # what came between the read and the check
                    return 0
                if f is None:
                    try:
                        f = open(row["log_path"], encoding="utf-8", errors="backslashreplace")
                    except FileNotFoundError:
                        pass
                time.sleep(0.1)  # polling a file for --follow
        finally:
            if f is not None:
                f.close()
