"""The report in words: summary(report), the one readable paragraph the CLI prints (what
happened, where, why, what to try, and what the record is missing); log_footer(report), what
a job's log file ends with; to_json(report), ASCII JSON. Pure. The one implementation: a Node
face shows the summary and reason written here (vectors/report.json pins the summary)."""

from __future__ import annotations

import re
from typing import Any, Optional

from trainbridge.bridge import jsonform


def log_footer(report: dict[str, Any]) -> str:
    """What a job's log file ends with: the verdict, then the stacks that explain it (the
    crash file's are gone once the job ends; the log keeps them)."""
    lines = [f"[trainbridge] {report.get('summary') or report.get('outcome')}"]
    if report.get("stacks"):
        lines += ["[trainbridge] stacks:", str(report["stacks"]).rstrip("\n")]
    return "\n".join(lines)


POINTS_KEPT = 1024  # worker/runtime.py SERIES_CAP: the calls' metrics kept between two sends


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
        if kind == "artifacts":
            out.append(
                f"{count} more file{'s' if count != 1 else ''} the job made "
                f"{'were' if count != 1 else 'was'} not listed: a worker lists at most 1,000 "
                "(report 'dropped')."
            )
            continue
        if kind == "points":
            out.append(
                f"The metrics of {count} progress() call{'s' if count != 1 else ''} were not "
                f"kept for the curves: more than {POINTS_KEPT} calls came between two sends "
                "(report 'dropped'); the latest values were sent."
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
    lost = (report.get("protocol") or {}).get("lost") or 0
    if lost:
        out.append(
            f"{lost} message{'s' if lost != 1 else ''} from the worker never arrived: gaps in "
            "their sequence numbers (report 'protocol.lost')."
        )
    worker = report.get("worker") or {}
    unsent = (report.get("protocol") or {}).get("unsent") or 0
    if unsent:
        out.append(
            f"{unsent} record{'s' if unsent != 1 else ''} the worker queued at exit (logs, "
            "stages, messages) never left it: the client took nothing for a whole ack "
            "timeout (report 'protocol.unsent'; TRAINBRIDGE_ACK_TIMEOUT_S waits longer)."
        )
    elif report.get("outcome") == "succeeded" and worker.get("hello") and not worker.get("bye"):
        out.append(
            "The worker's last words never arrived, so what it sent at the end may be "
            "missing; the log's last lines say how many records never left."
        )
    log_error = report.get("log_error")
    if log_error:
        out.append(
            f"The log file {log_error.get('path')} is incomplete from line "
            f"{log_error.get('from_line')} on: {log_error.get('error')}."
        )
    return out + feed_losses(report)


def feed_losses(report: dict[str, Any]) -> list[str]:
    """Sentences about what the job's feed (events.jsonl: what attached faces and the
    dashboard read) is missing: events a failed write dropped (the keeper's events_failed,
    with feed_error), and an end line still owed (end_line_owed: the error that stopped it)."""
    out = []
    failed = report.get("events_failed") or 0
    if failed:
        out.append(
            f"{failed} event{'s' if failed != 1 else ''} of the job's feed could not be written "
            f"({report.get('feed_error')}): attached faces and the dashboard missed "
            f"{'them' if failed != 1 else 'it'}; the log file keeps the output (report "
            "'events_failed')."
        )
    owed = report.get("end_line_owed")
    if owed:
        out.append(end_line_sentence(str(owed)))
    return out


def end_line_sentence(error: str) -> str:
    return (
        f"The feed's end line could not be written ({error}): a face that follows the feed "
        "shows this end from the store instead, and the scheduler writes the line when it can "
        "(every reconcile tries again; report 'end_line_owed')."
    )


def owe_end_line(report: dict[str, Any], error: str) -> dict[str, Any]:
    """The report of a job whose feed could not take its end line: says so in end_line_owed
    and in its summary (once), for the faces that read the store's row instead."""
    out = dict(report, end_line_owed=error)
    sentence = end_line_sentence(error)
    summary = str(report.get("summary") or "")
    old = report.get("end_line_owed")
    if old:  # a retry that failed again: the newer error replaces the older one's sentence
        summary = summary.replace(" " + end_line_sentence(str(old)), "")
    out["summary"] = f"{summary} {sentence}".strip()
    return out


def end_line_paid(report: dict[str, Any]) -> dict[str, Any]:
    """The report once its end line is in the feed: owe_end_line undone."""
    old = report.get("end_line_owed")
    if not old:
        return report
    out = {k: v for k, v in report.items() if k != "end_line_owed"}
    if isinstance(out.get("summary"), str):
        out["summary"] = (
            out["summary"]
            .replace(" " + end_line_sentence(str(old)), "")
            .replace(end_line_sentence(str(old)), "")
        )
    return out


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
        parts[0] += f", at step {fmt(progress['step'])}" + (f" of {fmt(total)}" if total else "")
    hang = report.get("hang")
    if hang:
        parts.append(
            f"It was declared hung ({hang['reason'].replace('_', ' ')}) "
            f"{hang['after_s']:.1f} s after the start, and stopped."
        )
    if report.get("health"):
        parts.append("Training health: " + "; ".join(e["text"] for e in report["health"]))
    diagnosis = report.get("diagnosis")
    if diagnosis:
        parts.append(f"Diagnosis ({diagnosis.get('kind')}): {diagnosis.get('summary')}")
        if diagnosis.get("hint"):
            parts.append(f"Try: {diagnosis['hint']}")
    elif report.get("error") and outcome != "succeeded":
        error = report["error"]
        parts.append(f"Error: {error.get('type')}: {error.get('message')}")
    after = (report.get("log_after_hang") or {}).get("lines")
    if after:
        parts.append(
            f"It printed {after} line{'s' if after != 1 else ''} after the hang's verdict, as "
            "it was stopped: the report's log_tail ends at the verdict, and log_after_hang "
            "keeps the last of them (the log file has every line)."
        )
    parts.extend(losses(report))
    return " ".join(p if p.endswith(".") else p + "." for p in parts)


REASON_CHARS = 160  # a job list's "why" column


def reason(report: Optional[dict[str, Any]]) -> Optional[str]:
    """Why, in one short line for a job list (the report's `reason`, decided here once so
    every face shows the same): the diagnosis summary, a cancel's reason, the store's note,
    else the summary's first sentence; for a success, only its training health."""
    if not report:
        return None
    if report.get("outcome") == "succeeded":
        health = report.get("health") or []
        text = f"training health: {health[0]['text']}" if health else None
    else:
        diagnosis = (report.get("diagnosis") or {}).get("summary")
        cancel = report.get("outcome") == "cancelled" and (report.get("cancel") or {}).get("reason")
        text = (
            diagnosis
            or (f"cancelled: {cancel}" if cancel else None)
            or report.get("note")
            or re.split(r"(?<=\.) ", str(report.get("summary") or ""))[0]
            or None
        )
    if text and len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 3] + "..."
    return text


def to_json(report: dict[str, Any], indent: Optional[int] = 2) -> str:
    """ASCII JSON: non-ASCII text and undecodable bytes (lone surrogates) become \\u escapes;
    a number that is not finite is its string (bridge/jsonform.py)."""
    return jsonform.dumps(report, indent=indent, default=str)


def fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
