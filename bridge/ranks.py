"""Per-process state of a distributed job, and its root cause (pure: values in, values out).

A torchrun job has a launcher and its ranks, each a worker process with its own messages.
The lead's stages and progress are the job's (bridge/job.py); this module keeps every
process's own: `observe` folds one message into the state, `table` gives the report's
`ranks` rows, `root_cause` names the rank that failed first by the ranks' own clocks
(the envelope's `ts`, the sender's wall time; torchrun's error-file timestamps, whole
seconds, for a rank without a worker) and lists the others' failures as consequences.
The one implementation; vectors/ranks.json pins all three.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from trainbridge.bridge import machine
from trainbridge.bridge.diagnosis_stack import format_frame, user_frame

State = dict[str, Any]

# A failure that follows from another rank's: its peer went away, or the agent stopped it.
_PEER_GONE = re.compile(
    r"connection closed by peer|connection reset by peer|broken pipe"
    r"|peer.*(closed|gone|disconnect)",
    re.IGNORECASE,
)
MESSAGE_CHARS = 160


def initial() -> State:
    return {"procs": {}, "order": []}


def _proc(state: State, key: str) -> dict[str, Any]:
    procs = state["procs"]
    if key not in procs:
        procs[key] = {
            "key": key,
            "rank": None,
            "local_rank": None,
            "world_size": None,
            "host": None,
            "pid": None,
            "ppid": None,
            "stages": [],
            "progress": None,
            "last_beat": None,
            "exit": None,
            "error": None,
            "hello": False,
            "failures": [],
        }
        state["order"].append(key)
    proc: dict[str, Any] = procs[key]
    return proc


def observe(state: State, key: str, kind: str, body: dict[str, Any], ts: float) -> None:
    """Fold one worker message (kind, body) from the process `key` (its routing id), sent
    at `ts` by its own clock, into `state`."""
    p = _proc(state, key)
    p["last_beat"] = ts
    if kind == "hello":
        p.update(
            hello=True,
            rank=body.get("rank"),
            local_rank=body.get("local_rank"),
            world_size=body.get("world_size"),
            host=body.get("host"),
            pid=body.get("pid"),
            ppid=body.get("ppid"),
        )
        if isinstance(body.get("addr"), str):  # a worker on tcp: its host's address
            p["addr"] = body["addr"]
    elif kind == "stage":
        if body.get("event") == "begin":
            p["stages"].append(body.get("name"))
        elif body.get("name") in p["stages"]:
            del p["stages"][len(p["stages"]) - 1 - p["stages"][::-1].index(body.get("name")) :]
    elif kind == "progress":
        p["progress"] = {"step": body.get("step"), "total": body.get("total")}
    elif kind == "error" and body.get("fatal") and p["error"] is None:
        p["error"] = _error(body, ts, "worker")
        p["body"] = body  # the full error, should this rank be the root cause
        if isinstance(body.get("failures"), list):
            p["failures"] = [f for f in body["failures"] if isinstance(f, dict)]
    elif kind == "bye":
        p["exit"] = {"code": body.get("exit_code"), "reason": body.get("reason")}
        p["bye"] = body  # its last words, should it lead again (Messages._leave)
    elif kind == "reply" and isinstance(body.get("stacks"), str):
        p["stacks"] = body["stacks"]  # its answer to dump_stacks: where it is at hang time
        if isinstance(body.get("children"), list):  # and its children's states then
            p["children"] = [c for c in body["children"] if isinstance(c, dict)]
    elif kind == "heartbeat":
        # Its main thread's stack while it is idle (None once it moves again): what the
        # live diagnosis reads before any deadline (live_collective).
        stack = body.get("stack")
        p["beat_stack"] = stack if isinstance(stack, str) and stack else None
    elif kind == "signal_dump" and isinstance(body.get("stacks"), str):
        # Not a wire kind: the client's record of what faulthandler wrote to the crash file
        # for a rank that did not answer dump_stacks (SIGUSR1, then SIGUSR2: its main thread).
        p["stacks"] = body["stacks"]


def _error(body: dict[str, Any], t: Optional[float], source: str) -> dict[str, Any]:
    frames: list[dict[str, Any]] = body["frames"] if isinstance(body.get("frames"), list) else []
    return {
        "type": body.get("type"),
        "message": body.get("message"),
        "stage": body.get("stage"),
        "frame": where(frames),
        "t": t,
        "source": source,
    }


def where(frames: list[dict[str, Any]]) -> Optional[str]:
    """The user's innermost frame (else the innermost), as 'dir/file.py:12 function'."""
    if not frames:
        return None
    return format_frame(user_frame(frames) or frames[-1])


