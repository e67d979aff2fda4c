"""The final report of a job: the JSON contract of the CLI and the API (docs/report.schema.json).

build(job) gathers what the job recorded into plain values, asks bridge.diagnosis why it
ended, and returns a JSON-ready dict. summary(report) is the one readable paragraph the CLI
prints. to_json(report) is ASCII JSON (non-ASCII and undecodable bytes stay as \\u escapes).

Stable names (docs/CLIENT.md, "The shell", Report): outcome, exit_code, signal, stage,
stages, progress, error, diagnosis, stacks, log_tail, duration_s, pid. Everything else is an
extra.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Optional

from trainbridge.protocol import codec

REPORT_VERSION = 1
CRASH_TEXT_MAX = 256 * 1024  # bytes of the crash file kept (its end: the newest dumps)
FATAL_LINES_MAX = 400  # stderr lines kept after "Fatal Python error"
FATAL_MARKERS = ("Fatal Python error:", "Timeout (")  # faulthandler's crash and watchdog headers


def log_footer(report: dict[str, Any]) -> str:
    """What a job's log file ends with: the verdict, then the stacks that explain it (the
    crash file's are gone once the job ends; the log keeps them). Node: logFooter."""
    lines = [f"[trainbridge] {report.get('summary') or report.get('outcome')}"]
    if report.get("stacks"):
        lines += ["[trainbridge] stacks:", str(report["stacks"]).rstrip("\n")]
    return "\n".join(lines)


def build(job: Any) -> dict[str, Any]:
    """The report of a finished job (bridge.job.Job)."""
    m = job.m
    outcome = m["outcome"]
    tail = [line["text"] for line in job.tail]
    crash_text = read_crash_file(job.crash_file)
    stacks = join_stacks(job.stacks, crash_text, job.fatal_lines)
    error = _error(job.error, tail)
    cancel = _cancel(outcome, getattr(job, "cancel_info", None), error)
    if cancel and cancel["traceback"] is not None:
        error = None  # the user's own stop is not an error; where it stopped is in "cancel"
    if m.get("refused") and error is None:
        error = {
            "type": "UnsupportedProtocol",
            "message": f"the client refused the worker: {m['refused']}",
            "traceback": "",
            "kind": "internal",
        }
    rows, cause, cause_error = _ranks(job)
    if cause_error is not None and outcome == "failed":
        error = _error(cause_error, tail)  # the rank that failed first, not the lead's echo
    stage = _last_stage(job.stages, job.error)
    if job.bye is None:  # no last words: the stage box may know a stage the messages missed
        boxed = read_stage_box(job.crash_file, job.lead_pid or job.pid)  # no hello yet: ours
        if boxed:
            stage = boxed[-1]
    hang = m.get("hang")
    facts_end = {
        "outcome": outcome,
        "exit_code": job.exit_code,
        "signal": job.exit_signal,
        "error": job.error,
        "saw_bye": job.bye is not None,
        "crash_text": crash_text,
        "log_tail": tail,
        "stage": stage,
        "pid": job.pid,
        "oom_killed": job.oom_killed,
        "oom_kills": getattr(job, "oom_kills", None),
        "hang_reason": hang and hang["reason"],
        "heartbeat_stack": (job.heartbeat or {}).get("stack"),
    }
    if cause_error is not None and outcome == "failed":
        facts_end["error"] = cause_error
        facts_end["stage"] = cause_error.get("stage") or stage
    diagnosis, diagnosis_error = _diagnose(outcome, facts_end, job, stacks, stage)
    if cause is not None and outcome == "failed" and diagnosis is not None:
        diagnosis = dict(diagnosis, summary=cause["summary"])
    waiting = _rendezvous(job, outcome, stacks)
    if waiting is not None:
        diagnosis = waiting
    stuck = _hung_rank(job, outcome)
    if stuck is not None:
        evidence = dict((diagnosis or {}).get("evidence") or {}, hung_rank=stuck)
        diagnosis = {
            "kind": "collective_wait",
            "summary": stuck["summary"],
            "hint": stuck["hint"],
            "evidence": evidence,
        }
    if getattr(job, "internal_error", None):
        diagnosis = internal_diagnosis(job.internal_error)
    ended = job.ended or time.monotonic()
    report: dict[str, Any] = {
        "outcome": outcome,
        "exit_code": job.exit_code,
        "signal": job.exit_signal,
        "stage": stage,
        "stages": [
            {
                "name": s["name"],
                "status": s["status"],
                "duration_s": s["duration_s"],
                "depth": s["depth"],
            }
            for s in job.stages
        ],
        "progress": job.progress,
        "error": error,
        "diagnosis": diagnosis,
        "stacks": stacks,
        "log_tail": tail,
        "duration_s": round(ended - job.started, 3),
        "pid": job.pid,
        # extras
        "report_version": REPORT_VERSION,
        "job_id": job.id,
        "command": list(job.cmd),
        "started_at": _iso(job.started_wall),
        "hang": hang
        and {
            "reason": hang["reason"],
            "stage": hang["stage"],
            "after_s": round(hang["t"] - job.started, 3),
            # what the last heartbeat said, as diagnose_hang read it
            "idle_s": (job.heartbeat or {}).get("idle_s"),
            "stack": (job.heartbeat or {}).get("stack"),
        },
        "signals_sent": list(job.signals_sent),
        "environment": environment(job.hellos),
        "worker": {
            "hello": bool(job.hellos),
            "bye": job.bye,
            "lead_pid": job.lead_pid,
            "leads": list(job.leads),
            "ranks": sorted(job.hellos),
            "dump_signal": bool(job.dump_pids),
            "off": m.get("no_worker"),
        },
        "output": {"lines": dict(job.lines), "bytes": dict(job.bytes)},
        "protocol": {
            "rejected": dict(job.channel.rejected),
            "lost": job.channel.lost,
            "foreign_hello": job.foreign_hellos,
            "unrouted": job.unrouted,
            "undelivered": dict(job.channel.undelivered),
        },
        "leftovers": list(job.leftovers),
        "stages_dropped": job.stages_dropped,
        "cancel": cancel,
        "log_path": job.log_path,
        "log_error": job.log_error,
        "dropped": dropped_total(job.dropped.values()),
        "evidence": job.snapshot,
        "ranks": rows,
        "root_cause": cause,
    }
    if diagnosis_error:
        report["diagnosis_error"] = diagnosis_error
    report["summary"] = summary(report)
    return report


