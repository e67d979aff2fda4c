"""bridge.Scheduler: a job queue on a store that outlives any GUI (docs/STORE.md, CLIENT.md).

    sched = bridge.Scheduler(store="~/jobs.db")
    job_id = sched.submit(["python", "train.py"], resources={"gpus": 1}, max_restarts=2)
    job = sched.attach(job_id)          # same events, wait(), cancel() as launch()'s Job
    report = job.wait()

The Scheduler owns nothing that dies with it: each started job runs under its own keeper
(bridge/keeper.py), and everything else is in the store. So any number of Schedulers, CLIs
and keepers may work on one store at once, and a Scheduler may be SIGKILLed at any moment:

- schedule_pass() starts queued jobs whose slots are free. Claiming a job and its GPUs is one
  BEGIN IMMEDIATE transaction, so two passes never give the same slot twice. Submit, every
  Scheduler tick and every keeper at its job's end run a pass: the queue moves even when no
  Scheduler is running.
- reconcile() makes the store match the processes: an active job whose keeper (pid + start
  time) is gone is marked lost (or cancelled, if a cancel was asked before it ran anything)
  and what is left of its training process is killed, and the keeper's runtime directory
  (which its own exit would have removed) is removed.

Slots: "jobs" (how many run at once; default the CPU count) and "gpus" (ids; default from
NVML, else CUDA_VISIBLE_DEVICES, else none). Queue order: priority (high first), then
submission; the head of the queue waits for its slots (no job overtakes it).

Its length (about 500 lines): slots, claiming, reconciliation and the operations are all
transactions on the one store schema (bridge/store.py), each short and read against the
others (a claim, a cancel and a reconcile may race on one row); the Scheduler object at the
end is their thin public face. What is asked of one job from outside its keeper (cancel,
ping, send, dump_stacks) is bridge/scheduled.py, which an attached job (bridge/attach.py)
uses too.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, TypedDict, Union

from trainbridge.bridge import (
    machine,
    private_files,
    procfs,
    procs,
    report_text,
    scheduled,
    store_errors,
    watch,
)
from trainbridge.bridge.store import ACTIVE, Store, StoreError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainbridge.bridge.attach import Attached

TICK_S = 0.5  # how often a running Scheduler reconciles and starts queued jobs
CLAIM_GRACE_S = 10.0  # a claimed job with no keeper pid after this long is queued again
KEEP_ENDED = 1000  # ended jobs kept (with their logs) by retention, unless the store says
KEEP_SETTING = "keep_ended"  # the store's retention, for every process: N, or None (keep all)
_UNSET: Any = object()
ON_SLURM = "json_extract(resources, '$.slurm')"  # a row's Slurm options (not null: on Slurm)
TIMEOUT_NAMES = set(machine.DEFAULTS) | {
    "startup_timeout",
    "stall_timeout",
    "heartbeat_timeout",
    "kill_grace",
}


# --- slots ------------------------------------------------------------------------------
def discover_gpus(environ: Optional[Mapping[str, str]] = None, nvml: Any = None) -> list[int]:
    """GPU ids this machine offers: the ids in CUDA_VISIBLE_DEVICES, else NVML's device count
    (pynvml, or the `nvml` given), else, without nvidia-ml-py, the GPUs nvidia-smi lists
    ($TRAINBRIDGE_NVIDIA_SMI names another program), else none (a CPU-only machine)."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [part.strip() for part in visible.split(",") if part.strip()]
        return [int(part) for part in ids if part.lstrip("-").isdigit() and int(part) >= 0]
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:  # nvidia-ml-py is optional: nvidia-smi comes with the driver
            from trainbridge.bridge.resources import NvidiaSmi

            return NvidiaSmi(environ.get("TRAINBRIDGE_NVIDIA_SMI")).indices()
    try:
        nvml.nvmlInit()
        try:
            return list(range(int(nvml.nvmlDeviceGetCount())))
        finally:
            nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver: a CPU-only machine
        return []


def default_slots() -> dict[str, Any]:
    return {"jobs": os.cpu_count() or 1, "gpus": discover_gpus()}


def _slots(store: Store) -> dict[str, Any]:
    return store.setting("slots") or default_slots()


