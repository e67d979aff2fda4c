"""The keeper: one small headless process per scheduled job, the training process's parent.

    python -m trainbridge.bridge.keeper STORE JOB_ID

A scheduler starts it (in its own session, so nothing that happens to the scheduler or a GUI
reaches it) and may then come and go, like podman's conmon or containerd's shim. The keeper
runs the job with bridge.launch (so deadlines, hang evidence, diagnosis and the report are
exactly those of a launched job), and:

- writes every event, numbered, as one ASCII JSON line to the job's events file
  (<dir>/events.jsonl, bridge/feed.py), which is how anyone attaches: from the first line,
  from now, or from event N (docs/STORE.md "Events file");
- writes the output to <dir>/output.log (the job's log_path);
- launches it with sample_resources: its Job samples the process tree (CPU, RSS, GPU) about
  every second as "resources" events;
- keeps the store row true: state at once, stage and progress coalesced (PROGRESS_EVERY_S),
  then outcome, exit code, signal and report; every attempt's report in `attempts`;
- restarts a failed attempt up to max_restarts times, waiting restart_backoff * 2**n seconds;
- on SIGTERM / SIGINT / SIGHUP cancels the job (docs/STORE.md "Cancel"); on SIGUSR1 asks the
  worker for its stacks and writes them as a "stacks" event (for a user's `kill -USR1`); on
  SIGUSR2 answers the ping, dump_stacks and send requests waiting in the job's requests/
  directory with "reply" events (each in the asker's own timeout);
- when its job ends, runs one scheduling pass so queued jobs start without a scheduler;
- on a full disk keeps the job's true end: it holds RESERVE_BYTES of the disk for it (released
  when a write fails), drops output before state (counted, said in the report and keeper.log),
  never tears a line of the feed, and writes the end again until the store takes it (the
  row says running meanwhile, and the keeper lives, so nobody reconciles the job lost).

The training process is launched supervised (not detached): it carries the keeper's pid in
TRAINBRIDGE_CLIENT_PID, so if the keeper is SIGKILLed its worker ends the job's tree, and the
next reconciliation marks the job lost (and ends any process of it still running).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from trainbridge.bridge import (
    feed,
    listen,
    machine,
    private_files,
    procs,
    report_text,
    scheduled,
    scheduler,
    slurm,
    slurm_runner,
)
from trainbridge.bridge.batches import Batches
from trainbridge.bridge.procs import ENV_FILE, process_start
from trainbridge.bridge.signal_thread import SignalThread
from trainbridge.bridge.store import Store
from trainbridge.bridge.store_errors import StoreError

if TYPE_CHECKING:
    from trainbridge.bridge.job import Job

PROGRESS_EVERY_S = 0.5  # while stage/progress keep coming, one row write per this period
FLUSH_EVERY_S = 0.02  # while events keep coming, one write to the events file per this period
CANCEL_REASON = "cancelled through the job store (Scheduler.cancel / trainbridge cancel)"
URGENT_EVENTS = ("state", "hang", "signal", "attempt", "stacks", "launch_failed", "end")
BACKOFF_MAX_S = 300.0
STATUS_WRITE_EVERY_S = 0.9  # status events reach the events file at most about once a second
ROW_PROGRESS = ("step", "total", "rate", "eta_s", "metrics")  # of the judge's status, in the row
REQUESTS_JOIN_S = 5.0  # at the end: the requests thread finishes what it read
REQUESTS_LOOK_S = 1.0  # the requests thread reads its directory this often, signal or none
# A full disk: what could not be written is kept and written again this often.
RETRY_S = 1.0
ROW_RETRY_MAX_S = 10.0  # the job's end goes to the row at last this often while it cannot
CLOSE_RETRY_S = 30.0  # at the end, the feed's last events are tried this long
KEPT_MAX = 10_000  # events kept to write again (the oldest go first beyond it)
KEPT_EVENTS = URGENT_EVENTS + ("reply", "stalled", "lead", "log_error")
KEPT_MESSAGES = ("hello", "stage", "error", "bye")
RESERVE_BYTES = 256 * 1024  # kept free for the job's end: released when a write fails


def backoff(base: float, restarts_done: int) -> float:
    """Seconds before restart number restarts_done + 1: base, 2 base, 4 base, ... capped."""
    return min(BACKOFF_MAX_S, base * 2.0**restarts_done)


class EventsFile(threading.Thread):
    """The job's feed: its events, numbered, one ASCII JSON object per line (bridge/feed.py).
    The hub's I/O thread only queues them; this thread encodes and writes them in batches
    (bridge/batches.py: an event to an idle writer at once, a state change or the end at once,
    a flood at most one write every FLUSH_EVERY_S), so an output flood costs the supervision
    little.

    A failed write (a full disk) never leaves a torn line: the file is cut back to its last
    whole line. Output capture degrades first: the events that only fill the log or that a
    later one replaces (all but KEPT_EVENTS) are dropped and counted (`failed`, the report's
    events_failed, with the first error in `error`, its feed_error); the others (the state,
    stages, replies, the end) are kept, in order, and written again every RETRY_S until
    they go (at most KEPT_MAX; at the end, for CLOSE_RETRY_S). Numbers go to what is written:
    the feed has no gap."""

    def __init__(self, path: str):
        super().__init__(name="trainbridge-keeper-events", daemon=True)
        self.path = path
        self.batches: Batches[dict[str, Any]] = Batches(FLUSH_EVERY_S)
        self.fd = private_files.open_append(path)
        # The feed's numbers go on from the file's last one (docs/PROTOCOL.md "The feed").
        try:
            self.seq = feed.last_seq(path)
        except feed.FeedError:  # begun by an older release: number from 1
            self.seq = 0
        self.written = 0
        self.failed = 0  # dropped after a failed write, or still unwritten when it closed
        self.error: Optional[str] = None  # why the first write failed
        self.end_written = False  # the end event is in the file
        self.late = 0  # events written after the feed closed (the keeper answers every
        # request before its end: none should come; any that does is counted in keeper.log)
        self.start()

    def write(self, event: dict[str, Any], urgent: bool = False) -> None:
        if not self.batches.put(event, urgent or event.get("event") in URGENT_EVENTS):
            self.late += 1
            say(
                f"a {event.get('event')!r} event came after the feed closed and is not in "
                f"it ({self.late} so far)"
            )

    def run(self) -> None:
        kept: list[dict[str, Any]] = []  # what a failed write left to write again
        give_up: Optional[float] = None
        while True:
            # A full disk: not before RETRY_S, urgent or not.
            taken, stopping = self.batches.take(retry_after=RETRY_S if kept else 0.0)
            batch = kept + taken
            kept = self._write(batch) if batch else []
            if not stopping:
                continue
            if not kept:
                return
            give_up = give_up or time.monotonic() + CLOSE_RETRY_S
            if time.monotonic() >= give_up:
                self.failed += len(kept)
                say(f"{len(kept)} events of the feed's end could not be written: {self.error}")
                return
            # Closed, take() waits for nothing: the end's retries keep RETRY_S apart too.
            time.sleep(RETRY_S)

    def _write(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append the batch, numbered, in whole lines; returns what to write again."""
        first = self.seq + 1
        data = "".join(feed.encode(first + i, e) for i, e in enumerate(batch)).encode("ascii")
        try:
            whole = os.fstat(self.fd).st_size  # the end of the last whole line
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            try:
                os.ftruncate(self.fd, whole)  # no torn line (frees space, never needs it)
            except (OSError, UnboundLocalError):
                pass
            keep = [e for e in batch if kept_event(e)][-KEPT_MAX:]
            self.failed += len(batch) - len(keep)
            if self.error is None:
                self.error = f"{private_files.error_text(exc)}, writing {self.path}"
                say(
                    f"cannot write the job's events ({self.error}): its output is dropped "
                    f"(counted in the report's events_failed) and its state and end are kept "
                    f"and written again every {RETRY_S:g} s; free space there"
                )
            return keep
        self.seq += len(batch)
        self.written += len(batch)
        self.end_written = self.end_written or batch[-1].get("event") == "end"
        return []

    def close(self) -> None:
        self.batches.close()
        self.join()
        try:
            os.close(self.fd)
        except OSError:
            self.failed += 1


