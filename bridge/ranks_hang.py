"""Why a distributed job hangs (pure: values in, values out; the one implementation,
vectors/ranks.json pins it).

- rendezvous_wait: its launcher (torchrun) waits in the rendezvous for nodes that never
  come, and no rank started;
- hung_rank: its ranks wait in a collective for one that is elsewhere (from every rank's
  dump_stacks reply or faulthandler dump, read by main_thread_frames); live_collective is
  the same judgement while the job is only stalled, from the heartbeats' idle stacks.

The per-process state these read is bridge/ranks.py's.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from trainbridge.bridge import proc_states, ranks
from trainbridge.bridge.diagnosis_hang import dataloader_wait


# --- rendezvous ---------------------------------------------------------------------------
def _option(argv: list[str], *names: str) -> Optional[str]:
    """The value of a launcher option given as `--name=value` or `--name value`."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


def rendezvous_wait(
    launcher: dict[str, Any], ranks_said_hello: bool, waited_s: float, stacks: Optional[str]
) -> Optional[dict[str, Any]]:
    """The verdict for a job whose launcher waits in its rendezvous for nodes that never
    come: its start-up deadline passed, no rank said hello, and the launcher's own stack
    is in torch.distributed.elastic's rendezvous. None otherwise (e.g. it was still
    importing torch: the plain start-up verdict stands)."""
    if ranks_said_hello or not ranks.awaits_ranks(launcher) or "rendezvous" not in (stacks or ""):
        return None
    argv = [str(a) for a in launcher.get("argv") or []]
    nnodes = _option(argv, "--nnodes") or "1"
    needed = nnodes.split(":")[0]
    endpoint = _option(argv, "--rdzv-endpoint", "--rdzv_endpoint")
    if endpoint is None:
        addr, port = (
            _option(argv, "--master-addr", "--master_addr"),
            _option(argv, "--master-port", "--master_port"),
        )
        endpoint = f"{addr or '127.0.0.1'}:{port or '29500'}"
    backend = _option(argv, "--rdzv-backend", "--rdzv_backend") or "static"
    host = launcher.get("host") or "?"
    waited = f"{waited_s:.0f} s" if waited_s >= 10 else f"{waited_s:.1f} s"
    summary = (
        f"torchrun on host {host} waited {waited} for nodes that never "
        f"came: its {backend} rendezvous at {endpoint} needs {needed} node(s) "
        f"(--nnodes={nnodes}) and only this one is known to have joined; no rank started"
    )
    hint = (
        f"start torchrun on the other node(s) with the same --rdzv-endpoint={endpoint} and "
        f"--rdzv-id, check that they can reach {endpoint}, or lower --nnodes"
    )
    return {
        "kind": "rendezvous_wait",
        "summary": summary,
        "hint": hint,
        "evidence": {
            "endpoint": endpoint,
            "backend": backend,
            "nnodes": nnodes,
            "nnodes_expected": int(needed) if needed.isdigit() else None,
            "nnodes_joined": 1,
            "waited_s": round(waited_s, 1),
            "host": host,
        },
    }


# --- the hung rank -----------------------------------------------------------------------
_THREAD = re.compile(r'^Thread 0x[0-9a-f]+ "([^"]*)"', re.MULTILINE)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.MULTILINE)
_COLLECTIVE_FILE = "torch/distributed/distributed_c10d.py"
# autograd's engine entry: torch >= 2.3's graph.py, and before it autograd/__init__.py's own
_BACKWARD = (
    ("torch/autograd/graph.py", "_engine_run_backward"),
    ("torch/autograd/__init__.py", "backward"),
)
BACKWARD = "backward() (DDP's gradient all-reduce)"
# faulthandler's own format: "Current thread 0x... (most recent call first):" and
# '  File "x.py", line 3 in f', innermost first.
_FH_CURRENT = re.compile(
    r"^(?:Current thread 0x[0-9a-f]+|Stack) \(most recent call first\):", re.MULTILINE
)  # "Stack": faulthandler.register(all_threads=False), the SIGUSR2 dump
_FH_THREAD = re.compile(r"^(?:Current thread 0x|Thread 0x|Stack \()", re.MULTILINE)
_FH_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)', re.MULTILINE)


