"""`trainbridge run --transparent -- CMD`: supervise CMD while changing nothing its caller
relies on (docs/CLIENT.md, "Transparent mode").

- stdin is the wrapper's own (inherited, not copied): EOF, a tty, `python - <<EOF` all work.
- stdout and stderr are pipes that the client reads; every chunk is written to the wrapper's
  own stdout / stderr at once and byte for byte (partial lines, "\\r", binary, any
  encoding), while the same bytes are split into lines for the events, --log and the report.
  A slow reader of the wrapper slows the child down (reading pauses), as without us; a
  reader that went away makes the child's next write fail (EPIPE / SIGPIPE), as without us.
- Nothing of trainbridge's own is written to stdout or stderr: the verdict goes to --report,
  and to stderr only with --verdict.
- The wrapper ends the way the child did: its exit code, or its signal raised again on the
  wrapper (also after a cancel or a hang: the report says which it was).
- SIGINT, SIGTERM and SIGHUP sent to the wrapper reach the child exactly once: forwarded
  with kill(), except those the terminal sent to the foreground process group, which the
  child (then in the wrapper's group) received already.
- The child's environment is the caller's plus the TRAINBRIDGE_* variables and the zero-code
  directory first on PYTHONPATH; no PYTHONUNBUFFERED / PYTHONIOENCODING / PYTHONUTF8.
- Start-up: this module imports nothing heavy; the child is spawned first, and the client
  (zmq, msgpack) is loaded while the child starts. The hub binds the ipc endpoint
  the child was given; the worker's socket connects once it exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any, Optional

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SI_KERNEL = 0x80  # siginfo.si_code of a signal the terminal generated
HAVE_SIGINFO = hasattr(signal, "sigwaitinfo")  # Linux; not macOS
IPC_PATH_MAX = 100  # as bridge/hub.py: sun_path is 108 bytes on Linux
COPY_CHUNK = 64 * 1024
COPY_JOIN_S = 2.0  # after the job's end, the longest we wait for the copies
EXIT_NOT_FOUND = 127  # as a shell: the command does not exist
EXIT_NOT_EXECUTABLE = 126
EXIT_OWN_FAILURE = 125  # trainbridge's own (the --log file cannot be written), as env(1)


def add_arguments(run: Any) -> None:
    """The `run` subcommand's options for this mode."""
    run.add_argument(
        "--transparent",
        action="store_true",
        help="drop-in mode: stdin passed through, stdout/stderr copied byte for "
        "byte, nothing of trainbridge's own on them, the caller's environment, "
        "exit the way the child did (see docs/CLIENT.md)",
    )
    run.add_argument(
        "--verdict",
        action="store_true",
        help="with --transparent: print the one-line verdict on stderr at the end",
    )


def run(args: Any, cmd: list[str]) -> int:
    """Spawn cmd first (the client's imports wait until it runs), then supervise it: the
    parts below, in order. Returns only on a failure before the command ran; otherwise the
    process leaves the way the command did (_leave)."""
    if getattr(args, "json", False):  # stdout is the child's: no room for events
        sys.stderr.write(
            "trainbridge: --json cannot be combined with --transparent (stdout "
            "is the command's); use --report FILE for the verdict\n"
        )
        return 2
    config, full = _config(args)
    runtime_dir = _private_dir()
    job_id, key = f"job-{os.urandom(6).hex()}", os.urandom(32)
    os.mkdir(os.path.join(runtime_dir, job_id), 0o700)
    crash_file = os.path.join(runtime_dir, job_id, "crash.txt")
    if args.log:  # a log that cannot be written is found before the command runs
        problem = _unwritable(args.log)
        if problem:
            os.rmdir(os.path.join(runtime_dir, job_id))
            os.rmdir(runtime_dir)
            sys.stderr.write(
                f"trainbridge: cannot write the log file {args.log}: {problem}; "
                "choose a writable path for the log (--log)\n"
            )
            return EXIT_OWN_FAILURE
    hub, endpoint, server_key = _endpoint(runtime_dir, job_id)
    # In the terminal's foreground group, the child stays in ours, as it would without us
    # (it may read the terminal; Ctrl-C reaches it from the terminal). Otherwise it gets a
    # group of its own, so a signal to our group is not delivered twice.
    interactive = _foreground()
    env = _child_env(
        (endpoint, server_key),
        (job_id, key, crash_file),
        full,
        interactive,
        getattr(args, "zero_code", True),
    )
    spawned = _spawn(cmd, env, interactive, runtime_dir)
    if isinstance(spawned, int):
        return spawned
    proc, forwarder, previous, spawned_at = spawned
    # Copying starts now, before the client's imports: the caller sees the command's
    # output as soon as it is written (what comes before the job exists is handed on later).
    copiers = [Copier(proc.stdout, 1, "stdout"), Copier(proc.stderr, 2, "stderr")]
    from trainbridge.bridge.hub import Hub

    # The child may have said hello already: the hub holds the job's messages until it is
    # attached (Hub.expect), so none is read and dropped before the job is registered.
    hub = hub or Hub.get(runtime_dir, expect=job_id)
    child = (proc, forwarder, copiers, spawned_at, endpoint)
    report, job = _supervise(args, cmd, config, (job_id, key), hub, child)
    _say_verdict(args, report)
    hub.close()
    _leave(exit_like(job.exit_code, job.exit_signal, previous))
    return 0  # not reached