def dropped_total(counts: Any) -> dict[str, int]:
    """What the job's worker processes dropped, per kind, summed over the processes (each
    reports its own running totals in heartbeats and, when not zero, in its bye)."""
    total: dict[str, int] = {}
    for per_process in counts:
        for kind, count in per_process.items():
            if isinstance(count, int) and not isinstance(count, bool):
                total[str(kind)] = total.get(str(kind), 0) + count
    return total


def losses(report: dict[str, Any]) -> list[str]:
    """Sentences for the summary about anything the job's record is missing."""
    out = []
    dropped = {k: v for k, v in (report.get("dropped") or {}).items() if v}
    for kind, count in sorted(dropped.items()):
        if kind == "user":
            out.append(
                f"The script's inbox was full: the worker dropped {count} job.send() "
                f"message{'s' if count != 1 else ''} (report 'dropped'); read them with "
                "worker.receive() or worker.on_message()."
            )
            continue
        out.append(
            f"The worker dropped {count} {kind} record{'s' if count != 1 else ''}: its "
            f"queue stayed full past TRAINBRIDGE_LOG_WAIT_S (report 'dropped')."
        )
    undelivered = (report.get("protocol") or {}).get("undelivered") or {}
    for kind, count in sorted((k, v) for k, v in undelivered.items() if v):
        what = "job.send() message" if kind == "user" else f"'{kind}' message"
        why = "its process was gone or the job ended first"
        if kind == "user":  # also bounded while a worker takes nothing (bridge/hub.py)
            why = "its process was gone, it took none while 10,000 waited, or the job ended first"
        out.append(
            f"{count} {what}{'s' if count != 1 else ''} never reached the worker: "
            f"{why} (report 'protocol.undelivered')."
        )
    log_error = report.get("log_error")
    if log_error:
        out.append(
            f"The log file {log_error.get('path')} is incomplete from line "
            f"{log_error.get('from_line')} on: {log_error.get('error')}."
        )
    return out


def _hung_rank(job: Any, outcome: str) -> Optional[dict[str, Any]]:
    """The rank the others wait for in a collective, from every rank's hang-time stack."""
    from trainbridge.bridge import ranks

    state = getattr(job, "ranks", None)
    if outcome != "hung" or state is None:
        return None
    return ranks.hung_rank(state)


