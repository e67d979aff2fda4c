"""Run one row of tests/faults/matrix.json through the Python client and judge it.

Used by test_matrix.py (pytest) and by `python -m tests.faults.matrix` (the 20x loop and
one-off runs). The judging is plain: a list of failures, empty when the row passed.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCENARIOS = HERE / "scenarios"
MATRIX = json.loads((HERE / "matrix.json").read_text(encoding="utf-8"))
ROWS = {row["name"]: row for row in MATRIX["scenarios"]}
GONE_WAIT_S = 3.0  # the client SIGKILLs leftovers as it finishes; death itself is async


@contextmanager
def silent_server() -> Iterator[int]:
    """A loopback server that accepts connections and never answers; yields its port."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                accepted.append(conn)
            except socket.timeout:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for conn in accepted:
            conn.close()
        srv.close()


class GoSignal:
    """Holds a scenario at wait_for_go() until the client has heard a worker message.

    `when` is "KIND" or "KIND:VALUE": a worker message of that kind whose name (a stage's
    begin) or message (a log) is VALUE. A listener (the job's on_event)
    calls seen(event); a thread answers the scenario's connection once both happened."""

    def __init__(self, when: str):
        self.kind, _, self.name = when.partition(":")
        self.heard = threading.Event()
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.srv.settimeout(30)
        self.port = self.srv.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def seen(self, event: dict[str, Any]) -> None:
        if event.get("event") != "message" or event.get("kind") != self.kind:
            return
        body = event.get("body") or {}
        if self.kind == "stage" and body.get("event") != "begin":
            return
        if not self.name or self.name in (body.get("name"), body.get("message")):
            self.heard.set()

    def _serve(self) -> None:
        try:
            conn, _ = self.srv.accept()
        except OSError:
            return
        with conn:
            if self.heard.wait(30):
                try:
                    conn.sendall(b"go")
                except OSError:
                    pass

    def close(self) -> None:
        self.heard.set()
        self.srv.close()
        self.thread.join(2)


class ExitWatch:
    """The time (time.monotonic()) a process that is not our child exits, through a pidfd: what
    launch()'s Job reads for its own child, for a job whose keeper is another process. `t`
    stays None when the process was gone (or a zombie) before the watch began."""

    def __init__(self, pid: int):
        self.t: Optional[float] = None
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone already
            return
        if select.select([fd], [], [], 0)[0]:  # exited before the watch: no time to give
            os.close(fd)
            return
        self.thread = threading.Thread(target=self._wait, args=(fd,), daemon=True)
        self.thread.start()

    def _wait(self, fd: int) -> None:
        try:
            if select.select([fd], [], [], 120)[0]:
                self.t = time.monotonic()
        finally:
            os.close(fd)


