"""A supervised job: the glue between the hub, the launcher, the state machine and the report.

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
import collections.abc
import os
import secrets
import shutil
import signal as signals
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from trainbridge.bridge import jobenv, launcher, machine, ranks
from trainbridge.bridge import report as reports
from trainbridge.bridge.hub import Channel, Hub
from trainbridge.bridge.launcher import LaunchError
from trainbridge.bridge.lines import LineSplitter, RedrawThrottle, decode_line, log_text
from trainbridge.bridge.status import StatusTracker
from trainbridge.bridge.streams import ChunkStream

READ_SIZE = 64 * 1024
TAIL_LINES = 40
EVENT_QUEUE = 10_000  # events kept for events(); the oldest go first when it is full
LIVE_DIAGNOSIS_S = 2.0  # while stalled, the live diagnosis is refreshed at most this often
OUTPUT_EVENT_S = 0.25  # output lines reach the state machine at most this often (issue 12)
STAGES_KEPT = 1_000  # stage records kept for the report (a stage per step must not grow)
LEADS_KEPT = 16  # lead changes kept for the report
DUMPS_KEPT = 4  # dump_stacks replies kept for the report
PIPE_LINGER_S = 0.2  # after the exit: how long a pipe held by a grandchild may keep us
TREE_REFRESH_S = 1.0  # how often the process tree is re-read while the job runs
# ... plus this much per job the hub serves: each refresh scans all of /proc, so a round
# over every job costs jobs x processes and saturated the I/O thread at 200 jobs. The tree
# is a safety net (the group kill and the end-of-job scan by job id find the rest).
TREE_REFRESH_PER_JOB_S = 0.05
# What bridge/inject/sitecustomize.py and the worker print when they cannot run: no hello
# will come from that process, so waiting for one (the startup deadline) would only kill it.
NO_WORKER_MARKERS = ("[trainbridge] zero-code mode is off", "[trainbridge] worker disabled")
# Keys of _pipes for streams the caller reads (start(read_pipes=False)): never real fds.
PSEUDO_FDS = {"stdout": -1, "stderr": -2}
OUTBOX_LIMIT = 1000  # job.send() messages held until the worker says hello
SEND_RETRY_S = 0.01  # how soon a send that a full worker queue refused is tried again
SIGNALS = {"SIGUSR1": signals.SIGUSR1, "SIGTERM": signals.SIGTERM, "SIGKILL": signals.SIGKILL}
if hasattr(signals, "SIGUSR2"):
    SIGNALS["SIGUSR2"] = signals.SIGUSR2
# A job whose output is piped into this process cannot outlive it (it dies of a broken pipe
# at its next print): a job that must outlive its client runs under a keeper instead.
DETACHED_REMOVED = (
    "launch(detached=True) was removed: its output went into this process's "
    "pipes, so the job died of a broken pipe soon after this process. Use "
    "bridge.Scheduler(store=...).submit(cmd): the job runs under its own keeper, "
    "outlives this process, and any process can attach to it (docs/STORE.md)"
)


class Report(dict):
    """The final report: a JSON-ready dict (docs/report.schema.json) with attribute access."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Job:
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
        )  # before anything exists
        self.log_path = log_path
        self._log = open_log(log_path) if log_path else None  # first: nothing to undo
        self.log_lines = 0  # lines written to the log file
        self.log_error: Optional[dict[str, Any]] = None  # the log file is incomplete
        self.log_timestamps = log_timestamps  # prefix each log line with its UTC time
        self.hub = hub or Hub.get()
        self.cmd = list(cmd)
        # `ident` (job id, key): chosen by a caller that spawned the process already
        # (bridge/transparent.py), whose directory then exists.
        self.id, self.key = ident or (f"job-{secrets.token_hex(6)}", secrets.token_bytes(32))
        self.dir = os.path.join(self.hub.runtime_dir, self.id)
        os.makedirs(self.dir, 0o700, exist_ok=ident is not None)
        self.stdin_mode = stdin
        self.stdin: Optional[Any] = None  # a writable binary file with stdin="pipe"
        self.stdout = ChunkStream("stdout") if raw else None
        self.stderr = ChunkStream("stderr") if raw else None
        self._outbox: collections.deque[Any] = collections.deque()  # job.send() before any hello
        self.crash_file = os.path.join(self.dir, "crash.txt")
        self.dropped: dict[bytes, dict[str, int]] = {}  # routing id -> the worker's drop counts
        self._callbacks: list[Callable[[dict[str, Any]], None]] = [on_event] if on_event else []
        self._queue: collections.deque[dict[str, Any]] = collections.deque(maxlen=EVENT_QUEUE)
        self._queue_cond = threading.Condition()
        self._queue_dropped = 0
        self._dropped_kinds: dict[str, int] = {}  # of _queue_dropped, per event kind
        self._dropped_lines: dict[str, list[int]] = {}  # stream -> [first, last] line missed
        self._queue_waiting = 0  # threads in next_event's wait (guarded by _queue_cond)
        self._done = threading.Event()
        self.report: Optional[Report] = None

        self.m = machine.initial(config, time.monotonic())
        self._unrouted_at_start = self.hub.unrouted  # the report shows what came meanwhile
        self.channel = Channel(self.hub, self.id, self.key, self._on_message, self._on_refused)
        # Facts for the report, gathered as they come.
        self.started_wall = time.time()
        self.started = time.monotonic()
        self.ended: Optional[float] = None
        self.tail: collections.deque[dict[str, str]] = collections.deque(maxlen=tail_lines)
        self.last_output_t: Optional[float] = None  # monotonic time of the last output line
        self.lines = {"stdout": 0, "stderr": 0}
        self.bytes = {"stdout": 0, "stderr": 0}
        self.hellos: dict[int, dict[str, Any]] = {}
        self.ranks = ranks.initial()  # every worker process's own state (report `ranks`)
        self.lead: Optional[bytes] = None  # routing id of the process that speaks for the job
        self.lead_pid: Optional[int] = None
        # Hellos of the processes that may lead (said hello, have not left), in order.
        self._present: dict[bytes, dict[str, Any]] = {}
        self._foreign: set = set()  # routing ids whose hello came from outside the tree
        self.foreign_hellos = 0
        self.leads: list[Optional[int]] = []  # pids that spoke for the job, in turn (None: none)
        self.internal_error: Optional[dict[str, Any]] = None  # a trainbridge bug ended the job
        self.dump_pids: list[int] = []
        self.native_dump_pids: list[int] = []  # SIGUSR2: faulthandler's C dump, main thread
        self._signal_dump_at: Optional[int] = None  # crash file size when SIGUSR1 went
        self.stages: list[dict[str, Any]] = []
        self.stages_dropped = 0
        self._stage_events = 0  # numbers the stage begins and ends, in the order received
        self.progress: Optional[dict[str, Any]] = None
        self.error: Optional[dict[str, Any]] = None
        self.bye: Optional[dict[str, Any]] = None
        self.heartbeat: Optional[dict[str, Any]] = None
        self.last_message_t: Optional[float] = None
        self.stacks: list[str] = []
        self.fatal_lines: list[str] = []  # faulthandler's report on stderr, after a crash
        self._fatal_capture = False
        self.oom_killed: Optional[bool] = None
        self._oom_before: Optional[int] = None
        self.oom_kills: Optional[int] = None  # OOM kills in the job's cgroup while it ran
        self.leftovers: list[int] = []  # pids that outlived the main process (then stopped)
        self.signals_sent: list[str] = []
        self.exit_code: Optional[int] = None
        self.exit_signal: Optional[str] = None
        self.snapshot: Optional[dict[str, Any]] = None
        self._snapshot_thread: Optional[threading.Thread] = None
        self._dump_seq: Optional[int] = None
        # The user's cancel: its reason, and the worker's answer (report "cancel").
        self.cancel_info: Optional[dict[str, Any]] = None
        self._cancel_seqs: range = range(0)
        # While stalled: the current diagnosis from a cheap look (issue 12 item 12).
        self.live_diagnosis: Optional[dict[str, Any]] = None
        self._live_t: Optional[float] = None
        self._live_mark: Optional[dict[str, Any]] = None
        self._pending_dumps: dict[int, list[Any]] = {}  # command seq -> [Event, reply]
        self._pipes: dict[int, str] = {}
        self._pipe_files: dict[int, Any] = {}  # close through these: Popen owns the fds
        self._splitters = {"stdout": LineSplitter(), "stderr": LineSplitter()}
        self._redraws = RedrawThrottle()  # a bar's redraws reach the log once a second
        self._status = StatusTracker(time.monotonic())  # the lead's stages and progress
        self._status_lock = threading.Lock()  # status() reads it from any thread
        self._pidfd: Optional[int] = None
        self._drain_until: Optional[float] = None
        self._tree_next = 0.0
        self.proc = None
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
        if self.hub.server_key:  # the tcp fallback: the worker must authenticate (hub.py)
            variables["TRAINBRIDGE_SERVER_KEY"] = self.hub.server_key
        self.env = launcher.child_env(env, variables, python_env=python_env)
        if not self.hub.server_key:  # an outer job's key must not reach this one's worker
            self.env.pop("TRAINBRIDGE_SERVER_KEY", None)
        # An outer job's setting, inherited through `env`, must not decide for this one.
        self.env.pop("TRAINBRIDGE_DETACHED", None)
        if zero_code:
            launcher.add_zero_code_hook(self.env)
        self.cwd = cwd

    # --- start (caller's thread) ----------------------------------------------------------
    def start(self, proc: Any = None, read_pipes: bool = True) -> Job:
        """Spawn the command, or supervise `proc`, a Popen already started with this
        job's environment (ident given, stdout and stderr pipes). Without `read_pipes`
        the caller reads proc's pipes and hands every chunk to feed_output()."""
        registered = threading.Event()
        self.hub.call(lambda: (self.hub.add_job(self), registered.set()))
        registered.wait()
        if proc is None:
            try:
                proc = launcher.spawn(self.cmd, self.cwd, self.env, stdin=self.stdin_mode)
            except launcher.LaunchError:
                self.hub.call(lambda: self.hub.remove_job(self.id))
                self._close_log()
                raise
        self.pid = proc.pid
        self.stdin = proc.stdin
        attached = threading.Event()
        self.hub.call(lambda: (self._attach(proc, read_pipes), attached.set()))
        attached.wait()
        return self

    def _attach(self, proc, read_pipes: bool = True) -> None:
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
        if not read_pipes:  # feed_output() brings the chunks
            self._pipes.update({fd: stream for stream, fd in PSEUDO_FDS.items()})
        pipes = (("stdout", proc.stdout), ("stderr", proc.stderr)) if read_pipes else ()
        for stream, pipe in pipes:
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            self._pipes[fd] = stream
            self._pipe_files[fd] = pipe
            self.hub.add_fd(fd, lambda fd=fd: self._read_pipe(fd), owner=self)
        self._oom_before = _oom_kill_count(proc.pid)
        self._pidfd = launcher.open_pidfd(proc.pid)
        if self._pidfd is not None:
            self.hub.add_fd(self._pidfd, self._on_exit_ready, owner=self)
        else:
            launcher.watch_exit_in_thread(proc, lambda: self.hub.call(self._on_exit_ready))
        self._publish({"event": "spawn", "pid": proc.pid, "command": list(self.cmd)})
        self._publish({"event": "state", "state": self.m["state"]})

    # --- public API (any thread) ----------------------------------------------------------
    @property
    def state(self) -> str:
        return self.m["state"]

    @property
    def outcome(self) -> Optional[str]:
        return self.m["outcome"]

    @property
    def stage(self) -> Optional[str]:
        return self.stages[-1]["name"] if self.stages else None

    def done(self) -> bool:
        return self._done.is_set()

    def status(self) -> dict[str, Any]:
        """A snapshot for a GUI: state, pid, elapsed_s, stages (open, outermost first),
        script_stages (without zero-code mode's own), step, total, rate (steps/s), eta_s,
        progress_age_s (bridge/status.py)."""
        with self._status_lock:
            return self._status.snapshot(self.m["state"], self.pid, time.monotonic())

    def wait(self, timeout: Optional[float] = None) -> Optional[Report]:
        """Block until the job ended and its report is built; None on timeout."""
        if not self._done.wait(timeout):
            return None
        return self.report

    def cancel(self, grace: Optional[float] = None, reason: Optional[str] = None) -> None:
        """Ask the job to stop: in-band cancel, then SIGTERM after `grace`, then SIGKILL.
        `reason` is echoed in the report's "cancel"; a worker that cannot interrupt the
        script (SIGINT ignored) says so, and SIGTERM follows at once."""

        def ask() -> None:
            if self.cancel_info is None:
                self.cancel_info = {
                    "reason": reason or "cancelled by the client",
                    "accepted": None,
                    "refused": None,
                    "traceback": None,
                }
            self._step({"type": "cancel", "t": time.monotonic(), "grace": grace})

        self.hub.call(ask)

    def note_user_signal(self, name: str, reason: str) -> None:
        """The user sent the process `name` (SIGINT/SIGTERM/SIGHUP) outside cancel(), as
        `run --transparent` forwards its own: no escalation, but the job is cancelled
        however it then ends. The report's "cancel" says by what (by: "signal")."""

        def note() -> None:
            if self.cancel_info is None and self.exit_code is None and self.exit_signal is None:
                self.cancel_info = {
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
        box: list[Any] = [threading.Event(), None]

        def ask() -> None:
            seq = self.channel.command(kind)
            if seq is None:
                box[0].set()  # no worker said hello: nobody to ask
            else:
                self._pending_dumps[seq] = box

        self.hub.call(ask)
        box[0].wait(timeout)
        return box[1]

    def send(self, data: Any) -> None:
        """Send a message (any JSON-like value) to the training script, which gets it from
        worker.on_message() / worker.receive() (PROTOCOL.md "user"). In order; held until
        the worker said hello (at most OUTBOX_LIMIT). Raises ValueError when too large
        and RuntimeError when the job ended or the outbox is full."""
        from trainbridge.protocol import codec

        try:
            codec.encode("user", 1, {"data": data}, self.key, self.id)
        except codec.ProtocolError as exc:
            raise ValueError(f"job.send: cannot send this message ({exc})") from None
        if self._done.is_set():
            raise RuntimeError(f"job.send: job {self.id} has ended")
        if self.lead is None and len(self._outbox) >= OUTBOX_LIMIT:
            raise RuntimeError(
                f"job.send: {OUTBOX_LIMIT} messages wait for the worker's "
                "hello; does the script import trainbridge.worker?"
            )
        self._outbox.append(data)
        self.hub.call(self._send_outbox)

    def _send_outbox(self) -> None:
        if self.lead is None or self._done.is_set():
            return  # sent once the lead said hello
        while self._outbox:
            self.channel.send_to(self.lead, "user", {"data": self._outbox.popleft()})

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call `callback(event)` on the I/O thread for every later event (keep it short)."""
        self.hub.call(lambda: self._callbacks.append(callback))

    def events(self, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Events since the job started, in order, until "end". One consumer at a time; a
        consumer that falls EVENT_QUEUE behind gets a "dropped" event instead of the oldest.
        With a timeout, the iteration stops when no event came for that long."""
        while True:
            event = self.next_event(timeout)
            if event is None:
                return
            yield event
            if event["event"] == "end":
                return

    def next_event(self, timeout: Optional[float] = 0) -> Optional[dict[str, Any]]:
        """The next event from the job's queue, waiting up to `timeout` (None: forever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queue_cond:
            while not self._queue:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._queue_waiting += 1
                try:
                    self._queue_cond.wait(left)
                finally:
                    self._queue_waiting -= 1
            if self._queue_dropped:
                event = {
                    "event": "dropped",
                    "t": self._queue[0]["t"],
                    "count": self._queue_dropped,
                    "kinds": self._dropped_kinds,
                    "lines": self._dropped_lines,
                }
                self._queue_dropped, self._dropped_kinds, self._dropped_lines = 0, {}, {}
                return event
            return self._queue.popleft()

    # --- I/O thread: publishing -----------------------------------------------------------
    def _publish(self, event: dict[str, Any]) -> None:
        event.setdefault("t", time.time())
        self._publish_all([event])

    def _publish_all(self, events: list[dict[str, Any]]) -> None:
        """Queue the events for events() and hand each to every listener, in order, with one
        lock for the lot (a `logs` batch holds up to 256 records)."""
        queue = self._queue
        with self._queue_cond:
            for event in events:
                if len(queue) == queue.maxlen:
                    self._note_dropped(queue[0])
                queue.append(event)
            if self._queue_waiting:  # notify costs more than the rest of a publish
                self._queue_cond.notify_all()
        for event in events:  # each event to every listener before the next event
            for callback in list(self._callbacks):
                try:
                    callback(event)
                except Exception as exc:  # noqa: BLE001 - a listener's bug must not kill supervision
                    self._callbacks.remove(callback)
                    self._write_log(
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

    def _note_dropped(self, event: dict[str, Any]) -> None:
        """Count an event the queue lets go, by kind, and the output lines it spans, so the
        `dropped` event can say exactly what a slow consumer missed."""
        self._queue_dropped += 1
        kinds = self._dropped_kinds
        kinds[event["event"]] = kinds.get(event["event"], 0) + 1
        if event["event"] == "output":
            span = self._dropped_lines.setdefault(event["stream"], [event["line"], 0])
            span[1] = event["line"]

    # --- I/O thread: the machine ----------------------------------------------------------
    def _step(self, event: dict[str, Any]) -> None:
        self.m, actions = machine.step(self.m, event)
        for action in actions:
            self._perform(action)

    def _perform(self, action: dict[str, Any]) -> None:
        do = action["do"]
        if do == "state":
            self._publish({"event": "state", "state": action["state"]})
            if action["state"] == "stalled":
                self._live_diagnose(force=True)
        elif do == "snapshot":
            self._publish({"event": "hang", "reason": action["reason"]})
            self._start_snapshot()
        elif do == "dump_stacks":
            self._dump_seq = self.channel.command("dump_stacks")
        elif do == "cancel":
            first = self.channel.seq + 1
            reason = (self.cancel_info or {}).get("reason") or "cancelled by the client"
            last = self.channel.command("cancel", {"reason": reason})
            self._cancel_seqs = range(first, last + 1) if last is not None else range(0)
        elif do == "signal":
            name = action["signal"]
            self.signals_sent.append(name)
            self._publish({"event": "signal", "signal": name})
            if name == "SIGUSR1":
                self._signal_dump_at = reports.crash_file_size(self.crash_file)
                for pid in self.dump_pids:
                    launcher.signal_process(pid, signals.SIGUSR1)
            elif name == "SIGUSR2":
                # Only to the processes whose SIGUSR1 handler did not answer: Python runs
                # in the others, and the C dump would race it (worker/hooks.py).
                answered = reports.signal_dumped_pids(self.crash_file, self._signal_dump_at)
                for pid in self.native_dump_pids:
                    if pid not in answered:
                        launcher.signal_process(pid, SIGNALS[name])
            elif self.tree is not None:
                self.tree.signal(SIGNALS[name])
        elif do == "drain":
            self._drain()
        elif do == "finish":
            self._finish()

    def next_wakeup(self) -> Optional[float]:
        if self.proc is None or self._done.is_set():
            return None
        times = [machine.next_deadline(self.m), self._drain_until]
        if self.channel.held:
            times.append(time.monotonic() + SEND_RETRY_S)
        if self.exit_code is None and self.exit_signal is None:
            times.append(self._tree_next)
        return min((t for t in times if t is not None), default=None)

    def tick(self, now: float) -> None:
        if self.proc is None or self._done.is_set():
            return
        if self.channel.held:
            self.channel.flush()
        if self._drain_until is not None:
            if not self._pipes or now >= self._drain_until:
                self._drain_until = None
                self._close_pipes()
                self._step({"type": "drained", "t": now})
                return
        elif self.m["exit"] is None and now >= self._tree_next:
            self.tree.refresh(max_age=launcher.SHARED_TABLE_S)  # one /proc read for all jobs
            self._check_lead_alive(now)
            self._tree_next = now + TREE_REFRESH_S + TREE_REFRESH_PER_JOB_S * len(self.hub.jobs)
            if not self.m["hello"] and self.m.get("loaded_t") is None:
                self._check_loaded(now)
        deadline = machine.next_deadline(self.m)
        if deadline is not None and now >= deadline:
            ending = self.m["ending"]
            if (
                ending is not None
                and ending["step"] == "signal_dump"
                and self.lead_pid
                in reports.signal_dumped_pids(self.crash_file, self._signal_dump_at)
            ):
                self._step({"type": "signal_dumped", "t": now})
            self._step({"type": "timer", "t": now})

    # --- I/O thread: worker messages ------------------------------------------------------
    def _on_message(self, routing_id: bytes, rank: int, msg) -> None:
        now = time.monotonic()
        kind, body = msg.kind, msg.body
        if routing_id in self._foreign:
            self.channel.rejected["foreign"] += 1
            self.channel.peers.pop(routing_id, None)
            return
        key = routing_id.decode("ascii", "replace")
        if kind == "hello" and not self._hello_in_tree(body):
            # Not a process of this job (docs/PROTOCOL.md "Trust boundary"): it neither
            # leads nor is listed, and what it sends later is rejected and counted.
            self._foreign.add(routing_id)
            self.foreign_hellos += 1
            self.channel.peers.pop(routing_id, None)  # commands go to the job's own only
            return
        ranks.observe(self.ranks, key, kind, body, msg.ts)
        if kind == "hello":
            self._present[routing_id] = body
            if self._elect() and routing_id != self.lead:
                self._step({"type": "lead", "t": now, "present": self.lead is not None})
        lead = routing_id is not None and routing_id == self.lead
        sender = dict(ranks.sender(self.ranks, key), lead=lead)  # who said it (docs/CLIENT.md)
        if lead and kind in ("stage", "progress"):
            self._track_status(kind, body, now)  # before listeners hear: status() agrees
        if lead:
            self.last_message_t = now
        if kind == "logs":
            # A batch of consecutive records (PROTOCOL.md): listeners see each as a `log`
            # message, as if it had come alone; the machine hears of the message once.
            self._publish_records(rank, body["records"], sender)
            if lead:
                self._step({"type": "beat", "t": now})
            return
        self._publish(
            {"event": "message", "kind": kind, "rank": rank, "body": body, "sender": sender}
        )
        if kind == "hello":
            if lead or rank not in self.hellos:  # every rank is listed; the lead's hello wins
                self.hellos[rank] = body
            # SIGUSR1 only to processes that registered faulthandler for it (it kills others).
            if body.get("dump_signal") == "SIGUSR1" and self._in_tree(body.get("pid")):
                self.dump_pids.append(body["pid"])
            if body.get("native_dump_signal") == "SIGUSR2" and self._in_tree(body.get("pid")):
                self.native_dump_pids.append(body["pid"])
        if kind in ("heartbeat", "bye") and isinstance(body.get("dropped"), dict):
            self.dropped[routing_id] = body["dropped"]  # counts only grow: the latest wins
        if kind == "reply":
            self._on_reply(body)  # dumps answer from every process of the job
        if not lead:
            if (
                kind == "hello"
                and body.get("world_size") is not None
                and self.m.get("awaiting_ranks")
            ):  # a rank: the job has started
                self._step({"type": "hello", "t": now, "dump_signal": bool(self.dump_pids)})
            if kind == "bye":
                self._leave(routing_id, now)  # it can no longer lead
            return  # another process of the job: published above, but it does not lead
        if kind == "reply" and body.get("to") in self._cancel_seqs:
            self._on_cancel_reply(body, now)
        if kind == "hello":
            self._step(
                {
                    "type": "hello",
                    "t": now,
                    "dump_signal": bool(self.dump_pids),
                    "native_dump": bool(self.native_dump_pids) and "SIGUSR2" in SIGNALS,
                    "awaits_ranks": ranks.awaits_ranks(body),
                }
            )
            self._send_outbox()
        elif kind == "stage":
            self._record_stage(body)
            self._step(
                {
                    "type": "stage",
                    "t": now,
                    "event": body["event"],
                    "name": body["name"],
                    "depth": body.get("depth"),
                    "budget_s": body.get("budget_s"),
                }
            )
        elif kind == "progress":
            self.progress = {
                "step": body["step"],
                "total": body.get("total"),
                "metrics": body.get("metrics") or {},
            }
            self._step({"type": "progress", "t": now})
        elif kind == "error":
            if body.get("fatal") or self.error is None:
                self.error = body
            self._step(
                {
                    "type": "error",
                    "t": now,
                    "fatal": bool(body.get("fatal")),
                    "kind": body.get("kind"),
                    "exit_code": body.get("exit_code"),
                }
            )
        elif kind == "bye":
            self.bye = body
            self._step(
                {
                    "type": "bye",
                    "t": now,
                    "reason": body.get("reason"),
                    "exit_code": body.get("exit_code"),
                }
            )
            self._leave(routing_id, now)
        else:
            if kind == "heartbeat":
                self.heartbeat = body
            self._step({"type": "beat", "t": now})
            if kind == "heartbeat" and self.m["state"] == "stalled":
                self._live_diagnose()

    def _check_loaded(self, now: float) -> None:
        """Before any hello: has the worker loaded in the launched process? Its stage box
        is written synchronously at `import worker`, before the beacon can speak; a GIL held
        right after would otherwise be seen only at the startup timeout (issue 12 item 4).
        The box's mtime says when; /proc's SigCgt whether SIGUSR1 has a handler (the
        faulthandler dump the worker registers at import), so it may be sent."""
        if not self.crash_file or self.pid is None:
            return
        try:
            mtime = os.stat(f"{self.crash_file}.stages.{self.pid}").st_mtime
        except OSError:
            return
        loaded = min(now, now - (time.time() - mtime))
        # SIGUSR2 (faulthandler's C dump, registered at import) too: a GIL held before hello
        # leaves SIGUSR1's Python handler unable to run; the native dump still answers.
        native = _catches(self.pid, signals.SIGUSR2) and "SIGUSR2" in SIGNALS
        if native and self.pid not in self.native_dump_pids:
            self.native_dump_pids.append(self.pid)
        self._step(
            {
                "type": "worker_loaded",
                "t": loaded,
                "dump_signal": _catches_sigusr1(self.pid),
                "native_dump": native,
            }
        )
        if self.m["exit"] is None:
            deadline = machine.next_deadline(self.m)
            if deadline is not None and now >= deadline:
                self._step({"type": "timer", "t": now})

    def _live_diagnose(self, force: bool = False) -> None:
        """While stalled, before any deadline: the diagnosis now, from the last heartbeat's
        stack and a cheap look at the process (evidence.live, well under a millisecond), at
        most every LIVE_DIAGNOSIS_S. Published as a "stalled" event and kept in
        live_diagnosis; the verdict at the deadline uses the same rules on fuller evidence."""
        now = time.monotonic()
        if self.pid is None or (
            not force and self._live_t is not None and now - self._live_t < LIVE_DIAGNOSIS_S
        ):
            return
        self._live_t = now
        idle = None
        try:
            from trainbridge.bridge import diagnosis, evidence

            ev = evidence.live(self.pid, self._live_mark)
            self._live_mark = ev.pop("mark", None)
            hb = self.heartbeat or {}
            running = [s["name"] for s in self.stages if s["status"] == "running"]
            last = self.m.get("last_activity_t")
            idle = round(now - last, 1) if last is not None else hb.get("idle_s")
            found = diagnosis.diagnose_hang(
                {
                    "reason": "stall",
                    "stage": running[-1] if running else None,
                    "stages": running,
                    "idle_s": idle,
                    "stack": hb.get("stack"),
                    "saw_hello": bool(self.hellos),
                    "evidence": ev,
                    "progress": self.progress,
                }
            )
            # Ranks waiting in a collective for one that is elsewhere (issue 12 item 12).
            found = ranks.live_collective(self.ranks) or found
        except Exception as exc:  # noqa: BLE001 - a live view must not cost the job
            found = {
                "kind": "unknown",
                "summary": f"live diagnosis failed: {exc}",
                "hint": "",
                "evidence": {},
            }
        self.live_diagnosis = {
            "kind": found["kind"],
            "frame": found["evidence"].get("frame"),
            "summary": found["summary"],
            "hint": found["hint"],
            "idle_s": idle,
        }
        self._publish(
            {
                "event": "stalled",
                "idle_s": self.live_diagnosis["idle_s"],
                "diagnosis": self.live_diagnosis,
            }
        )

    # --- I/O thread: who speaks for the job -------------------------------------------------
    def _elect(self) -> bool:
        """Apply machine.choose_lead to the processes present; True when the lead changed."""
        pid = machine.choose_lead(list(self._present.values()), self.pid)
        lead = next((rid for rid, hello in self._present.items() if hello.get("pid") == pid), None)
        if lead == self.lead:
            return False
        self.lead, self.lead_pid = lead, pid
        self.leads = (self.leads + [pid])[-LEADS_KEPT:]
        self._publish({"event": "lead", "pid": pid})
        return True

    def _leave(self, routing_id: bytes, now: float) -> None:
        """A process said bye or is gone. The launched process never leaves: its last words
        are the job's. Another one that led hands the lead back (machine event "lead")."""
        hello = self._present.get(routing_id)
        if hello is None or hello.get("pid") == self.pid:
            return
        del self._present[routing_id]
        if self._elect() and self.m["exit"] is None:
            self._step({"type": "lead", "t": now, "present": self.lead is not None})

    def _check_lead_alive(self, now: float) -> None:
        if self.lead is None or self.lead_pid == self.pid or self.tree is None:
            return
        created = self.tree.known.get(self.lead_pid)
        if not _process_alive(self.lead_pid, created):
            self._leave(self.lead, now)

    # --- I/O thread: a bug while handling this job ------------------------------------------
    def fail_internal(self, exc: BaseException) -> None:
        """The hub calls this when handling this job raised (a bug in trainbridge): the job
        is stopped at once and ends `failed` with an `internal` diagnosis that carries the
        traceback. Other jobs are not touched."""
        if self._done.is_set():
            return
        import traceback

        self.internal_error = {
            "type": type(exc).__name__,
            "message": f"trainbridge failed while supervising this job: {exc}",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "kind": "internal",
            "fatal": True,
        }
        self.error = self.internal_error
        for fd in list(self._pipes):
            self.hub.remove_fd(fd)
        if self._pidfd is not None:
            self.hub.remove_fd(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self.tree is not None:
            self.tree.signal(signals.SIGKILL)
            self.signals_sent.append("SIGKILL")
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
                self.exit_code, self.exit_signal = launcher.exit_status(self.proc.returncode)
            except Exception:  # noqa: BLE001 - the report goes out regardless
                pass
        self.ended = time.monotonic()
        for fd in list(self._pipes):
            try:
                self._close_pipe(fd)
            except Exception:  # noqa: BLE001 - failing the job anyway: forget the pipe
                self._pipes.pop(fd, None)
        self.m = {**self.m, "state": "ended", "outcome": "failed", "ending": None}
        self._publish({"event": "state", "state": "ended"})
        try:
            self._finish()
        finally:
            if not self._done.is_set():  # _finish itself failed: a waiter still gets a report
                self.report = Report(reports.minimal(self, exc))
                self.hub.remove_job(self.id)
                self._publish({"event": "end", "outcome": "failed", "report": self.report})
                self._done.set()

    @property
    def unrouted(self) -> int:
        """Messages for no job of this client while this job ran (docs/PROTOCOL.md 8)."""
        return self.hub.unrouted - self._unrouted_at_start

    def _on_reply(self, body: dict[str, Any]) -> None:
        to = body.get("to")
        text = body.get("stacks")
        if text:
            self.stacks = (self.stacks + [text])[-DUMPS_KEPT:]
        box = self._pending_dumps.pop(to, None)
        if box is not None:
            box[1] = body
            box[0].set()
        if to is not None and to == self._dump_seq:
            self._dump_seq = None
            self._step({"type": "dumped", "t": time.monotonic()})

    def _track_status(self, kind: str, body: dict[str, Any], now: float) -> None:
        with self._status_lock:
            if kind == "stage":
                self._status.stage(body)
            else:
                self._status.progress(body, now)

    def _on_cancel_reply(self, body: dict[str, Any], now: float) -> None:
        """The lead's answer to the in-band cancel: accepted, or refused and why."""
        self._cancel_seqs = range(0)
        info = self.cancel_info if self.cancel_info is not None else {"reason": None}
        self.cancel_info = info
        if body.get("ok"):
            info.update(accepted=True, refused=None)
        else:
            info.update(accepted=False, refused=str(body.get("error") or "refused"))
        self._publish(
            {
                "event": "cancel",
                "reason": info.get("reason"),
                "accepted": info["accepted"],
                "refused": info["refused"],
            }
        )
        if not info["accepted"]:
            self._step({"type": "cancel_refused", "t": now, "reason": info["refused"]})

    def _on_refused(self, reason: str) -> None:
        self._step({"type": "refused", "t": time.monotonic(), "reason": reason})

    def _record_stage(self, body: dict[str, Any]) -> None:
        if body["event"] == "begin":
            if len(self.stages) >= STAGES_KEPT:
                self._forget_a_closed_stage()
            self._stage_events += 1
            self.stages.append(
                {
                    "name": body["name"],
                    "status": "running",
                    "duration_s": None,
                    "depth": body.get("depth", 0),
                    "budget_s": body.get("budget_s"),
                    "started": time.monotonic() - self.started,
                    "began": self._stage_events,
                }
            )
            return
        depth = body.get("depth")
        for entry in reversed(self.stages):
            if (
                entry["name"] == body["name"]
                and entry["status"] == "running"
                and (depth is None or entry["depth"] == depth)
            ):
                entry["status"] = body.get("status") or "ok"
                self._stage_events += 1
                entry["closed"] = self._stage_events  # the order of begins and ends
                entry["duration_s"] = body.get("duration_s")
                if entry["duration_s"] is None:
                    entry["duration_s"] = round(
                        time.monotonic() - self.started - entry["started"], 6
                    )
                break

    def _forget_a_closed_stage(self) -> None:
        """Drop the oldest closed stage record (open ones say where the job is)."""
        for i, entry in enumerate(self.stages):
            if entry["status"] != "running":
                del self.stages[i]
                self.stages_dropped += 1
                return

    def _hello_in_tree(self, hello: dict[str, Any]) -> bool:
        """Whether a hello comes from the job's tree: its pid is, or (a subprocess that said
        hello and exited before we looked) its pid is gone and its parent is ours."""
        pid = hello.get("pid")
        if self._in_tree(pid):
            return True
        return (
            isinstance(pid, int)
            and not _process_alive(pid, None)
            and self._in_tree(hello.get("ppid"))
        )

    def _in_tree(self, pid: Any) -> bool:
        if not isinstance(pid, int):
            return False
        if pid == self.pid:  # ours for sure; the tree's snapshot can miss it in a race
            return True
        if self.tree is None:
            if self.pid is None:
                return False
            self.tree = launcher.Tree(self.pid, self.id)  # a hello before _attach ran
        self.tree.refresh()
        return pid in self.tree.known

    # --- I/O thread: output ---------------------------------------------------------------
    def _read_pipe(self, fd: int) -> None:
        stream = self._pipes.get(fd)
        if stream is None:
            return
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self.bytes[stream] += len(chunk)
            self._raw(stream, chunk)
            self._lines(stream, self._splitters[stream].feed(chunk))
        else:
            self._close_pipe(fd)

    def _raw(self, stream: str, chunk: bytes) -> None:
        """The bytes as read, before any splitting; b"" at EOF."""
        sink = self.stdout if stream == "stdout" else self.stderr
        if sink is not None:
            sink.feed(chunk or None)

    def feed_output(self, stream: str, chunk: bytes) -> None:
        """I/O thread, for start(proc, read_pipes=False): a chunk the caller read from the
        child's `stream` (b"" at EOF), handled as if the job had read it."""
        fd = PSEUDO_FDS[stream]
        if fd not in self._pipes:
            return  # after EOF, or after the drain gave up on the pipe
        if chunk:
            self.bytes[stream] += len(chunk)
            self._raw(stream, chunk)
            self._lines(stream, self._splitters[stream].feed(chunk))
        else:
            self._close_pipe(fd)

    def _lines(self, stream: str, raw_lines) -> None:
        if not raw_lines:
            return
        decoded = [(decode_line(raw.data)[0], raw.end) for raw in raw_lines]
        # The log first: when a listener hears of a line, the file already has it.
        now = time.monotonic()
        stamp = log_stamp(time.time()) + " " if self.log_timestamps else ""
        logged = [
            stamp + log_text(kept)
            for text, end in decoded
            for kept in self._redraws.feed(stream, text, end, now)
        ]
        if logged:
            self._write_log("\n".join(logged))
        for text, end in decoded:
            self.lines[stream] += 1
            # tqdm redraws replace each other in the tail instead of filling it.
            if self.tail and self.tail[-1]["end"] == "cr" and self.tail[-1]["stream"] == stream:
                self.tail.pop()
            self.tail.append({"stream": stream, "text": text, "end": end})
            if stream == "stderr":
                self._capture_fatal(text)
                if text.startswith(NO_WORKER_MARKERS):
                    self._publish({"event": "no_worker", "reason": text})
                    self._step({"type": "no_worker", "t": time.monotonic(), "reason": text})
            self._publish(
                {
                    "event": "output",
                    "stream": stream,
                    "text": text,
                    "end": end,
                    "line": self.lines[stream],
                }
            )
        self._output_activity()

    def _output_activity(self) -> None:
        """Tell the state machine the job printed (activity while it has no progress source),
        at most every OUTPUT_EVENT_S, and at once when that may end a stall."""
        now = self.last_output_t = time.monotonic()
        last = getattr(self, "_output_event_t", None)
        if last is None or now - last >= OUTPUT_EVENT_S or self.m["state"] == "stalled":
            self._output_event_t = now
            self._step({"type": "output", "t": now})

    def _capture_fatal(self, text: str) -> None:
        # PYTHONFAULTHANDLER prints a crashed process's stacks on stderr; keep them whole
        # even when they are longer than the tail.
        if text.startswith(reports.FATAL_MARKERS):
            self._fatal_capture = True
            self.fatal_lines = []
        if self._fatal_capture and len(self.fatal_lines) < reports.FATAL_LINES_MAX:
            self.fatal_lines.append(text)

    def _write_log(self, text: str) -> None:
        """Append lines to the log file, unbuffered (it must survive our crash). A failed
        write (a full disk) stops the log, never the supervision: the report and a
        `log_error` event say from which line on the file is incomplete, and why."""
        if self._log is None:
            return
        data = (text + "\n").encode("utf-8", "backslashreplace")
        done = 0
        try:
            while done < len(data):
                done += os.write(self._log, data[done:])
        except OSError as exc:
            self.log_error = log_failure(
                self.log_path, self.log_lines + data.count(b"\n", 0, done) + 1, exc
            )
            self._close_log()
            self._publish({"event": "log_error", **self.log_error})
            return
        self.log_lines += data.count(b"\n")

    def _close_pipe(self, fd: int) -> None:
        stream = self._pipes.pop(fd, None)
        if stream is None:
            return
        self.hub.remove_fd(fd)
        self._raw(stream, b"")
        self._lines(stream, self._splitters[stream].flush())
        try:
            # Closing the file object (not the bare fd) keeps Popen from closing the same
            # number again later, when it may belong to another job's pipe.
            self._pipe_files.pop(fd).close()
        except (OSError, KeyError):
            pass

    def _close_pipes(self) -> None:
        for fd in list(self._pipes):
            self._read_available(fd)
            self._close_pipe(fd)

    def _read_available(self, fd: int) -> None:
        for _ in range(64):  # bounded: a grandchild may write forever
            if fd not in self._pipes:
                return
            try:
                chunk = os.read(fd, READ_SIZE)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                self._close_pipe(fd)
                return
            stream = self._pipes[fd]
            self.bytes[stream] += len(chunk)
            self._raw(stream, chunk)
            self._lines(stream, self._splitters[stream].feed(chunk))

    # --- I/O thread: exit, drain, finish --------------------------------------------------
    def _on_exit_ready(self) -> None:
        if self.proc is None or self.proc.poll() is None:
            return
        now = time.monotonic()
        self.ended = now
        if self._pidfd is not None:
            self.hub.remove_fd(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self.exit_code, self.exit_signal = launcher.exit_status(self.proc.returncode)
        if self.exit_signal == "SIGKILL" and "SIGKILL" not in self.signals_sent:
            from trainbridge.bridge import oom

            self.oom_killed = oom.oom_killed(self._oom_before, _oom_kill_count(None))
        self.oom_kills = _oom_kills_since(self._oom_before, self.exit_code, self.exit_signal)
        self._step({"type": "exit", "t": now, "code": self.exit_code, "signal": self.exit_signal})

    def _drain(self) -> None:
        self.hub.drain_router()
        for fd in list(self._pipes):
            self._read_available(fd)
        # Whatever of the tree outlived the main process is an orphan now: ask it to go
        # (it is SIGKILLed at finish), so it cannot hold our pipes or the GPU.
        if self.tree is not None:
            self.tree.adopt_escapees()
            self.leftovers = [p.pid for p in self.tree.alive(include_root=False)]
            if self.leftovers:
                self.tree.signal(signals.SIGTERM, include_root=False)
        self._drain_until = time.monotonic() + PIPE_LINGER_S

    def _start_snapshot(self) -> None:
        pid = self.pid

        def collect() -> None:
            try:
                from trainbridge.bridge import evidence

                self.snapshot = evidence.collect(pid)
            except Exception as exc:  # noqa: BLE001 - evidence is best effort
                self.snapshot = {"notes": [f"evidence failed: {type(exc).__name__}: {exc}"]}
            self.hub.call(lambda: self._step({"type": "snapshotted", "t": time.monotonic()}))

        self._snapshot_thread = threading.Thread(
            target=collect, name="trainbridge-snapshot", daemon=True
        )
        self._snapshot_thread.start()

    def _finish(self) -> None:
        if self.tree is not None and self.tree.alive(include_root=False):
            self.tree.signal(signals.SIGKILL, include_root=False)
        if self._snapshot_thread is not None:
            self._snapshot_thread.join(timeout=3.0)
        self.hub.drain_router()
        self.channel.give_up()
        if self._outbox:  # sends that waited for a hello that never came
            self.channel.undelivered["user"] += len(self._outbox)
            self._outbox.clear()
        try:
            self.report = Report(reports.build(self))
        except Exception as exc:  # noqa: BLE001 - never leave a waiter hanging on a report bug
            self.report = Report(reports.minimal(self, exc))
        self.hub.remove_job(self.id)
        self._end_log()
        self._close_log()
        self._close_stdin()
        shutil.rmtree(self.dir, ignore_errors=True)  # the crash file is in the report now
        self._publish({"event": "end", "outcome": self.m["outcome"], "report": self.report})
        self._done.set()

    def _end_log(self) -> None:
        """The log file ends with the bar's last state, the verdict and the stacks."""
        held = self._redraws.flush()
        if held:
            self._write_log("\n".join(log_text(text) for text in held))
        self._write_log(log_text(reports.log_footer(self.report)))

    def _close_stdin(self) -> None:
        if self.stdin is not None:
            try:
                self.stdin.close()  # the process is gone: nobody reads it any more
            except OSError:
                pass

    def _close_log(self) -> None:
        if self._log is not None:
            try:
                os.close(self._log)
            except OSError:
                pass
            self._log = None


def launch(
    cmd: Sequence[str],
    cwd: Optional[str] = None,
    env: Optional[dict[str, str]] = None,
    startup_timeout: Optional[float] = machine.DEFAULTS["startup_timeout"],
    stall_timeout: Optional[float] = machine.DEFAULTS["stall_timeout"],
    heartbeat_timeout: Optional[float] = machine.DEFAULTS["heartbeat_timeout"],
    kill_grace: float = machine.DEFAULTS["kill_grace"],
    log_path: Optional[str] = None,
    on_event: Optional[Callable[[dict[str, Any]], None]] = None,
    zero_code: bool = True,
    detached: bool = False,
    stdin: str = "devnull",
    raw: bool = False,
    python_env: bool = True,
    log_timestamps: bool = False,
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
    caller's environment has them.
    Raises launcher.LaunchError when the command cannot be started."""
    config = {
        "startup_timeout": startup_timeout,
        "stall_timeout": stall_timeout,
        "heartbeat_timeout": heartbeat_timeout,
        "kill_grace": kill_grace,
        **machine_config,
    }
    check_arguments(cmd, cwd=cwd, env=env, config=config, log_path=log_path, on_event=on_event)
    if stall_timeout is not None and "stalled_after" not in machine_config:
        config["stalled_after"] = min(machine.DEFAULTS["stalled_after"], stall_timeout / 2)
    return Job(
        cmd,
        cwd=cwd,
        env=env,
        config=config,
        log_path=log_path,
        on_event=on_event,
        zero_code=zero_code,
        detached=detached,
        stdin=stdin,
        raw=raw,
        python_env=python_env,
        log_timestamps=log_timestamps,
    ).start()


def _catches_sigusr1(pid: int) -> bool:
    """Whether `pid` has a handler for SIGUSR1 (/proc/<pid>/status SigCgt, bit 10)."""
    return _catches(pid, signals.SIGUSR1)


def _catches(pid: int, signum: int) -> bool:
    """Whether `pid` has a handler for signum (/proc/<pid>/status SigCgt)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    except (OSError, ValueError, IndexError):
        pass
    return False


def log_stamp(wall: float) -> str:
    """'2026-11-30T18:23:23.123Z': the UTC time prefix of a log line (log_timestamps)."""
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + f".{int(wall * 1000) % 1000:03d}Z"
    )


class LogFileError(launcher.LaunchError):
    """The log file cannot be opened for writing (read-only, missing directory, ...)."""


def open_log(path: str) -> int:
    """An fd appending to the log file, or LogFileError saying what is wrong with it."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise LogFileError(
            f"cannot write the log file {path}: {os_error_text(exc)}; choose a "
            f"writable path for the log"
        ) from exc


def log_failure(path: Optional[str], from_line: int, exc: OSError) -> dict[str, Any]:
    """The report's `log_error`: the log file has every line before from_line, none after."""
    return {"path": path, "from_line": from_line, "error": os_error_text(exc)}


def os_error_text(exc: OSError) -> str:
    """'No space left on device (ENOSPC)': what went wrong, with the name to search for."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


def _oom_kills_since(
    before: Optional[int], code: Optional[int], signal: Optional[str]
) -> Optional[int]:
    """How many processes the OOM killer took in our cgroup while a job that ended badly ran
    (a DataLoader worker killed while the main process lived); None when unknown or clean."""
    if before is None or (code == 0 and not signal):
        return None
    after = _oom_kill_count(None)
    return None if after is None else max(0, after - before)


def check_arguments(
    cmd: Any,
    cwd: Any = None,
    env: Any = None,
    config: Any = None,
    log_path: Any = None,
    on_event: Any = None,
    tail_lines: Any = TAIL_LINES,
) -> None:
    """Refuse bad arguments with a LaunchError that says which and why, before anything is
    registered or spawned (launch, Job, aio.launch and the CLI all come through here)."""
    if isinstance(cmd, (str, bytes)):
        raise LaunchError(
            f"the command must be a list of arguments, not a string: got {cmd!r}; "
            f"write [{', '.join(repr(a) for a in str(cmd).split()[:3])}"
            f"{', ...' if len(str(cmd).split()) > 3 else ''}] (there is no shell)"
        )
    if not isinstance(cmd, (list, tuple)) or not cmd:
        raise LaunchError(f"the command must be a non-empty list of strings, got {cmd!r}")
    for i, arg in enumerate(cmd):
        if not isinstance(arg, (str, os.PathLike)):
            raise LaunchError(
                f"command argument {i} must be a string, got {arg!r} "
                f"({type(arg).__name__}) in {list(cmd)!r}"
            )
    for name, value in (("cwd", cwd), ("log_path", log_path)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise LaunchError(f"{name} must be a path (a string) or None, got {value!r}")
    if env is not None:
        if not isinstance(env, collections.abc.Mapping):
            raise LaunchError(f"env must be a dict of strings or None, got {type(env).__name__}")
        for key, value in env.items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                raise LaunchError(f"env keys must be non-empty strings without '=', got {key!r}")
            if not isinstance(value, str) or "\0" in value:
                raise LaunchError(
                    f"env[{key!r}] must be a string, got {value!r}; to leave a "
                    f"variable out, do not put it in env"
                )
    if on_event is not None and not callable(on_event):
        raise LaunchError(f"on_event must be a function or None, got {on_event!r}")
    if type(tail_lines) is not int or tail_lines < 0:
        raise LaunchError(f"tail_lines must be a whole number >= 0, got {tail_lines!r}")
    if config is not None:
        if not isinstance(config, dict):
            raise LaunchError(f"config must be a dict, got {type(config).__name__}")
        problem = machine.config_problem(config)
        if problem is not None:
            raise LaunchError(config_message(problem[0], problem[1], config.get(problem[0])))


def config_message(key: str, problem: str, value: Any) -> str:
    """The words for one machine.config_problem answer."""
    if problem == "unknown":
        return f"unknown setting {key!r}; the settings are {', '.join(sorted(machine.DEFAULTS))}"
    if problem == "type":
        allowed = " or None (off)" if key in machine.OPTIONAL else ""
        return f"{key} must be a number of seconds{allowed}, got {value!r}"
    if problem == "not_finite":
        return f"{key} must be a finite number of seconds, got {value!r}"
    return f"{key} must be >= 0 seconds, got {value!r}"


def _process_alive(pid: Any, created: Optional[float]) -> bool:
    """Whether `pid` is still the process that was seen (same start time), not a zombie."""
    import psutil

    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        if created is not None and proc.create_time() != created:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _oom_kill_count(pid: Optional[int]) -> Optional[int]:
    try:
        from trainbridge.bridge import oom

        return oom.oom_kill_count(pid)
    except Exception:  # noqa: BLE001 - best effort
        return None
