"""Hooks that let the worker see how the process ends, installed only when supervised.

- sys.excepthook / threading.excepthook: uncaught exceptions become `error` messages (fatal
  for the main thread, where the process ends); the previous hook still prints them.
- sys.exit is wrapped: SystemExit never reaches sys.excepthook, so its code is recorded here.
- atexit: `bye` with the reason, after the `error` of a sys.exit("message").
- faulthandler: native crashes and the freeze watchdog write to the crash file; so does
  SIGUSR1, through a Python-level handler (every thread's stack, read under the GIL), and
  SIGUSR2, faulthandler's C handler for the main thread alone, which the clients send only
  when no Python answered (native code holding the GIL).
- fork: a forked child (a DataLoader worker, say) is silent; the watchdog is disarmed
  across the fork because the child would inherit it armed with no thread behind it and
  block at exit in faulthandler's cancel.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import signal
import sys
import threading

from trainbridge.worker import elastic, errors, runtime
from trainbridge.worker.config import Config
from trainbridge.worker.runtime import STATE

TYPE_CHECKING = False  # typing costs milliseconds at `import worker`
# The longest a fork waits for the beacon's imports (tens of milliseconds on a cold disk).
FORK_WAIT_S = 5.0
if TYPE_CHECKING:
    from typing import Any, NoReturn

_prev_excepthook = sys.excepthook
_prev_thread_excepthook = threading.excepthook
_real_exit = sys.exit


def install(config: Config) -> None:
    global _prev_excepthook, _prev_thread_excepthook, _real_exit
    if config.crash_file:
        try:
            _install_faulthandler(config.crash_file)
            runtime.open_stage_box(config.crash_file)
        except Exception as exc:  # noqa: BLE001 - e.g. its folder is gone: report, go on
            runtime.internal_error("opening the crash file", exc)
        if config.freeze_s and STATE.crash_file is not None:
            # Armed now, not when the beacon first runs: a freeze right after import (say
            # `import torch` stuck in CUDA init with the GIL held) must be caught too.
            faulthandler.dump_traceback_later(config.freeze_s, file=STATE.crash_file)
    else:
        try:
            _install_fork_dumps()
        except Exception as exc:  # noqa: BLE001 - e.g. no room in TMPDIR: report, go on
            runtime.internal_error("opening the file for forks' stack dumps", exc)
    _prev_excepthook, sys.excepthook = sys.excepthook, _excepthook
    _prev_thread_excepthook, threading.excepthook = threading.excepthook, _thread_excepthook
    _real_exit, sys.exit = sys.exit, _exit
    atexit.register(_at_exit)
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


def _install_faulthandler(path: str) -> None:
    # Line-buffered so our marker is on disk before anything native can happen.
    crash = open(path, "a", buffering=1, encoding="ascii", errors="backslashreplace")
    crash.write(
        f"[trainbridge] pid {os.getpid()}: native crashes, SIGUSR1 dumps and GIL-freeze "
        f"watchdog dumps (headed 'Timeout') of this process are written below\n"
    )
    faulthandler.enable(crash, all_threads=True)
    STATE.crash_file = crash
    # SIGUSR1 kills an unprepared process, so hello advertises it only once registered,
    # and a handler the script installed itself is left alone. Not faulthandler.register:
    # its dump, in a C signal handler, reads the frames of threads that go on running
    # Python (and of the interrupted one in the middle of a call), and a process being
    # stopped died of SIGSEGV in it (CPython gh-116008). A Python-level handler
    # runs on the main thread between bytecodes, with the GIL: nothing moves while it reads.
    # Python code that cannot run (native code holding the GIL) is what the freeze
    # watchdog dumps instead, and the in-band dump_stacks covers native code that released it.
    if _sigusr1_free():
        signal.signal(signal.SIGUSR1, _dump_stacks_on_signal)
        STATE.dump_signal = "SIGUSR1"
    # The gap: native code holding the GIL runs no Python handler and answers no dump_stacks
    # until the freeze watchdog fires (freeze_s), after a short stall deadline. Then, and
    # only then (the clients send SIGUSR2 when neither dump was answered), faulthandler's C
    # handler dumps the thread the signal lands on: the main thread, as every thread the
    # worker starts blocks it. No thread runs Python, so no frame moves while it reads.
    if (
        hasattr(signal, "SIGUSR2")
        and signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
        and threading.current_thread() is threading.main_thread()
    ):
        faulthandler.register(signal.SIGUSR2, file=crash, all_threads=False)
        STATE.native_dump_signal = "SIGUSR2"


def _sigusr1_free() -> bool:
    """Whether SIGUSR1 may get our handler: it has none (the script's own is left alone)
    and this is the main thread (the only one that may set one)."""
    return (
        hasattr(signal, "SIGUSR1")
        and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
        and threading.current_thread() is threading.main_thread()
    )


def _install_fork_dumps() -> None:
    """No crash file here (a rank of another host): the same SIGUSR1 handler, writing to a
    private file of this host, for this process's forks to inherit; its own answer to
    dump_stacks carries what they write (worker/fork_dumps.py). Not advertised in hello: no
    supervisor here signals it."""
    if not _sigusr1_free() or not os.path.isdir("/proc"):
        return
    from trainbridge.worker import fork_dumps

    STATE.fork_dumps = fork_dumps.open_file()
    signal.signal(signal.SIGUSR1, _dump_stacks_on_signal)


def _dump_stacks_on_signal(signum: int, frame: Any) -> None:
    """SIGUSR1: every thread's stack to the crash file, in faulthandler's format. Written
    with os.write, past the file object's buffer and lock (the interrupted code may hold
    them), and never raising into the code it interrupted."""
    try:
        crash = STATE.crash_file or STATE.fork_dumps
        if crash is None:
            return
        # The marker line tells the clients this process answered (a process that did not
        # gets SIGUSR2); readers of the crash file skip "[trainbridge]" lines.
        text = (
            f"[trainbridge] pid {os.getpid()}: stacks on SIGUSR1\n"
            + errors.faulthandler_stacks(threading.get_ident(), frame)
            + "\n"
        )
        data = text.encode("ascii", "backslashreplace")
        fd = crash.fileno()
        while data:
            data = data[os.write(fd, data) :]
    except BaseException as failure:  # noqa: BLE001 - a full disk must not stop the script
        runtime.internal_error("dumping stacks on SIGUSR1", failure)


# --- uncaught exceptions -------------------------------------------------------------------
def _excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
    try:
        _prev_excepthook(exc_type, exc, tb)  # the traceback prints first, as without us
    finally:
        _report_uncaught(exc, tb)


def _report_uncaught(exc: Any, tb: Any) -> None:
    try:
        if not STATE.enabled or not isinstance(exc, BaseException):
            return
        if exc.__traceback__ is None and tb is not None:
            exc = exc.with_traceback(tb)
        thread = threading.current_thread()
        # In an interactive session sys.excepthook runs for every failed statement.
        fatal = (
            thread is threading.main_thread() and not hasattr(sys, "ps1") and not sys.flags.inspect
        )
        body = errors.error_body(
            exc, fatal=fatal, thread=thread.name, stage=runtime.current_stage()
        )
        if elastic.is_child_failed(exc):
            body["failures"] = elastic.failures_of(exc)
        if not fatal:
            runtime.enqueue_event("error", body)
            return
        STATE.fatal_sent = True
        STATE.exit_reason = "after_error"
        # An uncaught KeyboardInterrupt ends the process by SIGINT, not by an exit code.
        interrupted = isinstance(exc, KeyboardInterrupt)
        STATE.exit_code = None if interrupted else 1
        STATE.keyboard_interrupt = interrupted
        if not interrupted:
            _add_resources(body, exc)
            _record_for_torchrun(body)
        runtime.send_final("error", body)
    except BaseException as failure:  # noqa: BLE001 - Python's own excepthook still runs after us
        runtime.internal_error("reporting an uncaught exception", failure)


def _add_resources(body: Any, exc: BaseException) -> None:
    """What the process had of memory and disk as it failed (worker/exhaustion.py): the
    supervisor names the resource when the error is one running out."""
    try:
        from trainbridge.worker import exhaustion

        body["resources"] = exhaustion.at_error(exc)
    except BaseException as failure:  # noqa: BLE001 - the error itself must still be sent
        runtime.internal_error("reading memory and disk at the error", failure)


def _record_for_torchrun(body: Any) -> None:
    """The error in torchrun's error file (a rank under torchrun has one), so torchrun's
    own summary names it and orders the ranks' failures by time."""
    try:
        import time

        elastic.write_error_file(body, time.time())
    except BaseException as failure:  # noqa: BLE001 - e.g. its folder is gone
        runtime.internal_error("writing TORCHELASTIC_ERROR_FILE", failure)