def _config(args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's deadlines from the command line, and the whole machine config they make."""
    from trainbridge.bridge import machine

    config: dict[str, Any] = {
        "startup_timeout": args.startup_timeout,
        "stall_timeout": args.stall_timeout,
        "heartbeat_timeout": args.heartbeat_timeout,
        "kill_grace": args.kill_grace,
    }
    if args.stall_timeout is not None:
        config["stalled_after"] = min(machine.DEFAULTS["stalled_after"], args.stall_timeout / 2)
    return config, {**machine.DEFAULTS, **config}


def _endpoint(runtime_dir: str, job_id: str) -> tuple[Any, str, Optional[str]]:
    """Where the child's worker connects: (the hub if it had to start now, the endpoint, the
    hub's CurveZMQ key or None). An ipc path short enough is only named now (the hub binds
    it while the child starts); else the hub binds tcp first, and we pay for its imports."""
    sock_path = os.path.join(runtime_dir, "hub.sock")
    if len(sock_path) <= IPC_PATH_MAX:
        return None, f"ipc://{sock_path}", None
    from trainbridge.bridge.hub import Hub

    hub = Hub.get(runtime_dir, expect=job_id)
    return hub, hub.endpoint, hub.server_key


def _child_env(
    at: tuple[str, Optional[str]],
    ident: tuple[str, bytes, str],
    full: dict[str, Any],
    interactive: bool,
    zero_code: bool,
) -> dict[str, str]:
    """The caller's environment plus the job's TRAINBRIDGE_* variables (at: endpoint and
    server key; ident: job id, key and crash file) and, in zero-code mode, the inject
    directory first on PYTHONPATH."""
    from trainbridge.bridge import jobenv

    (endpoint, server_key), (job_id, key, crash_file) = at, ident
    env = dict(os.environ)
    env.pop("TRAINBRIDGE_CLIENT_PID", None)
    env.pop("TRAINBRIDGE_DETACHED", None)
    env.pop("TRAINBRIDGE_SERVER_KEY", None)
    # Without a group of its own the worker must not end "its" group (ours, maybe the
    # caller's pipeline) when we die: no client pid to watch, so the child is then left
    # running, as without us.
    client_pid = None if interactive else os.getpid()
    env.update(jobenv.variables(endpoint, job_id, key, crash_file, full, client_pid=client_pid))
    if server_key:  # the tcp fallback: the worker must authenticate the hub (hub.py)
        env["TRAINBRIDGE_SERVER_KEY"] = server_key
    if zero_code:
        inject = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inject")
        env["PYTHONPATH"] = inject + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
    return env


def _spawn(cmd: list[str], env: dict[str, str], interactive: bool, runtime_dir: str) -> Any:
    """Start the command with the forwarded signals noted meanwhile: (proc, the Forwarder
    that passes them on from now, the signal handlers as they were, when it was spawned),
    or the exit status when it cannot start (as a shell's: 127, 126)."""
    early: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: early.append(signum)) for sig in FORWARDED
    }
    spawned_at = _now()  # the Job's clock starts at the spawn, not once the client is loaded
    try:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            close_fds=True,
            **_group_option(interactive),
        )
    except OSError as exc:
        for sig, old in previous.items():
            signal.signal(sig, old)
        import shutil

        shutil.rmtree(runtime_dir, ignore_errors=True)
        sys.stderr.write(f"trainbridge: could not start {cmd[0]!r}: {exc}\n")
        return EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
    # From here on every thread (ours, the hub's, libzmq's) blocks the forwarded signals;
    # one thread takes them with their siginfo.
    forwarder = Forwarder(proc, same_group=interactive)
    if HAVE_SIGINFO:
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        forwarder.start()
    else:  # no siginfo (macOS): handlers on the main thread forward
        for sig in FORWARDED:
            signal.signal(sig, lambda signum, frame: forwarder.forward(signum, None))
    for signum in early:
        forwarder.forward(signum, None)
    return proc, forwarder, previous, spawned_at


