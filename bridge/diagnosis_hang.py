"""Diagnosis, part 3: hang verdicts (pure) -- why a live job makes no progress.

diagnose_hang(facts) -> {"kind", "summary", "hint", "evidence"}. The OS evidence comes from
bridge/evidence.py; stack reading is in diagnosis_stack.py.

Its length (about 670 lines): diagnose_hang is one ordered list of rules over the same
evidence, and the order is the judgement (a stopped child before a socket wait before a
sleep). The one implementation (a Node job is judged here too, through bridge/jobserve.py);
vectors/diagnosis.json pins it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

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

# --- hangs ------------------------------------------------------------------------------
# Kernel waits, by the main thread's syscall name and wchan (bridge/evidence.py maps
# syscall numbers to names). Socket and pipe reads share syscalls; the fd's target (from
# /proc/<pid>/fd) tells them apart.
_SLEEP_SYSCALLS = frozenset({"nanosleep", "clock_nanosleep"})
_LOCK_SYSCALLS = frozenset({"futex", "futex_waitv"})
_WAIT_SYSCALLS = frozenset({"wait4", "waitid", "waitpid"})
_POLL_SYSCALLS = frozenset(
    {"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2"}
)
_READ_SYSCALLS = frozenset(
    {
        "read",
        "readv",
        "pread64",
        "preadv",
        "preadv2",
        "recvfrom",
        "recvmsg",
        "recvmmsg",
        "connect",
        "accept",
        "accept4",
        "write",
        "writev",
        "sendto",
        "sendmsg",
        "pwrite64",
        "fsync",
        "fdatasync",
    }
)
_NET_WCHAN = re.compile(r"sk_wait|tcp_|inet_|sock_|wait_woken|unix_stream")
_POLL_WCHAN = re.compile(r"poll_schedule_timeout|do_select|do_sys_poll|ep_poll")
_IO_WCHAN = re.compile(r"io_schedule|folio_wait|wait_on_page|nfs|fuse|blk|jbd2|ext4|xfs|btrfs")
_LOCK_FUNCS = frozenset(
    {"acquire", "wait", "_wait_for_tstate_lock", "join", "get", "put", "__enter__"}
)
_NET_FILES = (
    "socket.py",
    "ssl.py",
    "http/client.py",
    "urllib3",
    "requests",
    "httpx",
    "huggingface_hub",
    "aiohttp",
    "selectors.py",
    "asyncio",
)
_CHILD_FILES = ("subprocess.py", "multiprocessing", "popen_fork.py", "torch/utils/data")

# Hang reasons (bridge/machine.py names first) that mean the worker's beacon went quiet.
BEACON_SILENT = frozenset({"heartbeat", "heartbeat_silence"})

CPU_BUSY = 0.5  # fraction of one core over the window: the main work is computing
# On a loaded machine a spinning thread gets a small share of a core, and a spinning Python
# thread also waits for the GIL (a futex, state S) whenever the beacon thread runs; but a
# thread blocked in a call is never runnable. Measured here under load: a CPU loop showed
# 16 % of a core and 40 % runnable samples, another 54 % and 96 % but its last syscall read
# caught it in the GIL's futex; a sleeping or blocked main thread shows 0 %.
RUNNABLE_BUSY = 0.3  # fraction of state samples in R
CPU_SOME = 0.05
# Margins against sampling jitter: the two clients sample the same process at
# different moments, so no verdict may turn on one sample.
RUNNABLE_SOME = 0.15  # below this share of R samples the main thread is not spinning
# Runnable in this share of at least WAIT_MIN_SAMPLES samples: the main thread never blocked
# over the window, so it is computing even when the machine gave it no CPU at all (every core
# busy with other work: a loop showed 0 % of a core and R in 25 of 25 samples beside two busy
# loops and three test workers on 2 cores, and was "cause not recognised").
RUNNABLE_ALWAYS = 0.9
WAIT_MAJORITY = 0.6  # share of samples in one kernel wait for that wait to decide
WAIT_MIN_SAMPLES = 5  # fewer samples than this decide nothing
GPU_BUSY = 50  # percent utilisation: the GPU is the thing that is busy
IO_BUSY_BYTES = 1 << 20  # bytes per window that count as "doing I/O"


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


def _main(evidence: dict[str, Any]) -> dict[str, Any]:
    return evidence.get("main_thread") or {}


def _remote(conn: dict[str, Any]) -> str:
    raddr = conn.get("raddr") or ""
    if isinstance(raddr, (list, tuple)) and len(raddr) == 2:
        host, port = raddr
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(raddr) or "an unknown peer"


def _blocking_socket(evidence: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The socket the main thread waits on: the one whose fd is the syscall's fd, else the
    one connection with a remote end (ESTABLISHED or connecting)."""
    sockets = [s for s in (evidence.get("sockets") or []) if s.get("raddr")]
    fd = _main(evidence).get("fd")
    for sock in sockets:
        if fd is not None and sock.get("fd") == fd:
            mine: dict[str, Any] = sock
            return mine
    live = [
        s
        for s in sockets
        if s.get("status") in ("ESTABLISHED", "SYN_SENT", "CLOSE_WAIT")
        and s.get("pid") in (None, evidence.get("pid"))
    ]
    found: Optional[dict[str, Any]] = live[0] if live else (sockets[0] if sockets else None)
    return found


