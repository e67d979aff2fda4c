"""A supervised job: the glue between the hub, the launcher, the state machine and the report.

This module is the facade: Job's set-up and public API, and launch() (its length, over the
rooms' ~200 lines, is the public API's documentation and the child's environment). Its rooms,
each one concern (docs/CLIENT.md "Rooms of the Job"), the one implementation: every face (the
Node client through bridge/jobserve.py) renders what this Job publishes:
  job_arguments  the argument check (launch, Job, aio, the scheduler and the CLI use it)
  job_events     the event queue behind events() / next_event()
  job_output     Output (job.output): pipes, lines, the tail, the log file
  job_messages   worker messages, the lead, replies, stage records
  job_actions    the state machine's events and actions, timers, signals, live diagnosis
  job_end        exit, drain, snapshot, report, fail_internal
  job_facts      the facts record the report is built from (pure)

Everything inside a Job runs on the hub's I/O thread; the public methods (wait, cancel,
dump_stacks, events) post calls to it or wait on what it publishes. The decisions are made
by bridge/machine.py; this module turns what happens into machine events and performs the
machine's actions.

Events handed to callbacks and to events() are dicts with "event" and "t" (wall clock):
  state    state: starting | running | stalled | ended
  stalled  idle_s, diagnosis {kind, frame, summary, hint, idle_s}: the current diagnosis
           while the job is stalled (on entering the state, then every few seconds)
  output   stream: stdout | stderr, text, end: lf | cr | crlf | max | eof
  message  kind, rank, body, sender: a worker message (hello, stage, progress, heartbeat,
           log, error, bye, reply), strings already unescaped; sender names the process
           (rank, local_rank, host, pid, role: rank | launcher | other, lead: bool)
  lead     pid: the process that speaks for the job now (None: none), docs/CLIENT.md
  hang     reason: startup | stage_budget | stall | heartbeat | after_bye
  signal   signal: SIGUSR1 | SIGTERM | SIGKILL
  dropped  count: events a slow events() consumer missed; kinds: how many of each event
           kind, lines: per stream, the first and last output line number missed
  log_error  path, from_line, error: the log file could not be written from that line on
  end      outcome, report
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import shutil
import signal as signals
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from trainbridge.bridge import job_facts, jobenv, launcher, machine, oom, ranks
from trainbridge.bridge.channel import Channel
from trainbridge.bridge.hub import Hub
from trainbridge.bridge.job_actions import JobActions
from trainbridge.bridge.job_arguments import (
    TAIL_LINES,
    check_arguments,
    metric_names,
    with_stalled_after,
)
from trainbridge.bridge.job_end import JobEnd
from trainbridge.bridge.job_events import EVENT_QUEUE, EventQueue
from trainbridge.bridge.job_leads import Leads
from trainbridge.bridge.job_messages import JobMessages
from trainbridge.bridge.job_output import (
    Output,
    open_log,
)
from trainbridge.bridge.job_status import LiveStatus
from trainbridge.bridge.launcher import LaunchError
from trainbridge.bridge.report import Report
from trainbridge.bridge.streams import ChunkStream
from trainbridge.protocol import codec

__all__ = ["Job", "check_message", "launch"]

OUTBOX_LIMIT = 1000  # job.send() messages held until the worker says hello
REMOTE_ENV = "TRAINBRIDGE_REMOTE_ENV"  # launch(listen=...): the other hosts' ranks' variables
# A job whose output is piped into this process cannot outlive it (it dies of a broken pipe
# at its next print): a job that must outlive its client runs under a keeper instead.
DETACHED_REMOVED = (
    "launch(detached=True) was removed: its output went into this process's "
    "pipes, so the job died of a broken pipe soon after this process. Use "
    "bridge.Scheduler(store=...).submit(cmd): the job runs under its own keeper, "
    "outlives this process, and any process can attach to it (docs/STORE.md)"
)


if TYPE_CHECKING:
    import subprocess
    from abc import abstractmethod

    class JobHost:
        """What the rooms (job_actions, job_messages, job_end) use of the Job, declared for
        mypy only: each room derives from JobHost while type checking and from object at run
        time (bridge/job_actions.py), so a room knows the attributes Job.__init__ sets up and
        the methods of Job and of the other rooms. mypy checks Job's and the rooms' own
        definitions against these, and (abstract) that Job has each method. A self-type
        (`self: Job`) cannot do it: mypy refuses a self-type that is a subclass, and takes a
        room's `self.x = ...` for a new attribute of the room."""

        # Set up in Job.__init__ (see there).
        id: str
        dir: str
        hub: Hub
        channel: Channel
        output: Output
        live_status: LiveStatus
        m: machine.State
        facts: job_facts.Facts
        ranks: Any  # facts["ranks"], read through Job.__getattr__
        crash_file: str
        sample_resources: bool
        stop_on_nan: list[str]
        stdin: Optional[Any]
        proc: Optional[subprocess.Popen[bytes]]
        pid: Optional[int]
        tree: Optional[launcher.Tree]
        report: Optional[Report]
        leads: Leads
        last_message_t: Optional[float]
        live_diagnosis: Optional[dict[str, Any]]
        _done: threading.Event
        _outbox: collections.deque[Any]
        _remote: bool
        _signal_dump_at: Optional[int]
        _hang_seqs: range
        _hang_answered: set[bytes]
        _fallback_pids: Optional[set[int]]
        _oom_before: Optional[int]
        _snapshot_thread: Optional[threading.Thread]
        _dump_seq: Optional[int]
        _cancel_seqs: range
        _live_t: Optional[float]
        _live_mark: Optional[dict[str, Any]]
        _pending_dumps: dict[int, list[Any]]
        _pidfd: Optional[int]
        _drain_started: Optional[float]
        _tree_next: float
        _look: Optional[dict[str, Any]]
        _heard: dict[str, Any]
        _look_due: Optional[float]

        # Job's methods that the rooms call.
        @property
        @abstractmethod
        def unrouted(self) -> int: ...
        @abstractmethod
        def status(self) -> dict[str, Any]: ...
        @abstractmethod
        def _ask_cancel(self, grace: Optional[float], reason: str, **by: Any) -> None: ...
        @abstractmethod
        def _send_outbox(self) -> None: ...
        @abstractmethod
        def _publish(self, event: dict[str, Any]) -> None: ...
        @abstractmethod
        def _publish_records(
            self, rank: int, records: list[dict[str, Any]], sender: dict[str, Any]
        ) -> None: ...

        # A room's methods that another room calls.
        @abstractmethod
        def _step(self, event: dict[str, Any]) -> None: ...  # job_actions
        @abstractmethod
        def _publish_status(self) -> None: ...
        @abstractmethod
        def _live_diagnose(self, force: bool = False) -> None: ...
        @abstractmethod
        def _check_lead_alive(self, now: float) -> None: ...  # job_messages
        @abstractmethod
        def _drain(self) -> None: ...  # job_end
        @abstractmethod
        def _start_snapshot(self) -> None: ...
        @abstractmethod
        def _finish(self) -> None: ...