def supervisor_cpu_wait() -> float:
    """Seconds this process's supervisor thread (the hub's reactor) has waited for a CPU so
    far (schedstat run_delay): on a loaded machine a deadline can only be judged once the
    supervisor runs, so a time to know is bounded by its deadline plus this wait between the
    last line and the verdict (docs/DIAGNOSIS.md). 0 where it cannot be read."""
    total = 0
    for thread in threading.enumerate():
        if thread.name != "trainbridge-hub" or thread.native_id is None:
            continue
        try:
            with open(f"/proc/self/task/{thread.native_id}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


class Timing:
    """Times of the events the deadlines are measured between (listener thread), on this
    process's monotonic clock: a wall clock set meanwhile (NTP, a restored VM) moves no
    measure. kept: the job's judge is another process (a keeper), whose child's exit is
    watched here."""

    def __init__(self, marker: Optional[str], go: Optional[GoSignal] = None, kept: bool = False):
        self.marker = marker
        self.go = go
        self.kept = kept
        self.exit: Optional[ExitWatch] = None  # keeper route: the job's process, watched
        self.marker_t: Optional[float] = None
        self.hang_t: Optional[float] = None
        # The supervisor's wait for a CPU at each (in this process only: the direct route).
        self.marker_wait: Optional[float] = None
        self.hang_wait: Optional[float] = None
        self.end_t: Optional[float] = None
        self.spawn_t: Optional[float] = None
        # the spawn event's own t (its judge's wall clock) on this monotonic clock
        self.spawned_at: Optional[float] = None
        self.live: Optional[dict[str, Any]] = None  # the last live (stalled) diagnosis

    def __call__(self, event: dict[str, Any]) -> None:
        now = time.monotonic()
        kind = event.get("event")
        if self.go is not None:
            self.go.seen(event)
        if kind == "output" and self.marker and self.marker in event.get("text", ""):
            self.marker_t = now
            self.marker_wait = supervisor_cpu_wait()
        elif kind == "hang" and self.hang_t is None:
            self.hang_t = now
            self.hang_wait = supervisor_cpu_wait()
        elif kind == "end":
            self.end_t = now
        elif kind == "spawn" and self.spawn_t is None:
            self.spawn_t = now
            t = event.get("t")
            # how long ago the judge stamped it, by the wall clock, read at once
            self.spawned_at = None if t is None else now - max(0.0, time.time() - t)
            if self.kept:  # another process's child: watch its exit here
                self.exit = ExitWatch(event["pid"])
        elif kind == "stalled" and event.get("diagnosis"):
            self.live = event["diagnosis"]


def job_processes(job_id: str, variable: str = "TRAINBRIDGE_JOB_ID") -> list[psutil.Process]:
    """Live processes that carry the job's id in their environment (zombies are gone): a
    launched job's id, or with variable="TRAINBRIDGE_STORE_JOB" a scheduled job's."""
    out = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(variable) == job_id and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


def run(name: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(report, measures, failures) for one row, launched by this process (launch())."""
    from trainbridge import bridge

    row, config, env = _setup(name)
    subs: dict[str, str] = {}
    with _needs(row, env, subs) as go, _tmpdir(row, env):
        timing = Timing(_sub(row.get("last_line"), subs), go)
        launched = time.monotonic()
        job = bridge.launch(
            [sys.executable, *row["argv"]],
            cwd=str(SCENARIOS),
            env=env,
            on_event=timing,
            zero_code=row.get("zero_code", True),
            **config,
        )
        budget = report_budget(config)
        report = job.wait(timeout=budget)
        failures: list[str] = []
        if report is None:
            job.cancel(grace=0)
            report = job.wait(timeout=10) or {}
            failures.append(f"no report within {budget:g} s")
        ended = job.ended
        failures += _left_behind(job_processes(job.id))
    measures = _measures(row, config, timing, launched, ended)
    failures += judge(row, report, measures, subs)
    return report, measures, failures


def run_kept(name: str, store: str) -> tuple[dict[str, Any], dict[str, Any], list[str], str]:
    """(report, measures, failures, job id) for one row submitted to a Scheduler on `store`
    and judged by its keeper (another process, the same judge as launch()), as a face sees it:
    the report is an attached job's, the times are when its events reached this process.
    The failures include any difference between that report, the one attach() reads after
    the end, and the store's row: every face gets the keeper's report, field by field."""
    from trainbridge import bridge
    from trainbridge.bridge.procs import JOB_VARIABLE

    row, config, env = _setup(name)
    subs: dict[str, str] = {}
    sched = bridge.Scheduler(store=store, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        with _needs(row, env, subs) as go, _tmpdir(row, env):
            timing = Timing(_sub(row.get("last_line"), subs), go, kept=True)
            submitted = time.monotonic()
            job_id = sched.submit(
                [sys.executable, *row["argv"]],
                cwd=str(SCENARIOS),
                env=env,
                timeouts=config,
                zero_code=row.get("zero_code", True),
            )
            job = sched.attach(job_id, on_event=timing)
            budget = report_budget(config)
            report = job.wait(timeout=budget)
            failures: list[str] = []
            if report is None:
                sched.cancel(job_id, grace=0)
                report = job.wait(timeout=10) or {}
                failures.append(f"no report within {budget:g} s")
            failures += _left_behind(job_processes(job_id, JOB_VARIABLE))
        after = sched.attach(job_id).wait(timeout=10)
        kept = sched.get(job_id)["report"]
    finally:
        sched.close()
    if not (after == report == kept):
        failures.append(
            "the faces' reports differ: "
            + "; ".join(
                f"{k}: attached live {report.get(k)!r}, after {(after or {}).get(k)!r}, "
                f"row {(kept or {}).get(k)!r}"
                for k in sorted(set(report) | set(after or {}) | set(kept or {}))
                if not (report.get(k) == (after or {}).get(k) == (kept or {}).get(k))
            )
        )
    if timing.exit is not None and getattr(timing.exit, "thread", None) is not None:
        timing.exit.thread.join(GONE_WAIT_S)
    ended = timing.exit.t if timing.exit is not None else None
    if ended is None and timing.spawned_at is not None and report.get("duration_s") is not None:
        # A job that ended before this process read its spawn from the feed (a crash in
        # 0.0 s; hunt 09eeb79 run 1) has no exit to watch: its judge's own account of it,
        # the spawn's time plus the job's duration.
        ended = timing.spawned_at + report["duration_s"]
    measures = _measures(row, config, timing, submitted, ended)
    failures += judge(row, report, measures, subs)
    return report, measures, failures, job_id


def report_budget(config: dict[str, Any]) -> float:
    """How long a row's report may take: a hang is judged as late as its startup deadline
    plus its stall deadline (a process may start up until the first and then stall), then
    its look, snapshot and kill grace. A flat 60 s was too little for a torchrun row on a
    loaded machine (three `import torch` on 2 cores took half of it), where the verdict was
    right and on its way."""
    deadlines = sum(float(config.get(k) or 0) for k in ("startup_timeout", "stall_timeout"))
    return max(60.0, deadlines + 30.0)


def _setup(name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The row, its config and the child's environment."""
    from trainbridge.bridge import childstack

    # The rows say what a client without py-spy says: a py-spy on PATH (a user's pip
    # install) would make the client name the child's Python frame instead of its kernel
    # stack. That variant is pinned in vectors/diagnosis.json. (A keeper is
    # another process: the test's PATH, from scripts/setup, has no py-spy.)
    childstack.py_spy_dump = lambda pid, notes: None

    row = ROWS[name]
    config = {**MATRIX["config"], **(row.get("config") or {})}
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env.update(row.get("env") or {})
    return row, config, env


def _left_behind(leftovers: list[psutil.Process]) -> list[str]:
    """A failure when any of the job's processes outlives it (then they are killed)."""
    if not leftovers:
        return []
    _, alive = psutil.wait_procs(leftovers, timeout=GONE_WAIT_S)
    alive = [p for p in alive if _alive(p)]
    for p in alive:  # do not let one failure poison the next rows
        try:
            p.kill()
        except psutil.Error:
            pass
    return [f"processes left behind: {[p.pid for p in alive]}"] if alive else []


@contextmanager
def lock_holder() -> Iterator[tuple[str, int]]:
    """Another process that holds an exclusive flock on a fresh file until the row is over:
    yields (the file, its pid) once it said it holds it (scenarios/_lock_holder.py)."""
    import subprocess
    import tempfile

    folder = tempfile.mkdtemp(prefix="fault-lock-")
    path = os.path.join(folder, "model.safetensors.lock")
    holder = subprocess.Popen(
        [sys.executable, str(SCENARIOS / "_lock_holder.py"), path],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield path, holder.pid
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@contextmanager
def _needs(
    row: dict[str, Any], env: dict[str, str], subs: dict[str, str]
) -> Iterator[Optional[GoSignal]]:
    go = GoSignal(row["go_when"]) if row.get("go_when") else None
    if go is not None:
        env["FAULT_GO_PORT"] = str(go.port)
    try:
        if "silent_server" in (row.get("needs") or []):
            with silent_server() as port:
                env["FAULT_SERVER_PORT"] = subs["FAULT_SERVER_PORT"] = str(port)
                yield go
        elif "lock_holder" in (row.get("needs") or []):
            with lock_holder() as (path, pid):
                env["FAULT_LOCK_PATH"] = subs["FAULT_LOCK_PATH"] = path
                subs["FAULT_LOCK_PID"] = str(pid)
                yield go
        else:
            yield go
    finally:
        if go is not None:
            go.close()


@contextmanager
def _tmpdir(row: dict[str, Any], env: dict[str, str]) -> Iterator[None]:
    """A row with tmpdir: its own TMPDIR (torchrun leaves its log folders there), removed
    after the row."""
    if not row.get("tmpdir"):
        yield
        return
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="fault-")
    env["TMPDIR"] = path
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _sub(text: Optional[str], subs: dict[str, str]) -> Optional[str]:
    if text is None:
        return None
    for key, value in subs.items():
        text = text.replace("{" + key + "}", value)
    return text


def _measures(row, config, timing: Timing, launched: float, ended: Optional[float]):
    """Seconds to know, measured as the row's `deadline` says, and its limit."""
    how = row["deadline"]
    if how == "end":
        start, stop, limit = ended, timing.end_t, MATRIX["end_deadline_s"]
    elif how == "startup":
        # From the child's spawn, where the startup deadline starts (the Node matrix reads the
        # same span from the report's clock): the first launch() in a process also pays the
        # client's one-time imports and hub start, which is not part of knowing.
        start = timing.spawn_t if timing.spawn_t is not None else launched
        # ... plus the look at the deadline (machine.LOOK_S: an idle Python is hung after it)
        from trainbridge.bridge.machine import LOOK_S

        stop, limit = timing.hang_t, config["startup_timeout"] + LOOK_S + 1
    else:  # stall | heartbeat: from the last line printed before the hang
        from trainbridge.bridge.jobenv import heartbeat_interval
        from trainbridge.bridge.machine import LOOK_S, LOOKED_AT

        start, stop = timing.marker_t, timing.hang_t
        # a deadline in LOOKED_AT is looked at first (starved of CPU? computing?); a stall
        # counts from where the main thread last moved, which the next heartbeat tells
        limit = config[f"{how}_timeout"] + (LOOK_S if how in LOOKED_AT else 0) + 1
        if how == "stall":
            limit += heartbeat_interval(config)
        if timing.marker_wait is not None and timing.hang_wait is not None:
            waited = round(timing.hang_wait - timing.marker_wait, 3)
            if waited > 0:
                limit = round(limit + waited, 3)  # the supervisor could not run sooner
    known = None if start is None or stop is None else round(stop - start, 3)
    return {"how": how, "known_s": known, "limit_s": limit, "live": timing.live}


def judge(
    row: dict[str, Any], report: dict[str, Any], measures: dict[str, Any], subs: dict[str, str]
) -> list[str]:
    """What is wrong with a report, given its row; [] when it matches."""
    failures = []
    if report.get("outcome") != row["outcome"]:
        failures.append(f"outcome {report.get('outcome')!r}, expected {row['outcome']!r}")
    diag = report.get("diagnosis") or {}
    kind = diag.get("kind") if diag else None
    if kind != row["kind"]:
        failures.append(
            f"diagnosis kind {kind!r}, expected {row['kind']!r} "
            f"({diag.get('summary') if diag else report.get('diagnosis_error')})"
        )
    summary = diag.get("summary", "") if diag else ""
    frame = row.get("frame")
    if frame:
        pattern = re.escape(frame["file"]) + r":\d+ " + re.escape(frame["function"]) + r"\b"
        if not re.search(pattern, summary):
            failures.append(
                f"summary does not name {frame['file']}:N {frame['function']}: {summary!r}"
            )
    for part in row.get("summary_has") or []:
        part = _sub(part, subs)
        if part not in summary:
            failures.append(f"summary lacks {part!r}: {summary!r}")
    if row.get("hang_reason") and (report.get("hang") or {}).get("reason") != row["hang_reason"]:
        failures.append(
            f"hang reason {(report.get('hang') or {}).get('reason')!r}, "
            f"expected {row['hang_reason']!r}"
        )
    last = _sub(row.get("last_line"), subs)
    if last and not any(last in line for line in report.get("log_tail") or []):
        failures.append(f"log_tail lacks {last!r}: {(report.get('log_tail') or [])[-5:]!r}")
    if row.get("progress_step") is not None:
        step = (report.get("progress") or {}).get("step")
        if step != row["progress_step"]:
            failures.append(f"progress step {step!r}, expected {row['progress_step']}")
    if "stage" in row and report.get("stage") != row["stage"]:
        failures.append(f"report stage {report.get('stage')!r}, expected {row['stage']!r}")
    for part in row.get("summary_lacks") or []:
        if part in summary:
            failures.append(f"summary has {part!r}: {summary!r}")
    message = str((report.get("error") or {}).get("message") or "")
    for part in row.get("error_message_lacks") or []:
        if part in message:
            failures.append(f"error message has {part!r}: {message!r}")
    hint = diag.get("hint", "") if diag else ""
    for part in row.get("hint_has") or []:
        if part not in hint:
            failures.append(f"hint lacks {part!r}: {hint!r}")
    for part in row.get("hint_lacks") or []:
        if part in hint:
            failures.append(f"hint has {part!r}: {hint!r}")
    for part in row.get("report_summary_has") or []:
        if part not in (report.get("summary") or ""):
            failures.append(f"report summary lacks {part!r}: {report.get('summary')!r}")
    for part in row.get("report_summary_lacks") or []:
        if part in (report.get("summary") or ""):
            failures.append(f"report summary has {part!r}: {report.get('summary')!r}")
    rejected = (report.get("protocol") or {}).get("rejected") or {}
    for reason, least in (row.get("rejected_at_least") or {}).items():
        if (rejected.get(reason) or 0) < least:
            failures.append(f"rejected[{reason!r}] = {rejected.get(reason)}, expected >= {least}")
    evidence = diag.get("evidence") or {} if diag else {}
    for path in row.get("evidence_has") or []:
        value: Any = evidence
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value in (None, "", [], {}):
            failures.append(f"diagnosis evidence lacks {path!r}")
    live = measures.get("live") or {}
    if row.get("live_kind") and live.get("kind") != row["live_kind"]:
        failures.append(f"last live diagnosis {live!r}, expected kind {row['live_kind']!r}")
    for part in row.get("live_summary_has") or []:
        part = _sub(part, subs) or ""
        if part not in (live.get("summary") or ""):
            failures.append(f"last live diagnosis lacks {part!r}: {live.get('summary')!r}")
    known, limit = measures["known_s"], measures["limit_s"]
    if known is None:
        failures.append(f"time to know not measured ({measures['how']}): an event is missing")
    elif known > limit:
        failures.append(f"known after {known} s, deadline {limit} s ({measures['how']})")
    return failures


def judged(report: dict[str, Any]) -> dict[str, Any]:
    """A report's judgement without what differs from run to run (times, pids, paths): two
    supervisors that judge alike give equal ones. How a job the supervisor stopped (hung,
    cancelled) then died is the process's timing, not a judgement: torchrun given SIGTERM
    exits 1 when its ranks go in time, else the escalation's SIGKILL ends it (both seen in
    one full run, 7d57dfb), so its exit is left out there."""
    diagnosis = report.get("diagnosis") or {}
    stopped = report.get("outcome") in ("hung", "cancelled")
    return {
        "outcome": report.get("outcome"),
        "exit_code": None if stopped else report.get("exit_code"),
        "signal": None if stopped else report.get("signal"),
        "kind": diagnosis.get("kind"),
        "error": (report.get("error") or {}).get("type"),
        "stages": [s["name"] for s in report.get("stages") or []],
        "stage": report.get("stage"),
        "hang": (report.get("hang") or {}).get("reason"),
    }


class NodeFace:
    """One Node process that reads ended jobs of one store as a Node face does
    (openStore(store).attach(id).done), for many rows: Node and its store helper start once."""

    def __init__(self, store: str):
        import subprocess

        self.proc = subprocess.Popen(
            [
                "node",
                str(ROOT / "tests" / "scheduler" / "attached_reports.js"),
                "--serve",
                store,
                sys.executable,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
        )

    def report(self, job_id: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(job_id + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()  # the job has ended: its report is in its feed
        if not line:
            raise AssertionError(f"attached_reports.js ended: {self.close()[-3000:]}")
        return json.loads(line)

    def close(self) -> str:
        """Its stderr, once it has ended."""
        _, err = self.proc.communicate(input="", timeout=60)
        return err


def keep_report(name: str, report: dict[str, Any], failures: list[str]) -> str:
    """Write a failing row's report where a person can read it later; returns the path."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "trainbridge-faults"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{time.strftime('%H%M%S')}-{os.getpid()}.json"
    path.write_text(
        json.dumps({"failures": failures, "report": report}, indent=1, default=str),
        encoding="ascii",
        errors="backslashreplace",
    )
    return str(path)


def main(argv: list[str]) -> int:
    """python -m tests.faults.matrix [--repeat N] [--keeper] [NAME ...]: run rows, print one
    line each; --keeper submits each to a Scheduler (a store in a temporary folder) instead."""
    import tempfile

    repeat = 1
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    kept = argv[:1] == ["--keeper"]
    argv = argv[1:] if kept else argv
    names = argv or list(ROWS)
    bad = 0
    started = time.monotonic()
    for i in range(repeat):
        pass_start = time.monotonic()
        for name in names:
            if kept:
                with tempfile.TemporaryDirectory() as folder:
                    report, measures, failures, _ = run_kept(name, os.path.join(folder, "j.db"))
            else:
                report, measures, failures = run(name)
            diag = report.get("diagnosis") or {}
            status = "ok  " if not failures else "FAIL"
            print(
                f"{status} {name:34} {str(report.get('outcome')):9} {str(diag.get('kind')):16} "
                f"known {measures['known_s']}s/{measures['limit_s']}s",
                flush=True,
            )
            for failure in failures:
                print(f"     - {failure}", flush=True)
            if failures:
                print(f"     report: {keep_report(name, report, failures)}", flush=True)
            bad += bool(failures)
        print(f"pass {i + 1}/{repeat}: {time.monotonic() - pass_start:.1f} s", flush=True)
    print(f"{repeat} pass(es), {bad} failure(s), {time.monotonic() - started:.1f} s in all")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
