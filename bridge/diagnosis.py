"""Diagnosis rules: from facts about a job to one specific answer (kind, summary, hint).

Pure: every function takes values (dicts, strings) and returns values. The evidence is
gathered elsewhere (bridge/evidence.py); the job's end and hang facts come from the client.
This is the seeds' three-layer method automated: (1) the blocking direction judged from
outside (kernel wait, CPU, I/O, sockets, children, GPU), (2) the stage with an enter and no
exit plus the blocking frame from the main thread's Python stack, (3) the environment facts
that the hint points at.

A diagnosis is a dict: {"kind", "summary", "hint", "evidence"}; summary and hint are one
ASCII-safe line each (the report is ASCII JSON; non-ASCII text is kept by the JSON escape).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

Frame = Dict[str, Any]  # {"file": str, "line": int, "function": str}

END_KINDS = ("python_exception", "cuda_oom", "native_crash", "killed", "oom_killed",
             "exit_nonzero")
HANG_KINDS = ("network_wait", "lock_wait", "cpu_bound", "io_wait", "gil_held", "child_wait",
              "sleeping", "gpu_busy", "import_hang", "startup", "stopped", "unknown")

NATIVE_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT"})
_SIGNAL_WORDS = {
    "SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGILL": "illegal instruction",
    "SIGFPE": "floating point exception", "SIGABRT": "abort",
}

# --- Python stack text ------------------------------------------------------------------
# Three formats reach us: traceback ('File "x.py", line 3, in f', innermost last),
# faulthandler ('File "x.py", line 3 in f', innermost first) and py-spy ('f (x.py:3)',
# innermost first). Every parser below returns frames innermost LAST, like the protocol's
# error.frames.
_TB_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_FH_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>.+?)\s*$')
_PYSPY_FRAME = re.compile(r'^\s+(?P<func>\S[^()]*?) \((?P<file>[^()]+?):(?P<line>\d+)\)\s*$')
_HEADER = re.compile(r"^(?:Current thread|Thread|Traceback|Stack|Process|#|---|===)|:\s*$")


def _split_blocks(text: str) -> List[Tuple[str, List[str]]]:
    """Split a dump into (header, lines) per thread. A header is an unindented line."""
    blocks: List[Tuple[str, List[str]]] = []
    header, lines = "", []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if not raw[0].isspace() and _HEADER.search(raw) and not _TB_FRAME.match(raw) \
                and not _FH_FRAME.match(raw):
            if lines or header:
                blocks.append((header, lines))
            header, lines = raw.strip(), []
        else:
            lines.append(raw)
    if lines or header:
        blocks.append((header, lines))
    return blocks


def _frames_of_block(header: str, lines: Sequence[str]) -> List[Frame]:
    frames: List[Frame] = []
    innermost_first = None
    for line in lines:
        for pattern, first in ((_TB_FRAME, False), (_FH_FRAME, True), (_PYSPY_FRAME, True)):
            m = pattern.match(line)
            if m:
                frames.append({"file": m["file"], "line": int(m["line"]),
                               "function": m["func"]})
                if innermost_first is None:
                    innermost_first = first
                break
    if "most recent call first" in header:
        innermost_first = True
    elif "most recent call last" in header:
        innermost_first = False
    if innermost_first:
        frames.reverse()
    return frames


def parse_stack(text: Optional[str], prefer: str = "main") -> List[Frame]:
    """Frames (innermost last) of one thread in a stack dump.

    prefer="main": the thread named MainThread, else the last thread in the dump
    (faulthandler and threading list the oldest thread, the main one, last).
    prefer="current": the faulthandler "Current thread" (the one that crashed)."""
    if not text:
        return []
    blocks = [(h, _frames_of_block(h, ls)) for h, ls in _split_blocks(text)]
    blocks = [(h, f) for h, f in blocks if f]
    if not blocks:
        return []
    if prefer == "current":
        for header, frames in blocks:
            if header.startswith("Current thread"):
                return frames
    for header, frames in blocks:
        if "MainThread" in header:
            return frames
    return blocks[-1][1]


def format_frame(frame: Optional[Frame]) -> str:
    """'file:line function' with the file shortened to its last two path parts."""
    if not frame:
        return "an unknown frame"
    where = f"{short_path(frame.get('file', '?'))}:{frame.get('line', '?')}"
    return f"{where} {frame.get('function', '?')}"


def short_path(path: str) -> str:
    parts = str(path).replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] else parts[-1]


_LIBRARY_MARKERS = ("/lib/python", "site-packages", "dist-packages", "<frozen", "/worker/",
                    "/bridge/", "<string>")


def is_library_frame(frame: Frame) -> bool:
    path = str(frame.get("file", "")).replace("\\", "/")
    return any(m in path for m in _LIBRARY_MARKERS)


def user_frame(frames: Sequence[Frame]) -> Optional[Frame]:
    """The innermost frame in the user's own code (not the stdlib, site-packages, us)."""
    for frame in reversed(frames):
        if not is_library_frame(frame):
            return frame
    return None


