"""The facts of one job, as the report needs them: a plain record (dicts, lists, numbers,
strings), so that report.build(facts, files) is a pure function pinned by
vectors/report.json.

The job's shell keeps the record up to date as things happen (worker messages, output, the
exit, signals sent, the hang snapshot) and, when the job ends, adds the machine's verdict
(`machine`) and the protocol counts, reads the crash and stage files, and calls
report.build(facts, files). Times are the shell's monotonic seconds (started, ended, a
stage's started) and wall-clock seconds (started_wall); nothing here reads a clock.

Keys (docs/CLIENT.md "The facts record and the report"):
  id, command, log_path, pid                  who the job is
  started, started_wall, ended                when (ended: None while it runs)
  machine   the state machine's verdict: outcome, hang, refused, no_worker, loaded_t
  tail      [{stream, text, end}], the last output lines; lines, bytes: per stream
  fatal_lines   faulthandler's report on stderr after a crash
  hellos    {rank (a string): hello}; ranks: bridge/ranks.py's state of every process
  lead_pid, leads (pids that spoke for the job, in turn), dump_pids, native_dump_pids
  stages    [{name, status, duration_s, depth, budget_s, started, began, closed?}]
  stages_dropped, stage_events (begins and ends so far: a stage's began and closed)
  progress, error, bye, heartbeat (the lead's last), stacks (dump replies)
  health    bridge/health.py's record: metrics that became NaN or infinite (entries)
  cancel    {reason, accepted, refused, traceback} once the user cancelled, else None
  internal_error   a bug in trainbridge ended the job
  signals_sent, exit_code, exit_signal, oom_killed, oom_kills, leftovers, snapshot
  look      the look at a startup, heartbeat or stall deadline that found the job not
            working (bridge/look.py's words), else None
  rejected, lost, undelivered, unrouted, foreign_hellos   protocol counts
  log_lines, log_error    the log file
  dropped   {routing id: the worker's drop counts}
"""

from __future__ import annotations

import collections
from typing import Any, Optional

from trainbridge.bridge import health, ranks

Facts = dict[str, Any]
STAGES_KEPT = 1_000  # stage records kept for the report (a stage per step must not grow)
DUMPS_KEPT = 4  # dump_stacks replies kept for the report
ARTIFACTS_KEPT = 1000  # files listed in the report (a worker says at most 1,000 each)


def initial(
    job_id: str,
    command: list[str],
    log_path: Optional[str],
    started: float,
    started_wall: float,
    tail_lines: int,
) -> Facts:
    """The record of a job that has not started yet."""
    return {
        "id": job_id,
        "command": list(command),
        "log_path": log_path,
        "pid": None,
        "started": started,
        "started_wall": started_wall,
        "ended": None,
        "machine": None,
        # the last output lines; a deque here (its bound is the caller's tail_lines)
        "tail": collections.deque(maxlen=tail_lines),
        # the tail and the line count when a hang was declared: what came after is the
        # stop's doing (a launcher's traceback on SIGTERM), not the job's (report log_tail)
        "tail_at_hang": None,
        "lines": {"stdout": 0, "stderr": 0},
        "bytes": {"stdout": 0, "stderr": 0},
        "fatal_lines": [],
        "hellos": {},
        "ranks": None,
        "lead_pid": None,
        "leads": [],
        "dump_pids": [],
        "native_dump_pids": [],  # SIGUSR2: faulthandler's C dump, main thread
        "stages": [],
        "stages_dropped": 0,
        "stage_events": 0,  # numbers the stage begins and ends, in the order received
        "progress": None,
        "health": health.initial(),
        "error": None,
        "bye": None,
        "heartbeat": None,
        "stacks": [],
        "cancel": None,
        "internal_error": None,
        "signals_sent": [],
        "exit_code": None,
        "exit_signal": None,
        "oom_killed": None,
        "oom_kills": None,  # OOM kills in the job's cgroup while it ran
        "leftovers": [],  # pids that outlived the main process (then stopped)
        "snapshot": None,
        "look": None,  # {reason, why}: the deadline's look that found the job not working
        "rejected": {},
        "lost": 0,
        "undelivered": {},
        "unrouted": 0,
        "foreign_hellos": 0,
        "log_lines": 0,  # lines written to the log file
        "log_error": None,  # the log file is incomplete from this line on
        "dropped": {},
        "artifacts": [],  # files the job made (any of its processes), in the order said
    }


def machine_verdict(m: dict[str, Any]) -> dict[str, Any]:
    """What the report reads of the state machine's final state."""
    return {
        "outcome": m.get("outcome"),
        "hang": m.get("hang"),
        "refused": m.get("refused"),
        "no_worker": m.get("no_worker"),
        "loaded_t": m.get("loaded_t"),
        "last_activity_t": m.get("last_activity_t"),  # a hang's idle time (report.hang_idle)
    }