def sender(state: State, key: str) -> dict[str, Any]:
    """Who sent a message, for the events a client publishes: rank, local_rank, host, pid
    and role as known when it arrived (a launcher is "other" until a rank of it says hello)."""
    p = _proc(state, key)
    return {
        "rank": p["rank"],
        "local_rank": p["local_rank"],
        "host": p["host"],
        "pid": p["pid"],
        "role": _role(p, list(state["procs"].values())),
    }


def awaits_ranks(hello: dict[str, Any]) -> bool:
    """Whether a hello is a distributed launcher's (torchrun, python -m
    torch.distributed.run/launch), whose job has not started until a rank says hello: a
    process that is no rank itself (no WORLD_SIZE) and that machine.is_launcher names, the
    one reading of argv (`python -W ignore -m torch.distributed.run` is one)."""
    return hello.get("world_size") is None and machine.is_launcher(hello)


def _role(p: dict[str, Any], procs: list[dict[str, Any]]) -> str:
    """By the job's structure: a rank says RANK and WORLD_SIZE; the launcher is the parent
    of ranks (torchrun's agent starts each rank itself); anything else is other."""
    if p["rank"] is not None and p["world_size"] is not None:
        return "rank"
    if p["pid"] is not None and any(
        q["ppid"] == p["pid"] and q["world_size"] is not None for q in procs
    ):
        return "launcher"
    return "other"


def table(state: State) -> list[dict[str, Any]]:
    """The report's `ranks`: one row per worker process (and per failed rank torchrun
    reported that never said hello), ranks first by rank, then the launcher, then others."""
    procs = [state["procs"][k] for k in state["order"]]
    rows = []
    for p in procs:
        rows.append(
            {
                "rank": p["rank"],
                "local_rank": p["local_rank"],
                "host": p["host"],
                "pid": p["pid"],
                "role": _role(p, procs),
                "stage": p["stages"][-1] if p["stages"] else None,
                "progress": p["progress"],
                "last_beat": p["last_beat"],
                "exit": p["exit"],
                "error": p["error"],
            }
        )
        if p.get("addr"):  # a rank of another host: the address it connected from
            rows[-1]["addr"] = p["addr"]
    for launcher in [p for p in procs if p["failures"]]:
        for f in launcher["failures"]:
            row = next(
                (
                    r
                    for r in rows
                    if r["role"] == "rank"
                    and r.get("addr") == launcher.get("addr")  # pids repeat across hosts
                    and (
                        (f.get("pid") is not None and r["pid"] == f.get("pid"))
                        or (r["rank"] == f.get("rank") and r["host"] == launcher["host"])
                    )
                ),
                None,
            )
            if row is None:  # a rank that never said hello: torchrun's word is all we have
                row = {
                    "rank": f.get("rank"),
                    "local_rank": f.get("local_rank"),
                    "host": launcher["host"],
                    "pid": f.get("pid"),
                    "role": "rank",
                    "stage": None,
                    "progress": None,
                    "last_beat": None,
                    "exit": None,
                    "error": None,
                }
                rows.append(row)
            if row["exit"] is None or row["exit"].get("code") is None:
                row["exit"] = {"code": f.get("exit_code"), "reason": "torchrun"}
            if row["error"] is None and f.get("traceback"):
                row["error"] = _file_error(f)
    for row in rows:
        row["state"] = _state(row)
    order = {"rank": 0, "launcher": 1, "other": 2}
    rows.sort(
        key=lambda r: (order[r["role"]], r["rank"] if r["rank"] is not None else 0, r["pid"] or 0)
    )
    return rows


