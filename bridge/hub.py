"""The hub: one ROUTER socket and one I/O thread per client process, serving many jobs.

The I/O thread is a small reactor: it polls the ROUTER, every job's pipes and pidfd, and a
wake-up pipe for calls from other threads, and gives each job a tick to judge its timers.
Jobs (bridge/job.py) are only ever touched from this thread, so nothing in them needs a lock.

Protocol duties done here, before a job sees a message (docs/PROTOCOL.md sections 6-8):
route by the routing id's job part, verify and decode with the job's key, check the
envelope's job against the route, judge the per-sender seq, count rejections by reason,
ack every error and bye (again for a replayed one), and refuse an unsupported version.

ipc endpoints live in a private (0700) runtime directory that is removed at exit; where ipc
is unavailable (or the path too long for a unix socket) the ROUTER binds tcp on loopback.

A job whose process was spawned before the job could be registered (`run --transparent`
spawns first and loads the client after) is *expected*: its messages are held, in order and
within a bound, until the job is attached (`release_early`), so a hello read in between is
not lost.
"""

from __future__ import annotations

import atexit
import collections
import ipaddress
import math
import os
import shutil
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

import zmq

from trainbridge.bridge import intake, launcher, resources
from trainbridge.protocol import codec

if TYPE_CHECKING:
    from trainbridge.bridge.channel import Channel


CHECK_THREADS_ENV = "TRAINBRIDGE_CHECK_THREADS"  # "1": io_only() checks (the tests)


class HubJob(Protocol):
    """What the hub uses of a Job (bridge/job.py), named here: the hub imports no Job."""

    id: str
    channel: Channel

    def next_wakeup(self) -> Optional[float]: ...

    def tick(self, now: float) -> None: ...

    def paused(self, seconds: float) -> None: ...

    def fail_internal(self, exc: BaseException) -> None: ...


IPC_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin
# Memory budget for input not yet read (docs/PROTOCOL.md "Limits"): libzmq queues at most
# RCVHWM messages per connection, each at most MAXMSGSIZE a frame, before it stops reading
# that connection (the sender then waits: nothing is dropped, a flood only goes as fast as
# the hub reads). 16 x 1 MiB = 16 MiB per connection; 100,000 allowed about 100 GiB.
RCVHWM = 16
# Messages queued per worker before a send must wait (then held in channel.Channel.held and
# retried on ticks).
SNDHWM = 1000
PER_CONNECTION_BYTES = RCVHWM * (codec.MAX_MESSAGE_BYTES + 64)
POLL_MAX_S = 5.0  # the longest the reactor sleeps (a safety net: every job names its next wakeup)
# A poll that returns this much later than asked: the reactor itself did not run (a SIGSTOP,
# a starved machine). Its jobs hear "paused" first, so that their workers' silence is not
# judged on time it could not read them (machine.py "paused").
PAUSED_MIN_S = 1.0
# Messages held for an expected job until it is attached (hello, a few beats: a spawn and an
# import's worth of time); past either bound they are dropped and counted (`early_overflow`).
EARLY_MAX_MESSAGES = 256
EARLY_MAX_BYTES = 4 * 1024 * 1024


class _Early:
    """What arrived for an expected job before it was attached."""

    __slots__ = ("frames", "size", "over", "over_budget")

    def __init__(self) -> None:
        self.frames: list[list[Any]] = []  # each: bytes, or zmq.Frame where not copied
        self.size = 0
        self.over = 0  # past EARLY_MAX_*: reported as the job's early_overflow
        self.over_budget = 0  # dropped unverified (intake budget): the job's over_budget

    def count(self) -> int:
        """Every message that came for the job: held, or dropped and counted."""
        return len(self.frames) + self.over + self.over_budget

    def hold(self, frames: list[Any]) -> None:
        size = frames_size(frames)
        if len(self.frames) >= EARLY_MAX_MESSAGES or self.size + size > EARLY_MAX_BYTES:
            self.over += 1
            return
        self.frames.append(frames)
        self.size += size