class Job(JobActions, JobMessages, JobEnd):
    def __init__(
        self,
        cmd: Sequence[str],
        cwd: Optional[str] = None,
        env: Optional[dict[str, str]] = None,
        config: Optional[dict[str, Any]] = None,
        log_path: Optional[str] = None,
        on_event: Optional[Callable[[dict[str, Any]], None]] = None,
        tail_lines: int = TAIL_LINES,
        hub: Optional[Hub] = None,
        zero_code: bool = True,
        detached: bool = False,
        stdin: str = "devnull",
        raw: bool = False,
        python_env: bool = True,
        ident: Optional[Sequence[Any]] = None,
        log_timestamps: bool = False,
        sample_resources: bool = False,
        stop_on_nan: Any = None,
        spawned_at: Optional[float] = None,
        events: bool = True,
    ):
        if detached:
            raise TypeError(DETACHED_REMOVED)
        check_arguments(
            cmd,
            cwd=cwd,
            env=env,
            config=config,
            log_path=log_path,
            on_event=on_event,
            tail_lines=tail_lines,
            stop_on_nan=stop_on_nan,
        )  # before anything exists
        # metrics whose first NaN or infinity cancels the job (bridge/health.py)
        self.stop_on_nan = metric_names(stop_on_nan)
        self.log_path = log_path
        log_fd = open_log(log_path) if log_path else None  # first: nothing to undo
        self.sample_resources = sample_resources  # `resources` events with the heartbeat
        self.hub = hub or Hub.get()
        self.cmd = list(cmd)
        # `ident` (job id, key): chosen by a caller that spawned the process already
        # (bridge/transparent.py), whose directory then exists, or that names its jobs
        # itself (bridge/jobserve.py: the Node client's ids and keys).
        self.id: str
        self.key: bytes
        self.id, self.key = ident or (f"job-{secrets.token_hex(6)}", secrets.token_bytes(32))
        self.dir = os.path.join(self.hub.runtime_dir, self.id)
        os.makedirs(self.dir, 0o700, exist_ok=ident is not None)
        self.stdin_mode = stdin
        self.stdin: Optional[Any] = None  # a writable binary file with stdin="pipe"
        self.stdout = ChunkStream("stdout") if raw else None
        self.stderr = ChunkStream("stderr") if raw else None
        self._outbox: collections.deque[Any] = collections.deque()  # job.send() before any hello
        self.crash_file = os.path.join(self.dir, "crash.txt")
        self._callbacks: list[Callable[[dict[str, Any]], None]] = [on_event] if on_event else []
        # for events() / next_event(); events=False: nobody will read them (run --transparent
        # waits for the report only), so no event is kept and an output line with no
        # listener makes none
        self._events: Optional[EventQueue] = EventQueue(EVENT_QUEUE) if events else None
        self._done = threading.Event()
        self.report: Optional[Report] = None

        # One clock read for the machine's start and the report's: two reads with a slow step
        # between them (the channel's registration, under load) made a startup hang's
        # after_s less than the startup deadline (0.481 s for 0.5 s). `spawned_at`: the
        # time.monotonic() at which a process started before its Job was spawned (jobserve's
        # first launch): the deadlines and the duration count from its start, not from now.
        t0 = time.monotonic() if spawned_at is None else spawned_at
        self.m = machine.initial(config, t0)
        self._unrouted_at_start = self.hub.unrouted  # the report shows what came meanwhile
        self.channel = Channel(self.hub, self.id, self.key, self._on_message, self._on_refused)
        # Facts for the report, gathered as they come (bridge/job_facts.py).
        self.facts = job_facts.initial(
            self.id, self.cmd, log_path, t0, time.time() - (time.monotonic() - t0), tail_lines
        )
        self.facts["ranks"] = ranks.initial()  # every worker process's own state
        self.output = Output(
            self.facts,
            self.hub,
            log_fd,
            log_path,
            log_timestamps,
            lambda stream: self.stdout if stream == "stdout" else self.stderr,
            self._publish,
            self._step,
            lambda: self.m["state"] == "stalled",
            lambda: self._events is not None or bool(self._callbacks),
            self._publish_all,
        )
        self.leads = Leads()  # who speaks for the job
        self._remote = False  # remote_env() was asked: other hosts' ranks may join
        self._signal_dump_at: Optional[int] = None  # crash file size when SIGUSR1 went
        # The hang's dump_stacks (its seqs) and the ranks that answered it; the pids the
        # per-rank fallback (bridge/rankdumps.py) sent SIGUSR2 already.
        self._hang_seqs: range = range(0)
        self._hang_answered: set[bytes] = set()
        self._fallback_pids: Optional[set[int]] = None
        self.last_message_t: Optional[float] = None
        self._oom_before: Optional[int] = None
        self._snapshot_thread: Optional[threading.Thread] = None
        self._dump_seq: Optional[int] = None
        # The in-band cancel in flight: its command seqs (the answer goes to facts["cancel"]).
        self._cancel_seqs: range = range(0)
        # While stalled: the current diagnosis from a cheap look.
        self.live_diagnosis: Optional[dict[str, Any]] = None
        self._live_t: Optional[float] = None
        self._live_mark: Optional[dict[str, Any]] = None
        self._pending_dumps: dict[int, list[Any]] = {}  # command seq -> [held Lock, reply]
        self.live_status = LiveStatus(t0)  # the lead's stages and progress, judged (job_status)
        self._pidfd: Optional[int] = None
        self._drain_started: Optional[float] = None
        self._tree_next = 0.0
        # The look at a startup, heartbeat or stall deadline (machine "look"): the first
        # sample and when the second is due (bridge/look.py)
        self._look: Optional[dict[str, Any]] = None  # {"reason", "sample"}
        # The lead's heartbeats: its `work` count and where its main thread was (look.heard)
        self._heard: dict[str, Any] = {}
        self._look_due: Optional[float] = None
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.pid: Optional[int] = None
        self.tree: Optional[launcher.Tree] = None

        # The worker ends the job's process group when this process is gone (PROTOCOL.md
        # section 2).
        variables = jobenv.variables(
            self.hub.endpoint,
            self.id,
            self.key,
            self.crash_file,
            self.m["config"],
            client_pid=os.getpid(),
        )
        self.env = launcher.job_env(env, variables, self.hub.server_key, python_env, zero_code)
        self.cwd = cwd

    def remote_env(self, address: str, port: int = 0) -> dict[str, str]:
        """The TRAINBRIDGE_* variables for this job's ranks on other hosts (torchrun on node
        2 and up inherits them from its caller's environment). The hub listens on
        tcp://address:port (0: a free port) as a CurveZMQ server; a hello that arrives there
        authenticated with this job's key joins the job although its pid is not in the
        local process tree (docs/PROTOCOL.md "Other hosts"). No client pid (it names no
        process over there) and no crash file (a path of this host). Raises ValueError for a
        loopback address, which other hosts cannot reach, and for one this host does not have."""
        from trainbridge.bridge import remote

        remote.check_address(address)
        remote.check_local(address)
        endpoint, server_key = self.hub.listen(address, port)
        self._remote = True
        out = jobenv.variables(endpoint, self.id, self.key, "", self.m["config"], None)
        del out["TRAINBRIDGE_CRASH_FILE"]
        out["TRAINBRIDGE_SERVER_KEY"] = server_key
        return out

    # --- start (caller's thread) ----------------------------------------------------------
    def start(
        self, proc: Any = None, read_pipes: bool = True, stop: Optional[tuple[str, str]] = None
    ) -> Job:
        """Spawn the command, or supervise `proc`, a Popen already started with this
        job's environment (ident given, stdout and stderr pipes). Without `read_pipes`
        the caller reads proc's pipes and hands every chunk to feed_output(). `stop`:
        (signal name, reason), a user signal asked before the spawn: noted, then sent to
        the process the moment it exists (note_user_signal)."""
        registered = threading.Event()

        def register() -> None:
            self.hub.add_job(self)
            registered.set()

        self.hub.call(register)
        registered.wait()
        if proc is None:
            try:
                proc = launcher.spawn(self.cmd, self.cwd, self.env, stdin=self.stdin_mode)
            except launcher.LaunchError:
                self.hub.call(lambda: self.hub.remove_job(self.id))
                self.output.close_log()
                raise
        self.pid = self.facts["pid"] = proc.pid
        self.stdin = proc.stdin
        if stop is not None:  # noted first: the exit, which may follow at once, finds it
            self.note_user_signal(*stop)
            try:
                os.kill(proc.pid, getattr(signals, stop[0]))
            except OSError:
                pass  # gone already: its exit decides
        attached = threading.Event()

        def attach() -> None:
            self._attach(proc, read_pipes)
            attached.set()

        self.hub.call(attach)
        attached.wait()
        return self

    def _attach(self, proc: subprocess.Popen[bytes], read_pipes: bool = True) -> None:
        if self._done.is_set():  # failed (internal) between spawn and here: nothing may run on
            launcher.Tree(proc.pid, self.id).signal(signals.SIGKILL)
            try:
                proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - SIGKILLed: it goes; never block the reactor
                pass
            return
        self.proc = proc
        if self.tree is None:
            self.tree = launcher.Tree(proc.pid, self.id)
        self.output.attach(proc, read_pipes, owner=self)  # without read_pipes: feed_output()
        self._oom_before = oom.oom_kill_count(proc.pid)
        self._pidfd = launcher.open_pidfd(proc.pid)
        if self._pidfd is not None:
            self.hub.add_fd(self._pidfd, self._on_exit_ready, owner=self)
        else:
            launcher.watch_exit_in_thread(proc, lambda: self.hub.call(self._on_exit_ready))
        self._publish({"event": "spawn", "pid": proc.pid, "command": list(self.cmd)})
        self._publish({"event": "state", "state": self.m["state"]})
        self.hub.release_early(self)  # a process spawned before its job: what it said meanwhile

    def no_worker(self, reason: str) -> None:
        """Any thread: no worker of this job can reach this supervisor (the hub could not
        bind the endpoint its process was given): the job does not wait for a hello, and
        its report says why."""
        self.hub.call(
            lambda: self._step({"type": "no_worker", "t": time.monotonic(), "reason": reason})
        )

    def feed_output(self, stream: str, chunk: bytes) -> None:
        """I/O thread, for start(proc, read_pipes=False): a chunk the caller read from the
        child's `stream` (b"" at EOF), handled as if the job had read it."""
        self.output.feed(stream, chunk)

    # --- public API (any thread) ----------------------------------------------------------
    @property
    def state(self) -> str:
        state: str = self.m["state"]
        return state

    @property
    def outcome(self) -> Optional[str]:
        outcome: Optional[str] = self.m["outcome"]
        return outcome

    @property
    def stage(self) -> Optional[str]:
        name: Optional[str] = self.facts["stages"][-1]["name"] if self.facts["stages"] else None
        return name

    def done(self) -> bool:
        return self._done.is_set()

    def status(self) -> dict[str, Any]:
        """A snapshot for a GUI: state, pid, elapsed_s, stages (open, outermost first),
        script_stages (without zero-code mode's own), step, total, rate (steps/s), eta_s,
        progress_age_s (bridge/status.py)."""
        return self.live_status.snapshot(self.m["state"], self.pid, time.monotonic())

    def wait(self, timeout: Optional[float] = None) -> Optional[Report]:
        """Block until the job ended and its report is built; None on timeout."""
        if not self._done.wait(timeout):
            return None
        return self.report

    def cancel(self, grace: Optional[float] = None, reason: Optional[str] = None) -> None:
        """Ask the job to stop: in-band cancel, then SIGTERM after `grace`, then SIGKILL.
        `reason` is echoed in the report's "cancel"; a worker that cannot interrupt the
        script (SIGINT ignored) says so, and SIGTERM follows at once."""

        self.hub.call(lambda: self._ask_cancel(grace, reason or "cancelled by the client"))

    def _ask_cancel(self, grace: Optional[float], reason: str, **by: Any) -> None:
        """cancel() on the I/O thread; `by` says who asked, when not the client."""
        if self.facts["cancel"] is None:
            self.facts["cancel"] = {
                "reason": reason,
                "accepted": None,
                "refused": None,
                "traceback": None,
                **by,
            }
        self._step({"type": "cancel", "t": time.monotonic(), "grace": grace})

    def note_user_signal(self, name: str, reason: str) -> None:
        """The user sent the process `name` (SIGINT/SIGTERM/SIGHUP) outside cancel(), as
        `run --transparent` forwards its own: no escalation, but the job is cancelled
        however it then ends. The report's "cancel" says by what (by: "signal")."""

        def note() -> None:
            facts = self.facts
            ended = facts["exit_code"] is not None or facts["exit_signal"] is not None
            if facts["cancel"] is None and not ended:
                facts["cancel"] = {
                    "reason": reason,
                    "accepted": None,
                    "refused": None,
                    "traceback": None,
                    "by": "signal",
                    "signal": name,
                }
            self._step({"type": "user_signal", "t": time.monotonic(), "signal": name})

        self.hub.call(note)

    def dump_stacks(self, timeout: float = 2.0) -> Optional[str]:
        """Every thread's Python stack from the worker, or None (no worker, no answer)."""
        reply = self._ask("dump_stacks", timeout)
        return reply.get("stacks") if reply else None

    def ping(self, timeout: float = 2.0) -> Optional[float]:
        """Round trip to the worker's beacon in seconds, or None (no worker, no answer)."""
        started = time.monotonic()
        reply = self._ask("ping", timeout)
        return time.monotonic() - started if reply and reply.get("ok") else None

    def _ask(self, kind: str, timeout: float) -> Optional[dict[str, Any]]:
        """Send a command to the worker and wait for its reply body."""
        # A held lock, released by the I/O thread, rather than an Event: after waking the
        # I/O thread the caller goes straight into one C call that gives up the GIL, instead
        # of an Event.wait()'s Python, which the woken I/O thread would wait on.
        box: list[Any] = [threading.Lock(), None]
        box[0].acquire()

        def ask() -> None:
            seq = self.channel.command(kind)
            if seq is None:
                box[0].release()  # no worker said hello: nobody to ask
            else:
                self._pending_dumps[seq] = box

        self.hub.call(ask)
        box[0].acquire(True, timeout)
        reply: Optional[dict[str, Any]] = box[1]  # the reply body, or None
        return reply

    def send(self, data: Any) -> None:
        """Send a message (any JSON-like value) to the training script, which gets it from
        worker.on_message() / worker.receive() (PROTOCOL.md "user"). In order; held until
        the worker said hello (at most OUTBOX_LIMIT). Raises ValueError when too large
        and RuntimeError when the job ended or the outbox is full."""
        check_message(data, self.key, self.id)
        if self._done.is_set():
            raise RuntimeError(f"job.send: job {self.id} has ended")
        if self.leads.lead is None and len(self._outbox) >= OUTBOX_LIMIT:
            raise RuntimeError(
                f"job.send: {OUTBOX_LIMIT} messages wait for the worker's "
                "hello; does the script import trainbridge.worker?"
            )
        self._outbox.append(data)
        self.hub.call(self._send_outbox)

    def _send_outbox(self) -> None:
        lead = self.leads.lead
        if lead is None or self._done.is_set():
            return  # sent once the lead said hello
        while self._outbox:
            self.channel.send_to(lead, "user", {"data": self._outbox.popleft()})

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call `callback(event)` on the I/O thread for every later event (keep it short)."""
        self.hub.call(lambda: self._callbacks.append(callback))

    def events(self, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Events since the job started, in order, until "end". One consumer at a time; a
        consumer that falls EVENT_QUEUE behind gets a "dropped" event instead of the oldest.
        With a timeout, the iteration stops when no event came for that long."""
        return self._queue().events(timeout)

    def next_event(self, timeout: Optional[float] = 0) -> Optional[dict[str, Any]]:
        """The next event from the job's queue, waiting up to `timeout` (None: forever)."""
        return self._queue().next_event(timeout)

    def _queue(self) -> EventQueue:
        if self._events is None:
            raise RuntimeError(
                "this Job was made with events=False, so it keeps no events: make it with "
                "events=True (the default) to read events() / next_event(), or pass on_event"
            )
        return self._events

    def __getattr__(self, name: str) -> Any:
        """job.exit_code, job.progress, job.stages, ...: the facts record's values, read as
        attributes (as before the record held them); cancel_info is facts["cancel"]."""
        facts = self.__dict__.get("facts")
        key = "cancel" if name == "cancel_info" else name
        if facts is None or key not in facts:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return facts[key]

    @property
    def unrouted(self) -> int:
        """Messages for no job of this client while this job ran (docs/PROTOCOL.md 8)."""
        return self.hub.unrouted - self._unrouted_at_start

    # --- I/O thread: publishing -----------------------------------------------------------
    def _publish(self, event: dict[str, Any]) -> None:
        event.setdefault("t", time.time())
        self._publish_all([event])

    def _publish_all(self, events: list[dict[str, Any]]) -> None:
        """Queue the events for events() and hand each to every listener, in order, with one
        lock for the lot (a `logs` batch holds up to 256 records)."""
        self.hub.io_only("a job's publish")
        if self._events is not None:
            self._events.put_all(events)
        for event in events:  # each event to every listener before the next event
            for callback in list(self._callbacks):
                try:
                    callback(event)
                except Exception as exc:  # noqa: BLE001 - a listener's bug must not kill supervision
                    self._callbacks.remove(callback)
                    self.output.write_log(
                        f"[trainbridge] event listener {callback!r} failed and was "
                        f"removed: {type(exc).__name__}: {exc}"
                    )

    def _publish_records(
        self, rank: int, records: list[dict[str, Any]], sender: dict[str, Any]
    ) -> None:
        """_publish() each record of a `logs` batch as its own `log` message event, with one
        clock read and one lock for the batch (a batch holds up to 256 records)."""
        t = time.time()
        events = [
            {
                "event": "message",
                "kind": "log",
                "rank": rank,
                "body": record,
                "t": t,
                "sender": sender,
            }
            for record in records
        ]
        self._publish_all(events)