def _thread_excepthook(args: Any) -> None:
    try:
        _prev_thread_excepthook(args)
    finally:
        try:
            if STATE.enabled and args.exc_type is not SystemExit and args.exc_value is not None:
                name = args.thread.name if args.thread is not None else "?"
                runtime.enqueue_event(
                    "error",
                    errors.error_body(
                        args.exc_value, fatal=False, thread=name, stage=runtime.current_stage()
                    ),
                )
        except BaseException as failure:  # noqa: BLE001 - the thread's own hook still runs
            runtime.internal_error("reporting a thread exception", failure)


# --- exit ------------------------------------------------------------------------------------
def _exit(status: Any = None) -> NoReturn:
    """sys.exit, recording what the process ends with (main thread only: elsewhere
    sys.exit ends just that thread)."""
    if STATE.enabled and threading.current_thread() is threading.main_thread():
        try:
            _record_exit(status)
        except BaseException as failure:  # noqa: BLE001 - sys.exit must still exit
            runtime.internal_error("recording sys.exit", failure)
    _real_exit(status)


def _record_exit(status: Any) -> None:
    STATE.exit_reason = "sys_exit"
    if status is None or isinstance(status, int):
        STATE.exit_code = 0 if status is None else int(status)
        STATE.exit_error = None
        return
    # sys.exit("message") prints the message and exits with 1: an error the user should see.
    STATE.exit_code = 1
    body = errors.message_body(
        errors.safe_str(status),
        fatal=True,
        thread="MainThread",
        stage=runtime.current_stage(),
        kind="system_exit",
        skip=2,
    )
    body.update(type="SystemExit", exit_code=1)
    STATE.exit_error = body