def _rendezvous(job: Any, outcome: str, stacks: Optional[str]) -> Optional[dict[str, Any]]:
    """rendezvous_wait when the start-up deadline passed with only a launcher's hello."""
    from trainbridge.bridge import ranks

    hang = job.m.get("hang")
    if outcome != "hung" or not hang or hang["reason"] != "startup" or not job.hellos:
        return None
    hellos = list(job.hellos.values())
    launcher = next((h for h in hellos if ranks.awaits_ranks(h)), None)
    if launcher is None:
        return None
    any_rank = any(h.get("world_size") is not None for h in hellos)
    return ranks.rendezvous_wait(launcher, any_rank, hang["t"] - job.started, stacks)


def _ranks(job: Any) -> tuple[list[dict[str, Any]], Any, Optional[dict[str, Any]]]:
    """The per-process rows, and for a distributed job (two ranks or more) the root cause
    and its rank's own error body (None when torchrun's error file is all there is)."""
    from trainbridge.bridge import ranks

    state = getattr(job, "ranks", None)
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


def environment(hellos: dict[int, dict[str, Any]]) -> Optional[dict[str, Any]]:
    """What the job ran on, from rank 0's hello (the lowest rank's), or None when no worker
    said hello. Fields an older worker does not send are None."""
    if not hellos:
        return None
    hello = hellos[min(hellos)]
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


def minimal(job: Any, exc: BaseException) -> dict[str, Any]:
    """The contract's fields only, when build() itself failed (a bug): never leave a waiter
    without a report."""
    report = {
        "outcome": job.m.get("outcome"),
        "exit_code": job.exit_code,
        "signal": job.exit_signal,
        "stage": None,
        "stages": [],
        "progress": None,
        "error": None,
        "diagnosis": None,
        "stacks": None,
        "log_tail": [line["text"] for line in job.tail],
        "duration_s": round((job.ended or time.monotonic()) - job.started, 3),
        "pid": job.pid,
        "report_version": REPORT_VERSION,
        "report_error": f"{type(exc).__name__}: {exc}",
    }
    report["summary"] = summary(report)
    return report


def _diagnose(
    outcome: str, facts_end: dict[str, Any], job: Any, stacks: Optional[str], stage: Optional[str]
) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """(diagnosis or None, error text or None): bridge.diagnosis decides; a bug there must
    not cost the report."""
    try:
        from trainbridge.bridge import diagnosis

        if outcome == "hung":
            hang = job.m["hang"]
            facts = {
                "reason": hang["reason"],
                "stage": hang["stage"] or stage,
                "stages": [s["name"] for s in job.stages if s["status"] == "running"],
                "idle_s": (job.heartbeat or {}).get("idle_s"),
                "stack": (job.heartbeat or {}).get("stack"),
                "stacks": stacks,
                "saw_hello": bool(job.hellos),
                "evidence": job.snapshot or {},
                "worker_loaded": job.m.get("loaded_t") is not None,
                "python_silent": "SIGUSR2" in job.signals_sent,
                "process_stacks": _process_stacks(job),
                "pid": job.pid,
                "progress": job.progress,
            }
            return diagnosis.diagnose_hang(facts), None
        return diagnosis.diagnose_end(facts_end), None
    except Exception as exc:  # noqa: BLE001 - a rule's bug: the report says so, and is written
        return None, f"{type(exc).__name__}: {exc}"


def _process_stacks(job: Any) -> dict[str, str]:
    from trainbridge.bridge import ranks

    state = getattr(job, "ranks", None)
    return ranks.process_stacks(state) if state is not None else {}


def _cancel(
    outcome: Optional[str], info: Optional[dict[str, Any]], error: Optional[dict[str, Any]]
) -> Optional[dict[str, Any]]:
    """The user's cancel: reason, the worker's answer (accepted, or refused and why), the
    KeyboardInterrupt traceback that shows where the script was stopped, and by what:
    cancel() ("client") or a signal the user sent the process ("signal")."""
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
        from trainbridge.bridge.diagnosis import traceback_in_text

        parsed = traceback_in_text(tail[start:])
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
    """The error's text fields without terminal escapes (issue 12: torch's "\x1b[1m" in a
    message reached GUIs); the log file keeps the raw bytes."""
    from trainbridge.bridge.diagnosis_stack import strip_ansi

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