def check_message(data: Any, key: bytes = b"k" * 32, job_id: str = "size-check") -> None:
    """ValueError when job.send(data) cannot go to the worker (too large, a type the codec
    refuses): the codec's own check, also for an attached job's send (scheduled.request)."""
    try:
        codec.encode("user", 1, {"data": data}, key, job_id)
    except codec.ProtocolError as exc:
        raise ValueError(f"job.send: cannot send this message ({exc})") from None


def launch(
    cmd: Sequence[str],
    cwd: Optional[str] = None,
    env: Optional[dict[str, str]] = None,
    startup_timeout: Optional[float] = machine.DEFAULTS["startup_timeout"],
    stall_timeout: Optional[float] = machine.DEFAULTS["stall_timeout"],
    heartbeat_timeout: Optional[float] = machine.DEFAULTS["heartbeat_timeout"],
    kill_grace: float = cast(float, machine.DEFAULTS["kill_grace"]),  # a float, never None
    log_path: Optional[str] = None,
    on_event: Optional[Callable[[dict[str, Any]], None]] = None,
    zero_code: bool = True,
    detached: bool = False,
    stdin: str = "devnull",
    raw: bool = False,
    python_env: bool = True,
    log_timestamps: bool = False,
    sample_resources: bool = False,
    stop_on_nan: Any = None,
    events: bool = True,
    listen: Optional[tuple[str, int]] = None,
    **machine_config: Any,
) -> Job:
    """Start `cmd` (a list, no shell) under supervision and return its Job at once.

    Timeouts are seconds; None disables one. More machine settings (stalled_after,
    cancel_grace, dump_timeout, signal_dump_wait, drain_timeout) may be given by name.
    zero_code puts bridge/inject first on PYTHONPATH, so every Python process of the job
    that can import trainbridge loads the worker (and says hello) without code changes.
    The job ends (SIGTERM, then SIGKILL after kill_grace) when this process dies without
    ending it, as noticed by the job's worker-bearing processes; a job that must outlive
    this process is submitted to a bridge.Scheduler instead (detached=True raises).
    stdin="pipe" makes job.stdin a writable binary file (close it for EOF); "inherit"
    passes this process's stdin. raw=True makes job.stdout and job.stderr iterators of
    the output's bytes chunks, exactly as written, besides the line events. python_env=False
    leaves PYTHONUNBUFFERED, PYTHONIOENCODING, PYTHONUTF8 and PYTHONFAULTHANDLER as the
    caller's environment has them. sample_resources=True publishes a `resources` event (the
    job's process tree's CPU, RSS and GPU; bridge/resources.py) with the status heartbeat, at
    most once a second, as a scheduled job's keeper does. stop_on_nan: a metric name, a list of
    them, or "*" for every one: the job is cancelled when one first becomes NaN or infinite
    (the `health` event says it either way; docs/CLIENT.md "Training health").
    events=False keeps no events for events() / next_event() (which then raise): for a
    caller that listens with on_event or only waits for the report, so a flood of output
    lines is not queued for nobody.
    listen=(address, port): the job's ranks are on other hosts and the launched process
    starts them (a Slurm job's runner): the hub listens there (remote_env()) and the ranks'
    variables are in the launched process's environment as TRAINBRIDGE_REMOTE_ENV (JSON).
    Raises launcher.LaunchError when the command cannot be started."""
    config = {
        "startup_timeout": startup_timeout,
        "stall_timeout": stall_timeout,
        "heartbeat_timeout": heartbeat_timeout,
        "kill_grace": kill_grace,
        **machine_config,
    }
    check_arguments(
        cmd,
        cwd=cwd,
        env=env,
        config=config,
        log_path=log_path,
        on_event=on_event,
        stop_on_nan=stop_on_nan,
    )
    job = Job(
        cmd,
        cwd=cwd,
        env=env,
        config=with_stalled_after(config),
        log_path=log_path,
        on_event=on_event,
        zero_code=zero_code,
        detached=detached,
        stdin=stdin,
        raw=raw,
        python_env=python_env,
        log_timestamps=log_timestamps,
        sample_resources=sample_resources,
        stop_on_nan=stop_on_nan,
        events=events,
    )
    if listen is not None:
        # The launched process starts the ranks on other hosts itself (a Slurm job's
        # runner, bridge/slurm_runner.py): their variables reach it in its environment only.
        try:
            job.env[REMOTE_ENV] = json.dumps(job.remote_env(*listen))
        except (ValueError, OSError, RuntimeError) as exc:  # a bad address, a port taken
            job.output.close_log()
            shutil.rmtree(job.dir, ignore_errors=True)
            raise LaunchError(f"cannot listen for the job's ranks on {listen[0]}: {exc}") from exc
    return job.start()