class Hub:
    """Use Hub.get(): one per process, started on first use."""

    _instance: Optional[Hub] = None
    _instance_lock = threading.Lock()

    @classmethod
    def get(cls, runtime_dir: Optional[str] = None, expect: Optional[str] = None) -> Hub:
        """The process's hub. `runtime_dir`: a private (0700) directory made by the caller,
        used if the hub starts now (a wrapper that chose the endpoint before it spawned:
        ipc://<runtime_dir>/hub.sock when that path is short enough). `expect`: the id of
        a job spawned (or about to be) before it is registered: see expect()."""
        with cls._instance_lock:
            if cls._instance is None or not cls._instance._thread.is_alive():
                cls._instance = cls(runtime_dir, expect)
                return cls._instance
        if expect is not None:
            cls._instance.expect(expect)
        return cls._instance

    def __init__(self, runtime_dir: Optional[str] = None, expect: Optional[str] = None) -> None:
        self.runtime_dir = runtime_dir or launcher.make_runtime_dir()
        # The tests set it: a Job's state touched off the I/O thread raises (io_only).
        self.check_threads = os.environ.get(CHECK_THREADS_ENV) == "1"
        self.jobs: dict[str, HubJob] = {}  # job id -> Job (I/O thread only)
        self.unrouted = 0  # messages for no job this client serves (reports show their share)
        self.resources = resources.Sampling()  # for jobs launched with sample_resources
        self.budget = intake.budget_initial()  # unauthenticated input, all connections
        self._calls: collections.deque[Callable[[], None]] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._fds: dict[int, Callable[[], None]] = {}
        self._owners: dict[int, Optional[HubJob]] = {}  # fd -> its job (None: the hub's)
        self._ready = threading.Event()
        self._looked_at: Optional[float] = None  # when the reactor last read or polled (_unread)
        self._stop = False
        self._error: Optional[BaseException] = None
        self.endpoint = ""
        self.server_key: Optional[str] = None  # CurveZMQ public key (z85) when on tcp
        # Other hosts (listen()): address -> (tcp endpoint, CurveZMQ public key), and the
        # peer address of each routing id that connected over such an endpoint.
        self.listening: dict[str, tuple[str, str]] = {}
        self.peer_addr: dict[bytes, str] = {}
        # job id -> what came for it before it was attached (held from the first read on)
        self._early: dict[str, _Early] = {} if expect is None else {expect: _Early()}
        # Each job's next wakeup (inf: none), asked again only of the jobs touched since.
        self._wakeups: dict[HubJob, float] = {}
        self._touched: set[HubJob] = set()
        self._thread = threading.Thread(target=self._run, name="trainbridge-hub", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        atexit.register(self.close)

    # --- calls from any thread ----------------------------------------------------------
    def call(self, fn: Callable[[], None]) -> None:
        """Run fn on the I/O thread, soon."""
        if self._stop:
            return
        self._calls.append(fn)
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already

    def in_io_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def io_only(self, what: str) -> None:
        """With TRAINBRIDGE_CHECK_THREADS=1 (the test suite's setting), raise when `what`
        (a Job's machine step or publish) runs on any thread but the I/O thread: only that
        thread touches a Job (docs/ARCHITECTURE.md, "Threads"), which is why Jobs take no
        locks."""
        if self.check_threads and not self.in_io_thread():
            raise AssertionError(
                f"trainbridge: {what} ran on thread {threading.current_thread().name!r}, "
                "not the hub's I/O thread (docs/ARCHITECTURE.md, Threads)"
            )

    def close(self) -> None:
        """Stop the I/O thread and remove the runtime directory (also run at exit)."""
        if self._stop:
            return
        # _stop before the wake-up: a loop that woke and found it still False would poll
        # again for up to POLL_MAX_S before it saw it (close() took 0.5 s every other run).
        self._stop = True
        self._calls.append(lambda: None)
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if not self.in_io_thread():
            self._thread.join(timeout=5)
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def listen(self, address: str, port: int = 0) -> tuple[str, str]:
        """Also accept workers of other hosts on tcp://address:port (0: a free port), as a
        CurveZMQ server: (endpoint, server public key). Idempotent per address. Any thread."""
        if address in self.listening:
            return self.listening[address]
        done = threading.Event()
        out: list[Any] = []

        def bind() -> None:
            try:
                out.append(_listen(self._sock, address, port))
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                out.append(exc)
            done.set()

        self.call(bind)
        done.wait(10)
        if not out:
            raise RuntimeError("trainbridge: the hub did not answer listen() within 10 s")
        if isinstance(out[0], BaseException):
            raise out[0]
        bound: tuple[str, str] = out[0]
        self.listening[address] = bound
        return bound

    def expect(self, job_id: str) -> None:
        """Hold every message for `job_id` from now until the job is attached
        (release_early): for a process spawned before its job is registered. Returns once
        in force. Any thread."""
        if self.in_io_thread():
            self._early.setdefault(job_id, _Early())
            return
        done = threading.Event()

        def hold() -> None:
            self._early.setdefault(job_id, _Early())
            done.set()

        self.call(hold)
        if not done.wait(10):
            raise RuntimeError("trainbridge: the hub did not answer expect() within 10 s")

    def held(self, job_id: str) -> int:
        """How many messages came for an expected job not attached yet (see expect): held
        for it, or dropped and counted for its report."""
        early = self._early.get(job_id)
        return early.count() if early is not None else 0

    # --- I/O thread: registration -------------------------------------------------------
    def add_job(self, job: HubJob) -> None:
        self.jobs[job.id] = job
        self._touched.add(job)

    def release_early(self, job: HubJob) -> None:
        """The job is attached: hand it what was held for it, in the order it came."""
        early = self._early.pop(job.id, None)
        if early is None:
            return
        if early.over:
            job.channel.rejected["early_overflow"] += early.over
        if early.over_budget:
            job.channel.rejected["over_budget"] += early.over_budget
        for frames in early.frames:
            self._for_job(job, job.channel.receive, frames[0], frames[1:])

    def remove_job(self, job_id: str) -> None:
        job = self.jobs.pop(job_id, None)
        if job is not None:
            self._wakeups.pop(job, None)
            self._touched.discard(job)
        early = self._early.pop(job_id, None)
        if early is not None:  # never attached (it failed first): no report of its own
            self.unrouted += early.count()
        if self.peer_addr:
            prefix = f"{job_id}/".encode("ascii", "replace")
            for rid in [rid for rid in self.peer_addr if rid.startswith(prefix)]:
                del self.peer_addr[rid]

    def add_fd(self, fd: int, on_ready: Callable[[], None], owner: Any = None) -> None:
        """Call on_ready when fd is readable. `owner`: the job it belongs to, which fails
        alone (internal) if on_ready raises."""
        self._fds[fd] = on_ready
        self._owners[fd] = owner
        self._poller.register(fd, zmq.POLLIN)

    def remove_fd(self, fd: int) -> None:
        self._owners.pop(fd, None)
        if self._fds.pop(fd, None) is not None:
            self._poller.unregister(fd)

    def send(self, routing_id: bytes, frames: Any) -> None:
        self._sock.send_multipart([routing_id, *frames], flags=zmq.NOBLOCK)

    # --- I/O thread: the loop -----------------------------------------------------------
    def _run(self) -> None:
        try:
            self._ctx = zmq.Context()
            self._sock = self._ctx.socket(zmq.ROUTER)
            self._sock.setsockopt(zmq.MAXMSGSIZE, codec.MAX_MESSAGE_BYTES + 64)
            self._sock.setsockopt(zmq.LINGER, 0)
            self._sock.setsockopt(zmq.RCVHWM, RCVHWM)
            self._sock.setsockopt(zmq.SNDHWM, SNDHWM)
            # A full peer queue raises Again (held, retried in order) and a gone peer raises
            # EHOSTUNREACH (counted): without it the ROUTER drops both without a word.
            self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            self.endpoint, self.server_key = _bind(self._sock, self.runtime_dir)
            self._poller = zmq.Poller()
            self._poller.register(self._sock, zmq.POLLIN)
            self._poller.register(self._wake_r, zmq.POLLIN)
        except BaseException as exc:  # noqa: BLE001 - reported to the thread that asked for the hub
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop:
                self._once()
        finally:
            self._sock.close(linger=0)
            self._ctx.term()
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)

    def _once(self) -> None:
        # A job's next wakeup changes only when something of it was handled (_for_job, or
        # any call: those may touch any job), so only those are asked again: with 200 jobs,
        # asking each one every turn was a fifth of the thread's time.
        touched, self._touched = self._touched, set()
        for job in touched:
            if self.jobs.get(job.id) is job:
                wake = self._for_job(job, job.next_wakeup, touch=False)
                if self.jobs.get(job.id) is job:  # not failed (internal) meanwhile
                    self._wakeups[job] = wake if isinstance(wake, (int, float)) else math.inf
        now = time.monotonic()
        wake = min(self._wakeups.values(), default=math.inf)
        timeout = POLL_MAX_S if wake == math.inf else min(POLL_MAX_S, max(0.0, wake - now))
        # Time in which the reactor could not read (the last turn's own work, a poll that
        # returned late because the process was stopped or starved) is told to the jobs
        # before they judge any silence (_unread).
        self._unread(now)
        ready = dict(self._poller.poll(int(timeout * 1000) + (1 if timeout > 0 else 0)))
        returned = time.monotonic()
        self._unread(returned, late=returned - (now + timeout))
        # Messages first: a worker's last words must count before the exit it precedes.
        if self._sock in ready:
            self._read_router()
        if self._wake_r in ready:
            try:
                while os.read(self._wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
        if self._calls:
            self._touched.update(self.jobs.values())
        while self._calls:
            _guarded(self._calls.popleft())
        for fd in [fd for fd in ready if isinstance(fd, int) and fd in self._fds]:
            callback = self._fds.get(fd)
            if callback is not None:
                owner = self._owners.get(fd)
                if owner is None:
                    self._touched.update(self.jobs.values())
                    _guarded(callback)
                else:
                    self._for_job(owner, callback)
        now = time.monotonic()
        self._unread(now)  # a call or a callback of this turn that took long
        for job in [job for job, wake in self._wakeups.items() if wake <= now]:
            if self.jobs.get(job.id) is job:
                self._for_job(job, job.tick, now)

    def _unread(self, now: float, late: Optional[float] = None) -> None:
        """Tell every job "paused" (machine.py) when the reactor spent PAUSED_MIN_S or more
        not reading: since it last looked (`now` - _looked_at), or, after a poll, by how
        much the poll came back late. A poll itself is reading: a message wakes it."""
        gap = late if late is not None else now - (self._looked_at or now)
        self._looked_at = now
        if gap < PAUSED_MIN_S:
            return
        for job in list(self.jobs.values()):
            self._for_job(job, job.paused, gap)

    def _for_job(self, job: HubJob, fn: Callable[..., Any], *args: Any, touch: bool = True) -> Any:
        """Run one job's piece of reactor work. If it raises (a bug in trainbridge), that
        job alone fails with an `internal` diagnosis; the reactor serves the others."""
        if touch:
            self._touched.add(job)
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - one job's bug fails that job, not the reactor
            _guarded(job.fail_internal, exc)
            self.remove_job(job.id)  # whatever happened, it is not handled again
            return None

    def drain_router(self) -> None:
        """Process every message already queued (a job calls this when its process exits)."""
        self._read_router()

    def _read_router(self) -> None:
        for _ in range(10_000):  # bounded so a flood cannot starve pipes and timers
            try:
                if self.listening:  # the peer's address tells another host's workers apart
                    first = self._sock.recv(flags=zmq.NOBLOCK, copy=False)
                    routing_id = first.bytes
                    self._note_peer(routing_id, first)
                else:
                    routing_id = self._sock.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            # Over the budget for unauthenticated input (intake.over_budget), a suspect
            # sender's parts are taken without a copy and dropped unverified.
            drop = intake.over_budget(self.budget, routing_id.decode("latin-1"), time.monotonic())
            frames: list[Any] = [routing_id]
            while self._sock.get(zmq.RCVMORE):
                frames.append(self._sock.recv(copy=not drop))
            if drop:
                self._dropped_unverified(routing_id)
            else:
                self._route(frames)

    def _dropped_unverified(self, routing_id: bytes) -> None:
        job_id, _ = intake.parse_routing_id(routing_id)
        early = self._early_for(job_id)
        job = self.jobs.get(job_id) if job_id is not None else None
        if early is not None:  # expected, not attached yet: its report counts it
            early.over_budget += 1
        elif job is not None:
            job.channel.rejected["over_budget"] += 1
        else:
            self.unrouted += 1

    def _early_for(self, job_id: Optional[str]) -> Optional[_Early]:
        """What is kept for job_id if it is expected and not attached yet (see expect)."""
        return self._early.get(job_id) if job_id is not None and self._early else None

    def _note_peer(self, routing_id: bytes, frame: Any) -> None:
        if routing_id in self.peer_addr:
            return
        try:
            addr = frame.get("Peer-Address")
            ip = ipaddress.ip_address(addr)
        except (ValueError, zmq.ZMQError, TypeError):
            return  # an ipc peer: its address is not an IP
        if not ip.is_loopback:
            self.peer_addr[routing_id] = addr

    def _route(self, frames: list[Any]) -> None:
        routing_id = frames[0]
        job_id, _ = intake.parse_routing_id(routing_id)
        early = self._early_for(job_id)
        if early is not None:  # expected, not attached yet: kept in order (release_early)
            early.hold(frames)
            return
        job = self.jobs.get(job_id) if job_id is not None else None
        if job is None:
            self.unrouted += 1
            sender = routing_id.decode("latin-1")
            intake.note_rejected(self.budget, sender, frames_size(frames), None, time.monotonic())
            return
        self._for_job(job, job.channel.receive, routing_id, frames[1:])


def frames_size(frames: list[Any]) -> int:
    return sum(len(frame) for frame in frames)


def _guarded(fn: Callable[..., None], *args: Any) -> None:
    """Run one piece of reactor work; a bug in it is reported, and the reactor (which
    serves every other job) goes on."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the docstring's rule: the reactor goes on
        import sys
        import traceback

        sys.stderr.write(
            "[trainbridge] internal error in the hub (please report it):\n" + traceback.format_exc()
        )


def _bind(sock: zmq.Socket[bytes], runtime_dir: str) -> tuple[str, Optional[str]]:
    """(endpoint, server key or None). ipc lives in the private (0700) runtime directory:
    only this user can connect. On the tcp fallback any local user could, so the socket is
    a CurveZMQ server whose public key only the job's environment holds (TRAINBRIDGE_SERVER_KEY,
    readable by this user alone): a peer without it fails the handshake, before libzmq
    queues a byte of its input."""
    path = os.path.join(runtime_dir, "hub.sock")
    if zmq.has("ipc") and len(path) <= IPC_PATH_MAX:
        try:
            sock.bind(f"ipc://{path}")
            return f"ipc://{path}", None
        except zmq.ZMQError:
            pass
    if not zmq.has("curve"):
        raise RuntimeError(
            "trainbridge: ipc is not usable here and this libzmq has no CurveZMQ "
            "to authenticate the tcp fallback; set XDG_RUNTIME_DIR to a short "
            "path (ipc socket paths are limited to about 100 bytes)"
        )
    public, secret = zmq.curve_keypair()
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    return f"tcp://127.0.0.1:{port}", public.decode("ascii")


def _listen(sock: zmq.Socket[bytes], address: str, port: int) -> tuple[str, str]:
    """Bind tcp://address:port as a CurveZMQ server (I/O thread). libzmq copies the
    security options into each listener at bind time: the ipc endpoint bound before stays
    as it was, and a peer of this one that does not hold the public key fails the
    handshake before a byte of its input is queued (docs/PROTOCOL.md "Other hosts")."""
    if not zmq.has("curve"):
        raise RuntimeError(
            "trainbridge: this libzmq has no CurveZMQ; workers of other hosts cannot be "
            "authenticated, so the client does not listen on tcp"
        )
    public, secret = zmq.curve_keypair()
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
    host = f"[{address}]" if ":" in address else address
    if port:
        sock.bind(f"tcp://{host}:{port}")
    else:
        port = sock.bind_to_random_port(f"tcp://{host}")
    return f"tcp://{host}:{port}", public.decode("ascii")
