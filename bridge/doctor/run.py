"""Process part of `trainbridge doctor`: run probe checks in a child of the target interpreter.

Each check has its own deadline, counted from the child's "begin" line. A check that passes it
is `hung`: its stack is taken (SIGUSR1 in the child, then SIGUSR2 if no Python answered; the
dumps go to a file), the child's whole process tree is killed, and the remaining checks go on
in a fresh child, minus those that need the hung one (torch_cuda after a hung `import torch`).
A child that dies in a check makes that check `crashed`. Nothing here waits without a deadline.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from trainbridge.protocol.constants import TRAINING_PACKAGES

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
# The versions the probe's "packages" check reports: the training stack, and what the worker
# itself needs in the training interpreter (rules.packages_verdict).
PROBE_PACKAGES = (*TRAINING_PACKAGES, "nvidia-ml-py", "trainbridge", "pyzmq", "msgpack")
STDERR_KEEP = 64 * 1024
STACK_WAIT_S = 1.0  # faulthandler writes within milliseconds; a stuck write is given up on
SIGNAL_DUMP_WAIT_S = 0.2  # SIGUSR1 -> SIGUSR2: the Python handler runs within milliseconds
EXIT_WAIT_S = 2.0

DONE, HUNG, CRASHED, NOT_RUN = "done", "hung", "crashed", "not_run"


@dataclass
class CheckRun:
    name: str
    status: str  # done | hung | crashed | not_run
    facts: dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None  # traceback from the check, or why it did not finish/run
    stack: Optional[str] = None  # faulthandler dump of a hung check
    duration_s: float = 0.0


class _Child:
    """One probe process: its event queue, its stderr tail, and how to stop it."""

    def __init__(
        self,
        python: str,
        checks: Sequence[str],
        env: Mapping[str, str],
        cwd: Optional[str],
        stack_file: str,
        timeout: float,
    ):
        self.stack_file = stack_file
        child_env = dict(env)
        # Makes a hang *before* the probe runs (a sitecustomize) dumpable too: SIGABRT then
        # prints every thread's stack to stderr. It also turns a segfault into a stack.
        child_env.setdefault("PYTHONFAULTHANDLER", "1")
        self.proc = subprocess.Popen(
            [
                python,
                PROBE,
                "--checks",
                ",".join(checks),
                "--stack-file",
                stack_file,
                "--deadline",
                str(timeout),
                "--packages",
                ",".join(PROBE_PACKAGES),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            cwd=cwd,
            start_new_session=(os.name == "posix"),
        )
        try:  # the SIGABRT above must not leave a core file in the user's directory
            import resource

            resource.prlimit(self.proc.pid, resource.RLIMIT_CORE, (0, 0))
        except (ImportError, AttributeError, OSError, ValueError):
            pass
        self.events: queue.Queue[Optional[dict[str, Any]]] = queue.Queue()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        threading.Thread(target=self._read_events, daemon=True, name="doctor-events").start()
        self._stderr_done = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True, name="doctor-stderr").start()

    def _read_events(self) -> None:
        assert self.proc.stdout is not None  # spawned with pipes
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line.decode("ascii", "replace")))
            except ValueError:
                continue  # not ours: the probe writes only JSON lines on this fd
        self.events.put(None)

    def _read_stderr(self) -> None:
        stderr: Any = self.proc.stderr  # spawned with pipes: a BufferedReader (read1)
        for chunk in iter(lambda: stderr.read1(4096), b""):
            with self._stderr_lock:
                self._stderr += chunk
                del self._stderr[:-STDERR_KEEP]
        self._stderr_done.set()

    def wait_stderr(self, timeout: float) -> None:
        """Until the child's stderr pipe is read to its end (it drains once the process is
        gone), at most `timeout` s."""
        self._stderr_done.wait(timeout)

    def stderr_tail(self, limit: int = 4000) -> str:
        with self._stderr_lock:
            return self._stderr[-limit:].decode("utf-8", "backslashreplace")

    def take_stack(self, startup: bool) -> Optional[str]:
        """Ask the stuck child where it is. Before the probe has registered its SIGUSR1
        handler (startup), SIGABRT makes PYTHONFAULTHANDLER print the stack on stderr."""
        if not hasattr(signal, "SIGUSR1"):  # Windows: the probe dumped itself before the deadline
            return self._read_stack_file()
        if startup:
            mark = len(self.stderr_tail(STDERR_KEEP))
            self._signal(signal.SIGABRT)
            try:
                self.proc.wait(STACK_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
            self._stderr_done.wait(0.2)  # the pipe drains once the process is gone
            text = self.stderr_tail(STDERR_KEEP)[mark:]
            return text if "most recent call first" in text else None
        before = self._stack_size()
        self._signal(signal.SIGUSR1)
        # The probe's SIGUSR1 handler is Python: it runs unless native code holds the GIL.
        # Only then SIGUSR2, faulthandler's C dump of the main thread (it would race a thread
        # running Python, so never while one may be).
        end = time.monotonic() + SIGNAL_DUMP_WAIT_S
        while self._stack_size() == before and time.monotonic() < end:
            time.sleep(0.01)  # polling a file the signal handler writes; bounded by the wait
        if self._stack_size() == before and hasattr(signal, "SIGUSR2"):
            self._signal(signal.SIGUSR2)
        end, last, stable_since = time.monotonic() + STACK_WAIT_S, -1, time.monotonic()
        while time.monotonic() < end:
            size = self._stack_size()
            if size != last:
                last, stable_since = size, time.monotonic()
            elif size and time.monotonic() - stable_since > 0.05:
                break  # the dump stopped growing: complete
            time.sleep(0.01)  # polling a file the signal handler writes; bounded by STACK_WAIT_S
        return self._read_stack_file()

    def _stack_size(self) -> int:
        try:
            return os.path.getsize(self.stack_file)
        except OSError:
            return 0

    def _read_stack_file(self) -> Optional[str]:
        try:
            with open(self.stack_file, encoding="utf-8", errors="backslashreplace") as f:
                return f.read() or None
        except OSError:
            return None

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self.proc.pid, sig)
        except OSError:
            pass

    def kill_tree(self) -> None:
        """Kill the child and everything it started; wait for it, but not forever (a process
        stuck in the kernel, e.g. on a dead NFS mount, cannot be reaped at once)."""
        descendants = []
        try:
            import psutil

            descendants = psutil.Process(self.proc.pid).children(recursive=True)
        except Exception:  # noqa: BLE001 - no psutil or the process is gone: kill what we can
            pass
        if os.name == "posix":
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        for p in descendants:  # those that left our session
            try:
                p.kill()
            except Exception:  # noqa: BLE001 - gone already or not ours: go on with the others
                pass
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        if descendants:  # SIGKILL is not instant on a loaded machine: see them gone too
            try:
                import psutil

                psutil.wait_procs(descendants, timeout=EXIT_WAIT_S)
            except Exception:  # noqa: BLE001 - best effort: SIGKILL was sent
                pass

    def exit_text(self) -> str:
        try:
            code = self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return "did not exit"
        if code is not None and code < 0:
            try:
                return "killed by %s" % signal.Signals(-code).name
            except ValueError:
                return "killed by signal %d" % -code
        return "exited with code %s" % code


def _dependents(name: str, requires: Mapping[str, str], among: Sequence[str]) -> list[str]:
    out = []
    for check in among:
        cur = requires.get(check)
        while cur is not None:
            if cur == name:
                out.append(check)
                break
            cur = requires.get(cur)
    return out


def run_checks(
    python: str,
    checks: Sequence[str],
    timeout: float,
    env: Mapping[str, str],
    cwd: Optional[str] = None,
    requires: Optional[Mapping[str, str]] = None,
) -> dict[str, CheckRun]:
    """Run the probe checks in order, in as many children as hangs and crashes need."""
    requires = requires or {}
    results: dict[str, CheckRun] = {}
    pending = list(checks)
    tmp = tempfile.mkdtemp(prefix="trainbridge-doctor-")
    try:
        round_no = 0
        while pending:
            round_no += 1
            stack_file = os.path.join(tmp, "stack-%d.txt" % round_no)
            before = len(pending)
            pending = _one_child(python, pending, timeout, env, cwd, stack_file, results, requires)
            if len(pending) >= before:  # the child left without running anything: do not loop
                for name in pending:
                    results[name] = CheckRun(
                        name, NOT_RUN, error="the probe exited without running it"
                    )
                pending = []
    finally:
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    return results


def _one_child(
    python: str,
    pending: list[str],
    timeout: float,
    env: Mapping[str, str],
    cwd: Optional[str],
    stack_file: str,
    results: dict[str, CheckRun],
    requires: Mapping[str, str],
) -> list[str]:
    """Run `pending` in one child; returns the checks still to run in a fresh one."""
    try:
        child = _Child(python, pending, env, cwd, stack_file, timeout)
    except OSError as exc:
        reason = "cannot start %s: %s" % (python, exc)
        for name in pending:
            results[name] = CheckRun(name, NOT_RUN, error=reason)
        return []
    r = _Round(pending, results, requires)
    deadline = r.started + timeout
    try:
        while True:
            try:
                event = child.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return _after_hang(child, r, timeout)
            now = time.monotonic()
            if event is None:  # the child's result pipe closed: it exited (or closed fd)
                return _after_exit(child, r)
            kind = event.get("event")
            if kind == "ready":
                r.ready = True
            elif kind == "begin":
                r.current, r.started = event["check"], now
            elif kind == "end":
                name = event["check"]
                results[name] = CheckRun(
                    name,
                    DONE,
                    event.get("facts") or {},
                    event.get("error"),
                    duration_s=round(now - r.started, 3),
                )
                r.current = None
            elif kind == "done":
                return []
            deadline = now + timeout
    finally:
        child.kill_tree()


@dataclass
class _Round:
    """One child's run of `pending`: the check it is in, whether it reached the probe, and
    the results it fills in."""

    pending: list[str]
    results: dict[str, CheckRun]
    requires: Mapping[str, str]
    current: Optional[str] = None
    ready: bool = False  # the probe said its first line
    started: float = field(default_factory=time.monotonic)  # of the current check

    def ended(
        self,
        status: str,
        stack: Optional[str],
        *,
        before_ready: str,
        rest_not_run: str,
        during: str,
    ) -> list[str]:
        """The child hung or died (`status`): the check it was in gets the blame (`during`),
        or, before the probe's first line, the first check does (`before_ready`) and the
        rest are not run (`rest_not_run`). Returns the checks still to run in a fresh
        child."""
        elapsed = round(time.monotonic() - self.started, 3)
        if not self.ready:
            first = self.pending[0]
            self.results[first] = CheckRun(
                first, status, stack=stack, duration_s=elapsed, error=before_ready
            )
            for name in self.pending[1:]:
                self.results[name] = CheckRun(name, NOT_RUN, error=rest_not_run)
            return []
        if self.current is None:  # between checks: nothing to blame, go on
            return _rest_after(None, self.pending, self.results, self.requires, "")
        self.results[self.current] = CheckRun(
            self.current, status, error=during, stack=stack, duration_s=elapsed
        )
        return _rest_after(self.current, self.pending, self.results, self.requires, status)


def _rest_after(
    name: Optional[str],
    pending: Sequence[str],
    results: dict[str, CheckRun],
    requires: Mapping[str, str],
    why: str,
) -> list[str]:
    rest = [c for c in pending if c not in results and c != name]
    if name is not None:
        for dep in _dependents(name, requires, rest):
            results[dep] = CheckRun(dep, NOT_RUN, error="%s %s" % (name, why))
            rest.remove(dep)
    return rest


def _after_hang(child: _Child, r: _Round, timeout: float) -> list[str]:
    stack = child.take_stack(startup=not r.ready)
    child.kill_tree()
    if not r.ready:  # stuck before our first line: the interpreter itself hangs at startup
        stack = stack or child.stderr_tail()
    return r.ended(
        HUNG,
        stack,
        before_ready="did not finish within %.1f s: the interpreter never reached the probe"
        % timeout,
        rest_not_run="the target interpreter hangs at startup",
        during="did not finish within %.1f s" % timeout,
    )


def _after_exit(child: _Child, r: _Round) -> list[str]:
    how = child.exit_text()
    child.wait_stderr(0.5)
    return r.ended(
        CRASHED,
        child.stderr_tail() or None,
        before_ready="the interpreter ended (%s) before running any check" % how,
        rest_not_run="the target interpreter cannot run the probe",
        during="the interpreter died (%s) during this check" % how,
    )