def main_thread_frames(stacks: str) -> list[dict[str, Any]]:
    """The main thread's frames (outermost first) from a worker's dump_stacks text, or from
    a faulthandler dump (the fallback): its "Current thread" (or, for SIGUSR2's, its one
    "Stack") is the thread the signal ran on, the main one, listed innermost first."""
    starts = [(m.start(), m.group(1)) for m in _THREAD.finditer(stacks)]
    for i, (start, name) in enumerate(starts):
        if name == "MainThread":
            end = starts[i + 1][0] if i + 1 < len(starts) else len(stacks)
            return [
                {"file": f, "line": int(n), "function": fn}
                for f, n, fn in _FRAME.findall(stacks[start:end])
            ]
    current = _FH_CURRENT.search(stacks)
    if current is None:
        return []
    block = stacks[current.end() :]
    following = _FH_THREAD.search(block)
    block = block[: following.start()] if following else block
    block = block.split("\n\n", 1)[0]
    frames = [{"file": f, "line": int(n), "function": fn} for f, n, fn in _FH_FRAME.findall(block)]
    return frames[::-1]


def _collective(frames: list[dict[str, Any]]) -> Optional[str]:
    """The collective a stack waits in: its outermost torch.distributed (c10d) frame, or
    autograd's backward, where DistributedDataParallel all-reduces the gradients (from C++
    hooks inside autograd's engine: no c10d frame shows). A rank in backward() while another
    rank is elsewhere waits for that one."""
    for frame in frames:
        if str(frame["file"]).replace("\\", "/").endswith(_COLLECTIVE_FILE):
            return str(frame["function"])
    for frame in frames:
        path = str(frame["file"]).replace("\\", "/")
        if any(path.endswith(f) and frame["function"] == fn for f, fn in _BACKWARD):
            return BACKWARD
    return None


def _beat_frames(stack: str) -> list[dict[str, Any]]:
    """The frames (outermost first) of a heartbeat's main-thread stack (no thread header)."""
    return [{"file": f, "line": int(n), "function": fn} for f, n, fn in _FRAME.findall(stack)]


def _os_view(
    state: ranks.State, processes: Optional[list[dict[str, Any]]]
) -> dict[tuple[Optional[str], Any], dict[str, Any]]:
    """(host address, pid) -> the OS's view of that process: for this host's processes
    (address None) from `processes`, the evidence's; for every host's, from each worker's
    answer to dump_stacks, which lists its children (a launcher's are its ranks). A pid
    means nothing on another host: another host's rank is never looked up in this one's."""
    view: dict[tuple[Optional[str], Any], dict[str, Any]] = {}
    for q in state["procs"].values():
        for child in q.get("children") or []:
            word = proc_states.word(child.get("state"))
            entry = {"pid": child.get("pid"), "status": word, "wchan": child.get("wchan")}
            view[(q.get("addr"), child.get("pid"))] = entry
    for proc in processes or []:
        if proc.get("pid") is not None:
            view[(None, proc["pid"])] = proc
    return view


