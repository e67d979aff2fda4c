"""The final report of a job: the JSON contract of the CLI and the API (docs/report.schema.json).

build(facts, files) turns a job's facts record (bridge/job_facts.py) and what its files said
(read_files: the crash file's text and the stage box, read by the job's shell when the job
ends) into a JSON-ready dict, asking bridge.diagnosis why it ended. It is pure: values in,
values out, no I/O and no clock; vectors/report.json pins it. The one implementation: a
Node job's report is this one, carried by bridge/jobserve.py.
Its rooms: bridge/report_text.py (summary, log_footer, to_json: the report in words) and
bridge/report_files.py (read_files and the crash file's other readers: the only I/O; what
the crash file's text says is bridge/crash_text.py's); import their names from there.

Stable names (docs/CLIENT.md, "The shell", Report): outcome, exit_code, signal, stage,
stages, progress, error, diagnosis, stacks, log_tail, duration_s, pid. Everything else is an
extra.

build() reads the facts once into an Ending, then asks named parts for the error
(_job_error), the stage (_stages, _ranks_stage) and the verdict: bridge.diagnosis's first,
then VERDICT_RULES over it in order (a failed distributed job's root cause rank, a launcher
waiting in its rendezvous, a hung job's stuck rank, a bug in trainbridge), each tested alone
in tests/client/test_report.py; vectors/report.json pins the whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from trainbridge.bridge import diagnosis, diagnosis_stack, ranks, ranks_hang
from trainbridge.bridge.crash_text import signal_dumped_in, sigusr1_sections
from trainbridge.bridge.diagnosis_stack import strip_ansi
from trainbridge.bridge.report_text import reason, summary

__all__ = [
    "FATAL_LINES_MAX",
    "FATAL_MARKERS",
    "REPORT_VERSION",
    "Report",
    "build",
    "dropped_total",
    "environment",
    "internal_diagnosis",
    "join_stacks",
    "minimal",
]

REPORT_VERSION = 1
FATAL_LINES_MAX = 400  # stderr lines kept after "Fatal Python error"
FATAL_MARKERS = ("Fatal Python error:", "Timeout (")  # faulthandler's crash and watchdog headers


def hang_idle(m: dict[str, Any], heartbeat: dict[str, Any]) -> Optional[float]:
    """How long the job had done nothing when it was declared hung: from the machine's last
    activity (progress, a stage, counted work, output while it has no progress source; issue
    38: the worker's own idle_s, since its last progress or stage, said 235 s where the
    deadline had measured 90 s since the last line), else the last heartbeat's idle_s."""
    hang, last = m.get("hang"), m.get("last_activity_t")
    if hang and isinstance(last, (int, float)) and hang["t"] >= last:
        return round(float(hang["t"]) - last, 1)
    idle = heartbeat.get("idle_s")
    return float(idle) if isinstance(idle, (int, float)) else None


@dataclass(frozen=True)
class Ending:
    """What the report of a finished job is judged on, each part worked out once."""

    facts: dict[str, Any]
    outcome: str  # the machine's (set once the job has ended)
    tail: list[str]  # the last output lines (a hung job's: up to the verdict)
    crash_text: Optional[str]
    stacks: Optional[str]  # every dump, joined
    rows: list[dict[str, Any]]  # ranks.table: one row per process that said hello
    cause: Optional[dict[str, Any]]  # a distributed job's root cause (ranks.root_cause)
    cause_error: Optional[dict[str, Any]]  # the root cause rank's own error body
    stuck: Optional[dict[str, Any]]  # a hung distributed job's stuck rank (ranks_hang)
    after_hang: Optional[dict[str, Any]] = None  # {lines, tail}: what came after a hang's verdict

    @property
    def failed_rank(self) -> Optional[dict[str, Any]]:
        """The root cause of a failed distributed job, else None."""
        return self.cause if self.outcome == "failed" else None

    @property
    def failed_rank_error(self) -> Optional[dict[str, Any]]:
        """The root cause rank's own error body when a distributed job failed, else None."""
        return self.cause_error if self.outcome == "failed" else None


AFTER_HANG_KEPT = 10  # lines printed after a hang's verdict, kept in log_after_hang


