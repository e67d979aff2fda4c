"""Diagnosis, part 3a: the hang kind (pure) -- what a live job that makes no progress waits on.

hang_kind(see(reason, frames, evidence, ...)) -> one of diagnosis_hang.HANG_KINDS. Three
ordered tables of small named rules, first match wins, and the order is the judgement (a
stopped process before a busy GPU before a socket wait before a sleep):

  KERNEL_RULES  the main thread read from outside the interpreter (MainWait: state, kernel
                wait, CPU, I/O, GPU; bridge/evidence.py gathers it)
  STACK_RULES   its Python stack alone (StackTop)
  HANG_RULES    the two weighed with the job's facts (Seen: the reason, the hello, a
                silent beacon, an import, a file lock)

Each rule is tested alone in tests/diagnosis/test_diagnosis_hang_rules.py; the verdict's words are
diagnosis_hang.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

from .diagnosis_stack import Frame, importing_module, is_library_frame

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


def main_thread(evidence: dict[str, Any]) -> dict[str, Any]:
    return evidence.get("main_thread") or {}


def blocking_socket(evidence: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The socket the main thread waits on: the one whose fd is the syscall's fd, else the
    one connection with a remote end (ESTABLISHED or connecting)."""
    sockets = [s for s in (evidence.get("sockets") or []) if s.get("raddr")]
    fd = main_thread(evidence).get("fd")
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


def peer_child(evidence: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The job process at the other end of the AF_UNIX socket the main thread reads, if any."""
    peer = (evidence.get("unix_peer") or {}).get("pid")
    if peer is None or peer == evidence.get("pid"):
        return None
    for child in evidence.get("children") or []:
        if child.get("pid") == peer:
            peer_child: dict[str, Any] = child
            return peer_child
    return None


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


def stack_says(frames: Sequence[Frame]) -> Optional[str]:
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
    main = main_thread(evidence)
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
    main = main_thread(w.evidence)
    unix = main.get("fd_family") == "unix" or w.wchan.startswith("unix_")
    own = peer_child(w.evidence) or w.evidence.get("children")
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
    if blocking_socket(w.evidence):
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


def alive_at_verdict(evidence: dict[str, Any]) -> bool:
    """The process was alive when the hang was said: alive now, or ended during the
    evidence's window (a slow snapshot that met the stop), whose first look is then judged."""
    return bool(evidence.get("alive", True) or evidence.get("ended_in_window"))


def kernel_says(evidence: dict[str, Any]) -> Optional[str]:
    """A hang kind from outside the interpreter: the first of KERNEL_RULES that names one
    (none for a process that was gone at the verdict)."""
    if not evidence or not alive_at_verdict(evidence):
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
        kernel=kernel_says(evidence),
        stack=stack_says(frames),
    )


def stopped(s: Seen) -> Optional[str]:
    """The process is stopped: nothing else it shows means anything."""
    return "stopped" if s.kernel == "stopped" else None


def beacon_silent(s: Seen) -> Optional[str]:
    """The beacon thread could not run (silent, or no dump path answered but the native one)
    in a live process whose worker loaded: something holds the GIL, or the process froze."""
    silent = s.reason in BEACON_SILENT or s.python_silent
    live = alive_at_verdict(s.evidence)
    return "gil_held" if silent and (s.saw_hello or s.loaded) and live else None


def importing(s: Seen) -> Optional[str]:
    """The stack is inside importlib: a module's top level does not finish."""
    return "import_hang" if importing_module(s.frames) else None


def never_said_hello(s: Seen) -> Optional[str]:
    """The startup deadline passed before any hello."""
    return "startup" if not s.saw_hello and s.reason == "startup" else None


def file_lock_held(s: Seen) -> Optional[str]:
    """Another process holds a lock on a file the main thread waits for."""
    return "file_lock_wait" if file_lock(s.evidence, s.kernel, s.stack) is not None else None


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


def file_lock(
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