def kept_event(event: dict[str, Any]) -> bool:
    """Whether a failed write keeps the event to write again: the job's state, stages,
    replies and end, not its output, status, resources or progress (a later one replaces
    those, or they only fill the log)."""
    kind = event.get("event")
    if kind == "message":
        return (event.get("kind") or "") in KEPT_MESSAGES
    return kind in KEPT_EVENTS


def say(text: str) -> None:
    """A line in keeper.log (the keeper's stderr); on a full disk even that may fail."""
    try:
        print(f"trainbridge keeper: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


class RowWriter(threading.Thread):
    """Copies the live state into the row: state changes at once, stage/progress coalesced.
    Runs on its own thread with its own connection, so the hub's I/O thread never waits
    on the store. A write the store refuses (a full disk) is kept, merged with what comes
    after it, and tried again every RETRY_S; stop() hands back what was never written."""

    def __init__(self, store_path: str, job_id: str):
        super().__init__(name="trainbridge-keeper-row", daemon=True)
        self.store_path = store_path
        self.job_id = job_id
        self.batches: Batches[dict[str, Any]] = Batches(PROGRESS_EVERY_S)
        self.left: dict[str, Any] = {}  # what was never written, once stopped
        self.writes = 0
        self.error: Optional[str] = None  # the last failure's reason, until a write goes

    def set(self, urgent: bool = False, **fields: Any) -> None:
        self.batches.put(fields, urgent)

    def run(self) -> None:
        store: Optional[Store] = None
        kept: dict[str, Any] = {}  # a refused write's fields, under what came since
        try:
            while True:
                taken, stopping = self.batches.take(retry_after=RETRY_S if kept else 0.0)
                fields, kept = dict(kept), {}
                for update in taken:  # coalesced: the latest wins
                    fields.update(update)
                if stopping:
                    self.left = fields  # it goes with the end (stop())
                    return
                if not fields:
                    continue
                try:
                    store = store or Store(self.store_path)
                    store.update(self.job_id, **fields)
                except StoreError as exc:
                    kept = fields
                    if self.error is None:
                        say(f"cannot update the job's row ({exc}); trying every {RETRY_S:g} s")
                    self.error = str(exc)
                else:
                    self.writes += 1
                    self.error = None
        finally:
            if store is not None:
                store.close()

    def stop(self) -> dict[str, Any]:
        """Stop; returns the fields never written (the caller writes them with the end)."""
        self.batches.close()
        self.join()
        left, self.left = self.left, {}
        return left


class Keeper:
    def __init__(self, store_path: str, job_id: str):
        self.store_path = store_path
        self.store = Store(store_path)
        self.id = job_id
        row = self.store.get(job_id)
        if row is None:
            raise SystemExit(f"trainbridge keeper: no job {job_id} in {store_path}")
        self.row: dict[str, Any] = row
        self.cancelled = threading.Event()
        self.requested = threading.Event()  # SIGUSR2: a request file waits (scheduled.request)
        self.finished = threading.Event()
        self._status_written: Optional[tuple[float, Any]] = None  # (t, state) of the last
        self.job: Optional[Job] = None
        self.events = EventsFile(self.row["events_path"])
        self.rows = RowWriter(store_path, job_id)
        self._requests_thread: Optional[threading.Thread] = None
        self._asking: dict[Any, dict[str, Any]] = {}  # ping, dump_stacks: waiting for the worker
        self._asking_lock = threading.Lock()
        self._reserve: Optional[str] = None  # the space kept for the end (make_reserve)
        self._cancel_lock = threading.Lock()
        self._cancel_sent: Any = None  # the attempt's Job that was cancelled
        self._dumping = threading.Event()  # a SIGUSR1's dump is on its way (_dump)

    # --- signals (the signals thread: bridge/signal_thread.py) -----------------------------
    def _on_signal(self, signum: int) -> None:
        """SIGTERM, SIGINT, SIGHUP: cancel; SIGUSR1: a `stacks` event; SIGUSR2: read the
        requests. On a thread of their own, never in a handler: a handler that set an Event
        deadlocked the main thread when a second signal came while the first held its lock."""
        if signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self.cancelled.set()
            self._pass_cancel()
        elif signum == signal.SIGUSR1:
            self._dump()
        elif signum == signal.SIGUSR2:
            self.requested.set()  # the requests thread reads the files

    def _pass_cancel(self) -> None:
        """job.cancel() once per attempt, with what the canceller asked for
        (Scheduler.cancel(reason, grace), stored in the row), else CANCEL_REASON and the
        job's cancel_grace. A SIGTERM sent by hand has no row request: its defaults. No job
        yet, or between attempts: the main thread sees `cancelled` itself."""
        with self._cancel_lock:
            job = self.job
            if job is None or job.done() or job is self._cancel_sent:
                return
            self._cancel_sent = job
        try:
            store = Store(self.store_path)
            try:
                row = store.get(self.id) or {}
            finally:
                store.close()
        except StoreError:
            row = {}  # the defaults: a cancel is never lost to the store
        job.cancel(grace=row.get("cancel_grace"), reason=row.get("cancel_reason") or CANCEL_REASON)

    def _dump(self) -> None:
        """SIGUSR1: a `stacks` event with the worker's answer (None: no job, or no answer).
        One asked while another is on its way is answered by that one: a burst of SIGUSR1
        started a thread each."""
        job = self.job
        if job is None:
            self.events.write({"event": "stacks", "t": time.time(), "stacks": None})
            return
        if self._dumping.is_set():
            return
        self._dumping.set()

        def ask() -> None:
            try:
                stacks = job.dump_stacks(timeout=2.0)
                self.events.write({"event": "stacks", "t": time.time(), "stacks": stacks})
            finally:
                self._dumping.clear()

        threading.Thread(target=ask, name="trainbridge-keeper-dump", daemon=True).start()

    def _serve_requests(self) -> None:
        """Answer the requests (scheduled.request) in the job's requests/ directory: a `send`
        passes its data to the job in the order asked, a `ping` or a `dump_stacks` asks the
        worker on a thread of its own; each gets a `reply` event in the feed. SIGUSR2 wakes
        it at once; it also reads the directory every REQUESTS_LOOK_S, so a request whose
        signal was lost (two close together, one handled late by the main thread) waits a
        second, not until the job ends."""
        while True:
            self.requested.wait(REQUESTS_LOOK_S)
            self.requested.clear()
            if self.finished.is_set():
                return
            for asked in self._take_requests():
                if "error" in asked:
                    self._reply(asked, error=f"unreadable request: {asked['error']}")
                else:
                    self._answer(asked)

    def _take_requests(self) -> list[dict[str, Any]]:
        """The request files waiting in the job's requests/ directory, oldest first, each
        removed as it is read (so it is answered once)."""
        directory = os.path.join(self.row["dir"], procs.REQUESTS_DIR)
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
        except OSError:
            return []  # none asked yet
        out = []
        for name in names:
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="ascii") as f:
                    asked = json.load(f)
            except (OSError, ValueError) as exc:  # torn or foreign: answered, then gone
                asked = {"id": name[: -len(".json")], "op": None, "error": str(exc)}
            try:
                os.unlink(path)
            except OSError:
                pass  # gone already
            if not isinstance(asked, dict):
                asked = {"id": name[: -len(".json")], "op": None, "error": "not an object"}
            out.append(asked)
        return out

    def _answer_the_rest(self) -> None:
        """At the end, before the feed's last event: every request still waiting (asked as
        the job ended, never read) and every ping or dump_stacks still waiting for the
        worker gets its reply, an error, so no asker waits on a reply that cannot come."""
        for asked in self._take_requests():
            self._reply(
                asked,
                error="the job ended before its keeper read this request: it was not delivered",
            )
        with self._asking_lock:
            pending, self._asking = list(self._asking.values()), {}
        for asked in pending:
            self._reply(asked, error="the job ended before the worker answered")

    def _answer(self, asked: dict[str, Any]) -> None:
        job = self.job
        if job is None or job.done():
            self._reply(asked, error="the job's process is not running (between attempts)")
        elif asked.get("op") == "send":
            try:
                job.send(asked.get("data"))
            except (ValueError, RuntimeError) as exc:
                self._reply(asked, error=str(exc))
            else:
                self._reply(asked)
        elif asked.get("op") in ("ping", "dump_stacks"):
            self._ask_worker(job, asked)
        else:
            self._reply(asked, error=f"unknown request {asked.get('op')!r}")

    def _ask_worker(self, job: Any, asked: dict[str, Any]) -> None:
        """A ping or a dump_stacks, asked of the worker on a thread of its own (the requests
        thread stays free), waiting as long as the asker said; the answer is its reply."""
        op = asked["op"]
        data: dict[str, Any] = asked["data"] if isinstance(asked.get("data"), dict) else {}
        wait = data.get("timeout", scheduled.PING_TIMEOUT_S)
        try:  # checked by the asker (scheduled.request); a hand-made file is answered
            scheduled.check_ping_timeout(wait, op)
        except ValueError as exc:
            self._reply(asked, error=str(exc))
            return

        with self._asking_lock:
            self._asking[asked.get("id")] = asked

        def ask() -> None:
            got = job.ping(wait) if op == "ping" else job.dump_stacks(wait)
            with self._asking_lock:
                if self._asking.pop(asked.get("id"), None) is None:
                    return  # answered at the end (_answer_the_rest)
            if got is None:
                self._reply(asked, error="no answer from the worker (no hello yet, or busy)")
            elif op == "ping":
                self._reply(asked, rtt_s=round(got, 6))
            else:
                self._reply(asked, stacks=got)

        threading.Thread(target=ask, name=f"trainbridge-keeper-{op}", daemon=True).start()

    def _reply(self, asked: dict[str, Any], error: Optional[str] = None, **fields: Any) -> None:
        reply = {"event": "reply", "t": time.time(), "request": asked.get("id")}
        reply.update(op=asked.get("op"), ok=error is None, **fields)
        if error is not None:
            reply["error"] = error
        self.events.write(reply, urgent=True)

    # --- events (hub I/O thread) ----------------------------------------------------------
    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "end":
            return  # written by run() once the last attempt is decided
        if kind == "status":
            # The row's progress is the judge's (the lead's, never a subprocess's).
            status = event["status"]
            if status.get("step") is not None:  # what a GUI's job list shows, no attach needed
                self.rows.set(progress={k: status.get(k) for k in ROW_PROGRESS})
            # The file gets at most one a second (a progressing job publishes one per
            # progress message); the Job's tick writes the latest within a second anyway.
            last = self._status_written
            if (
                last is not None
                and status.get("state") == last[1]
                and event["t"] - last[0] < STATUS_WRITE_EVERY_S
            ):
                return
            self._status_written = (event["t"], status.get("state"))
            self.events.write(event)
            return
        self.events.write(event)
        if kind == "state" and event["state"] != "ended":
            # An attempt's end is not the job's: _finish (or a restart) writes the row's.
            self.rows.set(urgent=True, state=event["state"])
        elif kind == "message" and event.get("kind") == "stage" and event["sender"].get("lead"):
            body = event.get("body") or {}  # the lead's last stage begun
            if body.get("event", "begin") == "begin" and body.get("name"):
                self.rows.set(stage=body["name"])

    # --- the job --------------------------------------------------------------------------
    def run(self) -> int:
        """Run the row's job to its end: claim the row, then attempts (each one launch()
        watched to its report) until one succeeds, is cancelled, cannot start, or the row's
        max_restarts are used; then the end (_finish). Returns the keeper's exit status."""
        if not self._claim():
            return 0  # not ours to run (cancelled while starting, or another keeper has it)
        command, config, on_slurm = self._what_to_run()
        env = self._env()
        first = self.row["attempt"] or 0
        attempt, outcome, final = first, None, None
        while True:
            attempt += 1
            if self.cancelled.is_set() or self._cancel_requested():
                outcome, final = "cancelled", None
                break
            started = time.time()
            final, launched = self._attempt(command, config, env, on_slurm, attempt, started)
            outcome = final.get("outcome")
            self._record_attempt(attempt, started, final)
            restarts_done = attempt - 1 - first
            if (
                not launched
                or outcome in ("succeeded", "cancelled")
                or self.cancelled.is_set()
                or restarts_done >= self.row["max_restarts"]
            ):
                break
            if self._wait_to_restart(attempt, final, restarts_done):
                outcome = "cancelled"
                break
        self._finish(outcome, final)
        return 0

    def _claim(self) -> bool:
        """Take the row (starting -> this keeper's pid): False when it is not ours to run.
        The signal and request threads start first, so a cancel meanwhile is heard."""
        SignalThread(self._on_signal, "trainbridge-keeper-signals").install(
            (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
        )
        self._requests_thread = threading.Thread(
            target=self._serve_requests, name="trainbridge-keeper-requests", daemon=True
        )
        self._requests_thread.start()
        me = os.getpid()
        if not self.store.update(
            self.id, where_state=["starting"], keeper_pid=me, keeper_start=process_start(me)
        ):
            return False
        self._reserve = make_reserve(self.row["dir"])
        self.rows.start()
        return True

    def _what_to_run(self) -> tuple[list[str], dict[str, Any], Optional[dict[str, Any]]]:
        """(the command, launch()'s config, the Slurm options or None): a Slurm job's
        command is its runner's, which submits the row's command and follows it
        (bridge/slurm_runner.py), and its job listens for the ranks on the nodes."""
        row = self.row
        config = dict(row["config"] or {})
        command = row["command"]
        on_slurm = (row["resources"] or {}).get("slurm")
        if on_slurm:
            grace = config.get("kill_grace", machine.DEFAULTS["kill_grace"])
            command = slurm_runner.runner_command(
                sys.executable, row["dir"], on_slurm, command, grace
            )
            config["listen"] = listen.parse_listen(on_slurm["listen"])
        return command, config, on_slurm

    def _attempt(
        self,
        command: list[str],
        config: dict[str, Any],
        env: dict[str, str],
        on_slurm: Optional[dict[str, Any]],
        attempt: int,
        started: float,
    ) -> tuple[dict[str, Any], bool]:
        """One attempt, launched and watched to its end: (its report, whether it started)."""
        from trainbridge import bridge

        row = self.row
        try:
            self.job = bridge.launch(
                command,
                cwd=row["cwd"],
                env=env,
                log_path=row["log_path"],
                on_event=self._on_event,
                events=False,  # on_event writes the feed; nothing reads events()
                sample_resources=True,  # `resources` events, with the heartbeat
                **config,
            )
        except (bridge.LaunchError, OSError) as exc:
            return self._launch_failed(exc), False
        pid = self.job.pid
        assert pid is not None  # launch() returns a started job
        self.rows.set(
            urgent=True,
            attempt=attempt,
            job_pid=pid,
            job_start=process_start(pid),
            endpoint=self.job.hub.endpoint,
            started_at=started,
            note=None,
        )
        if self.cancelled.is_set():  # asked while it was starting
            self._pass_cancel()
        follow = None
        if on_slurm:  # Slurm's queue holds the deadlines; the row says why
            follow = slurm_runner.Follow(
                row["dir"], self.job, lambda note: self.rows.set(note=note)
            )
            follow.start()
        self.job.wait()  # the signals need nothing of this thread (SignalThread)
        if follow is not None:
            follow.stop.set()
            follow.join(5.0)  # its last word on the row (the note) before the end's
        final = dict(self.job.report or {})
        return (self._slurm_end(final) if on_slurm else final), True

    def _launch_failed(self, exc: BaseException) -> dict[str, Any]:
        """The report of an attempt whose command could not start, said in the feed."""
        note = (
            f"could not start {self.row['command'][0]!r}: {exc}. Check the path and "
            f"that it is executable (use the full path, e.g. .venv/bin/python)."
        )
        self.events.write({"event": "launch_failed", "t": time.time(), "message": note})
        final: dict[str, Any] = {
            "outcome": "failed",
            "exit_code": None,
            "signal": None,
            "note": note,
            "summary": f"Job failed: {note}",
        }
        final["reason"] = report_text.reason(final)
        return final

    def _wait_to_restart(self, attempt: int, final: dict[str, Any], restarts_done: int) -> bool:
        """A failed attempt that will run again: said in the feed and the row, then the
        backoff waited; True when a cancel came meanwhile."""
        wait_s = backoff(self.row["restart_backoff"], restarts_done)
        outcome = final.get("outcome")
        self.events.write(
            {
                "event": "attempt",
                "t": time.time(),
                "attempt": attempt,
                "outcome": outcome,
                "report": final,
                "restart_in": wait_s,
            }
        )
        self.rows.set(
            urgent=True,
            state="restarting",
            outcome=outcome,
            exit_code=final.get("exit_code"),
            signal=final.get("signal"),
            job_pid=None,
            job_start=None,
        )
        self.job = None
        return self.cancelled.wait(wait_s)

    def _slurm_end(self, report: dict[str, Any]) -> dict[str, Any]:
        """A Slurm job's attempt: what Slurm said at its end judges it too (TIMEOUT,
        NODE_FAIL, ...), and a job the runner left running (SIGKILLed after the grace) is
        ended with scancel."""
        left = slurm_runner.end_leftover(self.row["dir"])
        if left:
            say(left)
        return slurm.end_verdict(report, slurm_runner.read_facts(self.row["dir"]))

    def _record_attempt(self, attempt: int, started: float, report: dict[str, Any]) -> None:
        ended = time.time()
        self._durably(
            "the attempt's report",
            lambda store: store.put_attempt(
                self.id,
                attempt,
                started_at=started,
                ended_at=ended,
                outcome=report.get("outcome"),
                exit_code=report.get("exit_code"),
                signal=report.get("signal"),
                report=report,
            ),
        )

    def _durably(self, what: str, write: Callable[[Store], Any]) -> None:
        """write(store) until the store takes it: a job's true end is never lost to a full
        disk. The first failure releases the space reserve (room for this write) and says so
        in keeper.log; then it tries again every RETRY_S, doubling to ROW_RETRY_MAX_S, for as
        long as it takes, on a fresh connection each time (one opened on a full disk reads
        only). A damaged store is not tried again: what could be done is said."""
        wait, failed_at = RETRY_S, None
        while True:
            try:
                write(self.store)
            except StoreError as exc:
                if exc.kind in ("corrupt", "too_new"):
                    say(f"gave up writing {what}: {exc}")
                    return
                if failed_at is None:
                    failed_at = time.monotonic()
                    release(self._reserve)
                    say(
                        f"cannot write {what} ({exc}); it is kept here and written as soon as "
                        "the store takes it"
                    )
                else:
                    time.sleep(wait)  # a backoff between tries, nothing waits on it
                    wait = min(wait * 2, ROW_RETRY_MAX_S)
                try:
                    fresh = Store(self.store_path)
                except StoreError:
                    continue
                self.store.close()
                self.store = fresh
            else:
                if failed_at is not None:
                    say(f"wrote {what} after {time.monotonic() - failed_at:.1f} s")
                return

    def _env(self) -> dict[str, str]:
        path = os.path.join(self.row["dir"], ENV_FILE)
        with open(path, encoding="utf-8") as f:
            env: dict[str, str] = json.load(f)
        os.unlink(path)  # values live only in this process from now on
        env[procs.JOB_VARIABLE] = self.id  # how leftovers of a lost job are found
        assigned = self.row.get("assigned") or {}
        if assigned.get("gpus") is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in assigned["gpus"])
        return env

    def _cancel_requested(self) -> bool:
        row = self.store.get(self.id)
        return bool(row and row["cancel_requested"])

    def _finish(self, outcome: Optional[str], report: Optional[dict[str, Any]]) -> None:
        self.finished.set()
        self.requested.set()  # the requests thread ends
        report = report or {"outcome": outcome}
        report_obj = dict(report)
        unwritten = self.rows.stop()  # e.g. the last stage, refused by a full disk
        if self.events.failed:
            report_obj["events_failed"] = self.events.failed  # attachers missed these
            report_obj["feed_error"] = self.events.error
            report_obj["summary"] = " ".join(
                [str(report_obj.get("summary") or f"Job {outcome}.")]
                + report_text.feed_losses(
                    {k: report_obj[k] for k in ("events_failed", "feed_error")}
                )
            )
        end = {
            **unwritten,
            "state": "ended",
            "outcome": outcome,
            "exit_code": report_obj.get("exit_code"),
            "signal": report_obj.get("signal"),
            "report": report_obj,
            "ended_at": time.time(),
            "job_pid": None,
            "job_start": None,
            "end_pending": 1,  # the feed's end line comes after the answers below
        }
        self._durably("the job's end", lambda store: store.update(self.id, **end))
        release(self._reserve)  # its room is for the feed's end now; given back before it
        # The row says ended: an asker is refused from now on. What was asked before gets
        # its answer ahead of the end event.
        if self._requests_thread is not None:
            self._requests_thread.join(REQUESTS_JOIN_S)
        self._answer_the_rest()
        self.events.write(
            {"event": "end", "t": time.time(), "outcome": outcome, "report": report_obj}
        )
        self.events.close()
        if self.events.end_written:  # a face waits for nothing more
            self._durably("the feed's end", lambda store: store.update(self.id, end_pending=None))
        else:  # still owed: the row's report says so, and reconcile() writes it once we are gone
            owed = report_text.owe_end_line(report_obj, self.events.error or "not written")
            self._durably("the feed's end", lambda store: store.update(self.id, report=owed))
        try:
            scheduler.schedule_pass(self.store)
        except Exception as exc:  # noqa: BLE001 - the job's end is recorded; say why not more
            print(
                f"trainbridge keeper: could not start queued jobs: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )


def make_reserve(directory: str) -> Optional[str]:
    """RESERVE_BYTES of the disk, held in <directory>/reserve for the job's end (released by
    the first write that fails: the row, the feed's last events and keeper.log's words fit
    in it); None where the disk has no room for it already."""
    path = os.path.join(directory, procs.RESERVE_FILE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError:
        os.close(fd)
        release(path)
        return None
    os.close(fd)
    return path


def release(reserve: Optional[str]) -> None:
    """Give the reserve's space back (a second call does nothing)."""
    if reserve is not None:
        try:
            os.unlink(reserve)
        except OSError:
            pass


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m trainbridge.bridge.keeper STORE JOB_ID", file=sys.stderr)
        return 2
    return Keeper(args[0], args[1]).run()


if __name__ == "__main__":
    sys.exit(main())