def tails(facts: dict[str, Any]) -> tuple[list[str], Optional[dict[str, Any]]]:
    """The report's log_tail and log_after_hang. For a job declared hung, the last lines up
    to the verdict, and {lines, tail} of what came after it (the stop's doing: a launcher's
    traceback on SIGTERM filled the tail and pushed out the job's own last line); else the
    last lines, and None."""
    now = [line["text"] for line in facts["tail"]]
    at = facts.get("tail_at_hang")
    after = 0 if not at else facts["lines"]["stdout"] + facts["lines"]["stderr"] - at["lines"]
    if not at or after <= 0:
        return now, None
    kept = min(after, AFTER_HANG_KEPT, len(now))
    return [line["text"] for line in at["tail"]], {
        "lines": after,
        "tail": now[-kept:] if kept else [],
    }


def ending(facts: dict[str, Any], files: dict[str, Any]) -> Ending:
    outcome = facts["machine"]["outcome"]
    tail, after_hang = tails(facts)
    crash_text = files.get("crash_text")
    rows, cause, cause_error = _ranks(facts["ranks"])
    stuck = None
    if outcome == "hung" and facts["ranks"]:
        processes = (facts["snapshot"] or {}).get("children")  # the OS's view at the deadline
        stacks = _process_stacks(facts["ranks"], crash_text)  # fork workers' too
        stuck = ranks_hang.hung_rank(
            facts["ranks"],
            processes=processes,
            process_stacks=stacks,
        )
    return Ending(
        facts=facts,
        outcome=outcome,
        tail=tail,
        after_hang=after_hang,
        crash_text=crash_text,
        stacks=join_stacks(facts["stacks"], crash_text, facts["fatal_lines"]),
        rows=rows,
        cause=cause,
        cause_error=cause_error,
        stuck=stuck,
    )


def _job_error(e: Ending) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]]]:
    """(the report's error, its cancel): the worker's fatal error; none for the user's own
    stop (where it stopped is in the cancel); the client's refusal of the worker; for a
    failed distributed job, the rank that failed first, not the lead's echo of it."""
    facts = e.facts
    error = _error(facts["error"], e.tail)
    cancel = _cancel(e.outcome, facts["cancel"], error)
    if cancel and cancel["traceback"] is not None:
        error = None  # the user's own stop is not an error; where it stopped is in "cancel"
    refused = facts["machine"].get("refused")
    if refused and error is None:
        error = {
            "type": "UnsupportedProtocol",
            "message": f"the client refused the worker: {refused}",
            "traceback": "",
            "kind": "internal",
        }
    failed = e.failed_rank
    if e.failed_rank_error is not None:
        error = _error(e.failed_rank_error, e.tail)
    elif failed is not None and failed["error"].get("source") == "signal":
        # a rank killed by a signal raised nothing: the job's error is its launcher's, the
        # same whichever of rank 0 and the launcher was the lead when its error came
        error = _error(ranks.launcher_error(facts["ranks"]), e.tail) or error
    return error, cancel


def _stages(e: Ending, files: dict[str, Any]) -> tuple[Optional[str], list[dict[str, Any]]]:
    """(the stage the job ended in, its stage records). Without last words the stage box
    (the lead's, or with no hello yet the launched process's) may know stages the messages
    missed."""
    facts = e.facts
    stage = diagnosis.stage_at_end(facts["stages"], facts["error"])
    stages = [
        {"name": s["name"], "status": s["status"], "duration_s": s["duration_s"],
         "depth": s["depth"]}
        for s in facts["stages"]
    ]  # fmt: skip
    if facts["bye"] is None:
        boxed = files.get("stage_box")
        if boxed:
            stage = boxed[-1]
            stages += _boxed_only(stages, boxed)
    return stage, stages


def _ranks_stage(e: Ending, stage: Optional[str]) -> Optional[str]:
    """A distributed job's stage is its ranks': where the root cause failed, or where the
    job was when declared hung; not the stage the launcher (the lead again once its ranks
    left) was in, its "main" around the whole run."""
    failed = e.failed_rank
    hang = e.facts["machine"].get("hang")
    if failed is not None and failed["error"].get("stage"):
        return str(failed["error"]["stage"])
    if e.stuck is not None and hang and hang.get("stage"):
        return str(hang["stage"])
    return stage