def failed_elsewhere(rows: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The failed rank of another host, when every rank of the job has ended (the
    report's rows, table()): the launcher on this host cannot know of it (torchrun's agent
    here waits in its exit barrier for the agent that failed), so the job has failed. None
    while a rank runs, when none failed, or when a failure is this host's (its own
    launcher sees it and ends the job itself)."""
    members = [r for r in rows if r["role"] == "rank"]
    if len(members) < 2 or any(r["state"] not in ("exited", "failed") for r in members):
        return None
    failed = [r for r in members if r["state"] == "failed"]
    if not failed or any(not r.get("addr") for r in failed):
        return None
    return failed[0]


def _file_error(f: dict[str, Any]) -> dict[str, Any]:
    """The error torchrun read from the rank's TORCHELASTIC_ERROR_FILE ("Type: message",
    the traceback text, whole-second timestamp)."""
    message = str(f.get("message") or "")
    kind, sep, rest = message.partition(": ")
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', f.get("traceback") or "")
    return {
        "type": kind if sep else None,
        "message": rest if sep else message,
        "stage": None,
        "frame": where([{"file": a, "line": int(b), "function": c} for a, b, c in frames]),
        "t": f.get("time"),
        "source": "error_file",
        "traceback": f.get("traceback"),
        "frames": [{"file": a, "line": int(b), "function": c} for a, b, c in frames],
    }


def _state(row: dict[str, Any]) -> str:
    exit_ = row["exit"] or {}
    if row["error"] is not None or (exit_.get("code") not in (None, 0)):
        return "failed"
    return "exited" if row["exit"] is not None else "running"


def error_body(state: State, cause: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The root-cause rank's own error message body (traceback and frames), if it sent one."""
    if cause is None:
        return None
    for p in state["procs"].values():
        if p.get("body") is not None and p["pid"] == cause["pid"] and p["host"] == cause["host"]:
            body: dict[str, Any] = p["body"]
            return body
    err = cause["error"]
    if err.get("source") == "error_file" and err.get("traceback"):  # a rank without a worker
        return {
            "type": err.get("type") or "Error",
            "message": err.get("message") or "",
            "traceback": err["traceback"],
            "frames": err.get("frames") or [],
            "chain": [],
            "stage": None,
            "fatal": True,
            "thread": "MainThread",
            "kind": "exception",
        }
    return None


def launcher_error(state: State) -> Optional[dict[str, Any]]:
    """The launcher's own fatal error body (torchrun's ChildFailedError), or None: the job's
    error when its root cause is a rank killed by a signal, which raised nothing itself.
    Not the lead's, which is rank 0's or the launcher's by the order their messages came."""
    procs = list(state["procs"].values())
    for p in procs:
        if p.get("body") is not None and _role(p, procs) == "launcher":
            return dict(p["body"])
    return None