def apply(facts: Facts, message: dict[str, Any]) -> Facts:
    """Fold one authentic worker message from a process of the job into the record, and
    return it (updated in place: the job holds the only copy, and a progress message per
    training step must not copy the tail and the stages). No I/O, no clock: what needs
    either comes with the message.

    message: kind, body; key (the sender's routing id), rank, ts (the sender's clock);
    lead (it speaks for the job); in_tree (a hello: its pid is in the job's process tree);
    t (the shell's monotonic clock when it came). Only the lead's stage, progress, error,
    bye and heartbeat are the job's; every process is listed (hellos, ranks), and any
    process's dump reply and drop counts count."""
    kind, body, key = message["kind"], message["body"], message["key"]
    ranks.observe(facts["ranks"], key, kind, body, message["ts"])
    lead = message["lead"]
    if kind == "hello":
        rank = str(message["rank"])
        if lead or rank not in facts["hellos"]:  # every rank is listed; the lead's hello wins
            facts["hellos"][rank] = body
        if message.get("in_tree"):
            # SIGUSR1 only to processes that registered faulthandler for it (it kills others).
            if body.get("dump_signal") == "SIGUSR1":
                facts["dump_pids"].append(body["pid"])
            if body.get("native_dump_signal") == "SIGUSR2":
                facts["native_dump_pids"].append(body["pid"])
    elif kind in ("heartbeat", "bye") and isinstance(body.get("dropped"), dict):
        facts["dropped"][key] = body["dropped"]  # counts only grow: the latest wins
    elif kind == "reply" and body.get("stacks"):
        facts["stacks"] = (facts["stacks"] + [body["stacks"]])[-DUMPS_KEPT:]
    elif kind == "artifact" and len(facts["artifacts"]) < ARTIFACTS_KEPT:
        # any process's (rank 0 saves the checkpoint; a DataLoader worker may write samples)
        entry = {k: body.get(k) for k in ("path", "name", "kind", "bytes", "step", "by")}
        facts["artifacts"].append(dict(entry, rank=message["rank"]))
    if not lead:
        return facts
    if kind == "stage":
        _record_stage(facts, body, message["t"])
    elif kind == "progress":
        facts["progress"] = {
            "step": body["step"],
            "total": body.get("total"),
            "metrics": body.get("metrics") or {},
        }
        observe_points(facts["health"], body)
    elif kind == "error":
        if body.get("fatal") or facts["error"] is None:
            facts["error"] = body
    elif kind == "bye":
        facts["bye"] = body
    elif kind == "heartbeat":
        facts["heartbeat"] = body
    return facts


def _record_stage(facts: Facts, body: dict[str, Any], t: float) -> None:
    stages = facts["stages"]
    if body["event"] == "begin":
        if len(stages) >= STAGES_KEPT:
            _forget_a_closed_stage(facts)
        facts["stage_events"] += 1
        stages.append(
            {
                "name": body["name"],
                "status": "running",
                "duration_s": None,
                "depth": body.get("depth", 0),
                "budget_s": body.get("budget_s"),
                "started": t - facts["started"],
                "began": facts["stage_events"],
            }
        )
        return
    depth = body.get("depth")
    for entry in reversed(stages):
        if (
            entry["name"] == body["name"]
            and entry["status"] == "running"
            and (depth is None or entry["depth"] == depth)
        ):
            entry["status"] = body.get("status") or "ok"
            facts["stage_events"] += 1
            entry["closed"] = facts["stage_events"]  # the order of begins and ends
            entry["duration_s"] = body.get("duration_s")
            if entry["duration_s"] is None:
                entry["duration_s"] = round(t - facts["started"] - entry["started"], 6)
            break


def _forget_a_closed_stage(facts: Facts) -> None:
    """Drop the oldest closed stage record (open ones say where the job is)."""
    for i, entry in enumerate(facts["stages"]):
        if entry["status"] != "running":
            del facts["stages"][i]
            facts["stages_dropped"] += 1
            return


def observe_points(record: dict[str, Any], body: dict[str, Any]) -> None:
    """Training health from a progress message: each of its `points` in order (a NaN at one
    step between two sends is seen), then the latest value unless it is the last point."""
    points = body.get("points")
    steps = points.get("steps") if isinstance(points, dict) else None
    columns = points.get("metrics") if isinstance(points, dict) else None
    if isinstance(steps, list) and isinstance(columns, dict):
        for i, step in enumerate(steps):
            at = {
                name: column[i]
                for name, column in columns.items()
                if isinstance(column, list) and i < len(column) and column[i] is not None
            }
            health.observe(record, step, at)
        if steps and not _after(body["step"], steps[-1]):
            return  # the latest is the last point, or older (a message queued behind a log)
    health.observe(record, body["step"], body.get("metrics"))


def _after(step: Any, last: Any) -> bool:
    """Whether `step` comes after the point `last` (numbers; anything else is not after)."""
    numbers = (int, float)
    return isinstance(step, numbers) and isinstance(last, numbers) and step > last
