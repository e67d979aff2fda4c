"""Diagnosis, part 3: hang verdicts (pure) -- why a live job makes no progress.

diagnose_hang(facts) -> {"kind", "summary", "hint", "evidence"}. The OS evidence comes from
bridge/evidence.py; stack reading is in diagnosis_stack.py.

The kind is judged by three ordered tables of small named rules, first match wins, and the
order is the judgement (a stopped process before a busy GPU before a socket wait before a
sleep): KERNEL_RULES read the main thread from outside (MainWait), STACK_RULES its Python
stack (StackTop), HANG_RULES weigh the two with the job's facts (Seen). WORDS holds each
kind's summary and hint. Each rule is tested alone in tests/diagnosis/test_hang_rules.py.
The one implementation (a Node job is judged here too, through bridge/jobserve.py);
vectors/diagnosis.json pins the verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

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


@dataclass(frozen=True)
class StackTop:
    """The innermost frames of a Python stack, as the stack rules read them."""

    function: str  # the innermost frame's function
    path: str  # its file, with forward slashes
    files: str  # the files of the four innermost frames, joined
    inner: Frame


def stack_top(frames: Sequence[Frame]) -> Optional[StackTop]:
    if not frames:
        return None
    inner = frames[-1]
    return StackTop(
        function=str(inner.get("function", "")),
        path=str(inner.get("file", "")).replace("\\", "/"),
        files=" ".join(str(f.get("file", "")) for f in frames[-4:]),
        inner=inner,
    )


_CHILD_WAIT_FUNCS = frozenset(
    {
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
    }
)
_NET_FUNCS = frozenset(
    {"recv", "recv_into", "readinto", "connect", "create_connection", "getaddrinfo", "accept"}
)


def sleep_call(top: StackTop) -> Optional[str]:
    """time.sleep (or any function named sleep) is innermost."""
    return "sleeping" if top.function == "sleep" else None


def child_call(top: StackTop) -> Optional[str]:
    """A wait, join, receive or select inside subprocess, multiprocessing or torch's data
    loading: a select under multiprocessing.connection.wait (a DataLoader's data queue) waits
    for a child, not for a network."""
    near_child = any(k in top.files for k in _CHILD_FILES)
    waits = top.function in _CHILD_WAIT_FUNCS or "selectors.py" in top.path
    return "child_wait" if near_child and waits else None


def network_call(top: StackTop) -> Optional[str]:
    """Innermost in a network library, or a socket's receive, connect, accept or name lookup."""
    on_net = any(k in top.path for k in _NET_FILES) or top.function in _NET_FUNCS
    return "network_wait" if on_net else None


def lock_call(top: StackTop) -> Optional[str]:
    """acquire, wait, join, get, put or a with-block, in threading, queue or the script."""
    in_lock_code = (
        "threading.py" in top.path or "queue.py" in top.path or not is_library_frame(top.inner)
    )
    return "lock_wait" if top.function in _LOCK_FUNCS and in_lock_code else None


# The hang kind the Python stack alone says (when kernel evidence is missing or vague),
# first match wins.
STACK_RULES: tuple[Callable[[StackTop], Optional[str]], ...] = (
    sleep_call,
    child_call,
    network_call,
    lock_call,
)


def _stack_says(frames: Sequence[Frame]) -> Optional[str]:
    """A hang kind from the Python stack alone: the first of STACK_RULES that names one."""
    top = stack_top(frames)
    return _first_match(STACK_RULES, top) if top is not None else None


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


@dataclass(frozen=True)
class MainWait:
    """The job's main thread as the kernel rules read it, each fact worked out once."""

    evidence: dict[str, Any]
    status: Any  # the process's state: running, sleeping, disk-sleep, stopped, ...
    syscall: str
    wchan: str
    target: str  # what the syscall's fd points at: socket:[...], pipe:[...], a path
    cpu: Optional[float]  # fraction of one core over the window
    spinning: bool  # the state samples (or, without them, the CPU) say it runs, not waits


def main_wait(evidence: dict[str, Any]) -> MainWait:
    main = _main(evidence)
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
    return MainWait(
        evidence=evidence,
        status=evidence.get("status"),
        syscall=syscall,
        wchan=wchan,
        target=target,
        cpu=cpu,
        spinning=spinning,
    )


def process_stopped(w: MainWait) -> Optional[str]:
    """Stopped by SIGSTOP or a debugger."""
    return "stopped" if w.status in ("stopped", "tracing-stop") else None


def gpu_busy(w: MainWait) -> Optional[str]:
    """A GPU the job uses is at least GPU_BUSY percent busy."""
    gpus = w.evidence.get("gpu") or []
    busy = any(
        (g.get("util_percent") or 0) >= GPU_BUSY and g.get("used_by_job", True)
        for g in gpus
        if isinstance(g, dict)
    )
    return "gpu_busy" if busy else None


def disk_sleep(w: MainWait) -> Optional[str]:
    """In uninterruptible sleep (state D) or a filesystem or block-device wait."""
    return "io_wait" if w.status == "disk-sleep" or _IO_WCHAN.search(w.wchan) else None


def spins(w: MainWait) -> Optional[str]:
    """The window's samples (or its CPU, without samples) say the thread runs."""
    return "cpu_bound" if w.spinning else None


def waits_for_child(w: MainWait) -> Optional[str]:
    """wait4, waitid or waitpid: a parent waiting for a child to exit."""
    waiting = w.syscall in _WAIT_SYSCALLS or w.wchan in ("do_wait", "kernel_wait4")
    return "child_wait" if waiting else None


def sleeps(w: MainWait) -> Optional[str]:
    """nanosleep or clock_nanosleep."""
    return "sleeping" if w.syscall in _SLEEP_SYSCALLS or "nanosleep" in w.wchan else None


def futex(w: MainWait) -> Optional[str]:
    """A futex: a threading lock, a join, a queue (or the GIL)."""
    return "lock_wait" if w.syscall in _LOCK_SYSCALLS or w.wchan.startswith("futex") else None


def local_socket_to_own_tree(w: MainWait) -> Optional[str]:
    """A local socket (socketpair, multiprocessing connection) into the job's own tree is a
    wait on that process, not on a network (a stopped DataLoader worker was once blamed on
    the proxy)."""
    main = _main(w.evidence)
    unix = main.get("fd_family") == "unix" or w.wchan.startswith("unix_")
    own = _peer_child(w.evidence) or w.evidence.get("children")
    return "child_wait" if unix and own else None


def network_socket(w: MainWait) -> Optional[str]:
    """The syscall's fd is a socket, or the wchan is a socket wait."""
    on_net = w.target.startswith("socket:") or _NET_WCHAN.search(w.wchan)
    return "network_wait" if on_net else None


def pipe(w: MainWait) -> Optional[str]:
    """A pipe: a child's output when there are children, else plain I/O."""
    if not (w.target.startswith("pipe:") or "pipe" in w.wchan):
        return None
    return "child_wait" if w.evidence.get("children") else "io_wait"


def poll(w: MainWait) -> Optional[str]:
    """poll, select or epoll: on the one live connection, else on children, else I/O."""
    if not (w.syscall in _POLL_SYSCALLS or _POLL_WCHAN.search(w.wchan)):
        return None
    if _blocking_socket(w.evidence):
        return "network_wait"
    return "child_wait" if w.evidence.get("children") else "io_wait"


def reads_a_file(w: MainWait) -> Optional[str]:
    """A read or write on a path."""
    return "io_wait" if w.syscall in _READ_SYSCALLS and w.target.startswith("/") else None


def moves_bytes(w: MainWait) -> Optional[str]:
    """At least IO_BUSY_BYTES read or written over the window."""
    io = w.evidence.get("io_delta") or {}
    moved = (io.get("read_bytes") or 0) + (io.get("write_bytes") or 0)
    return "io_wait" if moved >= IO_BUSY_BYTES else None


def busy_cpu(w: MainWait) -> Optional[str]:
    """At least CPU_BUSY of a core over the window, in whatever state it was read."""
    return "cpu_bound" if w.cpu is not None and w.cpu >= CPU_BUSY else None


# The hang kind seen from outside the interpreter (state, kernel wait, CPU, I/O, GPU),
# first match wins: the order is the judgement.
KERNEL_RULES: tuple[Callable[[MainWait], Optional[str]], ...] = (
    process_stopped,
    gpu_busy,
    disk_sleep,
    spins,
    waits_for_child,
    sleeps,
    futex,
    local_socket_to_own_tree,
    network_socket,
    pipe,
    poll,
    reads_a_file,
    moves_bytes,
    busy_cpu,
)


def _kernel_says(evidence: dict[str, Any]) -> Optional[str]:
    """A hang kind from outside the interpreter: the first of KERNEL_RULES that names one
    (none for a process that is gone)."""
    if not evidence or not evidence.get("alive", True):
        return None
    return _first_match(KERNEL_RULES, main_wait(evidence))


@dataclass(frozen=True)
class Seen:
    """What the hang kind is judged on: the facts, and what the kernel and the stack say."""

    reason: str
    frames: Sequence[Frame]
    evidence: dict[str, Any]
    saw_hello: bool
    loaded: bool  # the worker was imported (its beacon may never have spoken)
    python_silent: bool  # neither dump path answered, only the native SIGUSR2 one
    kernel: Optional[str]  # KERNEL_RULES' kind
    stack: Optional[str]  # STACK_RULES' kind


def see(
    reason: str,
    frames: Sequence[Frame],
    evidence: dict[str, Any],
    saw_hello: bool = True,
    loaded: bool = False,
    python_silent: bool = False,
) -> Seen:
    return Seen(
        reason=reason,
        frames=frames,
        evidence=evidence,
        saw_hello=saw_hello,
        loaded=loaded,
        python_silent=python_silent,
        kernel=_kernel_says(evidence),
        stack=_stack_says(frames),
    )


def stopped(s: Seen) -> Optional[str]:
    """The process is stopped: nothing else it shows means anything."""
    return "stopped" if s.kernel == "stopped" else None


def beacon_silent(s: Seen) -> Optional[str]:
    """The beacon thread could not run (silent, or no dump path answered but the native one)
    in a live process whose worker loaded: something holds the GIL, or the process froze."""
    silent = s.reason in BEACON_SILENT or s.python_silent
    live = s.evidence.get("alive", True)
    return "gil_held" if silent and (s.saw_hello or s.loaded) and live else None


def importing(s: Seen) -> Optional[str]:
    """The stack is inside importlib: a module's top level does not finish."""
    return "import_hang" if importing_module(s.frames) else None


def never_said_hello(s: Seen) -> Optional[str]:
    """The startup deadline passed before any hello."""
    return "startup" if not s.saw_hello and s.reason == "startup" else None


def file_lock_held(s: Seen) -> Optional[str]:
    """Another process holds a lock on a file the main thread waits for."""
    return "file_lock_wait" if _file_lock(s.evidence, s.kernel, s.stack) is not None else None


def stack_names_the_futex(s: Seen) -> Optional[str]:
    """A Python-level wait the kernel sees as a futex is still a lock unless the stack names
    the real thing (a queue fed by a child, a socket with a timeout loop, a sleep)."""
    named = s.kernel == "lock_wait" and s.stack in ("child_wait", "network_wait", "sleeping")
    return s.stack if named else None


def stack_names_the_poll(s: Seen) -> Optional[str]:
    """A child or I/O wait whose stack is in a network library waits on the network; an I/O
    wait whose stack waits on a child waits on the child."""
    named = (s.kernel in ("child_wait", "io_wait") and s.stack == "network_wait") or (
        s.kernel == "io_wait" and s.stack == "child_wait"
    )
    return s.stack if named else None


def kernel_decides(s: Seen) -> Optional[str]:
    return s.kernel


def stack_decides(s: Seen) -> Optional[str]:
    return s.stack


# The hang kind, first match wins ("unknown" when none does): the order is the judgement.
HANG_RULES: tuple[Callable[[Seen], Optional[str]], ...] = (
    stopped,
    beacon_silent,
    importing,
    never_said_hello,
    file_lock_held,
    stack_names_the_futex,
    stack_names_the_poll,
    kernel_decides,
    stack_decides,
)


def hang_kind(s: Seen) -> str:
    """The first of HANG_RULES that names a kind, else "unknown"."""
    return _first_match(HANG_RULES, s) or "unknown"


_T = TypeVar("_T")


def _first_match(rules: Sequence[Callable[[_T], Optional[str]]], facts: _T) -> Optional[str]:
    for rule in rules:
        kind = rule(facts)
        if kind is not None:
            return kind
    return None


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


@dataclass(frozen=True)
class Words:
    """What a kind's words are made of: the facts, and the parts every verdict shares."""

    facts: dict[str, Any]
    evidence: dict[str, Any]
    frames: Sequence[Frame]
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
    kind = hang_kind(
        see(reason, frames, evidence, saw_hello, loaded, bool(facts.get("python_silent")))
    )
    at = where(frames)
    if kind == "lock_wait":
        chained = _chain_end(facts, evidence, frames, at)
        if chained is not None:
            return chained
    stage = facts.get("stage")
    main = _main(evidence)
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
    words = Words(facts, evidence, frames, saw_hello, at, _idle(facts), where_stage, extra)
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
    sock = _blocking_socket(w.evidence)
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


def child_wait_words(w: Words) -> dict[str, Any]:
    evidence = w.evidence
    child = _child_to_name(evidence)
    w.extra["child"] = child
    children = evidence.get("children") or []
    who = _describe_child(child, children) if child else "a child process"
    role = child_role(child, children) if child else None
    w.extra["child_role"] = role
    w.extra["via"] = "unix socket" if child is not None and child is _peer_child(evidence) else None
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
    lock = _file_lock(w.evidence, _kernel_says(w.evidence), _stack_says(w.frames)) or {}
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
    what = _kernel_says(w.evidence) or _stack_says(w.frames)
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


def lock_wait_words(w: Words) -> dict[str, Any]:
    return diag(
        "lock_wait",
        f"waiting on a lock{w.idle}{w.where} at {w.at}",
        "a lock, queue or join that nobody releases: look for a deadlock "
        "(two locks taken in opposite order, a thread that died holding one)",
        w.extra,
    )


def sleeping_words(w: Words) -> dict[str, Any]:
    return diag(
        "sleeping",
        f"sleeping{w.idle}{w.where} at {w.at}",
        "the main thread keeps sleeping: check retry/backoff or polling loops at the named frame",
        w.extra,
    )


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
    target = _main(w.evidence).get("fd_target")
    w.extra["file"] = target
    on = f" on {target}" if target else ""
    return diag(
        "io_wait",
        f"waiting for I/O{on}{w.idle}{w.where} at {w.at}",
        "disk or filesystem is slow or stuck (network mount, full disk, a FIFO): "
        "check the path and the mount",
        w.extra,
    )


def gpu_busy_words(w: Words) -> dict[str, Any]:
    return diag(
        "gpu_busy",
        f"the GPU is busy but the job reports no progress{w.idle}{w.where} at {w.at}",
        "a long or stuck kernel: check nvidia-smi, lower the work per step, or "
        "run with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
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
    "lock_wait": lock_wait_words,
    "file_lock_wait": file_lock_wait_words,
    "cpu_bound": cpu_bound_words,
    "io_wait": io_wait_words,
    "gil_held": gil_held_words,
    "child_wait": child_wait_words,
    "sleeping": sleeping_words,
    "gpu_busy": gpu_busy_words,
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
