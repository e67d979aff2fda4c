"""Diagnosis, part 2: end verdicts (pure) -- why a process ended.

diagnose_end(facts) -> {"kind", "summary", "hint", "evidence"} or None for a clean success.
END_RULES is the judgement: an ordered table of small named rules over the facts (Ended),
first match wins; each rule is tested alone in tests/diagnosis/test_diagnosis_end.py. Stack and
text reading is in diagnosis_stack.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .diagnosis_stack import (
    Frame,
    diag,
    format_frame,
    frame_fields,
    in_stage,
    last_line,
    one_line,
    parse_stack,
    quote,
    traceback_in_text,
    user_frame,
    where,
)

END_KINDS = (
    "python_exception",
    "cuda_oom",
    "host_oom",
    "disk_full",
    "native_crash",
    "killed",
    "oom_killed",
    "exit_nonzero",
    "child_killed",
)

NATIVE_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT"})
_SIGNAL_WORDS = {
    "SIGSEGV": "segmentation fault",
    "SIGBUS": "bus error",
    "SIGILL": "illegal instruction",
    "SIGFPE": "floating point exception",
    "SIGABRT": "abort",
}

# --- ends -------------------------------------------------------------------------------
_CUDA_OOM_TEXT = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError", re.IGNORECASE
)


def _is_cuda_oom(error: Optional[dict[str, Any]], log_tail: Optional[Sequence[str]]) -> bool:
    if error:
        if error.get("kind") == "cuda_oom":
            return True
        if _CUDA_OOM_TEXT.search(f"{error.get('type', '')} {error.get('message', '')}"):
            return True
    return any(_CUDA_OOM_TEXT.search(str(line)) for line in (log_tail or [])[-50:])


def _error_frames(error: Optional[dict[str, Any]]) -> list[Frame]:
    if not error:
        return []
    frames = [f for f in (error.get("frames") or []) if isinstance(f, dict)]
    if frames:
        return frames
    return parse_stack(error.get("traceback"))


# torch's messages when a DataLoader worker dies: "DataLoader worker (pid 123) is killed by
# signal: Killed. " (its SIGCHLD handler, strsignal's words) and "DataLoader worker (pid(s)
# 123, 124) exited unexpectedly" (the loop that notices), usually chained.
_WORKER_DIED = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? (?P<pids>\d+(?:, \d+)*)\) "
    r"(?:is killed by signal: (?P<word>[A-Za-z ]+?)\.|exited unexpectedly)"
)
_STRSIGNAL = {
    "Killed": "SIGKILL",
    "Bus error": "SIGBUS",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Terminated": "SIGTERM",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
    "Interrupt": "SIGINT",
}


def _worker_died(
    error: Optional[dict[str, Any]], log_tail: Sequence[str]
) -> Optional[dict[str, Any]]:
    """{pids, signal} when the error (its chain, or the printed output) says a DataLoader
    worker died; the signal is None when torch only saw it exit."""
    texts = []
    if error:
        texts.append(str(error.get("message") or ""))
        texts.extend(
            str(c.get("message") or "") for c in error.get("chain") or [] if isinstance(c, dict)
        )
    texts.extend(str(line) for line in list(log_tail)[-200:])
    found: Optional[dict[str, Any]] = None
    for text in texts:
        for m in _WORKER_DIED.finditer(text):
            sig = _STRSIGNAL.get(m["word"], m["word"]) if m["word"] else None
            if found is None:
                found = {"pids": m["pids"], "signal": sig}
            elif sig and not found["signal"]:
                found["signal"] = sig
    return found


def _worker_died_hint(signal: Optional[str], oom_kills: Optional[int]) -> str:
    memory = "lower num_workers, prefetch_factor or the batch size, or raise the memory limit"
    if signal == "SIGKILL" or signal is None:
        if oom_kills:
            return (
                f"the kernel's OOM killer killed it (the job's memory cgroup counted "
                f"{oom_kills} OOM kill(s) during the job): the workers ran out of host "
                f"RAM; {memory}"
            )
        if oom_kills == 0 and signal:
            return (
                "the job's memory cgroup logged no OOM kill: check dmesg for the host's "
                "OOM killer and who else kills processes here; num_workers too high for "
                f"the memory is the usual cause ({memory})"
            )
        if signal:
            return (
                "likely the OOM killer (dmesg | grep -i 'killed process') or num_workers "
                f"too high for the memory: {memory}"
            )
        return (
            "the worker exited without a word: run with DataLoader(num_workers=0) to see "
            "its error in the main process, and check dmesg for the OOM killer"
        )
    if signal == "SIGBUS":
        return (
            "out of shared memory (/dev/shm), which workers use to pass batches: raise "
            "it (docker run --shm-size=8g) or lower num_workers / the batch size"
        )
    return (
        "a crash inside the worker (a dataset transform, an image decoder, a native "
        "extension): run with DataLoader(num_workers=0) to see it in the main process"
    )


def stage_at_end(
    stages: Sequence[dict[str, Any]], error: Optional[dict[str, Any]] = None
) -> Optional[str]:
    """The job's stage when it ended: where a fatal error was raised, else the innermost stage
    still open, else the innermost stage the end unwound through (closed with status "error"
    after the last stage began), else the last stage to close -- never merely the last one
    that began ("import numpy", long finished, was once named for an error in "main").

    stages: records in begin order {name, status: running|ok|error, began, closed}; began and
    closed number the begin and end messages in the order the client received them (times
    would mix the worker's clock with message latency, and two clients could disagree)."""
    if error and error.get("stage") and error.get("fatal", True):
        return str(error["stage"])
    if not stages:
        return None
    open_ = [s for s in stages if s.get("status") == "running"]
    if open_:
        return str(open_[-1]["name"])
    if not all(
        isinstance(s.get("began"), int) and isinstance(s.get("closed"), int) for s in stages
    ):
        return str(stages[-1]["name"])
    last_begin = max(s["began"] for s in stages)
    unwound = [s for s in stages if s.get("status") == "error" and s["closed"] > last_begin]
    if unwound:
        return str(min(unwound, key=lambda s: s["closed"])["name"])
    return str(max(stages, key=lambda s: s["closed"])["name"])


# A resource that ran out, raised as a library's generic error: the words of
# the allocators and of the kernel's errno, as Python, torch and numpy print them.
_HOST_OOM_TEXT = re.compile(
    r"\bMemoryError\b|DefaultCPUAllocator: can't allocate memory|std::bad_alloc|"
    r"Cannot allocate memory|Unable to allocate [\d.]+ [KMGT]i?B"
)
_DISK_FULL_TEXT = re.compile(
    r"No space left on device|Disk quota exceeded|unexpected pos \d+ vs \d+|"
    r"PytorchStreamWriter failed writing file"
)


def _says(
    pattern: re.Pattern[str], error: Optional[dict[str, Any]], log_tail: Sequence[str]
) -> bool:
    """Whether the fatal error (its type, message and chain) or, without one, the last
    output lines say what `pattern` matches."""
    if error:
        texts = [f"{error.get('type', '')}: {error.get('message', '')}"]
        texts += [
            f"{c.get('type', '')}: {c.get('message', '')}"
            for c in error.get("chain") or []
            if isinstance(c, dict)
        ]
        return any(pattern.search(str(t)) for t in texts)
    return any(pattern.search(str(line)) for line in log_tail[-50:])


def size(value: Any) -> str:
    """Bytes for people: 1.5 GiB, 320.0 MiB, 12 KiB (rounded half up)."""
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB")):
        if value >= unit:
            return f"{math.floor(value / unit * 10 + 0.5) / 10:.1f} {name}"
    return f"{math.floor(value / 1024 + 0.5)} KiB"


def _memory_words(memory: dict[str, Any]) -> tuple[str, str]:
    """What the summary adds about the process's memory, and the hint's first advice."""
    facts = []
    as_limit, cgroup = memory.get("as_limit_bytes"), memory.get("cgroup_limit_bytes")
    if isinstance(as_limit, int):
        facts.append(f"address-space limit {size(as_limit)}, ulimit -v")
    if isinstance(cgroup, int):
        facts.append(f"memory limit of its cgroup {size(cgroup)}")
    for key, name in (("vm_bytes", "address space in use"), ("peak_rss_bytes", "peak RSS")):
        if isinstance(memory.get(key), int):
            facts.append(f"{name} {size(memory[key])}")
    if isinstance(as_limit, int):
        advice = (
            f"the process hit its address-space limit ({size(as_limit)}, ulimit -v or "
            "RLIMIT_AS): raise or remove it (ulimit -v unlimited)"
        )
    elif isinstance(cgroup, int):
        advice = (
            f"the process hit its cgroup's memory limit ({size(cgroup)}; a container or "
            "systemd limit): raise it"
        )
    else:
        advice = "the host ran out of RAM: free memory that other processes hold"
    return (f" ({'; '.join(facts)})" if facts else ""), advice


def _disk_words(disk: dict[str, Any]) -> tuple[str, str]:
    """What the summary adds about the disk written to, and the hint's first advice."""
    fs = disk.get("filesystem")
    facts = []
    if isinstance(disk.get("path"), str):
        facts.append(f"writing {disk['path']}")
    if isinstance(fs, str) and isinstance(disk.get("free_bytes"), int):
        total = disk.get("total_bytes")
        of = f" of {size(total)}" if isinstance(total, int) else ""
        facts.append(f"{fs} has {size(disk['free_bytes'])} free{of}")
    if isinstance(disk.get("unknown"), str):  # worker/exhaustion.py could not look in time
        facts.append(disk["unknown"])
    where_to = f"on {fs}" if isinstance(fs, str) else "on the disk written to"
    advice = f"free space {where_to} (old checkpoints, caches) or write to a disk with room"
    return (f" ({'; '.join(facts)})" if facts else ""), advice


# A resource that ran out, in order: (kind, the error's words, the part of the error's
# `resources` that says how much there was, its words, the summary's lead, the hint's tail).
_EXHAUSTION = (
    (
        "host_oom",
        _HOST_OOM_TEXT,
        "memory",
        _memory_words,
        "out of host memory",
        "; or make the job need less: a smaller batch or model, fewer DataLoader workers or a "
        "lower prefetch_factor, the data read lazily instead of held in memory",
    ),
    (
        "disk_full",
        _DISK_FULL_TEXT,
        "disk",
        _disk_words,
        "disk full",
        "; the file being written is likely incomplete: delete it (a checkpoint cut short "
        "does not load)",
    ),
)


@dataclass(frozen=True)
class Ended:
    """What an end is judged on: the facts, and what every rule reads of them, worked out once."""

    facts: dict[str, Any]
    exit_code: Any
    signal: Optional[str]
    error: Optional[dict[str, Any]]  # the worker's error body, fatal or not
    fatal: Optional[dict[str, Any]]  # the error when it is fatal (not SystemExit), else None
    log_tail: list[str]
    stage: Any  # the stage the error was raised in, else the client's last stage
    last: Optional[str]  # the last output line
    badly: bool  # a fatal error, a non-zero exit status or a signal

    def evidence(self) -> dict[str, Any]:
        """The evidence every end verdict carries; a rule adds its own to a fresh copy."""
        return {
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stage": self.stage,
            "last_line": self.last,
        }

    def frames(self, error: Optional[dict[str, Any]]) -> list[Frame]:
        """The frames of `error` (the error, or only a fatal one), else those of a traceback
        printed in the output."""
        frames = _error_frames(error)
        return frames or (traceback_in_text(self.log_tail) or {}).get("frames", [])


def ended(facts: dict[str, Any]) -> Ended:
    error: Optional[dict[str, Any]] = facts.get("error") or None
    log_tail = list(facts.get("log_tail") or [])
    # A fatal error event decides the end even when the exit status is 0, as it decides the
    # outcome (docs/CLIENT.md, "Outcomes"); SystemExit is an exit status, not an exception.
    fatal = (
        error
        if error is not None
        and bool(error.get("fatal", True))
        and error.get("kind") != "system_exit"
        else None
    )
    exit_code, signal = facts.get("exit_code"), facts.get("signal")
    return Ended(
        facts=facts,
        exit_code=exit_code,
        signal=signal,
        error=error,
        fatal=fatal,
        log_tail=log_tail,
        # The error knows the stage it was raised in; the client's last stage may be an
        # outer one (the inner stage closed with status "error" while the exception unwound).
        stage=(error or {}).get("stage") or facts.get("stage"),
        last=last_line(log_tail),
        badly=fatal is not None or exit_code not in (0, None) or bool(signal),
    )


def cuda_oom(e: Ended) -> Optional[dict[str, Any]]:
    """The fatal error, or the output, says CUDA ran out of memory."""
    if not (e.badly and _is_cuda_oom(e.fatal, e.log_tail)):
        return None
    frames = e.frames(e.error)
    message = quote((e.error or {}).get("message") or _oom_line(e.log_tail))
    return diag(
        "cuda_oom",
        f"CUDA out of memory{in_stage(e.stage)} at {where(frames)}: {message}",
        "lower the batch size or sequence length, enable gradient checkpointing "
        "or mixed precision, or free other jobs on the GPU (nvidia-smi)",
        {**e.evidence(), **frame_fields(frames)},
    )


def ran_out(e: Ended) -> Optional[dict[str, Any]]:
    """The first resource of _EXHAUSTION the fatal error (or, without one, the output) says
    ran out: named with what the process had of it (worker/exhaustion.py)."""
    if not e.badly:
        return None
    resources = (e.fatal or {}).get("resources")
    resources = resources if isinstance(resources, dict) else {}
    for kind, pattern, part, words, lead, tail in _EXHAUSTION:
        if not _says(pattern, e.fatal, e.log_tail):
            continue
        frames = e.frames(e.fatal)
        had: dict[str, Any] = resources[part] if isinstance(resources.get(part), dict) else {}
        details, advice = words(had)
        message = quote(_message(e.fatal, e.log_tail))
        return diag(
            kind,
            f"{lead}{in_stage(e.stage)} at {where(frames)}{details}: {message}",
            advice + tail,
            {**e.evidence(), **frame_fields(frames), part: had or None},
        )
    return None


def oom_killed(e: Ended) -> Optional[dict[str, Any]]:
    """The job's memory cgroup counted an OOM kill."""
    if not e.facts.get("oom_killed"):
        return None
    return diag(
        "oom_killed",
        f"killed by the kernel's out-of-memory killer{in_stage(e.stage)} "
        f"(signal {e.signal or 'SIGKILL'})",
        "the job ran out of host RAM: lower the batch size or DataLoader "
        "num_workers / prefetch, or raise the memory limit",
        {**e.evidence(), "oom_killed": True},
    )


def native_crash(e: Ended) -> Optional[dict[str, Any]]:
    """SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT: the crashing thread's frame from the
    faulthandler text."""
    if e.signal not in NATIVE_SIGNALS:
        return None
    text = e.facts.get("crash_text") or "\n".join(e.log_tail)
    frames = parse_stack(text, prefer="current")
    evidence = {**e.evidence(), **frame_fields(frames)}
    evidence["crash_text_present"] = bool(e.facts.get("crash_text"))
    word = _SIGNAL_WORDS.get(str(e.signal), e.signal)
    hint = (
        "a crash in native code (C/C++/CUDA extension, ctypes): check that torch, "
        "CUDA and extension versions match; run with CUDA_LAUNCH_BLOCKING=1 "
        "to find the failing call"
    )
    if e.signal == "SIGABRT":
        hint = (
            "the process aborted (a C/C++ assertion, abort() or a fatal error in an "
            "extension): read the last output lines and check library versions"
        )
    return diag(
        "native_crash",
        f"native crash: {e.signal} ({word}){in_stage(e.stage)} at {where(frames)}",
        hint,
        evidence,
    )


def sigkill(e: Ended) -> Optional[dict[str, Any]]:
    """SIGKILL from outside (no OOM kill counted)."""
    if e.signal != "SIGKILL":
        return None
    return diag(
        "killed",
        f"killed by SIGKILL{in_stage(e.stage)}; last output: {e.last or '(none)'}",
        "something outside the job sent SIGKILL (a user, a scheduler, a "
        "container limit, or the OOM killer when the cgroup cannot tell): check "
        "dmesg, the scheduler's log and memory limits",
        e.evidence(),
    )


def other_signal(e: Ended) -> Optional[dict[str, Any]]:
    """Any other signal: SIGTERM, SIGINT, SIGHUP, ..."""
    if not e.signal:
        return None
    return diag(
        "killed",
        f"terminated by {e.signal}{in_stage(e.stage)}; last output: {e.last or '(none)'}",
        f"something outside the job sent {e.signal}: check who stops jobs here "
        "(a scheduler, a terminal closing, a service manager)",
        e.evidence(),
    )


def worker_died(e: Ended) -> Optional[dict[str, Any]]:
    """torch says a DataLoader worker died (in the fatal error, its chain or the output)."""
    died = _worker_died(e.fatal, e.log_tail) if e.badly else None
    if not died:
        return None
    frames = e.frames(e.error)
    evidence = {**e.evidence(), **frame_fields(frames)}
    evidence.update(
        child_pids=died["pids"], child_signal=died["signal"], oom_kills=e.facts.get("oom_kills")
    )
    how = f"died of {died['signal']}" if died["signal"] else "exited unexpectedly"
    plural = "s" if "," in died["pids"] else ""
    return diag(
        "child_killed",
        f"a DataLoader worker (pid{plural} {died['pids']}) {how}{in_stage(e.stage)}; "
        f"the main process failed on it at {where(frames)}",
        _worker_died_hint(died["signal"], e.facts.get("oom_kills")),
        evidence,
    )


def fatal_error(e: Ended) -> Optional[dict[str, Any]]:
    """A fatal error other than SystemExit, whatever the exit status."""
    error = e.fatal
    if error is None:
        return None
    frames = _error_frames(error)
    evidence = {**e.evidence(), **frame_fields(frames), "type": error.get("type")}
    message = quote(error.get("message"))
    thread = error.get("thread")
    in_thread = f" in thread {thread}" if thread and thread != "MainThread" else ""
    return diag(
        "python_exception",
        f"{error.get('type', 'Exception')}: {message}{in_stage(e.stage)}{in_thread} "
        f"at {where(frames)}",
        f"fix the error raised at "
        f"{format_frame(user_frame(frames) or (frames[-1] if frames else None))}"
        "; the full traceback is in the report's error field",
        evidence,
    )


def printed_traceback(e: Ended) -> Optional[dict[str, Any]]:
    """A non-zero exit with no error event, and a traceback on stderr (a script without the
    worker)."""
    if e.exit_code in (0, None) or e.error:
        return None
    printed = traceback_in_text(e.log_tail)
    if not printed:
        return None
    frames = printed["frames"]
    return diag(
        "python_exception",
        f"{printed['type']}: {quote(printed['message'])}"
        f"{in_stage(e.stage)} at {where(frames)} (from the traceback on stderr)",
        "fix the error at the named frame; the traceback is in the log tail",
        {**e.evidence(), **frame_fields(frames), "type": printed["type"]},
    )


def exit_nonzero(e: Ended) -> Optional[dict[str, Any]]:
    """Any other non-zero exit: sys.exit(3), sys.exit("msg") (its message and frame), or
    os._exit (no last words)."""
    if e.exit_code in (0, None):
        return None
    evidence = e.evidence()
    bye = e.facts.get("bye") or {}
    bye_reason = e.facts.get("bye_reason") or bye.get("reason")
    hint = (
        "the script chose to exit with an error status: read the last output lines for its reason"
    )
    reason = ""
    if e.error and e.error.get("kind") == "system_exit":
        frames = _error_frames(e.error)
        evidence.update(frame_fields(frames))
        at = f" at {where(frames)}" if frames else ""
        reason = f" from sys.exit({one_line(e.error.get('message'), 80)!r}){at}"
    elif bye_reason == "sys_exit":
        reason = f" from sys.exit({e.exit_code})"
    elif not e.facts.get("saw_bye"):
        reason = " with no last words (os._exit or exit from native code)"
        hint = (
            "the process left without Python's shutdown (os._exit, exit() in native "
            "code, a library calling _exit): search for those calls near the last "
            "output line"
        )
    return diag(
        "exit_nonzero",
        f"exited with status {e.exit_code}{reason}{in_stage(e.stage)}; "
        f"last output: {e.last or '(none)'}",
        hint,
        evidence,
    )


# Why a process ended, first match wins (None: a clean success): the order is the judgement
# (CUDA's OOM before the signal that followed it, a signal before the error it caused).
END_RULES: tuple[Callable[[Ended], Optional[dict[str, Any]]], ...] = (
    cuda_oom,
    ran_out,
    oom_killed,
    native_crash,
    sigkill,
    other_signal,
    worker_died,
    fatal_error,
    printed_traceback,
    exit_nonzero,
)


def diagnose_end(facts: dict[str, Any]) -> Optional[dict[str, Any]]:
    """Why a process ended; None for a clean success or a cancelled job. See the module
    docstring for shape: the first of END_RULES that says something.

    facts (all optional): outcome, exit_code, signal ("SIGSEGV" or None), error (the
    worker's error body), saw_bye, bye, bye_reason, crash_text, log_tail, stage, oom_killed,
    oom_kills, pid."""
    if facts.get("outcome") == "cancelled":
        return None
    e = ended(facts)
    for rule in END_RULES:
        found = rule(e)
        if found is not None:
            return found
    return None


def _message(error: Optional[dict[str, Any]], log_tail: Sequence[str]) -> str:
    """The error's own words: the worker's message, else the traceback's last line."""
    if error:
        return f"{error.get('type', 'Exception')}: {error.get('message', '')}"
    printed = traceback_in_text(log_tail)
    if printed:
        return f"{printed['type']}: {printed['message']}"
    return last_line(log_tail) or ""


def _oom_line(log_tail: Sequence[str]) -> str:
    for line in reversed(list(log_tail)):
        if _CUDA_OOM_TEXT.search(str(line)):
            return str(line)
    return ""