def _supervise(
    args: Any,
    cmd: list[str],
    config: dict[str, Any],
    ident: tuple[str, bytes],
    hub: Any,
    child: tuple[subprocess.Popen[bytes], Forwarder, list[Copier], float, str],
) -> tuple[dict[str, Any], Any]:
    """The running command (child: the process, its Forwarder, the copiers of its output,
    when it was spawned, the endpoint it was given) as a Job of `hub`, its end waited for;
    returns (its report, the Job)."""
    proc, forwarder, copiers, spawned_at, endpoint = child
    from trainbridge.bridge.job import Job

    job = Job(
        cmd,
        config=config,
        log_path=args.log,
        hub=hub,
        python_env=False,
        ident=ident,
        spawned_at=spawned_at,
        events=False,  # nothing reads them: the report is the verdict
    )
    forwarder.attach(job)  # before start: a signal noted so far steps the job before its exit
    job.start(proc, read_pipes=False)
    for copier in copiers:
        copier.attach(job)
    if hub.endpoint != endpoint:  # the ipc bind failed: the child's worker cannot reach us
        job.no_worker(f"the hub could not bind {endpoint}")
    report = job.wait()
    assert report is not None  # waited without a timeout: the end's report
    for copier in copiers:  # the job's end killed what was left of the tree: EOF soon
        copier.join(COPY_JOIN_S)
    return report, job


def _say_verdict(args: Any, report: dict[str, Any]) -> None:
    """--report FILE and --verdict: the only words of trainbridge's own."""
    if args.report:
        from trainbridge.bridge.cli_exit import write_report

        problem = write_report(args.report, report)
        if problem:  # trainbridge's own failure: said, though stderr is the command's
            sys.stderr.write(f"trainbridge: warning: {problem}\n")
    if args.verdict:
        sys.stderr.write(f"trainbridge: {report.get('summary', '')}\n")
        sys.stderr.flush()