def _own_children(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The children a process listed in its answer to dump_stacks, in the evidence's shape
    (pid, name, ppid, status, wchan), with the stack each dumped for it, if any."""
    return [
        {
            "pid": c.get("pid"),
            "name": c.get("name"),
            "ppid": p["pid"],
            "status": proc_states.word(c["state"]) if c.get("state") else None,
            "wchan": c.get("wchan"),
            "stack": c.get("stack"),
            "stack_missing": c.get("stack_missing"),
        }
        for c in p.get("children") or []
    ]


def _stopped(proc: Optional[dict[str, Any]]) -> Optional[str]:
    """How the OS says a process is stopped, in words, or None when it runs (or is not
    known: a rank of another host)."""
    status = (proc or {}).get("status")
    if status == "tracing-stop":
        return "stopped by a debugger (ptrace)"
    if status != "stopped":
        return None
    kernel = (proc or {}).get("kernel_stack") or [(proc or {}).get("wchan")]
    at = f": in the kernel at {kernel[0]}" if kernel and kernel[0] else ""
    return f"stopped (SIGSTOP, a debugger or a frozen container{at})"


def hung_rank(
    state: ranks.State,
    live: bool = False,
    processes: Optional[list[dict[str, Any]]] = None,
    process_stacks: Optional[dict[str, Any]] = None,
) -> Optional[dict[str, Any]]:
    """When ranks wait in a collective and one does not arrive: that rank, with its frame
    or its state, and the others' collective. Reads every rank's stack at hang time (their
    dump_stacks replies; with live, their last heartbeats' idle stacks) and the OS's view
    of a rank that cannot answer, a stopped one: `processes`, this host's at the deadline
    (bridge/evidence.py's children: pid, status, wchan, kernel_stack), and for any host the
    children its launcher listed in its own answer (_os_view).
    None when no rank waits, or none is missing. A rank whose stack shows no frame (a
    faulthandler dump read before it was written out) and whose process is not stopped is
    neither: it is never named. A rank away that waits on its DataLoader workers, all on the
    same wait (`processes` shows them, `process_stacks` their Python stacks: {pid: text}):
    the verdict is theirs, said of the rank (bridge/diagnosis_hang.py dataloader_wait)."""
    view = _os_view(state, processes)
    members = sorted(
        (
            p
            for p in state["procs"].values()
            if p["rank"] is not None and p["world_size"] is not None
        ),
        key=lambda q: q["rank"],
    )
    absent = _absent(members)
    if len(members) < 2 and not absent:
        return None
    waiting: list[_Entry] = []
    away: list[_Entry] = []
    for p in members:
        placed = _place(p, live, view, bool(absent))
        if placed is not None:
            (waiting if placed[0] == "waiting" else away).append(placed[1])
    if absent and waiting and not any(stopped for _, _, stopped in away):
        return _never_said_hello(absent, waiting)
    if not waiting or not away:
        return None
    away.sort(key=lambda entry: entry[2] is None)  # a stopped rank first: it is the cause
    first, _, first_stopped = away[0]
    waits = None
    if not first_stopped and not live:
        # This host's evidence (with the fork workers' stacks from the crash file), else the
        # children the rank listed itself in its answer, with the stacks they dumped for it
        # (any host: worker/fork_dumps.py).
        here = first.get("addr") is None
        own = _own_children(first)
        # A rank of this host: its workers' dumps in the crash file count for the children
        # it listed too (a slow snapshot on a loaded machine can meet the SIGTERM that follows
        # it and list none); another host's pids are not this host's.
        own_stacks = {
            **((process_stacks or {}) if here else {}),
            **{str(c["pid"]): c["stack"] for c in own if isinstance(c.get("stack"), str)},
        }
        waits = dataloader_wait(
            first["pid"], (processes or []) if here else [], process_stacks
        ) or dataloader_wait(first["pid"], own, own_stacks)
    return _missing_from_collective(waiting, away, waits)


# A rank placed: its process record, its main thread's frames, and the collective it waits
# in (a waiting rank) or its OS state, "stopped" or None (a rank away from the collective).
_Entry = tuple[dict[str, Any], list[dict[str, Any]], Optional[str]]


def _place(
    p: dict[str, Any], live: bool, view: dict[Any, Any], absent: bool
) -> Optional[tuple[str, _Entry]]:
    """Where one rank is: ("waiting", entry) in a collective, ("away", entry) elsewhere or
    stopped, or None when its stack shows no frame (a dump cut short: not known)."""
    stopped = None if live else _stopped(view.get((p.get("addr"), p["pid"])))
    text = p.get("beat_stack" if live else "stacks")
    frames = (_beat_frames(text) if live else main_thread_frames(text)) if text else []
    if not frames and not live and p.get("beat_stack"):
        # No answer to the hang's dump_stacks in time (another host's rank on a loaded
        # machine): its last heartbeat's stack (sent once idle) says where it was.
        frames = _beat_frames(p["beat_stack"])
    if stopped is not None:
        return "away", (p, frames, stopped)
    if not frames:
        return None
    # With a rank that never said hello, waiting in torch.distributed's start (the
    # rendezvous of init_process_group) is waiting for it too.
    op = _collective(frames) or (_distributed(frames) if absent else None)
    return ("waiting", (p, frames, op)) if op else ("away", (p, frames, None))


def _missing_from_collective(
    waiting: list[_Entry], away: list[_Entry], waits: Optional[dict[str, Any]] = None
) -> dict[str, Any]:
    """The verdict in words: the first rank away (a stopped one first) is the cause, the
    others away are named too, and the waiting ranks with their collective. `waits`: what
    the first rank away itself waits on (its DataLoader workers), which the words then say
    and whose hint is the verdict's."""
    ops = sorted({op for _, _, op in waiting if op})
    missing = [
        {
            "rank": p["rank"],
            "host": p["host"],
            "pid": p["pid"],
            "frame": ranks.where(frames),
            **({"state": "stopped"} if stopped else {}),
        }
        for p, frames, stopped in away
    ]
    waiters = _waiters(waiting)
    first, _, first_stopped = away[0]
    at = missing[0]["frame"] or "an unknown frame"
    if first_stopped:
        text = f"rank {first['rank']} ({ranks.who(first)}) is {first_stopped}"
        hint = (
            f"rank {first['rank']} is stopped, so the others wait for it in {ops[0]}: resume "
            f"it (kill -CONT {first['pid']} on host {first['host'] or '?'}) or find who "
            "stopped it (a debugger attached, a frozen container, Ctrl-Z in its terminal)"
        )
    elif waits:
        text = (
            f"rank {first['rank']} ({ranks.who(first)}) is not in the collective: at {at} it "
            f"waits for {waits['who']}"
        )
        hint = waits["hint"]
    else:
        text = f"rank {first['rank']} ({ranks.who(first)}) is not in the collective: it is at {at}"
        hint = (
            f"see why rank {first['rank']} is at {at} and not in {ops[0]}: every rank must "
            "reach the same collectives in the same order"
        )
    if len(missing) > 1:
        text += "; nor are rank(s) " + ", ".join(str(m["rank"]) for m in missing[1:])
    text += (
        f"; rank(s) {', '.join(str(w['rank']) for w in waiters)} wait in {' / '.join(ops)} for it"
    )
    kind = "stopped" if first_stopped else "child_wait" if waits else "collective_wait"
    return {
        "kind": kind,
        **({"same_wait": waits["same_wait"]} if waits else {}),
        "rank": first["rank"],
        "host": first["host"],
        **({"addr": first["addr"]} if first.get("addr") else {}),
        "pid": first["pid"],
        "missing": missing,
        "waiting": waiters,
        "summary": text,
        "hint": hint,
    }


def _absent(members: list[dict[str, Any]]) -> list[int]:
    """The ranks of the job's world (its ranks agree on its size) that never said hello."""
    worlds = {p["world_size"] for p in members}
    if len(worlds) != 1:
        return []
    world = worlds.pop()
    return sorted(set(range(world)) - {p["rank"] for p in members}) if world <= 4096 else []


def _distributed(frames: list[dict[str, Any]]) -> Optional[str]:
    """The outermost torch.distributed frame's function (init_process_group, a store's
    wait), or None."""
    for frame in frames:
        if "torch/distributed/" in str(frame["file"]).replace("\\", "/"):
            return str(frame["function"])
    return None


def _waiters(waiting: list[Any]) -> list[dict[str, Any]]:
    """The ranks that wait, each with its collective and frame (the verdict's `waiting`)."""
    return [
        {
            "rank": p["rank"],
            "host": p["host"],
            "pid": p["pid"],
            "collective": op,
            "frame": ranks.where(frames),
        }
        for p, frames, op in waiting
    ]


def _never_said_hello(absent: list[int], waiting: list[Any]) -> dict[str, Any]:
    """Ranks wait for one that never said hello: its process never got as far as Python
    (a launcher or a node that did not start it, a module load that hangs) or hangs before
    the worker loaded. Where it runs is the launcher's to say (a Slurm job's node: the
    keeper adds it, bridge/slurm.py)."""
    ops = sorted({op for _, _, op in waiting if op})
    waiters = _waiters(waiting)
    missing = [
        {"rank": r, "host": None, "pid": None, "frame": None, "hello": False} for r in absent
    ]
    return {
        "kind": "rank_never_started",
        "rank": absent[0],
        "host": None,
        "pid": None,
        "missing": missing,
        "waiting": waiters,
        "summary": never_said_hello_text(absent, waiters, ops, {}),
        "hint": (
            f"rank {absent[0]} never said hello: see whether its process started at all on its "
            "host (its launcher's or scheduler's log), and whether it hangs before Python "
            "(a stuck module load, a file system that does not answer)"
        ),
    }


def never_said_hello_text(
    absent: list[int], waiters: list[dict[str, Any]], ops: list[str], hosts: dict[int, str]
) -> str:
    """The words of _never_said_hello; `hosts`: where each absent rank runs, when known."""

    def named(rank: int) -> str:
        return f"rank {rank} (host {hosts[rank]})" if rank in hosts else f"rank {rank}"

    text = f"{named(absent[0])} never said hello"
    if len(absent) > 1:
        text += "; nor did " + ", ".join(named(r) for r in absent[1:])
    ranks_waiting = ", ".join(f"{w['rank']} ({w['host'] or '?'})" for w in waiters)
    return text + f"; rank(s) {ranks_waiting} wait in {' / '.join(ops)} for it"


def live_collective(state: ranks.State) -> Optional[dict[str, Any]]:
    """The live (stalled, before any deadline) form of hung_rank, from the ranks' last
    heartbeat stacks: a diagnosis {kind collective_wait, frame, summary, hint, evidence}
    whose summary says "waiting in all_reduce for rank 1 ...", or None.
    Its kind and frame are those the verdict at the deadline gives on the same facts."""
    stuck = hung_rank(state, live=True)
    if stuck is None:
        return None
    first, waiters = stuck["missing"][0], stuck["waiting"]
    ops = " / ".join(sorted({w["collective"] for w in waiters}))
    summary = (
        f"rank(s) {', '.join(str(w['rank']) for w in waiters)} waiting in {ops} for rank "
        f"{stuck['rank']} ({ranks.who(stuck)}), which is at {first['frame'] or 'an unknown frame'}"
    )
    return {
        "kind": "collective_wait",
        "summary": summary,
        "hint": stuck["hint"],
        "evidence": {"frame": first["frame"], "hung_rank": stuck},
    }