def _last_stage(
    stages: list[dict[str, Any]], error: Optional[dict[str, Any]] = None
) -> Optional[str]:
    """The job's stage at its end (the rule: bridge/diagnosis_end.py stage_at_end)."""
    from trainbridge.bridge.diagnosis import stage_at_end

    return stage_at_end(stages, error)


def read_stage_box(crash_file: Optional[str], pid: Optional[int]) -> Optional[list[str]]:
    """The stages a worker process had open when it last changed stage, from the file it
    writes synchronously beside the crash file (worker/runtime.py, PROTOCOL.md section 2),
    outermost first; None when there is none. Newer than the stage messages, which wait up
    to 50 ms for the beacon: a native crash right after a stage began is placed in it."""
    if not crash_file or pid is None:
        return None
    try:
        with open(f"{crash_file}.stages.{pid}", "rb") as f:
            data = f.read(64 * 1024)
    except OSError:
        return None
    names: list[str] = []
    for line in data.decode("ascii", "replace").split("\n"):
        if line == ".":
            return names
        try:
            names.append(codec.unescape(line))
        except codec.ProtocolError:
            names.append(line)
    return None  # no closing line: a torn or foreign file


def read_crash_file(path: Optional[str]) -> Optional[str]:
    """What faulthandler wrote (native crash, SIGUSR1 dump, freeze watchdog), or None."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - CRASH_TEXT_MAX))
            data = f.read()
    except OSError:
        return None
    text = data.decode("utf-8", "surrogateescape")
    # The worker writes a "[trainbridge] ..." banner first; only dumps count as stacks.
    text = "\n".join(
        line for line in text.splitlines() if not line.startswith("[trainbridge]")
    ).strip()
    return text or None


def crash_file_size(path: Optional[str]) -> Optional[int]:
    """Where the next dump will start in the crash file (None: there is none yet)."""
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


_SIGNAL_DUMP_MARK = re.compile(r"^\[trainbridge\] pid (\d+): stacks on SIGUSR1$", re.M)


def signal_dumped_pids(path: Optional[str], since: Optional[int]) -> set[int]:
    """The processes whose SIGUSR1 handler wrote its stacks after offset `since` of the crash
    file (each marks its dump with a "[trainbridge] pid N: stacks on SIGUSR1" line)."""
    if not path:
        return set()
    try:
        with open(path, "rb") as f:
            f.seek(since or 0)
            data = f.read(CRASH_TEXT_MAX)
    except OSError:
        return set()
    return {int(m) for m in _SIGNAL_DUMP_MARK.findall(data.decode("ascii", "replace"))}


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


def summary(report: dict[str, Any]) -> str:
    """One readable paragraph: what happened, where, why, and what to try."""
    outcome = report.get("outcome") or "unknown"
    parts = [f"Job {outcome} after {report.get('duration_s', 0):.1f} s"]
    if report.get("signal"):
        parts[0] += f" (killed by {report['signal']})"
    elif report.get("exit_code") is not None:
        parts[0] += f" (exit status {report['exit_code']})"
    if report.get("stage") and outcome != "succeeded":
        parts[0] += f", in stage '{report['stage']}'"
    progress = report.get("progress")
    if progress and progress.get("step") is not None:
        total = progress.get("total")
        parts[0] += f", at step {_fmt(progress['step'])}" + (f" of {_fmt(total)}" if total else "")
    hang = report.get("hang")
    if hang:
        parts.append(
            f"It was declared hung ({hang['reason'].replace('_', ' ')}) "
            f"{hang['after_s']:.1f} s after the start, and stopped."
        )
    diagnosis = report.get("diagnosis")
    if diagnosis:
        parts.append(f"Diagnosis ({diagnosis.get('kind')}): {diagnosis.get('summary')}")
        if diagnosis.get("hint"):
            parts.append(f"Try: {diagnosis['hint']}")
    elif report.get("error") and outcome != "succeeded":
        error = report["error"]
        parts.append(f"Error: {error.get('type')}: {error.get('message')}")
    parts.extend(losses(report))
    return " ".join(p if p.endswith(".") else p + "." for p in parts)


def to_json(report: dict[str, Any], indent: Optional[int] = 2) -> str:
    """ASCII JSON: non-ASCII text and undecodable bytes (lone surrogates) become \\u escapes."""
    return json.dumps(report, ensure_ascii=True, indent=indent, default=str)


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _iso(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))