SIGNAL_NAMES = {6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def _killed(row: dict[str, Any]) -> Optional[str]:
    """The signal a rank died of with no error of its own (torchrun's negative exit code),
    else None."""
    code = (row["exit"] or {}).get("code")
    if row["role"] != "rank" or row["error"] is not None or not isinstance(code, int):
        return None
    return SIGNAL_NAMES.get(-code, f"signal {-code}") if code < 0 else None


def _death(row: dict[str, Any], signal: str) -> dict[str, Any]:
    """A rank's death by a signal as the failure it is: no message, no frame, no clock."""
    return {
        "type": signal,
        "message": "",
        "stage": row["stage"],
        "frame": None,
        "t": None,
        "source": "signal",
    }


def root_cause(rows: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The rank that failed first by its own clock (ties: the lower rank), with the other
    failed ranks as consequences; None when no rank failed with an error.

    A rank killed by a signal with no error of its own (SIGKILL from outside, the OOM killer:
    no error file, no timestamp) failed too, before the peers that only lost it: when every
    error the ranks sent is such a consequence (peer gone, or a stop by the launcher), the
    killed rank is the cause (a SIGTERM the launcher sent comes after any other signal)."""
    failed = [
        r
        for r in rows
        if r["role"] == "rank" and r["error"] is not None and r["error"].get("t") is not None
    ]
    killed = [(r, sig) for r in rows if (sig := _killed(r)) is not None]
    own = [r for r in failed if _why(r) == "later"]
    if killed and not own:
        row, signal = min(
            killed,
            key=lambda k: (k[1] == "SIGTERM", k[0]["rank"] if k[0]["rank"] is not None else 0),
        )
        first = dict(row, error=_death(row, signal))
    elif failed:
        first = min(
            failed, key=lambda r: (r["error"]["t"], r["rank"] if r["rank"] is not None else 0)
        )
    else:
        return None
    consequences = []
    for r in rows:
        if r["pid"] == first["pid"] and r["host"] == first["host"] and r["rank"] == first["rank"]:
            continue
        if r["role"] != "rank" or r["state"] != "failed":
            continue
        consequences.append(
            {
                "rank": r["rank"],
                "host": r["host"],
                "pid": r["pid"],
                "why": _why(r),
                "error": r["error"],
            }
        )
    return {
        "rank": first["rank"],
        "local_rank": first["local_rank"],
        "host": first["host"],
        **({"addr": first["addr"]} if first.get("addr") else {}),
        "pid": first["pid"],
        "error": first["error"],
        "consequences": consequences,
        "summary": _sentence(first, consequences),
    }


def _why(row: dict[str, Any]) -> str:
    """peer_gone (its collective lost the failed peer), stopped (a signal from the agent),
    or later (an error of its own, after the first)."""
    err = row["error"] or {}
    code = (row["exit"] or {}).get("code")
    if _PEER_GONE.search(str(err.get("message") or "")):
        return "peer_gone"
    if str(err.get("type") or "").endswith("SignalException") or (code is not None and code < 0):
        return "stopped"
    return "later"


_WHY_TEXT = {
    "stopped": "stopped by the launcher",
    "peer_gone": "lost its peer",
    "later": "failed later",
}


def _sentence(first: dict[str, Any], consequences: list[dict[str, Any]]) -> str:
    err = first["error"]
    text = f"rank {first['rank']} ({who(first)}) failed first: {_short(err)}"
    if err.get("source") == "signal":
        text = (
            f"rank {first['rank']} ({who(first)}) failed first: killed by {err['type']}, with "
            "no error of its own (a kill from outside the job, or the kernel's OOM killer)"
        )
    if err.get("stage"):
        text += f" in stage '{err['stage']}'"
    if err.get("frame"):
        text += f" at {err['frame']}"
    if consequences:
        text += "; then " + ", ".join(
            f"rank {c['rank']} {_WHY_TEXT[c['why']]}"
            + (f" ({_brief(c['error'])})" if c["error"] and c["why"] != "stopped" else "")
            for c in consequences
        )
        text += " (consequences, not the cause)"
    return text


def killed_hint(cause: dict[str, Any]) -> str:
    """What to try when the root cause is a rank killed by a signal (root_cause)."""
    return (
        f"rank {cause['rank']} was killed by {cause['error']['type']} from outside the job: "
        "check dmesg for the kernel's OOM killer (dmesg | grep -i 'killed process') and who "
        "else stops processes here (a scheduler, a user); the other ranks' errors follow "
        "from its death"
    )


def who(row: dict[str, Any]) -> str:
    at = f" at {row['addr']}" if row.get("addr") else ""  # a rank of another host
    return f"host {row['host'] or '?'}{at}, pid {row['pid'] if row['pid'] is not None else '?'}"


def _brief(err: dict[str, Any]) -> str:
    kind = str(err.get("type") or "Error").rsplit(".", 1)[-1]
    return f"{kind} at {err['frame']}" if err.get("frame") else kind


def _short(err: dict[str, Any]) -> str:
    message = " ".join(str(err.get("message") or "").split())
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 3] + "..."
    return (
        f"{err.get('type') or 'Error'}: {message}" if message else str(err.get("type") or "Error")
    )


def process_stacks(state: State) -> dict[str, str]:
    """{pid: its dump_stacks answer} of every process that answered one: a waited-on child's
    own stack for the hang diagnosis (diagnosis_hang.child_stack)."""
    return {
        str(p["pid"]): p["stacks"]
        for p in state["procs"].values()
        if p.get("pid") is not None and isinstance(p.get("stacks"), str)
    }
