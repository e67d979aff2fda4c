"""Diagnosis, part 3: hang verdicts (pure) -- why a live job makes no progress.

diagnose_hang(facts) -> {"kind", "summary", "hint", "evidence"}. The OS evidence comes from
bridge/evidence.py; stack reading is in diagnosis_stack.py.

The kind is diagnosis_hang_rules.py's (ordered tables of small named rules); this module
says it: WORDS holds each kind's summary and hint, and diagnose_hang follows a lock wait to
the thread it waits for.
The one implementation (a Node job is judged here too, through bridge/jobserve.py);
vectors/diagnosis.json pins the verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .diagnosis_hang_rules import (
    CPU_BUSY,
    CPU_SOME,
    Seen,
    blocking_socket,
    file_lock,
    hang_kind,
    main_thread,
    peer_child,
    see,
    stack_says,
)
from .diagnosis_stack import (
    Frame,
    diag,
    frame_fields,
    importing_module,
    in_stage,
    is_library_frame,
    parse_stack,
    thread_stacks,
    where,
)

HANG_KINDS = (
    "network_wait",
    "lock_wait",
    "file_lock_wait",
    "cpu_bound",
    "io_wait",
    "gil_held",
    "child_wait",
    "sleeping",
    "gpu_busy",
    "import_hang",
    "startup",
    "stopped",
    "unknown",
)


def _startup_hint(frames: Sequence[Any]) -> str:
    """What to do when no process said hello in time. In zero-code mode (the default) every
    Python process says it as it starts; so a Python frame means it was stuck before that. A
    tree with no Python, or one that works, is never a startup hang (bridge/look.py):
    without a frame, a Python process started and then did nothing."""
    if frames:
        return (
            "the process was stuck before trainbridge's hello (in zero-code mode it comes as "
            "Python starts; with --no-zero-code at `from trainbridge import worker`): check "
            "what the named frame waits on"
        )
    return (
        "a Python process of the command started and then did nothing (no CPU, I/O or "
        "output) until the startup deadline, before trainbridge's hello: to see where it is "
        "stuck, install py-spy (pip install py-spy); if it waits on purpose, raise "
        "--startup-timeout (startup_timeout), or 0 to turn it off"
    )


def _remote(conn: dict[str, Any]) -> str:
    raddr = conn.get("raddr") or ""
    if isinstance(raddr, (list, tuple)) and len(raddr) == 2:
        host, port = raddr
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(raddr) or "an unknown peer"


def _child_to_name(evidence: dict[str, Any]) -> Optional[dict[str, Any]]:
    peer = peer_child(evidence)
    if peer is not None:
        return peer
    children: list[dict[str, Any]] = evidence.get("children") or []
    for child in children:  # a stopped or dead child is the likely culprit
        if child.get("status") in ("stopped", "tracing-stop", "zombie", "dead", "disk-sleep"):
            return child
    return children[0] if children else None


DATALOADER_WORKER = "pt_data_worker"  # /proc/<pid>/comm of a torch DataLoader worker


def child_role(child: dict[str, Any], children: Sequence[dict[str, Any]]) -> Optional[str]:
    """'DataLoader worker N' for a torch DataLoader worker: N is its place among its
    siblings by start time (torch starts worker 0, 1, ... in order), else None."""
    if child.get("name") != DATALOADER_WORKER:
        return None
    siblings = sorted(
        (
            c
            for c in children
            if c.get("name") == DATALOADER_WORKER and c.get("ppid") == child.get("ppid")
        ),
        key=lambda c: (c.get("started") or 0, c.get("pid") or 0),
    )
    ids = [c.get("pid") for c in siblings]
    return f"DataLoader worker {ids.index(child.get('pid'))}" if child.get("pid") in ids else None


def child_state(child: dict[str, Any]) -> str:
    """stopped / exited / spinning / in disk I/O / sleeping, from its state and CPU."""
    status = child.get("status")
    if status in ("stopped", "tracing-stop"):
        return "stopped"
    if status in ("zombie", "dead", "gone"):
        return "exited"
    if status == "running" or (child.get("cpu_fraction") or 0) >= CPU_BUSY:
        return "spinning"
    if status == "disk-sleep":
        return "in disk I/O"
    return "sleeping"


def _describe_child(child: dict[str, Any], children: Sequence[dict[str, Any]] = ()) -> str:
    role = child_role(child, children)
    if role:
        return f"{role} (pid {child.get('pid')}, {child_state(child)})"
    return (
        f"child pid {child.get('pid')} ({child.get('name') or '?'}, {child.get('status') or '?'})"
    )


def same_wait(
    child: dict[str, Any],
    children: Sequence[dict[str, Any]],
    process_stacks: Optional[dict[str, Any]] = None,
) -> list[dict[str, Any]]:
    """The DataLoader workers (the named child's siblings, itself included) that are where
    it is: the same state and the same Python frame, or with no Python stack the same
    kernel wait. Two or more: [{pid, role, frame, kernel}], in worker order; else []."""
    siblings = _dataloader_siblings(child, children)

    def key(c: dict[str, Any]) -> tuple[str, Optional[str], Optional[str]]:
        st = child_stack(c, process_stacks) or {}
        return child_state(c), st.get("frame"), None if st.get("frame") else _first(st)

    mine = key(child)
    group = [
        {"pid": c.get("pid"), "role": f"DataLoader worker {i}", "frame": k[1], "kernel": k[2]}
        for i, c in enumerate(siblings)
        for k in [key(c)]
        if k == mine
    ]
    return group if len(group) >= 2 and (mine[1] or mine[2]) else []


def _first(stack: dict[str, Any]) -> Optional[str]:
    kernel = stack.get("kernel") or []
    return str(kernel[0]) if kernel else None


def _dataloader_siblings(
    child: dict[str, Any], children: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    return sorted(
        (
            c
            for c in children
            if c.get("name") == DATALOADER_WORKER and c.get("ppid") == child.get("ppid")
        ),
        key=lambda c: (c.get("started") or 0, c.get("pid") or 0),
    )


def _same_wait_words(
    child: dict[str, Any],
    children: Sequence[dict[str, Any]],
    group: list[dict[str, Any]],
    stack: Optional[dict[str, Any]],
    state_hint: str,
) -> tuple[str, str]:
    """(who, hint) for DataLoader workers that all wait on the same thing."""
    every = len(group) == len(_dataloader_siblings(child, children))
    pids = ", ".join(str(g["pid"]) for g in group)
    state = child_state(child)
    count = ("both" if len(group) == 2 else f"all {len(group)}") if every else str(len(group))
    who = f"{count} DataLoader workers (pids {pids}, {state}), all blocked on the same wait"
    if state in ("stopped", "exited"):
        return who, state_hint
    frame = (stack or {}).get("frame")
    wchan = str(child.get("wchan") or "") + " ".join(child.get("kernel_stack") or [])
    if frame and "futex" in wchan:
        hint = (
            f"the {len(group)} DataLoader workers wait for a lock at {frame}: one a "
            "thread of the main process held when they were forked stays held in each copy; "
            "make it in each worker (worker_init_fn), or do not fork: "
            "DataLoader(multiprocessing_context='spawn')"
        )
    else:
        where_ = frame or f"the kernel's {(stack or {}).get('kernel', ['?'])[0]}"
        hint = (
            f"the {len(group)} DataLoader workers wait at {where_}: see what they wait "
            f"for there (py-spy dump --pid {group[0]['pid']}), or use DataLoader(num_workers=0) "
            "to rule the workers out"
        )
    return who, hint


KERNEL_FRAMES = 3  # innermost kernel functions named for a child with no Python stack


def child_stack(
    child: Optional[dict[str, Any]], process_stacks: Optional[dict[str, Any]] = None
) -> Optional[dict[str, Any]]:
    """Where the child a job waits on is itself: its own Python stack
    (its answer to dump_stacks when it runs a worker, else py-spy's dump of it from the
    evidence), else its kernel stack (/proc/PID/stack, readable by root) or its wchan.
    {source: dump_stacks | py-spy | kernel | wchan, frame, kernel} or None."""
    if not child:
        return None
    for source, text in (
        ("dump_stacks", (process_stacks or {}).get(str(child.get("pid")))),
        ("py-spy", child.get("py_stack")),
    ):
        frames = parse_stack(text) if isinstance(text, str) else []
        if frames:
            return {"source": source, "frame": where(frames), "kernel": None}
    kernel = [f for f in (child.get("kernel_stack") or []) if isinstance(f, str) and f]
    if kernel:
        return {"source": "kernel", "frame": None, "kernel": kernel[:KERNEL_FRAMES]}
    wchan = child.get("wchan")
    if isinstance(wchan, str) and wchan not in ("", "0"):
        return {"source": "wchan", "frame": None, "kernel": [wchan]}
    return None


def _child_stack_text(stack: Optional[dict[str, Any]], each: bool = False) -> str:
    if not stack:
        return ""
    self_ = "each" if each else "itself"
    if stack["frame"]:
        return f", {self_} at {stack['frame']}"
    return f", {self_} in the kernel at {' <- '.join(stack['kernel'])}"


_LOCK_CALLS = {"FLOCK": " (flock)", "POSIX": " (fcntl)", "OFDLCK": " (fcntl, open file)"}


def _process_words(peer: dict[str, Any]) -> str:
    """'pid 812 (python serve.py, sleeping)', or 'the job's own process pid 812 (...)'."""
    facts = ", ".join(str(x) for x in (peer.get("cmd"), peer.get("state")) if x)
    own = "the job's own process " if peer.get("in_job") else ""
    return f"{own}pid {peer.get('pid')}" + (f" ({facts})" if facts else "")


def _lock_holder(lock: dict[str, Any], short: bool = False) -> str:
    """'pid 812 (python prefetch.py, sleeping)', the job's own or another's; short: 'pid 812'."""
    pid = lock.get("holder_pid")
    if pid is None:
        return "another process" if short else "another process's open file (its pid is not known)"
    facts = ", ".join(str(x) for x in (lock.get("holder_cmd"), lock.get("holder_state")) if x)
    own = "the job's own process " if lock.get("in_job") else ""
    return f"{own}pid {pid}" + (f" ({facts})" if facts and not short else "")


# The wait chain inside the process: a main thread waiting on a lock, a
# queue, an event or a join waits for another thread of the script. Found blocked on a
# socket or a child, that thread is the chain's end, and the verdict is about it.
_THREAD_NAME = re.compile(r'^Thread 0x[0-9a-fA-F]+ "([^"]*)"')
_CHAIN_ENDS = ("network_wait", "child_wait")  # in the order one is preferred


def _waited_thread(stacks: Any) -> Optional[dict[str, Any]]:
    """The script thread a main thread's lock wait is for: another thread of the in-band dump
    (named: faulthandler's dumps name no thread, and cannot tell the worker's own threads,
    trainbridge-*, from the script's) whose stack shows it blocked on a socket or a child."""
    best: Optional[dict[str, Any]] = None
    for header, frames in thread_stacks(stacks if isinstance(stacks, str) else None):
        named = _THREAD_NAME.match(header)
        name = named.group(1) if named else None
        if name is None or name in ("MainThread", "") or name.startswith("trainbridge-"):
            continue
        kind = stack_says(frames)
        if kind in _CHAIN_ENDS and (
            best is None or _CHAIN_ENDS.index(kind) < _CHAIN_ENDS.index(best["kind"])
        ):
            best = {"thread": name, "frames": frames, "kind": kind}
    return best


def _idle(facts: dict[str, Any]) -> str:
    idle = facts.get("idle_s")
    # A beat sent just before the hang says ~0 s: a number that small informs nobody.
    return f" for {idle:.0f} s" if isinstance(idle, (int, float)) and idle >= 1 else ""


@dataclass(frozen=True)
class Words:
    """What a kind's words are made of: the facts, and the parts every verdict shares."""

    facts: dict[str, Any]
    evidence: dict[str, Any]
    frames: Sequence[Frame]
    seen: Seen  # what the kind was judged on: what the kernel and the stack said
    saw_hello: bool
    at: str  # the frame: "train.py:12 in step"
    idle: str  # " for 40 s", or "" when too short to inform
    where: str  # " in stage 'load'", the stuck bar, "after the script said bye"
    extra: dict[str, Any]  # the verdict's evidence; a kind's words add their own facts


def diagnose_hang(facts: dict[str, Any]) -> dict[str, Any]:
    """Why a job that is still alive makes no progress. Always returns a diagnosis.

    facts: reason (startup | stage_budget | stall | heartbeat | after_bye; heartbeat_silence
    is read as heartbeat), stage, stages,
    idle_s, stack (main thread's Python stack from a heartbeat), stacks (dump text or
    faulthandler text), saw_hello, python_silent (neither the in-band dump nor the SIGUSR1
    handler answered, so the native SIGUSR2 dump was taken: nothing runs Python), evidence
    (bridge.evidence.collect's dict), progress (the last {step, total, metrics}: a tqdm bar's
    name is quoted), process_stacks ({pid: dump_stacks text} of the job's other processes
    that answered: a waited-on child's own stack).

    The kind is HANG_RULES' (over KERNEL_RULES' and STACK_RULES'); a lock wait for another
    thread of the script is that thread's verdict (_chain_end); the words are WORDS[kind]."""
    reason = facts.get("reason") or "stall"
    evidence = dict(facts.get("evidence") or {})
    saw_hello = bool(facts.get("saw_hello", True))
    frames = (
        facts.get("frames")  # a thread's frames already read (the wait chain, below)
        or parse_stack(facts.get("stack"))
        or parse_stack(facts.get("stacks"))
        or parse_stack(evidence.get("py_spy"))
    )
    loaded = bool(facts.get("worker_loaded"))
    seen = see(reason, frames, evidence, saw_hello, loaded, bool(facts.get("python_silent")))
    kind = hang_kind(seen)
    at = where(frames)
    if kind == "lock_wait":
        chained = _chain_end(facts, evidence, frames, at)
        if chained is not None:
            return chained
    stage = facts.get("stage")
    main = main_thread(evidence)
    extra = {
        "reason": reason,
        "stage": stage,
        "stages": facts.get("stages"),
        "idle_s": facts.get("idle_s"),
        "kernel_wait": main.get("wchan") or main.get("syscall"),
        "cpu_fraction": evidence.get("cpu_fraction"),
        **frame_fields(frames),
        "os": _trim(evidence),
    }
    where_stage = in_stage(stage) + _stuck_bar(facts.get("progress"))
    if reason == "after_bye":
        # The script finished (bye) but the process did not exit: say so before the cause.
        where_stage += " after the script said bye (a non-daemon thread or atexit handler)"
    words = Words(facts, evidence, frames, seen, saw_hello, at, _idle(facts), where_stage, extra)
    return WORDS[kind](words)


def _chain_end(
    facts: dict[str, Any], evidence: dict[str, Any], frames: Sequence[Frame], at: str
) -> Optional[dict[str, Any]]:
    """A main thread's lock wait for another thread of the script that is blocked on a
    socket or a child: that thread's verdict, said of it, with the call the main thread
    made to wait; None when no such thread shows."""
    end = _waited_thread(facts.get("stacks"))
    if end is None:
        return None
    # The verdict of the thread waited for: its own stack, and none of the main thread's
    # kernel facts (they describe the main thread's futex)
    found = diagnose_hang(
        {
            **facts,
            "stack": None,
            "stacks": None,
            "frames": end["frames"],
            "evidence": {k: v for k, v in evidence.items() if k != "main_thread"},
        }
    )
    # the call the script made to wait (join, get, wait): below its own innermost frame
    own = [i for i, f in enumerate(frames) if not is_library_frame(f)]
    below = own[-1] + 1 if own and own[-1] + 1 < len(frames) else len(frames) - 1
    via = str(frames[below].get("function")) if frames else "a lock"
    found["evidence"]["waits_for"] = {"thread": end["thread"], "via": via, "at": at}
    return diag(
        found["kind"],
        f"{found['summary']}, in thread '{end['thread']}'; the main thread waits for it "
        f"({via}) at {at}",
        found["hint"],
        found["evidence"],
    )


def network_wait_words(w: Words) -> dict[str, Any]:
    sock = blocking_socket(w.evidence)
    remote = _remote(sock) if sock else "a remote host"
    w.extra["remote"] = remote if sock else None
    w.extra["socket_status"] = sock.get("status") if sock else None
    verb = "connecting to" if sock and sock.get("status") == "SYN_SENT" else "reading from"
    peer = (sock or {}).get("peer")
    if isinstance(peer, dict) and peer.get("pid"):
        # the end of the chain is a process on this machine: name it, and what to do there
        w.extra["peer"] = peer
        who = _process_words(peer)
        return diag(
            "network_wait",
            f"blocked {verb} {remote}{w.idle}, served by {who}{w.where} at {w.at}",
            f"the local server, pid {peer['pid']}, does not answer: look at its stack "
            f"(py-spy dump --pid {peer['pid']}), restart it, or put a timeout on the call",
            w.extra,
        )
    return diag(
        "network_wait",
        f"blocked {verb} {remote}{w.idle}{w.where} at {w.at}",
        f"blocked {verb} {remote}{w.idle}: check HTTPS_PROXY / HF_ENDPOINT, the "
        "server, or go offline (HF_HUB_OFFLINE=1); put a timeout on the call",
        w.extra,
    )


def _child_state_hint(named: str, child: Optional[dict[str, Any]], role: Optional[str]) -> str:
    """What to do about the child waited on, in words that fit its state."""
    if child and child.get("status") in ("stopped", "tracing-stop"):
        return (
            f"{named} is stopped (SIGSTOP or a debugger): resume it with kill -CONT "
            f"{child.get('pid')} or find who stopped it"
        )
    if child and child.get("status") == "zombie":
        return f"{named} has exited but nobody collected it: the worker died; check its output"
    if role and child and child_state(child) == "spinning":
        return (
            f"{named} is busy computing: a slow or endless __getitem__ / collate_fn "
            f"in the dataset; profile it (py-spy dump --pid {child.get('pid')}) "
            "or use DataLoader(num_workers=0) to run it in the main process"
        )
    return (
        f"{named} is not answering: check its stack (py-spy dump --pid "
        f"{child.get('pid') if child else '?'}) or use DataLoader(num_workers=0) "
        "to rule it out"
    )


def dataloader_wait(
    parent_pid: Any,
    children: Sequence[dict[str, Any]],
    process_stacks: Optional[dict[str, Any]] = None,
) -> Optional[dict[str, Any]]:
    """A process's DataLoader workers (its children named pt_data_worker) that all wait on
    the same thing (same_wait): {who, hint, same_wait, stack} in child_wait's words, as "both
    DataLoader workers (pids ...), all blocked on the same wait, each at FRAME"; else None.
    For a process the verdict names but does not wait on itself (a distributed job's rank
    that is not in the collective, bridge/ranks_hang.py)."""
    workers = sorted(
        (c for c in children if c.get("name") == DATALOADER_WORKER and c.get("ppid") == parent_pid),
        key=lambda c: (c.get("started") or 0, c.get("pid") or 0),
    )
    if len(workers) < 2:
        return None
    child = workers[0]
    group = same_wait(child, children, process_stacks)
    if not group:
        return None
    stack = child_stack(child, process_stacks)
    named = f"DataLoader worker 0 (pid {child.get('pid')})"
    who, hint = _same_wait_words(
        child, children, group, stack, _child_state_hint(named, child, "DataLoader worker 0")
    )
    # Stacks a rank of another host asked its workers for and did not get: said, not dropped.
    missing = [c["stack_missing"] for c in workers if c.get("stack_missing")]
    unsaid = (
        f" (no Python stack from {len(missing)} of them: {'; '.join(sorted(set(missing)))})"
        if missing
        else ""
    )
    return {
        "who": who + _child_stack_text(stack, each=True) + unsaid,
        "hint": hint,
        "same_wait": group,
        "stack": stack,
    }


def child_wait_words(w: Words) -> dict[str, Any]:
    evidence = w.evidence
    child = _child_to_name(evidence)
    w.extra["child"] = child
    children = evidence.get("children") or []
    who = _describe_child(child, children) if child else "a child process"
    role = child_role(child, children) if child else None
    w.extra["child_role"] = role
    w.extra["via"] = "unix socket" if child is not None and child is peer_child(evidence) else None
    # The hint says the state in its own words: name the child without it.
    named = f"{role} (pid {(child or {}).get('pid')})" if role else who
    state_hint = _child_state_hint(named, child, role)
    stack = child_stack(child, w.facts.get("process_stacks"))
    w.extra["child_stack"] = stack
    group = same_wait(child, children, w.facts.get("process_stacks")) if role and child else []
    if group and child:
        w.extra["same_wait"] = group
        who, state_hint = _same_wait_words(child, children, group, stack, state_hint)
    who += _child_stack_text(stack, each=bool(group))
    return diag("child_wait", f"waiting{w.idle} on {who}{w.where} at {w.at}", state_hint, w.extra)


def file_lock_wait_words(w: Words) -> dict[str, Any]:
    lock = file_lock(w.evidence, w.seen.kernel, w.seen.stack) or {}
    holder = _lock_holder(lock)
    w.extra["file_lock"] = lock
    pid = lock.get("holder_pid")
    stop = f" (kill {pid})" if pid is not None else ""
    call = _LOCK_CALLS.get(str(lock.get("lock")), "")
    return diag(
        "file_lock_wait",
        f"waiting{w.idle} for a lock on {lock.get('path')}{call}"
        f", held by {holder}{w.where} at {w.at}",
        f"{_lock_holder(lock, short=True)} holds the lock: let it finish, stop it{stop} if "
        "it is stuck, or give each job its own cache directory; the lock goes when its "
        "holder closes the file or exits",
        w.extra,
    )


def import_hang_words(w: Words) -> dict[str, Any]:
    module = importing_module(w.frames)
    w.extra["module"] = module
    never = "" if w.saw_hello else "; never said hello"
    return diag(
        "import_hang",
        f"stuck importing {module}{w.idle}{never}{w.where} at {w.at}",
        f"the import of {module} does not finish: run python -X importtime -c "
        f"'import {module}' to see where, and check the network, CUDA init and "
        "lock files it may wait on",
        w.extra,
    )


def startup_words(w: Words) -> dict[str, Any]:
    what = w.seen.kernel or w.seen.stack
    w.extra["blocking"] = what
    doing = f" (main thread {what.replace('_', ' ')})" if what else ""
    at_text = f" at {w.at}" if w.frames else ""
    return diag(
        "startup", f"never said hello{w.idle}{doing}{at_text}", _startup_hint(w.frames), w.extra
    )


def gil_held_words(w: Words) -> dict[str, Any]:
    busy = w.evidence.get("cpu_fraction")
    doing = (
        "spinning in native code"
        if busy is not None and busy >= CPU_BUSY
        else "blocked in native code"
    )
    never = "" if w.saw_hello else " (the worker loaded but never said hello)"
    return diag(
        "gil_held",
        f"beacon silent{w.idle} while the process lives{never}: the GIL is "
        f"held, {doing}{w.where} at {w.at}",
        "a C extension or ctypes call holds the GIL: release it around long "
        "calls (ctypes.CDLL instead of PyDLL, Py_BEGIN_ALLOW_THREADS), or check "
        "the named frame",
        w.extra,
    )


def _plain(kind: str, lead: str, hint: str) -> Callable[[Words], dict[str, Any]]:
    """The words of a kind that adds no facts of its own: "<lead> for 40 s in stage 'x' at
    train.py:12 in f", and a fixed hint."""

    def words(w: Words) -> dict[str, Any]:
        return diag(kind, f"{lead}{w.idle}{w.where} at {w.at}", hint, w.extra)

    return words


def cpu_bound_words(w: Words) -> dict[str, Any]:
    return diag(
        "cpu_bound",
        f"computing without progress{w.idle} (CPU {_pct(w.evidence)}{_starved(w.evidence)})"
        f"{w.where} at {w.at}",
        "busy on the CPU but not reporting progress: an infinite loop, or slow "
        "preprocessing; report progress inside it or profile the named frame",
        w.extra,
    )


def io_wait_words(w: Words) -> dict[str, Any]:
    target = main_thread(w.evidence).get("fd_target")
    w.extra["file"] = target
    on = f" on {target}" if target else ""
    return diag(
        "io_wait",
        f"waiting for I/O{on}{w.idle}{w.where} at {w.at}",
        "disk or filesystem is slow or stuck (network mount, full disk, a FIFO): "
        "check the path and the mount",
        w.extra,
    )


def stopped_words(w: Words) -> dict[str, Any]:
    return diag(
        "stopped",
        f"the process is stopped (SIGSTOP or a debugger){w.idle}{w.where} at {w.at}",
        f"resume it with kill -CONT {w.evidence.get('pid', '<pid>')} or find who stopped it",
        w.extra,
    )


def unknown_words(w: Words) -> dict[str, Any]:
    return diag(
        "unknown",
        f"no progress{w.idle}{w.where} at {w.at}; cause not recognised",
        "read the stacks in the report; py-spy dump --pid <pid> shows native frames",
        w.extra,
    )


# Each hang kind's summary and hint (and the facts only that kind carries).
WORDS: dict[str, Callable[[Words], dict[str, Any]]] = {
    "network_wait": network_wait_words,
    "lock_wait": _plain(
        "lock_wait",
        "waiting on a lock",
        "a lock, queue or join that nobody releases: look for a deadlock "
        "(two locks taken in opposite order, a thread that died holding one)",
    ),
    "file_lock_wait": file_lock_wait_words,
    "cpu_bound": cpu_bound_words,
    "io_wait": io_wait_words,
    "gil_held": gil_held_words,
    "child_wait": child_wait_words,
    "sleeping": _plain(
        "sleeping",
        "sleeping",
        "the main thread keeps sleeping: check retry/backoff or polling loops at the named frame",
    ),
    "gpu_busy": _plain(
        "gpu_busy",
        "the GPU is busy but the job reports no progress",
        "a long or stuck kernel: check nvidia-smi, lower the work per step, or "
        "run with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
    ),
    "import_hang": import_hang_words,
    "startup": startup_words,
    "stopped": stopped_words,
    "unknown": unknown_words,
}


def _trim(evidence: dict[str, Any], items: int = 10) -> dict[str, Any]:
    """The OS evidence for the report, with long lists cut (a fork bomb has many children)."""
    out = {k: v for k, v in evidence.items() if k != "py_spy"}
    for key in ("sockets", "children"):
        if isinstance(out.get(key), list) and len(out[key]) > items:
            out[key + "_total"] = len(out[key])
            out[key] = out[key][:items]
    return out


def _starved(evidence: dict[str, Any]) -> str:
    """Why a computing thread shows almost no CPU: it waited for a core the whole window."""
    cpu = evidence.get("cpu_fraction")
    return (
        ", always runnable: waiting for a free core"
        if (isinstance(cpu, (int, float)) and cpu < CPU_SOME)
        else ""
    )


def _pct(evidence: dict[str, Any]) -> str:
    cpu = evidence.get("cpu_fraction")
    return f"{cpu * 100:.0f}%" if isinstance(cpu, (int, float)) else "?"


def _stuck_bar(progress: Optional[dict[str, Any]]) -> str:
    """Name the progress bar that stopped (zero-code tqdm bars carry their description, e.g.
    a huggingface_hub download's file name), so 'download stuck at 0 B/s' names the file."""
    progress = progress or {}
    metrics = progress.get("metrics") or {}
    bar = metrics.get("bar")
    if not bar:
        return ""
    total = progress.get("total")
    count = f"{progress.get('step')}/{total}" if total is not None else f"{progress.get('step')}"
    return f" (its bar '{bar}' stopped at {count} {metrics.get('unit') or 'it'})"
