"""A supervised job: the glue between the hub, the launcher, the state machine and the report.

This module is the facade: Job's set-up and public API, and launch() (its length, over the
rooms' ~200 lines, is the public API's documentation and the child's environment). Its rooms,
each one concern (docs/CLIENT.md "Rooms of the Job"), the one implementation: every face (the
Node client through bridge/jobserve.py) renders what this Job publishes:
  job_arguments  the argument check (launch, Job, aio, the scheduler and the CLI use it)
  job_events     the event queue behind events() / next_event()
  job_publish    Publisher (job.publisher): events to listeners and the queue, in order
  job_outbox     Outbox (job.outbox): job.send()'s messages held until the lead's hello
  job_output     Output (job.output): pipes, lines, the tail, the log file
  job_status     LiveStatus (job.live_status): the judged status snapshot
  job_leads      Leads (job.election): who speaks for the job
  job_asks       Asks (job.asks): the commands awaiting an answer
  job_dumps      SignalDumps (job.dumps): the signal dumps in the crash file
  job_look       Look (job.deadline_look): the look at a deadline, the lead's heartbeats
  job_live       LiveDiagnosis (job.live): the live diagnosis while stalled
  job_exit       ExitWatch (job.exit_watch): the process's end, the OOM killer's count
  job_snapshot   Snapshot (job.hang_snapshot): the hang's evidence, on a thread of its own
  job_messages   Messages (job.messages): worker messages, the lead, replies, stage records
  job_actions    Actions (job.actions): the machine's events and actions, timers, signals
  job_end        Ending (job.ending): exit, drain, snapshot, report, fail_internal
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

import json
import os
import secrets
import shutil
import signal as signals
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, cast

from trainbridge.bridge import job_facts, jobenv, launcher, machine, ranks
from trainbridge.bridge.channel import Channel
from trainbridge.bridge.hub import Hub
from trainbridge.bridge.job_actions import Actions
from trainbridge.bridge.job_arguments import (
    TAIL_LINES,
    check_arguments,
    metric_names,
    with_stalled_after,
)
from trainbridge.bridge.job_asks import Asks
from trainbridge.bridge.job_dumps import SignalDumps
from trainbridge.bridge.job_end import Ending
from trainbridge.bridge.job_exit import ExitWatch
from trainbridge.bridge.job_leads import Leads
from trainbridge.bridge.job_live import LiveDiagnosis
from trainbridge.bridge.job_look import Look
from trainbridge.bridge.job_messages import Messages
from trainbridge.bridge.job_outbox import Outbox
from trainbridge.bridge.job_output import Output, open_log
from trainbridge.bridge.job_publish import Publisher
from trainbridge.bridge.job_snapshot import Snapshot
from trainbridge.bridge.job_status import LiveStatus
from trainbridge.bridge.launcher import LaunchError
from trainbridge.bridge.report import Report
from trainbridge.bridge.streams import ChunkStream
from trainbridge.protocol import codec

__all__ = ["Job", "check_message", "launch"]

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

_Self = TypeVar("_Self", bound="JobCore")  # start() returns the job it was called on


class JobCore:
    """A supervised job: its parts (the module's docstring) own their state; the Job holds
    them, sets up what they share (the facts, the machine's state, the process) and is the
    API. The rooms see the Job as this class: without Job's facts read as attributes (whose
    __getattr__ would make any misspelt attribute an Any for mypy), every name they use of it
    is checked."""

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
        self._place(ident)
        self.stdin_mode = stdin
        self.stdin: Optional[Any] = None  # a writable binary file with stdin="pipe"
        self.stdout = ChunkStream("stdout") if raw else None
        self.stderr = ChunkStream("stderr") if raw else None
        # One clock read for the machine's start and the report's: two reads with a slow step
        # between them (the channel's registration, under load) made a startup hang's
        # after_s less than the startup deadline (0.481 s for 0.5 s). `spawned_at`: the
        # time.monotonic() at which a process started before its Job was spawned (jobserve's
        # first launch): the deadlines and the duration count from its start, not from now.
        t0 = time.monotonic() if spawned_at is None else spawned_at
        self._parts(config, t0, events, on_event, tail_lines)
        self.output = Output(
            self.facts,
            self.hub,
            log_fd,
            log_path,
            log_timestamps,
            lambda stream: self.stdout if stream == "stdout" else self.stderr,
            self.publisher.publish,
            self.actions.step,
            lambda: self.m["state"] == "stalled",
            self.publisher.wanted,
            self.publisher.publish_all,
        )
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

    def _place(self, ident: Optional[Sequence[Any]]) -> None:
        """The job's id, key and private folder (with its crash file's path). `ident` (job
        id, key): chosen by a caller that spawned the process already (bridge/transparent.py),
        whose folder then exists, or that names its jobs itself (bridge/jobserve.py: the Node
        client's ids and keys)."""
        self.id: str
        self.key: bytes
        self.id, self.key = ident or (f"job-{secrets.token_hex(6)}", secrets.token_bytes(32))
        self.dir = os.path.join(self.hub.runtime_dir, self.id)
        os.makedirs(self.dir, 0o700, exist_ok=ident is not None)
        self.crash_file = os.path.join(self.dir, "crash.txt")

    def _parts(
        self,
        config: Optional[dict[str, Any]],
        t0: float,
        events: bool,
        on_event: Optional[Callable[[dict[str, Any]], None]],
        tail_lines: int,
    ) -> None:
        """The parts that hold the job's state (each a room of its own: the module's
        docstring), the machine's state from `t0`, the report's facts, and the channel the
        worker's messages come in by. The output part comes after (it writes the facts)."""
        # The events, to listeners and for events() / next_event(); events=False: nobody will
        # read them (run --transparent waits for the report only), so no event is kept and an
        # output line with no listener makes none.
        self.publisher = Publisher(
            self.hub, events, on_event, lambda text: self.output.write_log(text)
        )
        self.outbox = Outbox()  # job.send() before the lead's hello
        # The rooms: each a part that reads and moves the job's state set up here.
        self.actions = Actions(self)  # the machine's events and actions, timers, signals
        self.messages = Messages(self)  # worker messages, the lead, replies
        self.ending = Ending(self)  # exit, drain, snapshot, report
        self.report: Optional[Report] = None
        self.m = machine.initial(config, t0)
        self._unrouted_at_start = self.hub.unrouted  # the report shows what came meanwhile
        self.channel = Channel(
            self.hub, self.id, self.key, self.messages.on_message, self.messages.on_refused
        )
        # Facts for the report, gathered as they come (bridge/job_facts.py).
        self.facts = job_facts.initial(
            self.id, self.cmd, self.log_path, t0, time.time() - (time.monotonic() - t0), tail_lines
        )
        self.facts["ranks"] = ranks.initial()  # every worker process's own state
        self.election = Leads()  # who speaks for the job
        self.remote_ranks = False  # remote_env() was asked: other hosts' ranks may join
        self.asks = Asks()  # commands that await an answer: callers', the hang's, the cancel
        self.dumps = SignalDumps(self.crash_file)  # the signal dumps in the crash file
        self.last_message_t: Optional[float] = None
        self.hang_snapshot = Snapshot()  # the hang's evidence, gathered on a thread of its own
        self.live = LiveDiagnosis()  # while stalled: the current diagnosis from a cheap look
        self.live_status = LiveStatus(t0)  # the lead's stages and progress, judged (job_status)
        self.exit_watch = ExitWatch(self.hub)  # the process's end: pidfd, OOM count before
        self.deadline_look = Look()  # the look at a startup, heartbeat or stall deadline

    def remote_env(self, address: str, port: int = 0) -> dict[str, str]:
        """The TRAINBRIDGE_* variables for this job's ranks on other hosts (torchrun on node
        2 and up inherits them from its caller's environment). The hub listens on
        tcp://address:port (0: a free port) as a CurveZMQ server; a hello that arrives there
        authenticated with this job's key joins the job although its pid is not in the
        local process tree (docs/PROTOCOL.md "Other hosts"). No client pid (it names no
        process over there) and no crash file (a path of this host). Raises ValueError for a
        loopback address, which other hosts cannot reach, and for one this host does not have."""
        from trainbridge.bridge import listen, remote

        listen.check_address(address)
        remote.check_local(address)
        endpoint, server_key = self.hub.listen(address, port)
        self.remote_ranks = True
        out = jobenv.variables(endpoint, self.id, self.key, "", self.m["config"], None)
        del out["TRAINBRIDGE_CRASH_FILE"]
        out["TRAINBRIDGE_SERVER_KEY"] = server_key
        return out

    # --- start (caller's thread) ----------------------------------------------------------
    def start(
        self: _Self,
        proc: Any = None,
        read_pipes: bool = True,
        stop: Optional[tuple[str, str]] = None,
    ) -> _Self:
        """Spawn the command, or supervise `proc`, a Popen already started with this
        job's environment (ident given, stdout and stderr pipes). Without `read_pipes`
        the caller reads proc's pipes and hands every chunk to feed_output(). `stop`:
        (signal name, reason), a user signal asked before the spawn: noted, then sent to
        the process the moment it exists (note_user_signal)."""
        registered = threading.Event()

        def register() -> None:
            self.hub.add_job(self)
            # What the process says before _attach is held and handed over there, in order:
            # a hello judged before this thread recorded the pid (a loaded machine can hold
            # it that long after the fork) was taken for a stranger's, and all the job said
            # was refused.
            self.hub.expect(self.id)
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
        if self.done():  # failed (internal) between spawn and here: nothing may run on
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
        self.exit_watch.start(proc, self.ending.on_exit_ready, owner=self)
        self.publisher.publish({"event": "spawn", "pid": proc.pid, "command": list(self.cmd)})
        self.publisher.publish({"event": "state", "state": self.m["state"]})
        self.hub.release_early(self)  # a process spawned before its job: what it said meanwhile

    def no_worker(self, reason: str) -> None:
        """Any thread: no worker of this job can reach this supervisor (the hub could not
        bind the endpoint its process was given): the job does not wait for a hello, and
        its report says why."""
        self.hub.call(
            lambda: self.actions.step(
                {"type": "no_worker", "t": time.monotonic(), "reason": reason}
            )
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

    @property
    def live_diagnosis(self) -> Optional[dict[str, Any]]:
        """While stalled: the current diagnosis from a cheap look ({kind, frame, summary,
        hint, idle_s}, as the last "stalled" event said), else None before any stall."""
        return self.live.current

    def done(self) -> bool:
        return self.ending.finished.is_set()

    def status(self) -> dict[str, Any]:
        """A snapshot for a GUI: state, pid, elapsed_s, stages (open, outermost first),
        script_stages (without zero-code mode's own), step, total, rate (steps/s), eta_s,
        progress_age_s (bridge/status.py)."""
        return self.live_status.snapshot(self.m["state"], self.pid, time.monotonic())

    def wait(self, timeout: Optional[float] = None) -> Optional[Report]:
        """Block until the job ended and its report is built; None on timeout."""
        if not self.ending.finished.wait(timeout):
            return None
        return self.report

    def cancel(self, grace: Optional[float] = None, reason: Optional[str] = None) -> None:
        """Ask the job to stop: in-band cancel, then SIGTERM after `grace`, then SIGKILL.
        `reason` is echoed in the report's "cancel"; a worker that cannot interrupt the
        script (SIGINT ignored) says so, and SIGTERM follows at once."""

        self.hub.call(lambda: self.actions.ask_cancel(grace, reason or "cancelled by the client"))

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
            self.actions.step({"type": "user_signal", "t": time.monotonic(), "signal": name})

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
                self.asks.caller(seq, box)

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
        if self.done():
            raise RuntimeError(f"job.send: job {self.id} has ended")
        self.outbox.hold(data, lead_present=self.election.lead is not None)
        self.hub.call(self.messages.send_outbox)

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call `callback(event)` on the I/O thread for every later event (keep it short)."""
        self.hub.call(lambda: self.publisher.add(callback))

    def events(self, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Events since the job started, in order, until "end". One consumer at a time; a
        consumer that falls EVENT_QUEUE behind gets a "dropped" event instead of the oldest.
        With a timeout, the iteration stops when no event came for that long."""
        return self.publisher.queue().events(timeout)

    def next_event(self, timeout: Optional[float] = 0) -> Optional[dict[str, Any]]:
        """The next event from the job's queue, waiting up to `timeout` (None: forever)."""
        return self.publisher.queue().next_event(timeout)

    @property
    def unrouted(self) -> int:
        """Messages for no job of this client while this job ran (docs/PROTOCOL.md 8)."""
        return self.hub.unrouted - self._unrouted_at_start

    # --- the hub's calls (I/O thread; hold: any thread), handled by the rooms -------------
    def next_wakeup(self) -> Optional[float]:
        return self.actions.next_wakeup()

    def tick(self, now: float) -> None:
        self.actions.tick(now)

    def paused(self, seconds: float) -> None:
        self.actions.paused(seconds)

    def hold(self, held: bool) -> None:
        """The job's processes wait in another scheduler's queue (held: a Slurm job PENDING)
        or no longer do: its start-up and stall deadlines wait meanwhile. Any thread."""
        self.actions.hold(held)

    def fail_internal(self, exc: BaseException) -> None:
        self.ending.fail_internal(exc)


class Job(JobCore):
    """A supervised job, as launch() returns it: JobCore's API, and the facts record's values
    read as attributes."""

    def __getattr__(self, name: str) -> Any:
        """job.exit_code, job.progress, job.stages, ...: the facts record's values, read as
        attributes (as before the record held them); cancel_info is facts["cancel"]."""
        facts = self.__dict__.get("facts")
        key = "cancel" if name == "cancel_info" else name
        if facts is None or key not in facts:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return facts[key]


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
    job = Job(  # Job checks the arguments (check_arguments) before anything exists
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
        _listen_for_ranks(job, listen)
    return job.start()


def _listen_for_ranks(job: Job, listen: tuple[str, int]) -> None:
    """The launched process starts the ranks on other hosts itself (a Slurm job's runner,
    bridge/slurm_runner.py): the hub listens for them, and their variables reach the
    process in its environment only. LaunchError (the job's folder removed) when the hub
    cannot listen there."""
    try:
        job.env[REMOTE_ENV] = json.dumps(job.remote_env(*listen))
    except (ValueError, OSError, RuntimeError) as exc:  # a bad address, a port taken
        job.output.close_log()
        shutil.rmtree(job.dir, ignore_errors=True)
        raise LaunchError(f"cannot listen for the job's ranks on {listen[0]}: {exc}") from exc