def _leave(code: int) -> None:
    """Exit now with `code`, skipping the interpreter's teardown (module cleanup, the
    zmq context's finalizers: ~10-15 ms of a short run's time to exit). Everything of
    ours is done by now: the report written, the hub closed, the log file closed, and the
    child's bytes went to fds 1 and 2 with os.write, so only Python's own buffers (the
    --verdict line, a warning) need flushing."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more to say
            pass
    os._exit(code)


def exit_like(
    code: Optional[int], signal_name: Optional[str], previous: dict[signal.Signals, Any]
) -> int:
    """End this process the way the child ended: raise its signal on ourselves, or return
    its exit code."""
    if signal_name:
        sig = getattr(signal, signal_name, None)
        if sig is None and signal_name[3:].isdigit():
            sig = int(signal_name[3:])
        if sig is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            if HAVE_SIGINFO:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
            return 128 + int(sig)  # a signal that does not end a process by default
    for sig, old in previous.items():
        signal.signal(sig, old)
    return 0 if code is None else code & 0xFF


class Forwarder(threading.Thread):
    """Takes SIGINT/SIGTERM/SIGHUP (blocked in every thread) and passes each to the child."""

    def __init__(self, proc: subprocess.Popen[bytes], same_group: bool):
        super().__init__(name="trainbridge-signals", daemon=True)
        self.proc = proc
        self.same_group = same_group
        self.job: Any = None
        self.forwarded: list[str] = []
        self.pending: list[tuple[str, str]] = []  # signals noted before the job existed
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            info = signal.sigwaitinfo(FORWARDED)
            self.forward(info.si_signo, info.si_code)

    def forward(self, signum: int, code: Optional[int]) -> None:
        name = signal.Signals(signum).name
        if self.same_group and (code == SI_KERNEL or not HAVE_SIGINFO):
            # The terminal sent it to the whole foreground group: the child has it. (Without
            # siginfo that cannot be told apart from a kill(): nothing is forwarded then.)
            self._note(name, f"{name} from the terminal (Ctrl-C, hang-up) to the command")
            return
        job = self.job
        if job is not None and (job.exit_code is not None or job.exit_signal is not None):
            return  # reaped: the pid may belong to another process now
        # Noted before the kill: the child's exit, which may follow at once, must find it.
        self._note(
            name, f"{name} sent to trainbridge run --transparent (pid {os.getpid()}), forwarded"
        )
        try:
            os.kill(self.proc.pid, signum)
            self.forwarded.append(name)
        except OSError:
            pass

    def _note(self, name: str, reason: str) -> None:
        """The user stopped the child with a signal: the report says cancelled, by it."""
        with self.lock:
            if self.job is None:
                self.pending.append((name, reason))
                return
        self.job.note_user_signal(name, reason)

    def attach(self, job: Any) -> None:
        with self.lock:
            self.job = job
            pending, self.pending = self.pending, []
        for name, reason in pending:
            job.note_user_signal(name, reason)


class Copier(threading.Thread):
    """Copies one of the child's pipes to our own fd, chunk by chunk as read, and hands
    each chunk to the job (on its I/O thread) for the lines, the log and the report.
    Blocking on our reader blocks the child, as without us; when our reader is gone, the
    pipe is closed so the child's next write fails (EPIPE / SIGPIPE), as without us."""

    def __init__(self, pipe: Any, fd: int, stream: str):
        super().__init__(name=f"trainbridge-copy-{stream}", daemon=True)
        self.pipe = pipe
        self.src = pipe.fileno()
        self.fd = fd
        self.stream = stream
        self.job: Any = None
        self.early: list[bytes] = []  # chunks read before the job existed
        self.lock = threading.Lock()
        self.broken = False
        self.start()

    def attach(self, job: Any) -> None:
        with self.lock:
            self.job = job
            for chunk in self.early:
                self._hand(chunk)
            self.early = []

    def _hand(self, chunk: bytes) -> None:
        job = self.job
        job.hub.call(lambda: job.feed_output(self.stream, chunk))

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.src, COPY_CHUNK)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if chunk and not self.broken:
                if not _write_all(self.fd, chunk):
                    self.broken = True
                    self.pipe.close()  # the child's next write gets EPIPE
                    chunk = b""
            with self.lock:
                if self.job is None:
                    self.early.append(chunk)
                else:
                    self._hand(chunk)
            if not chunk:
                return


def _write_all(fd: int, data: bytes) -> bool:
    """Write every byte (waiting on a non-blocking fd); False when the reader is gone."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            import select

            select.select([], [fd], [])
        except InterruptedError:
            continue
        except OSError:  # EPIPE, EBADF, ENOSPC: nobody will get these bytes
            return False
    return True


def _group_option(same_group: bool) -> dict[str, Any]:
    """Popen's way to give the child a process group of its own (Python 3.11 has
    process_group; before it, a setpgid in the child between fork and exec)."""
    if same_group:
        return {}
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # no threads yet: safe before 3.11


def _unwritable(path: str) -> Optional[str]:
    """Why `path` cannot be appended to, or None (it is created if missing, as --log does)."""
    from trainbridge.bridge import private_files

    try:
        os.close(private_files.open_append(path))
        return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _foreground() -> bool:
    """Whether we run in the foreground process group of the terminal on stdin."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _private_dir() -> str:
    """A fresh 0700 directory for the hub's socket and the job's files (as hub.py)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.path.isdir(base) or not os.access(base, os.W_OK):
        base = os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(base, f"trainbridge-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _now() -> float:
    import time

    return time.monotonic()