def _first_verdict(
    e: Ending, stage: Optional[str]
) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """(bridge.diagnosis's verdict on the end or the hang, the error text of a bug there)."""
    facts = e.facts
    hang = facts["machine"].get("hang")
    facts_end = {
        "outcome": e.outcome,
        "exit_code": facts["exit_code"],
        "signal": facts["exit_signal"],
        "error": facts["error"],
        "saw_bye": facts["bye"] is not None,
        "crash_text": e.crash_text,
        "log_tail": e.tail,
        "stage": stage,
        "pid": facts["pid"],
        "oom_killed": facts["oom_killed"],
        "oom_kills": facts["oom_kills"],
        "hang_reason": hang and hang["reason"],
        "heartbeat_stack": (facts["heartbeat"] or {}).get("stack"),
    }
    if e.failed_rank_error is not None:
        facts_end["error"] = e.failed_rank_error
        facts_end["stage"] = e.failed_rank_error.get("stage") or stage
    return _diagnose(e.outcome, facts_end, facts, e.stacks, stage, e.crash_text)


def root_cause_rank(e: Ending, verdict: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A failed distributed job is said by its root cause rank; a rank killed by a signal,
    with no error of its own, is a kill."""
    failed = e.failed_rank
    if failed is None or verdict is None:
        return None
    said = dict(verdict, summary=failed["summary"])
    if failed["error"].get("source") == "signal":
        said.update(kind="killed", hint=ranks.killed_hint(failed))
    return said


def rendezvous(e: Ending, verdict: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A hung launcher whose ranks never all joined: the rendezvous it waits in."""
    return _rendezvous(e.facts, e.outcome, e.stacks)


def hung_rank(e: Ending, verdict: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A hung distributed job is said by its stuck rank, with the first verdict's evidence."""
    if e.stuck is None:
        return None
    evidence = dict((verdict or {}).get("evidence") or {}, hung_rank=e.stuck)
    return {
        "kind": e.stuck["kind"],
        "summary": e.stuck["summary"],
        "hint": e.stuck["hint"],
        "evidence": evidence,
    }


def internal(e: Ending, verdict: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A bug in trainbridge ended the job: that, whatever else was seen."""
    error = e.facts["internal_error"]
    return internal_diagnosis(error) if error else None


# Over the first verdict (bridge.diagnosis's), in order; each that says something replaces
# the verdict so far: the last that speaks is the report's.
VERDICT_RULES: tuple[
    Callable[[Ending, Optional[dict[str, Any]]], Optional[dict[str, Any]]], ...
] = (root_cause_rank, rendezvous, hung_rank, internal)


def _verdict(
    e: Ending, stage: Optional[str], error: Optional[dict[str, Any]]
) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """(the report's diagnosis, the error text of a bug in the rules): the first verdict,
    the VERDICT_RULES over it, then the thread it is about."""
    verdict, diagnosis_error = _first_verdict(e, stage)
    for rule in VERDICT_RULES:
        verdict = rule(e, verdict) or verdict
    if verdict is None or "thread" in verdict:
        return verdict, diagnosis_error
    dump = e.crash_text or "\n".join(e.facts["fatal_lines"])
    failed = e.failed_rank_error
    verdict = dict(
        verdict,
        thread=diagnosis_stack.thread_of(
            verdict.get("kind"),
            verdict.get("evidence"),
            failed if failed is not None else error,
            dump,
            e.outcome == "hung",
        ),
    )
    crashed = diagnosis_stack.crash_dump_thread(dump) if verdict["kind"] == "native_crash" else None
    if crashed is not None:  # a face finds that thread's block in the dump by it
        verdict["thread_ident"] = crashed[0]
    return verdict, diagnosis_error


def build(facts: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
    """The report of a finished job from its facts record (bridge/job_facts.py, with
    `machine` and `ended` set) and read_files()'s answer: the error, the stage, the verdict
    (each a function above), then the report's fields."""
    e = ending(facts, files)
    error, cancel = _job_error(e)
    stage, stages = _stages(e, files)
    verdict, diagnosis_error = _verdict(e, stage, error)
    stage = _ranks_stage(e, stage)
    m = facts["machine"]
    started = facts["started"]
    heartbeat = facts["heartbeat"] or {}
    report: dict[str, Any] = {
        "outcome": e.outcome,
        "exit_code": facts["exit_code"],
        "signal": facts["exit_signal"],
        "stage": stage,
        "stages": stages,
        "progress": facts["progress"],
        "health": [dict(entry) for entry in facts["health"]["entries"]],
        "error": error,
        "diagnosis": verdict,
        "stacks": e.stacks,
        "log_tail": e.tail,
        "log_after_hang": e.after_hang,
        "duration_s": round(facts["ended"] - started, 3),
        "pid": facts["pid"],
        # extras
        "report_version": REPORT_VERSION,
        "job_id": facts["id"],
        "command": list(facts["command"]),
        "started_at": _iso(facts["started_wall"]),
        "hang": _hang(m, started, heartbeat),
        "signals_sent": list(facts["signals_sent"]),
        "environment": environment(facts["hellos"]),
        "worker": _worker(facts, m),
        "output": {"lines": dict(facts["lines"]), "bytes": dict(facts["bytes"])},
        "protocol": _protocol(facts, files),
        "leftovers": list(facts["leftovers"]),
        "stages_dropped": facts["stages_dropped"],
        "cancel": cancel,
        "log_path": facts["log_path"],
        "log_error": facts["log_error"],
        "dropped": dropped_total(facts["dropped"].values()),
        "artifacts": [dict(a) for a in facts.get("artifacts", [])],
        "evidence": facts["snapshot"],
        "look": facts.get("look"),
        "ranks": e.rows,
        "root_cause": e.cause,
    }
    if diagnosis_error:
        report["diagnosis_error"] = diagnosis_error
    report["summary"] = summary(report)
    report["reason"] = reason(report)
    return report


def _hang(m: dict[str, Any], started: float, heartbeat: dict[str, Any]) -> Any:
    """The hang the machine declared, if any: its reason and stage, when, and as
    diagnose_hang read them, the idle time the machine measured and the last heartbeat's
    stack."""
    hang = m.get("hang")
    return hang and {
        "reason": hang["reason"],
        "stage": hang["stage"],
        "after_s": round(hang["t"] - started, 3),
        "idle_s": hang_idle(m, heartbeat),
        "stack": heartbeat.get("stack"),
    }


def _worker(facts: dict[str, Any], m: dict[str, Any]) -> dict[str, Any]:
    """What the worker said of itself: hello and bye, the leads, the ranks."""
    hellos = facts["hellos"]
    return {
        "hello": bool(hellos),
        "bye": facts["bye"],
        "lead_pid": facts["lead_pid"],
        "leads": list(facts["leads"]),
        "ranks": sorted(int(rank) for rank in hellos),
        "dump_signal": bool(facts["dump_pids"]),
        "off": m.get("no_worker"),
    }


def _protocol(facts: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
    """What crossed the wire and did not count: refused, lost, foreign, unrouted, undelivered
    and unsent messages."""
    return {
        "rejected": dict(facts["rejected"]),
        "lost": facts["lost"],
        "foreign_hello": facts["foreign_hellos"],
        "unrouted": facts["unrouted"],
        "undelivered": dict(facts["undelivered"]),
        "unsent": int(files.get("unsent") or 0),
    }


def _boxed_only(stages: list[dict[str, Any]], boxed: list[str]) -> list[dict[str, Any]]:
    """The stages open in the stage box that no stage message brought (a native crash right
    after they began, before the beacon sent them): records that never ended, at the box's
    depth, so the report lists every stage the process was in whatever the beacon managed."""
    open_names = [s["name"] for s in stages if s["status"] == "running"]
    out = []
    for depth, name in enumerate(boxed):
        if name in open_names:
            open_names.remove(name)
            continue
        out.append({"name": name, "status": "running", "duration_s": None, "depth": depth})
    return out


def dropped_total(counts: Any) -> dict[str, int]:
    """What the job's worker processes dropped, per kind, summed over the processes (each
    reports its own running totals in heartbeats and, when not zero, in its bye)."""
    total: dict[str, int] = {}
    for per_process in counts:
        for kind, count in per_process.items():
            if isinstance(count, int) and not isinstance(count, bool):
                total[str(kind)] = total.get(str(kind), 0) + count
    return total


def _rendezvous(
    facts: dict[str, Any], outcome: str, stacks: Optional[str]
) -> Optional[dict[str, Any]]:
    """rendezvous_wait when the start-up deadline passed with only a launcher's hello."""
    hang = facts["machine"].get("hang")
    if outcome != "hung" or not hang or hang["reason"] != "startup" or not facts["hellos"]:
        return None
    hellos = list(facts["hellos"].values())
    launcher = next((h for h in hellos if ranks.awaits_ranks(h)), None)
    if launcher is None:
        return None
    any_rank = any(h.get("world_size") is not None for h in hellos)
    return ranks_hang.rendezvous_wait(launcher, any_rank, hang["t"] - facts["started"], stacks)


def _ranks(state: Any) -> tuple[list[dict[str, Any]], Any, Optional[dict[str, Any]]]:
    """The per-process rows, and for a distributed job (two ranks or more) the root cause
    and its rank's own error body (None when torchrun's error file is all there is)."""
    if state is None:
        return [], None, None
    rows = ranks.table(state)
    if sum(1 for r in rows if r["role"] == "rank") < 2:
        return rows, None, None
    cause = ranks.root_cause(rows)
    return rows, cause, ranks.error_body(state, cause)


def internal_diagnosis(error: dict[str, Any]) -> dict[str, Any]:
    """A bug in trainbridge ended the job (Job.fail_internal): say so, not the job's fault."""
    return {
        "kind": "internal",
        "summary": f"{error['message']} ({error['type']}); the job was stopped",
        "hint": "this is a bug in trainbridge, not in the job: please report it with this "
        "report (error.traceback); other jobs of this client were not affected",
        "evidence": {"traceback": error["traceback"][-4000:]},
    }


def environment(hellos: dict[Any, dict[str, Any]]) -> Optional[dict[str, Any]]:
    """What the job ran on, from rank 0's hello (the lowest rank's), or None when no worker
    said hello. Fields an older worker does not send are None. Ranks are the keys, numbers
    or their strings (a facts record's)."""
    if not hellos:
        return None
    hello = hellos[min(hellos, key=int)]
    python = _map(hello.get("python"))
    encoding = _map(hello.get("encoding"))
    stdout = _map(hello.get("stdout"))
    return {
        "host": hello.get("host"),
        "platform": hello.get("platform"),
        "python": python.get("version"),
        "python_executable": python.get("executable"),
        "venv": python.get("venv"),
        "cpu_count": hello.get("cpu_count"),
        "torch": _map(hello.get("packages")).get("torch"),
        "gpu_driver": _map(hello.get("nvidia")).get("driver"),
        "cuda_visible_devices": _map(hello.get("env")).get("CUDA_VISIBLE_DEVICES"),
        "stdout_encoding": encoding.get("stdout"),
        "locale_encoding": encoding.get("locale"),
        "utf8_mode": encoding.get("utf8_mode"),
        "stdout_buffered": stdout.get("buffered"),
    }


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def minimal(facts: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """The contract's fields only, when build() itself failed (a bug): never leave a waiter
    without a report. `facts` as for build()."""
    report = {
        "outcome": (facts.get("machine") or {}).get("outcome"),
        "exit_code": facts["exit_code"],
        "signal": facts["exit_signal"],
        "stage": None,
        "stages": [],
        "progress": None,
        "error": None,
        "diagnosis": None,
        "stacks": None,
        "log_tail": [line["text"] for line in facts["tail"]],
        "duration_s": round(facts["ended"] - facts["started"], 3),
        "pid": facts["pid"],
        "report_version": REPORT_VERSION,
        "report_error": f"{type(exc).__name__}: {exc}",
    }
    report["summary"] = summary(report)
    report["reason"] = reason(report)
    return report


def _diagnose(
    outcome: str,
    facts_end: dict[str, Any],
    facts: dict[str, Any],
    stacks: Optional[str],
    stage: Optional[str],
    crash_text: Optional[str] = None,
) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """(diagnosis or None, error text or None): bridge.diagnosis decides; a bug there must
    not cost the report."""
    try:
        if outcome == "hung":
            m = facts["machine"]
            hang = m["hang"]
            heartbeat = facts["heartbeat"] or {}
            hang_facts = {
                "reason": hang["reason"],
                "stage": hang["stage"] or stage,
                "stages": [s["name"] for s in facts["stages"] if s["status"] == "running"],
                "idle_s": hang_idle(m, heartbeat),
                "stack": heartbeat.get("stack"),
                "stacks": stacks,
                "saw_hello": bool(facts["hellos"]),
                "evidence": facts["snapshot"] or {},
                "worker_loaded": m.get("loaded_t") is not None,
                "python_silent": _python_silent(facts, crash_text),
                "process_stacks": _process_stacks(facts["ranks"], crash_text),
                "pid": facts["pid"],
                "progress": facts["progress"],
            }
            return diagnosis.diagnose_hang(hang_facts), None
        return diagnosis.diagnose_end(facts_end), None
    except Exception as exc:  # noqa: BLE001 - a rule's bug: the report says so, and is written
        return None, f"{type(exc).__name__}: {exc}"


def _python_silent(facts: dict[str, Any], crash_text: Optional[str]) -> bool:
    """Whether no Python ran in the job's process when it was asked for its stacks: it got
    SIGUSR2 (neither dump_stacks nor its SIGUSR1 handler answered in time) and its SIGUSR1
    dump never came. A dump that came late, after the SIGUSR2, still proves its main thread
    ran Python: a process starved of CPU, not one whose GIL native code holds."""
    if "SIGUSR2" not in facts["signals_sent"]:
        return False
    return (facts["lead_pid"] or facts["pid"]) not in signal_dumped_in(crash_text)


def _process_stacks(state: Any, crash_text: Optional[str]) -> dict[str, str]:
    """{pid: its stacks}: every answer to dump_stacks, and the SIGUSR1 dumps in the crash
    file of processes with no beacon (fork workers: their handler came with the fork)."""
    out = {str(pid): text for pid, text in sigusr1_sections(crash_text or "").items()}
    out.update(ranks.process_stacks(state) if state is not None else {})
    return out


def _cancel(
    outcome: Optional[str], info: Optional[dict[str, Any]], error: Optional[dict[str, Any]]
) -> Optional[dict[str, Any]]:
    """The user's cancel: reason, the worker's answer (accepted, or refused and why), the
    KeyboardInterrupt traceback that shows where the script was stopped, and by what:
    cancel() ("client"), a signal the user sent the process ("signal"), or a metric that
    became NaN under stop_on_nan ("health")."""
    if info is None:
        return None
    out = {
        "reason": info.get("reason"),
        "accepted": info.get("accepted"),
        "refused": info.get("refused"),
        "traceback": None,
        "by": info.get("by") or "client",  # cancel(), or the user's own signal
        "signal": info.get("signal"),  # that signal (SIGINT, SIGTERM, SIGHUP), by: "signal"
    }
    if outcome == "cancelled" and error is not None and error.get("type") == "KeyboardInterrupt":
        out["traceback"] = error.get("traceback") or ""
    return out


def _error(worker_error: Optional[dict[str, Any]], tail: list[str]) -> Optional[dict[str, Any]]:
    """The worker's error, or the last traceback printed on stderr by a plain command."""
    if worker_error:
        return _for_people(
            {
                k: worker_error.get(k)
                for k in (
                    "type",
                    "message",
                    "traceback",
                    "kind",
                    "stage",
                    "fatal",
                    "thread",
                    "frames",
                    "chain",
                    "exit_code",
                    "resources",  # memory and disk as it failed (worker/exhaustion.py)
                )
                if k in worker_error
            }
        )
    start = None
    for i in range(len(tail) - 1, -1, -1):
        if tail[i].startswith("Traceback (most recent call last)"):
            start = i
            break
    if start is None:
        return None
    try:
        parsed = diagnosis.traceback_in_text(tail[start:])
    except Exception:  # noqa: BLE001 - a best-effort parse of free text: no traceback found
        parsed = None
    if not parsed:
        return None
    return _for_people(
        {
            "type": parsed["type"],
            "message": parsed["message"],
            "traceback": "\n".join(tail[start:]),
            "frames": parsed["frames"],
            "kind": "exception",
            "source": "stderr",
        }
    )


def _for_people(error: dict[str, Any]) -> dict[str, Any]:
    """The error's text fields without terminal escapes (torch's "\x1b[1m" in a
    message reached GUIs); the log file keeps the raw bytes."""
    for key in ("message", "traceback"):
        if isinstance(error.get(key), str):
            error[key] = strip_ansi(error[key])
    if isinstance(error.get("chain"), list):
        error["chain"] = [
            {**c, "message": strip_ansi(c["message"])}
            if isinstance(c, dict) and isinstance(c.get("message"), str)
            else c
            for c in error["chain"]
        ]
    return error


def join_stacks(
    dumps: list[str], crash_text: Optional[str], fatal_lines: list[str]
) -> Optional[str]:
    """All the stack text we got, each part under a header saying where it came from."""
    parts = [f"--- in-band dump_stacks (worker) ---\n{text.rstrip()}" for text in dumps]
    if crash_text:
        parts.append(f"--- faulthandler (crash file) ---\n{crash_text}")
    if fatal_lines and not crash_text:
        parts.append("--- faulthandler (stderr) ---\n" + "\n".join(fatal_lines))
    return "\n\n".join(parts) if parts else None


def _iso(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


class Report(dict):  # type: ignore[type-arg]
    """The final report: a JSON-ready dict (docs/report.schema.json) with attribute access;
    the one class of a launched and an attached job's report (bridge.Report)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