# --- claiming and starting ----------------------------------------------------------------
def schedule_pass(
    store: Store,
    python: Optional[str] = None,
    started: Optional[list[subprocess.Popen[bytes]]] = None,
) -> list[str]:
    """Start every queued job whose slots are free, head of the queue first. Returns the ids
    started. Safe to run from many processes at once."""
    ids: list[str] = []
    while True:
        job_id = _claim_next(store)
        if job_id is None:
            return ids
        proc = _spawn_keeper(store, job_id, python)
        if started is not None and proc is not None:
            started.append(proc)
        ids.append(job_id)


def _claim_next(store: Store) -> Optional[str]:
    slots = _slots(store)
    with store.transaction() as db:
        # A paused queue starts nothing (every process that schedules on the store reads it).
        paused = db.execute("SELECT value FROM settings WHERE name = 'paused'").fetchone()
        if paused is not None and json.loads(paused[0]):
            return None
        # A Slurm job takes no slot of this host (Slurm queues it): it is claimed at once,
        # and its keeper does not count against the local jobs.
        slurm_head = db.execute(
            f"SELECT id FROM jobs WHERE state = 'queued' AND {ON_SLURM} IS NOT NULL "
            "ORDER BY priority DESC, seq ASC LIMIT 1"
        ).fetchone()
        if slurm_head is not None:
            db.execute(
                "UPDATE jobs SET state = 'starting', assigned = '{}', updated_at = ?, "
                "keeper_pid = NULL, keeper_start = NULL WHERE id = ?",
                (time.time(), slurm_head[0]),
            )
            return str(slurm_head[0])
        active = db.execute(
            f"SELECT assigned FROM jobs WHERE state IN ({', '.join('?' for _ in ACTIVE)}) "
            f"AND {ON_SLURM} IS NULL",
            ACTIVE,
        ).fetchall()
        if len(active) >= slots["jobs"]:
            return None
        used: set[int] = set()
        for (assigned,) in active:
            used.update((json.loads(assigned) or {}).get("gpus") or [] if assigned else [])
        head = db.execute(
            f"SELECT id, resources FROM jobs WHERE state = 'queued' AND {ON_SLURM} IS NULL "
            "ORDER BY priority DESC, seq ASC LIMIT 1"
        ).fetchone()
        if head is None:
            return None
        want = int(json.loads(head[1]).get("gpus", 0) or 0)
        free = [g for g in slots["gpus"] if g not in used]
        if want > len(free):
            return None  # the head waits for its GPUs; nothing overtakes it
        assigned = {"gpus": free[:want]} if slots["gpus"] else {}
        db.execute(
            "UPDATE jobs SET state = 'starting', assigned = ?, updated_at = ?, "
            "keeper_pid = NULL, keeper_start = NULL WHERE id = ?",
            (json.dumps(assigned), time.time(), head[0]),
        )
        return str(head[0])


def keeper_command(store_path: str, job_id: str, python: Optional[str] = None) -> list[str]:
    return [python or sys.executable, "-m", "trainbridge.bridge.keeper", store_path, job_id]