def _peer_child(evidence: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The job process at the other end of the AF_UNIX socket the main thread reads, if any."""
    peer = (evidence.get("unix_peer") or {}).get("pid")
    if peer is None or peer == evidence.get("pid"):
        return None
    for child in evidence.get("children") or []:
        if child.get("pid") == peer:
            peer_child: dict[str, Any] = child
            return peer_child
    return None


def _child_to_name(evidence: dict[str, Any]) -> Optional[dict[str, Any]]:
    peer = _peer_child(evidence)
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


def _stack_says(frames: Sequence[Frame]) -> Optional[str]:
    """A hang kind from the Python stack alone (when kernel evidence is missing)."""
    if not frames:
        return None
    inner = frames[-1]
    func, path = str(inner.get("function", "")), str(inner.get("file", "")).replace("\\", "/")
    files = " ".join(str(f.get("file", "")) for f in frames[-4:])
    if func == "sleep":
        return "sleeping"
    if any(k in files for k in _CHILD_FILES) and (
        func
        in (
            "wait",
            "_wait",
            "poll",
            "_try_wait",
            "communicate",
            "join",
            "recv",
            "_recv",
            "_recv_bytes",
            "get",
        )
        or "selectors.py" in path
    ):
        # A select under multiprocessing.connection.wait (a DataLoader's data queue) waits
        # for a child, not for a network.
        return "child_wait"
    if any(k in path for k in _NET_FILES) or func in (
        "recv",
        "recv_into",
        "readinto",
        "connect",
        "create_connection",
        "getaddrinfo",
        "accept",
    ):
        return "network_wait"
    if func in _LOCK_FUNCS and (
        "threading.py" in path or "queue.py" in path or not is_library_frame(inner)
    ):
        return "lock_wait"
    return None


def _sample_count(main: dict[str, Any]) -> int:
    """How many state samples of the main thread the window took."""
    samples = main.get("wait_samples") or {}
    return sum(n for n in samples.values() if isinstance(n, int))


def dominant_wait(main: dict[str, Any]) -> Optional[str]:
    """The kernel wait (wchan) the main thread was seen in for at least WAIT_MAJORITY of at
    least WAIT_MIN_SAMPLES samples over the window, else None ("running" never counts)."""
    samples = main.get("wait_samples") or {}
    total = _sample_count(main)
    if total < WAIT_MIN_SAMPLES:
        return None
    # Sorted so that a tie (impossible above one half, but cheap to rule out) cannot differ
    # between the clients.
    for wait, n in sorted(samples.items()):
        if wait not in ("running", "unknown") and isinstance(n, int) and n >= WAIT_MAJORITY * total:
            return str(wait)
    return None


def _kernel_says(evidence: dict[str, Any]) -> Optional[str]:
    """A hang kind from outside the interpreter: state, kernel wait, CPU, I/O, GPU."""
    if not evidence or not evidence.get("alive", True):
        return None
    main = _main(evidence)
    status = evidence.get("status")
    syscall = main.get("syscall") or ""
    wchan = main.get("wchan") or ""
    target = str(main.get("fd_target") or "")
    waited = dominant_wait(main)
    if waited is not None and waited != wchan:
        # The one read at the end disagrees with most samples over the window (a sleeping
        # loop caught between two sleeps, or in the GIL's futex): the samples decide, and
        # the end read's syscall and fd no longer describe the wait.
        syscall, wchan, target = "", waited, ""
    cpu = evidence.get("cpu_fraction")
    io = evidence.get("io_delta") or {}
    if status in ("stopped", "tracing-stop"):
        return "stopped"
    gpus = evidence.get("gpu") or []
    if any(
        (g.get("util_percent") or 0) >= GPU_BUSY and g.get("used_by_job", True)
        for g in gpus
        if isinstance(g, dict)
    ):
        return "gpu_busy"
    if status == "disk-sleep" or _IO_WCHAN.search(wchan):
        return "io_wait"
    runnable = main.get("runnable_fraction")
    # "running" in /proc/.../syscall: caught executing user code, not waiting in the kernel.
    in_user_code = syscall in ("", "running") or main.get("state") in (None, "R")
    if runnable is not None:
        # The samples over the window judge the main thread; the one syscall read at the
        # end may well catch a spinning thread waiting for the GIL (a futex).
        # Margins against sampling jitter: one or two runnable samples (a sleeping loop waking
        # up) are not a loop; below RUNNABLE_BUSY a blocking wait that most samples saw decides.
        spinning = (runnable >= RUNNABLE_ALWAYS and _sample_count(main) >= WAIT_MIN_SAMPLES) or (
            (cpu or 0) >= CPU_SOME
            and (
                runnable >= RUNNABLE_BUSY
                or (in_user_code and runnable >= RUNNABLE_SOME and waited is None)
            )
        )
    else:
        spinning = cpu is not None and cpu >= CPU_BUSY and in_user_code
    if spinning:
        return "cpu_bound"
    if syscall in _WAIT_SYSCALLS or wchan in ("do_wait", "kernel_wait4"):
        return "child_wait"
    if syscall in _SLEEP_SYSCALLS or "nanosleep" in wchan:
        return "sleeping"
    if syscall in _LOCK_SYSCALLS or wchan.startswith("futex"):
        return "lock_wait"
    if (main.get("fd_family") == "unix" or wchan.startswith("unix_")) and (
        _peer_child(evidence) or evidence.get("children")
    ):
        # A local socket (socketpair, multiprocessing connection) into the job's own tree
        # is a wait on that process, not on a network (a stopped DataLoader
        # worker was once blamed on the proxy).
        return "child_wait"
    if target.startswith("socket:") or _NET_WCHAN.search(wchan):
        return "network_wait"
    if target.startswith("pipe:") or "pipe" in wchan:
        return "child_wait" if evidence.get("children") else "io_wait"
    if syscall in _POLL_SYSCALLS or _POLL_WCHAN.search(wchan):
        if _blocking_socket(evidence):
            return "network_wait"
        if evidence.get("children"):
            return "child_wait"
        return "io_wait"
    if syscall in _READ_SYSCALLS and target.startswith("/"):
        return "io_wait"
    if (io.get("read_bytes") or 0) + (io.get("write_bytes") or 0) >= IO_BUSY_BYTES:
        return "io_wait"
    if cpu is not None and cpu >= CPU_BUSY:
        return "cpu_bound"
    return None


def _hang_kind(
    reason: str,
    frames: Sequence[Frame],
    evidence: dict[str, Any],
    saw_hello: bool,
    loaded: bool = False,
    python_silent: bool = False,
) -> str:
    kernel, stack = _kernel_says(evidence), _stack_says(frames)
    if kernel == "stopped":
        return "stopped"
    if (
        (reason in BEACON_SILENT or python_silent)
        and (saw_hello or loaded)
        and evidence.get("alive", True)
    ):
        # (loaded: the worker was imported but its beacon never spoke;
        # python_silent: neither dump path answered, only the native SIGUSR2 one)
        # The beacon thread could not run: something holds the GIL (or the process froze).
        return "gil_held"
    if importing_module(frames):
        return "import_hang"
    if not saw_hello and reason == "startup":
        return "startup"
    if _file_lock(evidence, kernel, stack) is not None:
        return "file_lock_wait"
    # A Python-level wait that the kernel sees as a futex is still a lock unless the stack
    # names the real thing (a queue fed by a child, a socket with a timeout loop).
    if kernel == "lock_wait" and stack in ("child_wait", "network_wait", "sleeping"):
        return stack
    if kernel in ("child_wait", "io_wait") and stack == "network_wait":
        return stack
    if kernel == "io_wait" and stack == "child_wait":
        return stack
    if kernel:
        return kernel
    if stack:
        return stack
    return "unknown"


# What a main thread waiting for another process's file lock looks like: blocked in the
# kernel on it, or a poll (filelock's try-and-sleep, a spin on LOCK_NB). A main thread that
# waits on a child, a socket or a GPU only happens to have a locked file open.
_NOT_A_LOCK_POLL = frozenset({"child_wait", "network_wait", "gpu_busy", "stopped"})
_LOCK_CALLS = {"FLOCK": " (flock)", "POSIX": " (fcntl)", "OFDLCK": " (fcntl, open file)"}


def _file_lock(
    evidence: dict[str, Any], kernel: Optional[str], stack: Optional[str]
) -> Optional[dict[str, Any]]:
    """The file lock the main thread waits for (bridge/filelocks.py), or None."""
    locks = [lk for lk in evidence.get("file_locks") or [] if isinstance(lk, dict)]
    if not locks:
        return None
    if locks[0].get("blocked"):
        return locks[0]  # queued for it in the kernel: nothing else to weigh
    if kernel in _NOT_A_LOCK_POLL or stack in _NOT_A_LOCK_POLL:
        return None
    return locks[0]


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
        kind = _stack_says(frames)
        if kind in _CHAIN_ENDS and (
            best is None or _CHAIN_ENDS.index(kind) < _CHAIN_ENDS.index(best["kind"])
        ):
            best = {"thread": name, "frames": frames, "kind": kind}
    return best


def _idle(facts: dict[str, Any]) -> str:
    idle = facts.get("idle_s")
    # A beat sent just before the hang says ~0 s: a number that small informs nobody.
    return f" for {idle:.0f} s" if isinstance(idle, (int, float)) and idle >= 1 else ""


def diagnose_hang(facts: dict[str, Any]) -> dict[str, Any]:
    """Why a job that is still alive makes no progress. Always returns a diagnosis.

    facts: reason (startup | stage_budget | stall | heartbeat | after_bye; heartbeat_silence
    is read as heartbeat), stage, stages,
    idle_s, stack (main thread's Python stack from a heartbeat), stacks (dump text or
    faulthandler text), saw_hello, python_silent (neither the in-band dump nor the SIGUSR1
    handler answered, so the native SIGUSR2 dump was taken: nothing runs Python), evidence
    (bridge.evidence.collect's dict), progress (the last {step, total, metrics}: a tqdm bar's
    name is quoted), process_stacks ({pid: dump_stacks text} of the job's other processes
    that answered: a waited-on child's own stack)."""
    reason = facts.get("reason") or "stall"
    evidence = dict(facts.get("evidence") or {})
    saw_hello = bool(facts.get("saw_hello", True))
    frames = (
        facts.get("frames")  # a thread's frames already read (the wait chain, below)
        or parse_stack(facts.get("stack"))
        or parse_stack(facts.get("stacks"))
        or parse_stack(evidence.get("py_spy"))
    )
    stage = facts.get("stage")
    loaded = bool(facts.get("worker_loaded"))
    kind = _hang_kind(reason, frames, evidence, saw_hello, loaded, bool(facts.get("python_silent")))
    at = where(frames)
    end = _waited_thread(facts.get("stacks")) if kind == "lock_wait" else None
    if end is not None:
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
    idle = _idle(facts)
    main = _main(evidence)
    kernel_wait = main.get("wchan") or main.get("syscall")
    extra = {
        "reason": reason,
        "stage": stage,
        "stages": facts.get("stages"),
        "idle_s": facts.get("idle_s"),
        "kernel_wait": kernel_wait,
        "cpu_fraction": evidence.get("cpu_fraction"),
        **frame_fields(frames),
        "os": _trim(evidence),
    }
    where_stage = in_stage(stage) + _stuck_bar(facts.get("progress"))
    if reason == "after_bye":
        # The script finished (bye) but the process did not exit: say so before the cause.
        where_stage += " after the script said bye (a non-daemon thread or atexit handler)"

    if kind == "network_wait":
        sock = _blocking_socket(evidence)
        remote = _remote(sock) if sock else "a remote host"
        extra["remote"] = remote if sock else None
        extra["socket_status"] = sock.get("status") if sock else None
        verb = "connecting to" if sock and sock.get("status") == "SYN_SENT" else "reading from"
        peer = (sock or {}).get("peer")
        if isinstance(peer, dict) and peer.get("pid"):
            # the end of the chain is a process on this machine: name it, and what to do there
            extra["peer"] = peer
            who = _process_words(peer)
            return diag(
                kind,
                f"blocked {verb} {remote}{idle}, served by {who}{where_stage} at {at}",
                f"the local server, pid {peer['pid']}, does not answer: look at its stack "
                f"(py-spy dump --pid {peer['pid']}), restart it, or put a timeout on the call",
                extra,
            )
        return diag(
            kind,
            f"blocked {verb} {remote}{idle}{where_stage} at {at}",
            f"blocked {verb} {remote}{idle}: check HTTPS_PROXY / HF_ENDPOINT, the "
            "server, or go offline (HF_HUB_OFFLINE=1); put a timeout on the call",
            extra,
        )
    if kind == "child_wait":
        child = _child_to_name(evidence)
        extra["child"] = child
        children = evidence.get("children") or []
        who = _describe_child(child, children) if child else "a child process"
        role = child_role(child, children) if child else None
        extra["child_role"] = role
        extra["via"] = (
            "unix socket" if child is not None and child is _peer_child(evidence) else None
        )
        # The hint says the state in its own words: name the child without it.
        named = f"{role} (pid {(child or {}).get('pid')})" if role else who
        state_hint = ""
        if child and child.get("status") in ("stopped", "tracing-stop"):
            state_hint = (
                f"{named} is stopped (SIGSTOP or a debugger): resume it with kill -CONT "
                f"{child.get('pid')} or find who stopped it"
            )
        elif child and child.get("status") == "zombie":
            state_hint = (
                f"{named} has exited but nobody collected it: the worker died; check its output"
            )
        elif role and child and child_state(child) == "spinning":
            state_hint = (
                f"{named} is busy computing: a slow or endless __getitem__ / collate_fn "
                f"in the dataset; profile it (py-spy dump --pid {child.get('pid')}) "
                "or use DataLoader(num_workers=0) to run it in the main process"
            )
        else:
            state_hint = (
                f"{named} is not answering: check its stack (py-spy dump --pid "
                f"{child.get('pid') if child else '?'}) or use DataLoader(num_workers=0) "
                "to rule it out"
            )
        stack = child_stack(child, facts.get("process_stacks"))
        extra["child_stack"] = stack
        group = same_wait(child, children, facts.get("process_stacks")) if role and child else []
        if group and child:
            extra["same_wait"] = group
            who, state_hint = _same_wait_words(child, children, group, stack, state_hint)
        who += _child_stack_text(stack, each=bool(group))
        return diag(kind, f"waiting{idle} on {who}{where_stage} at {at}", state_hint, extra)
    if kind == "file_lock_wait":
        lock = _file_lock(evidence, _kernel_says(evidence), _stack_says(frames)) or {}
        holder = _lock_holder(lock)
        extra["file_lock"] = lock
        pid = lock.get("holder_pid")
        stop = f" (kill {pid})" if pid is not None else ""
        call = _LOCK_CALLS.get(str(lock.get("lock")), "")
        return diag(
            kind,
            f"waiting{idle} for a lock on {lock.get('path')}{call}"
            f", held by {holder}{where_stage} at {at}",
            f"{_lock_holder(lock, short=True)} holds the lock: let it finish, stop it{stop} if "
            "it is stuck, or give each job its own cache directory; the lock goes when its "
            "holder closes the file or exits",
            extra,
        )
    if kind == "import_hang":
        module = importing_module(frames)
        extra["module"] = module
        never = "" if saw_hello else "; never said hello"
        return diag(
            kind,
            f"stuck importing {module}{idle}{never}{where_stage} at {at}",
            f"the import of {module} does not finish: run python -X importtime -c "
            f"'import {module}' to see where, and check the network, CUDA init and "
            "lock files it may wait on",
            extra,
        )
    if kind == "startup":
        what = _kernel_says(evidence) or _stack_says(frames)
        extra["blocking"] = what
        doing = f" (main thread {what.replace('_', ' ')})" if what else ""
        at_text = f" at {at}" if frames else ""
        return diag(kind, f"never said hello{idle}{doing}{at_text}", _startup_hint(frames), extra)
    if kind == "gil_held":
        busy = evidence.get("cpu_fraction")
        doing = (
            "spinning in native code"
            if busy is not None and busy >= CPU_BUSY
            else "blocked in native code"
        )
        never = "" if saw_hello else " (the worker loaded but never said hello)"
        return diag(
            kind,
            f"beacon silent{idle} while the process lives{never}: the GIL is "
            f"held, {doing}{where_stage} at {at}",
            "a C extension or ctypes call holds the GIL: release it around long "
            "calls (ctypes.CDLL instead of PyDLL, Py_BEGIN_ALLOW_THREADS), or check "
            "the named frame",
            extra,
        )
    if kind == "lock_wait":
        return diag(
            kind,
            f"waiting on a lock{idle}{where_stage} at {at}",
            "a lock, queue or join that nobody releases: look for a deadlock "
            "(two locks taken in opposite order, a thread that died holding one)",
            extra,
        )
    if kind == "sleeping":
        return diag(
            kind,
            f"sleeping{idle}{where_stage} at {at}",
            "the main thread keeps sleeping: check retry/backoff or polling loops at "
            "the named frame",
            extra,
        )
    if kind == "cpu_bound":
        return diag(
            kind,
            f"computing without progress{idle} (CPU {_pct(evidence)}{_starved(evidence)})"
            f"{where_stage} at {at}",
            "busy on the CPU but not reporting progress: an infinite loop, or slow "
            "preprocessing; report progress inside it or profile the named frame",
            extra,
        )
    if kind == "io_wait":
        target = main.get("fd_target")
        extra["file"] = target
        on = f" on {target}" if target else ""
        return diag(
            kind,
            f"waiting for I/O{on}{idle}{where_stage} at {at}",
            "disk or filesystem is slow or stuck (network mount, full disk, a FIFO): "
            "check the path and the mount",
            extra,
        )
    if kind == "gpu_busy":
        return diag(
            kind,
            f"the GPU is busy but the job reports no progress{idle}{where_stage} at {at}",
            "a long or stuck kernel: check nvidia-smi, lower the work per step, or "
            "run with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
            extra,
        )
    if kind == "stopped":
        return diag(
            kind,
            f"the process is stopped (SIGSTOP or a debugger){idle}{where_stage} at {at}",
            f"resume it with kill -CONT {evidence.get('pid', '<pid>')} or find who stopped it",
            extra,
        )
    return diag(
        "unknown",
        f"no progress{idle}{where_stage} at {at}; cause not recognised",
        "read the stacks in the report; py-spy dump --pid <pid> shows native frames",
        extra,
    )


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