def where(frames: Sequence[Frame]) -> str:
    """'train.py:12 load' or 'socket.py:706 readinto (from train.py:12 load)'."""
    if not frames:
        return "an unknown frame (no Python stack)"
    inner, mine = frames[-1], user_frame(frames)
    if mine is None or mine is inner:
        return format_frame(inner)
    return f"{format_frame(inner)} (from {format_frame(mine)})"


def _frame_fields(frames: Sequence[Frame]) -> Dict[str, Any]:
    inner, mine = (frames[-1] if frames else None), user_frame(frames)
    return {"frame": format_frame(inner) if inner else None,
            "user_frame": format_frame(mine) if mine else None}


# --- imports ----------------------------------------------------------------------------
def importing_module(frames: Sequence[Frame]) -> Optional[str]:
    """The module being imported when the stack is inside importlib, else None.

    Names the innermost module whose top level (a "<module>" frame) runs under an
    importlib._bootstrap frame: that is the import that has not finished."""
    in_import = False
    name = None
    for frame in frames:  # outermost first
        fname = str(frame.get("file", ""))
        if "importlib._bootstrap" in fname or "importlib/_bootstrap" in fname:
            in_import = True
            continue
        if in_import and frame.get("function") == "<module>":
            name = module_name(fname)
    if in_import and name is None:
        return "an unknown module"
    return name


def module_name(path: str) -> str:
    parts = str(path).replace("\\", "/").split("/")
    stem = parts[-1]
    if stem in ("__init__.py", "__init__.pyc") and len(parts) > 1:
        return parts[-2]
    return re.sub(r"\.(py|pyc|so|pyd)$", "", stem)


# --- ends -------------------------------------------------------------------------------
_CUDA_OOM_TEXT = re.compile(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError",
                            re.IGNORECASE)
_TB_LAST_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)"
                           r"|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(?P<msg>.*))?$")


def _one_line(text: Any, limit: int = 200) -> str:
    s = " ".join(str(text if text is not None else "").split())
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _last_line(log_tail: Optional[Sequence[str]]) -> Optional[str]:
    for line in reversed(list(log_tail or [])):
        if str(line).strip():
            return _one_line(line)
    return None


def traceback_in_text(lines: Optional[Sequence[str]]) -> Optional[Dict[str, Any]]:
    """The last Python traceback printed in output lines: {type, message, frames}.

    Used when the script never imported the worker, so no error message came over the
    wire; the traceback on stderr is still the best word on what happened."""
    lines = [str(x) for x in (lines or [])]
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            start = i
            break
    if start is None:
        return None
    frames: List[Frame] = []
    exc_type, message = None, ""
    for line in lines[start + 1:]:
        m = _TB_FRAME.match(line)
        if m:
            frames.append({"file": m["file"], "line": int(m["line"]), "function": m["func"]})
            continue
        if line.startswith((" ", "\t")) or not line.strip():
            continue
        t = _TB_LAST_LINE.match(line.strip())
        if t:
            exc_type, message = t["type"], t["msg"] or ""
            break
    if exc_type is None:
        return None
    return {"type": exc_type, "message": message, "frames": frames}