def _spawn_keeper(
    store: Store, job_id: str, python: Optional[str]
) -> Optional[subprocess.Popen[bytes]]:
    row = store.get(job_id)
    if row is None:  # forgotten since it was claimed: nothing to keep
        return None
    env = dict(os.environ)
    # The keeper must import this trainbridge, wherever the caller's cwd is.
    import trainbridge

    top = os.path.dirname(os.path.abspath(list(trainbridge.__path__)[0]))
    env["PYTHONPATH"] = top + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for name in ("TRAINBRIDGE_CLIENT_PID", "TRAINBRIDGE_DETACHED"):
        env.pop(name, None)
    try:
        with os.fdopen(
            private_files.open_append(os.path.join(row["dir"], procs.KEEPER_LOG)), "ab"
        ) as log:
            proc = subprocess.Popen(
                keeper_command(store.path, job_id, python),
                env=env,
                cwd=row["dir"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:
        store.update(
            job_id,
            where_state=["starting"],
            state="ended",
            outcome="failed",
            ended_at=time.time(),
            note=f"could not start the keeper: {exc}",
        )
        return None
    # The keeper writes the same; whoever is first, the row names its keeper at once.
    store.update(
        job_id,
        where_state=["starting"],
        keeper_pid=proc.pid,
        keeper_start=procs.process_start(proc.pid),
    )
    return proc


# --- reconciliation ---------------------------------------------------------------------
def last_known(row: dict[str, Any]) -> str:
    """A lost job's last state, stage and step in words (a GUI shows the note as it is)."""
    bits = [f"state {row['state']}"]
    if row.get("stage"):
        bits.append(f"stage '{row['stage']}'")
    progress = row.get("progress") or {}
    if progress.get("step") is not None:
        total = progress.get("total")
        bits.append(f"step {progress['step']}" + (f" of {total}" if total else ""))
    return ", ".join(bits)


def reconcile(store: Store) -> list[str]:
    """Mark active jobs whose keeper is gone as lost (ending their leftovers and removing the
    keeper's runtime directory) and requeue claims whose claimer died before starting a
    keeper. Returns the ids changed."""
    changed = []
    now = time.time()
    # Restarted since the store last looked: every keeper a row names ran before, and a pid
    # of this boot with the same start after boot is another process.
    rebooted = store.note_boot(procfs.boot_id())
    for row in store.jobs(state="active"):
        if row["keeper_pid"] is None:
            if row["state"] == "starting" and now - row["updated_at"] > CLAIM_GRACE_S:
                if store.update(
                    row["id"],
                    where_state=["starting"],
                    state="queued",
                    assigned=None,
                    keeper_pid=None,
                ):
                    changed.append(row["id"])
            continue
        if not rebooted and procs.same_process(row["keeper_pid"], row["keeper_start"]):
            continue
        fresh = store.get(row["id"])  # the keeper may have finished since we read
        if (
            fresh is None
            or fresh["state"] not in ACTIVE
            or fresh["keeper_pid"] != row["keeper_pid"]
        ):
            continue
        pid = None if rebooted else fresh["job_pid"]  # its group ended with the machine
        procs.kill_job_processes(fresh["id"], pid, fresh["job_start"])
        procs.remove_runtime_dir(fresh["endpoint"])
        left = None
        if (fresh["resources"] or {}).get("slurm"):
            from trainbridge.bridge import slurm_runner

            left = slurm_runner.end_leftover(fresh["dir"])  # Slurm would run it on for nobody
        if fresh["cancel_requested"] and fresh["job_pid"] is None and fresh["attempt"] == 0:
            outcome, note = "cancelled", "cancelled before its keeper started the command"
        else:
            outcome = "lost"
            gone = "ran before the machine restarted" if rebooted else "is gone"
            note = (
                f"its keeper (pid {fresh['keeper_pid']}) {gone}: the job's end was not "
                f"seen. Last known: {last_known(fresh)}. Its processes were stopped; see "
                f"{fresh['log_path']} and {os.path.join(fresh['dir'], procs.KEEPER_LOG)}"
            )
        if left:
            note += f". {left}"
        report = scheduled.short_report(fresh, outcome, note)
        with store.transaction():
            ended = store.update(
                row["id"],
                where_state=ACTIVE,
                state="ended",
                outcome=outcome,
                note=note,
                ended_at=now,
                job_pid=None,
                job_start=None,
                report=report,
            )
            # the line before the commit: whoever reads the row ended finds it; a line not
            # written leaves end_pending set (the report says so), and a later reconcile()
            # writes it
            error = scheduled.append_end_event(fresh, report) if ended else None
            if error:
                store.update(
                    row["id"], end_pending=1, report=report_text.owe_end_line(report, error)
                )
        if ended:
            changed.append(row["id"])
    changed += _end_lines_left(store, rebooted)
    return changed


def _end_lines_left(store: Store, rebooted: bool) -> list[str]:
    """The feed's end line of each job whose keeper wrote the row's end and was gone before
    the line (end_pending), or whose line could not be written when the row ended (the feed's
    folder unwritable, the disk full): written from the row, so every face reads the same end,
    with its number. Returns the ids written."""
    done = []
    for row in store.ends_pending():
        if not rebooted and procs.same_process(row["keeper_pid"], row["keeper_start"]):
            continue  # its keeper writes it next
        with store.transaction():
            fresh = store.get(row["id"])
            if fresh is None or not fresh["end_pending"]:
                continue
            owed = fresh["report"] or {"outcome": fresh["outcome"], "note": fresh["note"]}
            report = report_text.end_line_paid(owed)
            error = scheduled.append_end_event(fresh, report)
            if error:  # end_pending stays set: the next reconcile() tries again
                if error != owed.get("end_line_owed"):
                    store.update(row["id"], report=report_text.owe_end_line(owed, error))
                continue
            if report is not owed:
                store.update(row["id"], end_pending=None, report=report)
            else:
                store.update(row["id"], end_pending=None)
        done.append(row["id"])
    return done


# --- the operations -------------------------------------------------------------------------
class SubmitOptions(TypedDict, total=False):
    """submit()'s options, by name (Scheduler.submit's and this module's submit's: one list).
    cwd: the job's working directory (default: this process's, now). env: the job's whole
    environment (default: this process's, now); only the names go in the store. timeouts:
    launch()'s deadlines by name (startup_timeout, ...). resources: {"gpus": N}, the slots
    it needs on this host. priority (0): higher first. max_restarts (0), restart_backoff (1.0
    s): a failed job is run again. zero_code (True): as launch()'s (False: only processes
    that import the worker say hello). name, tags (strings), meta (a JSON object): kept in
    the row for the GUI (jobs(tag=) lists by tag); log_path: the job's output log there
    instead of in the job's folder; stop_on_nan: as launch()'s (metric names whose first NaN
    or infinity cancels the job). slurm: this job goes to Slurm with these options
    (docs/SCALE.md)."""

    cwd: Optional[str]
    env: Optional[Mapping[str, str]]
    timeouts: Optional[Mapping[str, Any]]
    resources: Optional[Mapping[str, Any]]
    priority: int
    max_restarts: int
    restart_backoff: float
    zero_code: bool
    name: Optional[str]
    tags: Optional[Sequence[str]]
    meta: Optional[Mapping[str, Any]]
    log_path: Optional[str]
    stop_on_nan: Any
    slurm: Optional[Mapping[str, Any]]


SUBMIT_OPTIONS = frozenset(SubmitOptions.__annotations__)


def submit(store: Store, cmd: Sequence[str], **options: Unpack[SubmitOptions]) -> str:
    """Queue cmd (a list, no shell) in `store` and return its id; SubmitOptions says the
    options. A job that could never run is refused here (ValueError that says why), not
    stored to fail later in its keeper."""
    unknown = sorted(set(options) - SUBMIT_OPTIONS)
    if unknown:
        raise TypeError(
            f"submit() got unexpected keyword argument(s) {unknown}; "
            f"known: {sorted(SUBMIT_OPTIONS)}"
        )
    if isinstance(cmd, (str, bytes)) or not cmd:
        raise ValueError("the command must be a non-empty list of arguments (no shell strings)")
    o = options
    cwd, env = o.get("cwd"), o.get("env")
    config = _config(cmd, o)
    labels = check_labels(o.get("name"), o.get("tags"), o.get("meta"), o.get("log_path"))
    resources = _resources(store, o.get("resources"), o.get("slurm"))
    max_restarts, backoff = o.get("max_restarts", 0), o.get("restart_backoff", 1.0)
    if max_restarts < 0 or backoff < 0:
        raise ValueError("max_restarts and restart_backoff must be >= 0")
    job_id = f"j-{time.strftime('%Y%m%d')}-{secrets.token_hex(4)}"
    job_dir = os.path.join(store.jobs_dir, job_id)
    row = {
        "id": job_id,
        "command": [str(part) for part in cmd],
        "cwd": os.path.abspath(cwd) if cwd else os.getcwd(),
        "env_names": None if env is None else sorted(env),
        "config": config,
        "resources": resources,
        "priority": int(o.get("priority", 0)),
        "max_restarts": int(max_restarts),
        "restart_backoff": float(backoff),
        "state": "queued",
        "submitted_at": time.time(),
        "dir": job_dir,
        "log_path": os.path.join(job_dir, procs.OUTPUT_FILE),
        "events_path": os.path.join(job_dir, procs.EVENTS_FILE),
        **labels,
    }
    try:
        _make_job(store, row, dict(os.environ if env is None else env))
    except (OSError, StoreError) as exc:
        # A full or read-only disk: no directory is left without its row, and the error
        # says why (bridge/store_errors.py) instead of a raw OSError.
        shutil.rmtree(job_dir, ignore_errors=True)
        if isinstance(exc, StoreError):
            raise
        raise store_errors.explain(store.path, exc) from exc
    return job_id


def _config(cmd: Sequence[str], o: SubmitOptions) -> dict[str, Any]:
    """The job's config as its keeper passes it to launch() by name: the deadlines, and
    zero_code and stop_on_nan where given; checked by launch()'s own check (argv, cwd, env,
    deadline values: NaN, "30", negatives)."""
    config = dict(o.get("timeouts") or {})
    unknown = set(config) - TIMEOUT_NAMES
    if unknown:
        raise ValueError(f"unknown timeouts {sorted(unknown)}; known: {sorted(TIMEOUT_NAMES)}")
    zero_code, stop_on_nan = o.get("zero_code", True), o.get("stop_on_nan")
    if not isinstance(zero_code, bool):
        raise ValueError(f"zero_code must be True or False, got {zero_code!r}")
    from trainbridge.bridge.job_arguments import check_arguments
    from trainbridge.bridge.launcher import LaunchError

    try:
        check_arguments(
            list(cmd), cwd=o.get("cwd"), env=o.get("env"), config=config, stop_on_nan=stop_on_nan
        )
    except LaunchError as exc:
        raise ValueError(str(exc)) from None
    if not zero_code:
        config["zero_code"] = False
    if stop_on_nan:
        config["stop_on_nan"] = [stop_on_nan] if isinstance(stop_on_nan, str) else list(stop_on_nan)
    return config


def _resources(
    store: Store, asked: Optional[Mapping[str, Any]], slurm: Optional[Mapping[str, Any]]
) -> dict[str, Any]:
    """The slots the job needs on this host (its GPUs, which the store's slots must have),
    or its Slurm options, checked (Slurm queues it and gives its nodes: no slot here)."""
    resources = dict(asked or {})
    gpus = resources.get("gpus", 0)
    if not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"resources['gpus'] must be an int >= 0, got {gpus!r}")
    if slurm is not None:
        from trainbridge.bridge import slurm as on_slurm

        if gpus:
            raise ValueError(
                "a Slurm job asks for its GPUs from Slurm: slurm={'gres': 'gpu:N'}, not "
                "resources={'gpus': N}"
            )
        resources["slurm"] = on_slurm.check_options(slurm)
    have = len(_slots(store)["gpus"])
    if gpus > have:
        raise ValueError(
            f"the job asks for {gpus} GPU(s) but this store's slots have {have} (those a "
            "Scheduler(slots=...) set, else the GPUs NVML and CUDA_VISIBLE_DEVICES show); on "
            "a machine with no GPU leave the GPUs out of the job; else check nvidia-smi and "
            "CUDA_VISIBLE_DEVICES, or from Python set Scheduler(slots={'gpus': [...]})"
        )
    return resources


def _make_job(store: Store, row: dict[str, Any], env: dict[str, str]) -> None:
    """The job's directory (its environment file, its empty feed), then its row: a row is
    never without its directory."""
    os.mkdir(row["dir"], 0o700)
    fd = os.open(
        os.path.join(row["dir"], procs.ENV_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
    )
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(env, f)
    os.close(private_files.open_append(row["events_path"]))
    store.insert_job(row)


NAME_MAX = 200  # characters of a job's name, and of each tag
TAGS_MAX = 32
META_MAX_BYTES = 64 * 1024  # a job's meta as JSON


def check_labels(name: Any, tags: Any, meta: Any, log_path: Any) -> dict[str, Any]:
    """What a GUI keeps with a job (submit's name, tags, meta and log_path), checked: the
    row's columns they fill. ValueError that says which and why."""
    out: dict[str, Any] = {}
    if name is not None:
        if not isinstance(name, str) or not 0 < len(name) <= NAME_MAX:
            raise ValueError(f"name must be a string of 1 to {NAME_MAX} characters, got {name!r}")
        out["name"] = name
    if tags is not None:
        if isinstance(tags, str) or not all(
            isinstance(t, str) and 0 < len(t) <= NAME_MAX for t in tags
        ):
            raise ValueError(f"tags must be a list of strings (1 to {NAME_MAX} characters)")
        if len(list(tags)) > TAGS_MAX:
            raise ValueError(f"at most {TAGS_MAX} tags, got {len(list(tags))}")
        out["tags"] = list(dict.fromkeys(tags))
    if meta is not None:
        if not isinstance(meta, Mapping):
            raise ValueError(f"meta must be a dict (a JSON object), got {type(meta).__name__}")
        try:
            size = len(json.dumps(meta, ensure_ascii=True, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"meta must be JSON (strings, numbers, lists, dicts): {exc}") from None
        if size > META_MAX_BYTES:
            raise ValueError(f"meta is {size} bytes as JSON; at most {META_MAX_BYTES}")
        out["meta"] = dict(meta)
    if log_path is not None:
        if not isinstance(log_path, (str, os.PathLike)):
            raise ValueError(f"log_path must be a path, got {log_path!r}")
        path = os.path.abspath(os.fspath(log_path))
        if not os.path.isdir(os.path.dirname(path)):
            raise ValueError(
                f"log_path {path}: its folder does not exist; make it first (the job's "
                "output is written there, as well as to its feed)"
            )
        out["log_path"] = path
    return out


def forget(store: Store, job_id: str) -> bool:
    """Delete an ended job's row, attempts and directory (logs, events). False if it is not
    ended (cancel it first) or unknown."""
    row = store.get(job_id)
    if row is None or row["state"] != "ended":
        return False
    store.delete(job_id)
    shutil.rmtree(row["dir"], ignore_errors=True)
    return True


RETAINED_LAST = 200  # ids retention names in the store's `retained` setting (watch.py)


def retention(store: Store) -> Optional[int]:
    """The store's retention: keep the newest N ended jobs (None: every one); KEEP_ENDED
    until someone sets it (Scheduler(keep_ended=), Node openStore({keepEnded}), the CLI's
    `trainbridge retention`)."""
    kept: Optional[int] = store.setting(KEEP_SETTING, KEEP_ENDED)
    return kept


def check_keep_ended(value: Any) -> Optional[int]:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(
            f"keep_ended must be a whole number >= 0, or None to keep every ended job; "
            f"got {value!r}"
        )
    return value


def retain(store: Store, keep_ended: int) -> int:
    """Forget the oldest ended jobs beyond the newest keep_ended; returns how many. Each
    pass that forgets any says so in the store's `retained` setting (keep_ended, the count
    so far, when, the last ids), which a watch's `removed` change and the CLI read."""
    old = store.db.execute(
        "SELECT id FROM jobs WHERE state = 'ended' ORDER BY seq DESC LIMIT -1 OFFSET ?",
        (keep_ended,),
    ).fetchall()
    if not old:
        return 0
    before = store.setting(watch.RETAINED) or {}
    ids = [job_id for (job_id,) in old]

    def said(named: list[str], count: int) -> None:
        store.set_setting(
            watch.RETAINED,
            {
                "keep_ended": keep_ended,
                "count": int(before.get("count") or 0) + count,
                "at": time.time(),
                "last": ((before.get("last") or []) + named)[-RETAINED_LAST:],
            },
        )

    # Named before their rows go: a watch that reads between a row's removal and this
    # setting called a retained job "forgotten" (hunt on 0c7cf0d, under load). Then again
    # with the ids this pass did forget.
    said(ids, 0)
    gone = [job_id for job_id in ids if forget(store, job_id)]
    said(gone, len(gone))
    return len(gone)


# --- the object a GUI holds ---------------------------------------------------------------------
class Scheduler:
    """A job queue on `store` (a path; default store.default_path()).

    slots: {"jobs": N, "gpus": [ids]} saved in the store for every process that schedules on
    it (default: CPU count, GPUs discovered). A background thread reconciles the store with
    the processes and starts queued jobs every TICK_S (tick=None: only on calls).
    keep_ended: the store's retention, saved in it for every process (the newest N ended
    jobs are kept, older ones forgotten with their files; None keeps all; unset: the
    store's, KEEP_ENDED by default).
    create=False: a store that is not there raises StoreMissing instead of being made. On a
    read-only store (`read_only`) it lists and attaches, and neither ticks nor writes; a
    write raises StoreReadOnly. Store failures are StoreError subclasses (store_errors.py)."""

    def __init__(
        self,
        store: Optional[str] = None,
        slots: Optional[Mapping[str, Any]] = None,
        tick: Optional[float] = TICK_S,
        keep_ended: Optional[int] = _UNSET,
        python: Optional[str] = None,
        create: bool = True,
        backend: str = "local",
        slurm: Optional[Mapping[str, Any]] = None,
    ):
        if backend not in ("local", "slurm"):
            raise ValueError(f"backend must be 'local' or 'slurm', got {backend!r}")
        if slurm is not None and backend != "slurm":
            raise ValueError("slurm options go with backend='slurm'")
        self.backend = backend
        # Every job's Slurm options start from these (submit(slurm=...) adds to them).
        self.slurm = dict(slurm or {})
        if keep_ended is not _UNSET:
            check_keep_ended(keep_ended)
        self._store = Store(store, create=create)
        self.path = self._store.path
        self.read_only = self._store.read_only
        self.python = python
        if keep_ended is not _UNSET and not self.read_only:
            self._store.set_setting(KEEP_SETTING, keep_ended)  # for every process on it
        self._lock = threading.Lock()  # one connection, used by the caller and the ticker
        self._keepers: list[subprocess.Popen[bytes]] = []  # reaped as they end (no zombies)
        if not self.read_only and (slots is not None or self._store.setting("slots") is None):
            merged = default_slots()
            merged.update(dict(slots or {}))
            merged["gpus"] = [int(g) for g in merged["gpus"]]
            self._store.set_setting("slots", merged)
        self.slots = self._store.setting("slots") or default_slots()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        # A tick writes (reconciles, retains): on a full disk that fails, and the rows may be
        # stale, but listing and attaching still work. Said here; the next tick tries again.
        self.tick_error: Optional[StoreError] = None
        try:
            self.tick()
        except store_errors.StoreFull as exc:
            self.tick_error = exc
        if tick:
            self._thread = threading.Thread(
                target=self._run, args=(tick,), daemon=True, name="trainbridge-scheduler"
            )
            self._thread.start()

    def _run(self, every: float) -> None:
        said: Optional[str] = None  # the failure said last: each is said once, not per tick
        while not self._stop.wait(every):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - keep ticking; say why, once
                if isinstance(exc, StoreError):
                    self.tick_error = exc
                text = f"{type(exc).__name__}: {exc}"
                if text != said:
                    print(
                        f"trainbridge scheduler: tick failed: {text}; trying again every "
                        f"{every:g} s (said again only if the cause changes)",
                        file=sys.stderr,
                        flush=True,
                    )
                    said = text
            else:
                if said is not None:
                    print("trainbridge scheduler: ticks work again", file=sys.stderr, flush=True)
                said, self.tick_error = None, None

    def tick(self) -> None:
        """Reconcile, start what fits, reap ended keepers, apply retention (not on a
        read-only store: nothing there can change)."""
        if self.read_only:
            return
        with self._lock:
            self._keepers = [p for p in self._keepers if p.poll() is None]
            reconcile(self._store)
            schedule_pass(self._store, self.python, self._keepers)
            keep = retention(self._store)
            if keep is not None:
                forgot = retain(self._store, keep)
                if forgot:
                    print(
                        f"trainbridge scheduler: forgot {forgot} ended job(s) beyond the "
                        f"newest {keep} (keep_ended), with their logs and events; "
                        "keep_ended=None keeps every job",
                        file=sys.stderr,
                        flush=True,
                    )

    def close(self) -> None:
        """Stop ticking. Running jobs go on under their procs."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._store.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def submit(self, cmd: Sequence[str], **options: Unpack[SubmitOptions]) -> str:
        """Queue cmd (a list, no shell) and start it if its slots are free; returns its id.
        The options by name: SubmitOptions (cwd, env, timeouts, resources, priority,
        max_restarts, restart_backoff, zero_code, name, tags, meta, log_path, stop_on_nan,
        slurm). slurm: this job goes to Slurm (with backend="slurm" every job does), with
        these options over the Scheduler's (nodes, ntasks_per_node, cpus_per_task, gres,
        time, partition, account, qos, sbatch: a list of more sbatch options, listen: this
        host's address the nodes reach; docs/SCALE.md)."""
        slurm = options.get("slurm")
        if slurm is not None and not isinstance(slurm, Mapping):
            raise ValueError(f"slurm options must be a dict, got {type(slurm).__name__}")
        if self.backend == "slurm" or slurm is not None:
            options["slurm"] = {**self.slurm, **dict(slurm or {})}
        with self._lock:
            job_id = submit(self._store, cmd, **options)
            schedule_pass(self._store, self.python, self._keepers)
        return job_id

    def jobs(
        self, state: Optional[Any] = None, limit: Optional[int] = None, tag: Optional[str] = None
    ) -> list[dict[str, Any]]:
        """Rows, newest first; state: a state, a list, or "active"; tag: submitted with it."""
        with self._lock:
            return self._store.jobs(state, limit, tag)

    def get(self, job_id: str) -> Optional[dict[str, Any]]:
        with self._lock:
            row = self._store.get(job_id)
            if row is not None:
                row["attempts"] = self._store.attempts(job_id)
            return row

    def attach(
        self,
        job_id: str,
        on_event: Optional[Callable[[dict[str, Any]], None]] = None,
        since: Union[str, int] = "start",
    ) -> Attached:
        """A handle on the job with launch()'s Job API: events from the first one; with
        since="now" the job's state and last status, then what comes next; with since=N the
        events numbered N and after (`seq`; bridge/attach.py, bridge/feed.py)."""
        from trainbridge.bridge.attach import Attached

        if self.get(job_id) is None:
            raise KeyError(f"no job {job_id!r} in {self.path}")
        return Attached(self.path, job_id, on_event=on_event, since=since)

    @property
    def keep_ended(self) -> Optional[int]:
        """The store's retention (every process on it applies the same)."""
        with self._lock:
            return retention(self._store)

    @keep_ended.setter
    def keep_ended(self, value: Optional[int]) -> None:
        check_keep_ended(value)
        with self._lock:
            self._store.set_setting(KEEP_SETTING, value)

    def forgotten(self) -> dict[str, Any]:
        """What retention forgot so far ({} when nothing): keep_ended, count, at (when the
        last went), last (the latest ids, at most RETAINED_LAST)."""
        with self._lock:
            return dict(self._store.setting(watch.RETAINED) or {})

    def watch(self, on_change: Optional[Callable[[dict[str, Any]], None]] = None) -> watch.Watch:
        """The job list's change feed (bridge/watch.py): every row "added" first, then each
        change anyone makes, as it is committed; no polling by the caller. Close it (or use
        it in a with block) when done."""
        return watch.Watch(self.path, on_change=on_change)

    def pause(self) -> None:
        """Start no queued job (in any process that schedules on this store) until resume();
        running jobs go on, and submit still queues."""
        with self._lock:
            self._store.set_setting("paused", True)

    def resume(self) -> None:
        """Start queued jobs again, at once where slots are free."""
        with self._lock:
            self._store.set_setting("paused", False)
            schedule_pass(self._store, self.python, self._keepers)

    @property
    def paused(self) -> bool:
        with self._lock:
            return bool(self._store.setting("paused"))

    def rerun(self, job_id: str, env: Optional[Mapping[str, str]] = None) -> str:
        """Queue a new job with an ended one's spec (command, cwd, timeouts, resources,
        priority, restarts, zero_code, name, tags, meta, log path); returns the new id. Its
        environment is `env`, else this process's: the old job's values were never kept."""
        row = self.get(job_id)
        if row is None:
            raise KeyError(f"no job {job_id!r} in {self.path}")
        config = dict(row["config"] or {})
        zero_code = config.pop("zero_code", True)
        own_log = row["log_path"] != os.path.join(row["dir"], procs.OUTPUT_FILE)
        return self.submit(
            row["command"],
            cwd=row["cwd"],
            env=env,
            timeouts=config,
            resources=row["resources"],
            priority=row["priority"],
            max_restarts=row["max_restarts"],
            restart_backoff=row["restart_backoff"],
            zero_code=zero_code,
            name=row.get("name"),
            tags=row.get("tags"),
            meta=row.get("meta"),
            log_path=row["log_path"] if own_log else None,
        )

    def cancel(
        self, job_id: str, reason: Optional[str] = None, grace: Optional[float] = None
    ) -> bool:
        """Cancel the job for everyone; `reason` and `grace` as launch()'s Job.cancel()."""
        with self._lock:
            return scheduled.cancel(self._store, job_id, reason=reason, grace=grace)

    def request(self, job_id: str, op: str, data: Any = None) -> str:
        """Ask a running job's keeper to `ping` its worker or `send` it data (module
        request()); the answer is a `reply` event in the job's feed."""
        with self._lock:
            return scheduled.request(self._store, job_id, op, data)

    def forget(self, job_id: str) -> bool:
        with self._lock:
            return forget(self._store, job_id)