def _at_exit() -> None:
    try:
        if not STATE.enabled:
            return
        last = getattr(sys, "last_value", None)
        if last is not None and not STATE.fatal_sent:
            # The script replaced sys.excepthook (rich, IPython-style hooks): Python still
            # records the uncaught exception here before calling the hook.
            _report_uncaught(last, getattr(last, "__traceback__", None))
        if STATE.exit_error is not None and not STATE.fatal_sent:
            STATE.fatal_sent = True
            _record_for_torchrun(STATE.exit_error)
            runtime.send_final("error", STATE.exit_error)
        # "normal" is also the path of a bare `raise SystemExit(n)`, which no hook sees:
        # the code is then unknown here (nil) and the client takes it from the OS.
        reason = "cancelled" if STATE.cancelled else (STATE.exit_reason or "normal")
        runtime.send_final("bye", {"exit_code": STATE.exit_code, "reason": reason})
    except BaseException as failure:  # noqa: BLE001 - at exit: report it, stop the beacon
        runtime.internal_error("sending bye", failure)
    finally:
        _stop_beacon()
        if STATE.keyboard_interrupt:
            _keep_sigint_exit()


def _keep_sigint_exit() -> None:
    """Python ends a process whose main thread died of KeyboardInterrupt by SIGINT (so a
    shell sees 130), keyed on a C flag that any later eval() of a string clears, e.g. a
    namedtuple created by a module the beacon imports while we wait for acks. Set it
    again so the exit status is what it would have been without trainbridge."""
    try:
        import ctypes

        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 1
    except Exception:  # noqa: BLE001 - other Pythons keep the flag elsewhere: exit code 1
        pass


def _stop_beacon() -> None:
    beacon = STATE.beacon
    if beacon is None:
        return
    beacon.stop = True
    beacon.wake()
    if beacon is not threading.current_thread():
        beacon.join(timeout=2.0)


# --- fork --------------------------------------------------------------------------------------
def _before_fork() -> None:
    # Wait (bounded) while the beacon imports or arms the watchdog (runtime.State.fork_lock).
    # Never on the beacon itself, which forks nothing, and never for ever: a module that
    # forks in its own body while the beacon waits for that module would wait out the bound.
    lock, beacon = STATE.fork_lock, STATE.beacon
    if lock is not None and beacon is not None and threading.current_thread() is not beacon:
        STATE.fork_held = lock.acquire(timeout=FORK_WAIT_S)
    if STATE.enabled and STATE.crash_file is not None:
        STATE.forking = True
        faulthandler.cancel_dump_traceback_later()


def _after_fork_in_parent() -> None:
    STATE.forking = False
    if STATE.fork_held:
        STATE.fork_held = False
        STATE.fork_lock.release()  # type: ignore[union-attr] # held: it exists
    beacon = STATE.beacon
    if beacon is not None:
        beacon.armed_at = 0.0  # re-arm at its next loop,
        beacon.wake()  # now, not at its next heartbeat


def _after_fork_in_child() -> None:
    # No locks, no zmq, no Event.set here: the parent's threads may have held them at fork.
    STATE.enabled = False
    STATE.beacon = None
    STATE.idle = STATE.idle_progress = False
    STATE.forking = False
    STATE.fork_lock = None  # held by the parent's fork: the child has no beacon to wait on
    STATE.fork_held = False
    runtime.restore_switch_interval()  # forked while the beacon started: the script's again
    STATE.events = type(STATE.events)()