def _is_cuda_oom(error: Optional[Dict[str, Any]], log_tail: Optional[Sequence[str]]) -> bool:
    if error:
        if error.get("kind") == "cuda_oom":
            return True
        if _CUDA_OOM_TEXT.search(f"{error.get('type', '')} {error.get('message', '')}"):
            return True
    return any(_CUDA_OOM_TEXT.search(str(line)) for line in (log_tail or [])[-50:])


def _error_frames(error: Optional[Dict[str, Any]]) -> List[Frame]:
    if not error:
        return []
    frames = [f for f in (error.get("frames") or []) if isinstance(f, dict)]
    if frames:
        return frames
    return parse_stack(error.get("traceback"))


def _in_stage(stage: Optional[str]) -> str:
    return f" in stage '{stage}'" if stage else ""


def _stuck_bar(progress: Optional[Dict[str, Any]]) -> str:
    """Name the progress bar that stopped (zero-code tqdm bars carry their description, e.g.
    a huggingface_hub download's file name), so 'download stuck at 0 B/s' names the file."""
    metrics = (progress or {}).get("metrics") or {}
    bar = metrics.get("bar")
    if not bar:
        return ""
    total = progress.get("total")
    count = f"{progress.get('step')}/{total}" if total is not None else f"{progress.get('step')}"
    return f" (its bar '{bar}' stopped at {count} {metrics.get('unit') or 'it'})"


def diagnose_end(facts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Why a process ended; None for a clean success. See the module docstring for shape.

    facts (all optional): outcome, exit_code, signal ("SIGSEGV" or None), error (the
    worker's error body), saw_bye, crash_text, log_tail, stage, oom_killed, pid."""
    exit_code = facts.get("exit_code")
    signal = facts.get("signal")
    error = facts.get("error") or None
    log_tail = list(facts.get("log_tail") or [])
    # The error knows the stage it was raised in; the client's last stage may be an outer
    # one (the inner stage closed with status "error" while the exception unwound).
    stage = (error or {}).get("stage") or facts.get("stage")
    last = _last_line(log_tail)
    outcome = facts.get("outcome")
    evidence: Dict[str, Any] = {"exit_code": exit_code, "signal": signal, "stage": stage,
                                "last_line": last}
    # A fatal error event decides the end even when the exit status is 0 (issue 3's rule);
    # SystemExit is an exit status, not an exception.
    fatal_error = bool(error) and bool(error.get("fatal", True)) and \
        error.get("kind") != "system_exit"
    ended_badly = fatal_error or exit_code not in (0, None) or bool(signal)

    if outcome == "cancelled":
        return None
    if ended_badly and _is_cuda_oom(error if fatal_error else None, log_tail):
        frames = _error_frames(error) or (traceback_in_text(log_tail) or {}).get("frames", [])
        message = _one_line((error or {}).get("message") or _oom_line(log_tail), 160)
        evidence.update(_frame_fields(frames))
        return _diag("cuda_oom",
                     f"CUDA out of memory{_in_stage(stage)} at {where(frames)}: {message}",
                     "lower the batch size or sequence length, enable gradient checkpointing "
                     "or mixed precision, or free other jobs on the GPU (nvidia-smi)",
                     evidence)
    if facts.get("oom_killed"):
        return _diag("oom_killed",
                     f"killed by the kernel's out-of-memory killer{_in_stage(stage)} "
                     f"(signal {signal or 'SIGKILL'})",
                     "the job ran out of host RAM: lower the batch size or DataLoader "
                     "num_workers / prefetch, or raise the memory limit",
                     {**evidence, "oom_killed": True})
    if signal in NATIVE_SIGNALS:
        text = facts.get("crash_text") or "\n".join(log_tail)
        frames = parse_stack(text, prefer="current")
        evidence.update(_frame_fields(frames))
        evidence["crash_text_present"] = bool(facts.get("crash_text"))
        word = _SIGNAL_WORDS.get(signal, signal)
        hint = ("a crash in native code (C/C++/CUDA extension, ctypes): check that torch, "
                "CUDA and extension versions match; run with CUDA_LAUNCH_BLOCKING=1 "
                "to find the failing call")
        if signal == "SIGABRT":
            hint = ("the process aborted (a C/C++ assertion, abort() or a fatal error in an "
                    "extension): read the last output lines and check library versions")
        return _diag("native_crash",
                     f"native crash: {signal} ({word}){_in_stage(stage)} at {where(frames)}",
                     hint, evidence)
    if signal == "SIGKILL":
        return _diag("killed",
                     f"killed by SIGKILL{_in_stage(stage)}; last output: {last or '(none)'}",
                     "something outside the job sent SIGKILL (a user, a scheduler, a "
                     "container limit, or the OOM killer when the cgroup cannot tell): check "
                     "dmesg, the scheduler's log and memory limits", evidence)
    if signal:
        return _diag("killed",
                     f"terminated by {signal}{_in_stage(stage)}; last output: {last or '(none)'}",
                     f"something outside the job sent {signal}: check who stops jobs here "
                     "(a scheduler, a terminal closing, a service manager)", evidence)
    if fatal_error:
        frames = _error_frames(error)
        evidence.update(_frame_fields(frames))
        evidence["type"] = error.get("type")
        message = _one_line(error.get("message"), 160)
        thread = error.get("thread")
        in_thread = f" in thread {thread}" if thread and thread != "MainThread" else ""
        return _diag("python_exception",
                     f"{error.get('type', 'Exception')}: {message}{_in_stage(stage)}{in_thread} "
                     f"at {where(frames)}",
                     "fix the error raised at "
                     f"{format_frame(user_frame(frames) or (frames[-1] if frames else None))}"
                     "; the full traceback is in the report's error field", evidence)
    if exit_code not in (0, None):
        printed = traceback_in_text(log_tail)
        if printed and not error:
            frames = printed["frames"]
            evidence.update(_frame_fields(frames))
            evidence["type"] = printed["type"]
            return _diag("python_exception",
                         f"{printed['type']}: {_one_line(printed['message'], 160)}"
                         f"{_in_stage(stage)} at {where(frames)} (from the traceback on stderr)",
                         "fix the error at the named frame; the traceback is in the log tail",
                         evidence)
        bye = facts.get("bye") or {}
        bye_reason = facts.get("bye_reason") or bye.get("reason")
        hint = ("the script chose to exit with an error status: read the last output lines "
                "for its reason")
        reason = ""
        if error and error.get("kind") == "system_exit":
            frames = _error_frames(error)
            evidence.update(_frame_fields(frames))
            at = f" at {where(frames)}" if frames else ""
            reason = f" from sys.exit({_one_line(error.get('message'), 80)!r}){at}"
        elif bye_reason == "sys_exit":
            reason = f" from sys.exit({exit_code})"
        elif not facts.get("saw_bye"):
            reason = " with no last words (os._exit or exit from native code)"
            hint = ("the process left without Python's shutdown (os._exit, exit() in native "
                    "code, a library calling _exit): search for those calls near the last "
                    "output line")
        return _diag("exit_nonzero",
                     f"exited with status {exit_code}{reason}{_in_stage(stage)}; "
                     f"last output: {last or '(none)'}", hint, evidence)
    return None


def _oom_line(log_tail: Sequence[str]) -> str:
    for line in reversed(list(log_tail)):
        if _CUDA_OOM_TEXT.search(str(line)):
            return str(line)
    return ""


def _diag(kind: str, summary: str, hint: str, evidence: Dict[str, Any]) -> Dict[str, Any]:
    return {"kind": kind, "summary": _one_line(summary, 400), "hint": _one_line(hint, 300),
            "evidence": evidence}


# --- hangs ------------------------------------------------------------------------------
# Kernel waits, by the main thread's syscall name and wchan (bridge/evidence.py maps
# syscall numbers to names). Socket and pipe reads share syscalls; the fd's target (from
# /proc/<pid>/fd) tells them apart.
_SLEEP_SYSCALLS = frozenset({"nanosleep", "clock_nanosleep"})
_LOCK_SYSCALLS = frozenset({"futex", "futex_waitv"})
_WAIT_SYSCALLS = frozenset({"wait4", "waitid", "waitpid"})
_POLL_SYSCALLS = frozenset({"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait",
                            "epoll_pwait2"})
_READ_SYSCALLS = frozenset({"read", "readv", "pread64", "preadv", "preadv2", "recvfrom",
                            "recvmsg", "recvmmsg", "connect", "accept", "accept4", "write",
                            "writev", "sendto", "sendmsg", "pwrite64", "fsync", "fdatasync"})
_NET_WCHAN = re.compile(r"sk_wait|tcp_|inet_|sock_|wait_woken|unix_stream")
_IO_WCHAN = re.compile(r"io_schedule|folio_wait|wait_on_page|nfs|fuse|blk|jbd2|ext4|xfs|btrfs")
_LOCK_FUNCS = frozenset({"acquire", "wait", "_wait_for_tstate_lock", "join", "get", "put",
                         "__enter__"})
_NET_FILES = ("socket.py", "ssl.py", "http/client.py", "urllib3", "requests", "httpx",
              "huggingface_hub", "aiohttp", "selectors.py", "asyncio")
_CHILD_FILES = ("subprocess.py", "multiprocessing", "popen_fork.py", "torch/utils/data")

# Hang reasons (bridge/machine.py names first) that mean the worker's beacon went quiet.
BEACON_SILENT = frozenset({"heartbeat", "heartbeat_silence"})

CPU_BUSY = 0.5       # fraction of one core over the window: the main work is computing
# On a loaded machine a spinning thread gets a small share of a core, and a spinning Python
# thread also waits for the GIL (a futex, state S) whenever the beacon thread runs; but a
# thread blocked in a call is never runnable. Measured here under load: a CPU loop showed
# 16 % of a core and 40 % runnable samples, another 54 % and 96 % but its last syscall read
# caught it in the GIL's futex; a sleeping or blocked main thread shows 0 %.
RUNNABLE_BUSY = 0.3  # fraction of state samples in R
CPU_SOME = 0.05
GPU_BUSY = 50        # percent utilisation: the GPU is the thing that is busy
IO_BUSY_BYTES = 1 << 20  # bytes per window that count as "doing I/O"


def _main(evidence: Dict[str, Any]) -> Dict[str, Any]:
    return evidence.get("main_thread") or {}


def _remote(conn: Dict[str, Any]) -> str:
    raddr = conn.get("raddr") or ""
    if isinstance(raddr, (list, tuple)) and len(raddr) == 2:
        host, port = raddr
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(raddr) or "an unknown peer"


def _blocking_socket(evidence: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The socket the main thread waits on: the one whose fd is the syscall's fd, else the
    one connection with a remote end (ESTABLISHED or connecting)."""
    sockets = [s for s in (evidence.get("sockets") or []) if s.get("raddr")]
    fd = _main(evidence).get("fd")
    for sock in sockets:
        if fd is not None and sock.get("fd") == fd:
            return sock
    live = [s for s in sockets if s.get("status") in ("ESTABLISHED", "SYN_SENT", "CLOSE_WAIT")
            and s.get("pid") in (None, evidence.get("pid"))]
    return live[0] if live else (sockets[0] if sockets else None)


def _child_to_name(evidence: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    children = evidence.get("children") or []
    for child in children:  # a stopped or dead child is the likely culprit
        if child.get("status") in ("stopped", "tracing-stop", "zombie", "dead", "disk-sleep"):
            return child
    return children[0] if children else None


def _describe_child(child: Dict[str, Any]) -> str:
    return f"child pid {child.get('pid')} ({child.get('name') or '?'}, {child.get('status') or '?'})"


def _stack_says(frames: Sequence[Frame]) -> Optional[str]:
    """A hang kind from the Python stack alone (when kernel evidence is missing)."""
    if not frames:
        return None
    inner = frames[-1]
    func, path = str(inner.get("function", "")), str(inner.get("file", "")).replace("\\", "/")
    files = " ".join(str(f.get("file", "")) for f in frames[-4:])
    if func == "sleep":
        return "sleeping"
    if any(k in files for k in _CHILD_FILES) and func in ("wait", "_wait", "poll", "_try_wait",
                                                          "communicate", "join", "recv",
                                                          "_recv", "_recv_bytes", "get"):
        return "child_wait"
    if any(k in path for k in _NET_FILES) or func in ("recv", "recv_into", "readinto",
                                                      "connect", "create_connection",
                                                      "getaddrinfo", "accept"):
        return "network_wait"
    if func in _LOCK_FUNCS and ("threading.py" in path or "queue.py" in path or
                                not is_library_frame(inner)):
        return "lock_wait"
    return None


def _kernel_says(evidence: Dict[str, Any]) -> Optional[str]:
    """A hang kind from outside the interpreter: state, kernel wait, CPU, I/O, GPU."""
    if not evidence or not evidence.get("alive", True):
        return None
    main = _main(evidence)
    status = evidence.get("status")
    syscall = main.get("syscall") or ""
    wchan = main.get("wchan") or ""
    target = str(main.get("fd_target") or "")
    cpu = evidence.get("cpu_fraction")
    io = evidence.get("io_delta") or {}
    if status in ("stopped", "tracing-stop"):
        return "stopped"
    gpus = evidence.get("gpu") or []
    if any((g.get("util_percent") or 0) >= GPU_BUSY and g.get("used_by_job", True)
           for g in gpus if isinstance(g, dict)):
        return "gpu_busy"
    if status == "disk-sleep" or _IO_WCHAN.search(wchan):
        return "io_wait"
    runnable = main.get("runnable_fraction")
    # "running" in /proc/.../syscall: caught executing user code, not waiting in the kernel.
    in_user_code = syscall in ("", "running") or main.get("state") in (None, "R")
    if runnable is not None:
        # The samples over the window judge the main thread; the one syscall read at the
        # end may well catch a spinning thread waiting for the GIL (a futex).
        spinning = (cpu or 0) >= CPU_SOME and (runnable >= RUNNABLE_BUSY or (
            in_user_code and runnable > 0))
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
    if target.startswith("socket:") or _NET_WCHAN.search(wchan):
        return "network_wait"
    if target.startswith("pipe:") or "pipe" in wchan:
        return "child_wait" if evidence.get("children") else "io_wait"
    if syscall in _POLL_SYSCALLS:
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


def _hang_kind(reason: str, frames: Sequence[Frame], evidence: Dict[str, Any],
               saw_hello: bool, python_silent: bool = False) -> str:
    kernel, stack = _kernel_says(evidence), _stack_says(frames)
    if kernel == "stopped":
        return "stopped"
    if (reason in BEACON_SILENT or python_silent) and saw_hello and evidence.get("alive", True):
        # The beacon thread could not run: something holds the GIL (or the process froze).
        return "gil_held"
    if importing_module(frames):
        return "import_hang"
    if not saw_hello and reason == "startup":
        return "startup"
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


def _idle(facts: Dict[str, Any]) -> str:
    idle = facts.get("idle_s")
    # A beat sent just before the hang says ~0 s: a number that small informs nobody.
    return f" for {idle:.0f} s" if isinstance(idle, (int, float)) and idle >= 1 else ""


def diagnose_hang(facts: Dict[str, Any]) -> Dict[str, Any]:
    """Why a job that is still alive makes no progress. Always returns a diagnosis.

    facts: reason (startup | stage_budget | stall | heartbeat | after_bye; heartbeat_silence
    is read as heartbeat), stage, stages,
    idle_s, stack (main thread's Python stack from a heartbeat), stacks (dump text or
    faulthandler text), saw_hello, python_silent (neither the in-band dump nor the SIGUSR1
    handler answered, so the native SIGUSR2 dump was taken: nothing runs Python), evidence
    (bridge.evidence.collect's dict), progress (the last {step, total, metrics}: a tqdm bar's
    name is quoted)."""
    reason = facts.get("reason") or "stall"
    evidence = dict(facts.get("evidence") or {})
    saw_hello = bool(facts.get("saw_hello", True))
    frames = parse_stack(facts.get("stack")) or parse_stack(facts.get("stacks")) \
        or parse_stack(evidence.get("py_spy"))
    stage = facts.get("stage")
    kind = _hang_kind(reason, frames, evidence, saw_hello, bool(facts.get("python_silent")))
    at = where(frames)
    idle = _idle(facts)
    main = _main(evidence)
    kernel_wait = main.get("wchan") or main.get("syscall")
    extra = {"reason": reason, "stage": stage, "stages": facts.get("stages"),
             "idle_s": facts.get("idle_s"), "kernel_wait": kernel_wait,
             "cpu_fraction": evidence.get("cpu_fraction"), **_frame_fields(frames),
             "os": _trim(evidence)}
    where_stage = _in_stage(stage) + _stuck_bar(facts.get("progress"))
    if reason == "after_bye":
        # The script finished (bye) but the process did not exit: say so before the cause.
        where_stage += " after the script said bye (a non-daemon thread or atexit handler)"

    if kind == "network_wait":
        sock = _blocking_socket(evidence)
        remote = _remote(sock) if sock else "a remote host"
        extra["remote"] = remote if sock else None
        extra["socket_status"] = sock.get("status") if sock else None
        verb = "connecting to" if sock and sock.get("status") == "SYN_SENT" else "reading from"
        return _diag(kind, f"blocked {verb} {remote}{idle}{where_stage} at {at}",
                     f"blocked {verb} {remote}{idle}: check HTTPS_PROXY / HF_ENDPOINT, the "
                     "server, or go offline (HF_HUB_OFFLINE=1); put a timeout on the call",
                     extra)
    if kind == "child_wait":
        child = _child_to_name(evidence)
        extra["child"] = child
        who = _describe_child(child) if child else "a child process"
        state_hint = ""
        if child and child.get("status") in ("stopped", "tracing-stop"):
            state_hint = f"{who} is stopped (SIGSTOP or a debugger): resume it with kill -CONT " \
                         f"{child.get('pid')} or find who stopped it"
        elif child and child.get("status") == "zombie":
            state_hint = f"{who} has exited but nobody collected it: the worker died; check its output"
        else:
            state_hint = f"{who} is not answering: check its stack (py-spy dump --pid " \
                         f"{child.get('pid') if child else '?'}) or use " \
                         "DataLoader(num_workers=0) to rule it out"
        return _diag(kind, f"waiting{idle} on {who}{where_stage} at {at}", state_hint, extra)
    if kind == "import_hang":
        module = importing_module(frames)
        extra["module"] = module
        never = "" if saw_hello else "; never said hello"
        return _diag(kind, f"stuck importing {module}{idle}{never}{where_stage} at {at}",
                     f"the import of {module} does not finish: run python -X importtime -c "
                     f"'import {module}' to see where, and check the network, CUDA init and "
                     "lock files it may wait on", extra)
    if kind == "startup":
        what = _kernel_says(evidence) or _stack_says(frames)
        extra["blocking"] = what
        doing = f" (main thread {what.replace('_', ' ')})" if what else ""
        at_text = f" at {at}" if frames else ""
        look = "check what the named frame waits on" if frames else \
            "install py-spy (pip install py-spy) to see the frame it is stuck in"
        return _diag(kind, f"never said hello{idle}{doing}{at_text}",
                     "the script did not reach the worker's hello: "
                     "from trainbridge import worker (or run it "
                     f"under trainbridge's zero-code mode) before heavy imports, and {look}",
                     extra)
    if kind == "gil_held":
        busy = evidence.get("cpu_fraction")
        doing = "spinning in native code" if busy is not None and busy >= CPU_BUSY \
            else "blocked in native code"
        return _diag(kind, f"beacon silent{idle} while the process lives: the GIL is held, "
                           f"{doing}{where_stage} at {at}",
                     "a C extension or ctypes call holds the GIL: release it around long "
                     "calls (ctypes.CDLL instead of PyDLL, Py_BEGIN_ALLOW_THREADS), or check "
                     "the named frame", extra)
    if kind == "lock_wait":
        return _diag(kind, f"waiting on a lock{idle}{where_stage} at {at}",
                     "a lock, queue or join that nobody releases: look for a deadlock "
                     "(two locks taken in opposite order, a thread that died holding one)",
                     extra)
    if kind == "sleeping":
        return _diag(kind, f"sleeping{idle}{where_stage} at {at}",
                     "the main thread keeps sleeping: check retry/backoff or polling loops at "
                     "the named frame", extra)
    if kind == "cpu_bound":
        return _diag(kind, f"computing without progress{idle} (CPU {_pct(evidence)}){where_stage} "
                           f"at {at}",
                     "busy on the CPU but not reporting progress: an infinite loop, or slow "
                     "preprocessing; report progress inside it or profile the named frame",
                     extra)
    if kind == "io_wait":
        target = main.get("fd_target")
        extra["file"] = target
        on = f" on {target}" if target else ""
        return _diag(kind, f"waiting for I/O{on}{idle}{where_stage} at {at}",
                     "disk or filesystem is slow or stuck (network mount, full disk, a FIFO): "
                     "check the path and the mount", extra)
    if kind == "gpu_busy":
        return _diag(kind, f"the GPU is busy but the job reports no progress{idle}{where_stage} at {at}",
                     "a long or stuck kernel: check nvidia-smi, lower the work per step, or "
                     "run with CUDA_LAUNCH_BLOCKING=1 to find the kernel", extra)
    if kind == "stopped":
        return _diag(kind, f"the process is stopped (SIGSTOP or a debugger){idle}{where_stage} at {at}",
                     f"resume it with kill -CONT {evidence.get('pid', '<pid>')} or find who "
                     "stopped it", extra)
    return _diag("unknown", f"no progress{idle}{where_stage} at {at}; cause not recognised",
                 "read the stacks in the report; py-spy dump --pid <pid> shows native frames",
                 extra)


def _trim(evidence: Dict[str, Any], items: int = 10) -> Dict[str, Any]:
    """The OS evidence for the report, with long lists cut (a fork bomb has many children)."""
    out = {k: v for k, v in evidence.items() if k != "py_spy"}
    for key in ("sockets", "children"):
        if isinstance(out.get(key), list) and len(out[key]) > items:
            out[key + "_total"] = len(out[key])
            out[key] = out[key][:items]
    return out


def _pct(evidence: Dict[str, Any]) -> str:
    cpu = evidence.get("cpu_fraction")
    return f"{cpu * 100:.0f}%" if isinstance(cpu, (int, float)) else "?"


def kinds() -> Tuple[str, ...]:
    """Every kind a diagnosis can have (ends first)."""
    return END_KINDS + HANG_KINDS


__all__ = ("diagnose_end", "diagnose_hang", "parse_stack", "format_frame", "importing_module",
           "traceback_in_text", "kinds")
