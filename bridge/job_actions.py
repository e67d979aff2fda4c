"""A Job and its state machine: machine events in, the machine's actions performed (state
events, snapshots, stack dumps, the in-band cancel, signals, drain, finish); the hub's timer
calls (next_wakeup, tick); the look for a loaded worker before any hello. The deadline's
look, the live diagnosis while stalled, the asks and the signal dumps are parts of their own
(job_look, job_live, job_asks, job_dumps) that this room drives. A part of bridge.job.Job
(job.actions): it owns when the process tree is next read, and reads and moves the rest of
the job's state through the Job it is given. The one implementation: a Node job's deadlines
and live diagnosis are these, through bridge/jobserve.py."""

from __future__ import annotations

import os
import signal as signals
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional, cast

from trainbridge.bridge import launcher, machine, procfs

if TYPE_CHECKING:
    from collections import deque

    from trainbridge.bridge.job import JobCore

TREE_REFRESH_S = 1.0  # how often the process tree is re-read while the job runs
# ... plus this much per job the hub serves: each refresh scans all of /proc, so a round
# over every job costs jobs x processes and saturated the I/O thread at 200 jobs. The tree
# is a safety net (the group kill and the end-of-job scan by job id find the rest).
TREE_REFRESH_PER_JOB_S = 0.05
SEND_RETRY_S = 0.01  # how soon a send that a full worker queue refused is tried again
# The feed's event when a deadline's look saw the job working, not hung (docs/CLIENT.md):
# starting (startup), starved (heartbeat: waiting for a free core), computing (stall).
LOOKED_EVENTS = {"startup": "starting", "heartbeat": "starved", "stall": "computing"}
SIGNALS = {"SIGUSR1": signals.SIGUSR1, "SIGTERM": signals.SIGTERM, "SIGKILL": signals.SIGKILL}
if hasattr(signals, "SIGUSR2"):
    SIGNALS["SIGUSR2"] = signals.SIGUSR2


class Actions:
    """Job's machine room (I/O thread): job.actions."""

    def __init__(self, job: JobCore) -> None:
        self.job = job
        self._tree_next = 0.0  # when the process tree is next re-read (_due)

    def step(self, event: dict[str, Any]) -> None:
        self.job.hub.io_only("a job's machine step")
        self.job.m, actions = machine.step(self.job.m, event)
        for action in actions:
            self._perform(action)

    def _perform(self, action: dict[str, Any]) -> None:
        """One action of the machine's, by its kind (ACTIONS)."""
        ACTIONS[action["do"]](self, action)

    def ask_cancel(self, grace: Optional[float], reason: str, **by: Any) -> None:
        """job.cancel() on the I/O thread; `by` says who asked, when not the client (the
        health rule, stop_on_nan)."""
        facts = self.job.facts
        if facts["cancel"] is None:
            facts["cancel"] = {
                "reason": reason,
                "accepted": None,
                "refused": None,
                "traceback": None,
                **by,
            }
        self.step({"type": "cancel", "t": time.monotonic(), "grace": grace})

    def _do_state(self, action: dict[str, Any]) -> None:
        """The job's state changed: said in the feed, with the judged status; a stall is
        looked at at once."""
        self.job.publisher.publish({"event": "state", "state": action["state"]})
        self.publish_status()
        if action["state"] == "stalled":
            self.live_diagnose(force=True)

    def _do_snapshot(self, action: dict[str, Any]) -> None:
        """A hang: said in the feed, and the evidence gathered (on a thread of its own)."""
        hang = self.job.m["hang"] or {}
        self.job.publisher.publish(
            {"event": "hang", "reason": action["reason"], "stage": hang.get("stage")}
        )
        facts = self.job.facts
        facts["tail_at_hang"] = {"tail": list(facts["tail"]), "lines": self._output_lines()}
        self.job.ending.start_snapshot()

    def _do_dump_stacks(self, action: dict[str, Any]) -> None:
        """Ask every process of the job for its stacks, in band: the hang's ask (job_asks)."""
        first = self.job.channel.seq + 1
        self.job.asks.hang_dump(first, self.job.channel.command("dump_stacks"))

    def _do_cancel(self, action: dict[str, Any]) -> None:
        """The in-band cancel, with the user's reason; its seqs await the lead's answer."""
        first = self.job.channel.seq + 1
        reason = (self.job.facts["cancel"] or {}).get("reason") or "cancelled by the client"
        self.job.asks.cancel(first, self.job.channel.command("cancel", {"reason": reason}))

    def _do_signal(self, action: dict[str, Any]) -> None:
        """A signal, recorded and said in the feed. SIGUSR1 (Python's dump) goes to every
        process that offered it and their fork workers; SIGUSR2 (the C dump) only to those
        whose SIGUSR1 did not answer; any other to the whole tree."""
        name = action["signal"]
        self.job.facts["signals_sent"].append(name)
        self.job.publisher.publish({"event": "signal", "signal": name})
        if name == "SIGUSR1":
            self.job.dumps.sigusr1_sent()
            for pid in self.job.facts["dump_pids"]:
                launcher.signal_process(pid, signals.SIGUSR1)
            # Their fork workers (a DataLoader's) inherited the handler and the crash
            # file but say no hello: their own stacks come the same way.
            said_hello = {p["pid"] for p in self.job.facts["ranks"]["procs"].values()}
            dump_pids = [pid for pid in self.job.facts["dump_pids"] if isinstance(pid, int)]
            for pid in procfs.forked_copies(dump_pids, signals.SIGUSR1, said_hello):
                launcher.signal_process(pid, signals.SIGUSR1)
        elif name == "SIGUSR2":
            for pid in self.job.dumps.sigusr2_due(self.job.facts["native_dump_pids"]):
                launcher.signal_process(pid, SIGNALS[name])
        elif self.job.tree is not None:
            self.job.tree.signal(SIGNALS[name])

    def _do_look(self, action: dict[str, Any]) -> None:
        self._start_look(action["reason"])

    def _do_drain(self, action: dict[str, Any]) -> None:
        self.job.ending.drain()

    def _do_finish(self, action: dict[str, Any]) -> None:
        self.job.ending.finish()

    def publish_status(self) -> None:
        """The feed's `status` event: the judge's snapshot (bridge/status.py), which every
        face renders as it is (docs/CLIENT.md "The status event")."""
        self.job.live_status.published(time.monotonic())
        self.job.publisher.publish({"event": "status", "status": self.job.status()})
        if self.job.sample_resources and self.job.pid and self.job.m["exit"] is None:
            self.job.hub.resources.due(self.job.id, self.job.pid, self._sampled)

    def _sampled(self, sample: dict[str, Any]) -> None:
        """A sample of the job's tree (bridge/resources.py; its thread): published as a
        `resources` event on the I/O thread, unless the job ended meanwhile."""

        def publish() -> None:
            if self.job.m["exit"] is None:
                self.job.publisher.publish({"event": "resources", **sample})

        self.job.hub.call(publish)

    def _due(
        self, now: float
    ) -> tuple[dict[bytes, deque[tuple[str, Any]]], Optional[float], Optional[float]]:
        """What of this job's timed work is due, the one account next_wakeup and tick both
        read (two copies drifted once: a job whose pipes had closed was kept for the pipe
        linger): (sends held back by a full worker queue, retried on every tick; when the
        drain ends, `now` once the pipes are done; when the process tree is next re-read,
        only while the job runs and does not drain). The machine's own deadline is read
        apart, after the work above, which may move it."""
        if self.job.ending.drain_started is not None:
            wait = machine.drain_wait(
                pipes_open=self.job.output.open,
                since_drain_s=now - self.job.ending.drain_started,
                bye=self.job.facts["bye"] is not None,
                # This hub has no end notices; it read every message queued at the exit.
                connections_ended=False,
                notice_due=False,
                quiet_s=now - max(self.job.last_message_t or 0.0, self.job.facts["ended"] or 0.0),
            )
            return self.job.channel.held, now + wait, None
        tree = self._tree_next if self.job.m["exit"] is None else None
        return self.job.channel.held, None, tree

    def hold(self, held: bool) -> None:
        """The job's processes wait in another scheduler's queue (held: a Slurm job PENDING)
        or no longer do: its start-up and stall deadlines wait meanwhile (machine.py "held").
        Any thread."""

        def step() -> None:
            if self.job.proc is not None and not self.job.done():
                self.step({"type": "held", "t": time.monotonic(), "held": bool(held)})

        self.job.hub.call(step)

    def paused(self, seconds: float) -> None:
        """The hub did not run for `seconds` (machine.py "paused")."""
        if self.job.proc is not None and not self.job.done():
            self.step({"type": "paused", "t": time.monotonic(), "paused_s": seconds})

    def next_wakeup(self) -> Optional[float]:
        if self.job.proc is None or self.job.done():
            return None
        now = time.monotonic()
        held, drain, tree = self._due(now)
        status = self.job.live_status.next_at if self.job.m["exit"] is None else None
        look = self.job.deadline_look.due
        times = [
            machine.next_deadline(self.job.m),
            drain,
            tree,
            status,
            look,
            self.job.ending.due(),
        ]
        if held:
            times.append(now + SEND_RETRY_S)
        return min((t for t in times if t is not None), default=None)

    def tick(self, now: float) -> None:
        if self.job.proc is None or self.job.done():
            return
        if self.job.ending.tick(now):  # the end waits for its leftovers: nothing else is due
            return
        held, drain, tree = self._due(now)
        if held:
            self.job.channel.flush()
        if self.job.m["exit"] is None and now >= self.job.live_status.next_at:
            self.publish_status()
        if drain is not None and now >= drain:
            self.job.ending.drained(now)
            return
        if self.job.deadline_look.due is not None and now >= self.job.deadline_look.due:
            self._end_look(now)
        if tree is not None and now >= tree:
            # One /proc read for all jobs. Not None: Job._attach sets it with the process.
            cast(launcher.Tree, self.job.tree).refresh(max_age=launcher.SHARED_TABLE_S)
            self.job.messages.check_lead_alive(now)
            self._tree_next = now + TREE_REFRESH_S + TREE_REFRESH_PER_JOB_S * len(self.job.hub.jobs)
            if not self.job.m["hello"] and self.job.m.get("loaded_t") is None:
                self._check_loaded(now)
        deadline = machine.next_deadline(self.job.m)
        if deadline is not None and now >= deadline:
            ending = self.job.m["ending"]
            if (
                ending is not None
                and ending["step"] == "signal_dump"
                and self.job.facts["lead_pid"] in self.job.dumps.answered()
            ):
                self.step({"type": "signal_dumped", "t": now})
            if ending is not None and ending["step"] == "signal_dump":
                # Each local rank that did not answer the hang's dump_stacks: its stack from
                # its own signal dump (job_dumps).
                native = self.job.facts["native_dump_pids"]
                self.job.dumps.fallback(
                    self.job.facts["ranks"], self.job.asks.hang_answered, native
                )
            self.step({"type": "timer", "t": now})

    def _output_lines(self) -> int:
        return int(self.job.facts["lines"]["stdout"]) + int(self.job.facts["lines"]["stderr"])

    def _sample(self, now: float) -> dict[str, Any]:
        lead = self.job.facts["lead_pid"] or self.job.pid
        # Not None: both callers (_start_look, _end_look) return first while it is.
        return procfs.tree_sample(cast(int, self.job.pid), self._output_lines(), now, lead=lead)

    def _start_look(self, reason: str) -> None:
        """A startup, heartbeat or stall deadline passed: sample the job's tree now and again
        LOOK_S later (machine.py "look"; job_look keeps it, bridge/look.py judges it)."""
        if self.job.pid is None:
            return  # no process: the look's own deadline decides
        now = time.monotonic()
        self.job.deadline_look.start(reason, self._sample(now), now)

    def _end_look(self, now: float) -> None:
        asked = self.job.deadline_look.take()
        if asked is None or self.job.pid is None or self.job.m["exit"] is not None:
            return
        reason = asked["reason"]
        verdict = self.job.deadline_look.judge(
            asked, self._sample(now), self.job.m["last_activity_t"]
        )
        if verdict["working"]:  # said before the machine moves on: faces show why it waits
            timeout = self.job.m["config"][f"{reason}_timeout"]
            event = LOOKED_EVENTS[reason]
            self.job.publisher.publish({"event": event, "why": verdict["why"], "for_s": timeout})
        looked = {"type": "looked", "t": now, "reason": reason, "working": verdict["working"]}
        if "since" in verdict:
            looked["since"] = verdict["since"]
        hang = self.job.m["hang"]
        self.step(looked)
        if hang is None and (self.job.m["hang"] or {}).get("reason") == reason:
            # The look made it a hang: the report says what it saw (report["look"]). A look
            # the machine no longer heeds (the job spoke meanwhile) is not the job's.
            self.job.facts["look"] = {"reason": reason, "why": verdict["why"]}

    def _check_loaded(self, now: float) -> None:
        """Before any hello: has the worker loaded in the launched process? Its stage box
        is written synchronously at `import worker`, before the beacon can speak; a GIL held
        right after would otherwise be seen only at the startup timeout.
        The box's mtime says when; /proc's SigCgt whether SIGUSR1 has a handler (the
        faulthandler dump the worker registers at import), so it may be sent."""
        if not self.job.crash_file or self.job.pid is None:
            return
        try:
            mtime = os.stat(f"{self.job.crash_file}.stages.{self.job.pid}").st_mtime
        except OSError:
            return
        loaded = min(now, now - (time.time() - mtime))
        # SIGUSR2 (faulthandler's C dump, registered at import) too: a GIL held before hello
        # leaves SIGUSR1's Python handler unable to run; the native dump still answers.
        native = procfs.catches(self.job.pid, signals.SIGUSR2) and "SIGUSR2" in SIGNALS
        if native and self.job.pid not in self.job.facts["native_dump_pids"]:
            self.job.facts["native_dump_pids"].append(self.job.pid)
        self.step(
            {
                "type": "worker_loaded",
                "t": loaded,
                "dump_signal": _catches_sigusr1(self.job.pid),
                "native_dump": native,
            }
        )
        if self.job.m["exit"] is None:
            deadline = machine.next_deadline(self.job.m)
            if deadline is not None and now >= deadline:
                self.step({"type": "timer", "t": now})

    def live_diagnose(self, force: bool = False) -> None:
        """While stalled: the live diagnosis (job_live), at most every LIVE_DIAGNOSIS_S unless
        forced, published as a "stalled" event."""
        now = time.monotonic()
        if self.job.pid is None or not self.job.live.due(now, force):
            return
        found = self.job.live.refresh(
            self.job.pid, self.job.facts, self.job.m.get("last_activity_t"), now
        )
        hb = self.job.facts["heartbeat"] or {}
        self.job.publisher.publish(
            {
                "event": "stalled",
                "stage": hb.get("stage"),  # the fields of Node's 'stalled' (src/feed_job.js)
                "idle_s": found["idle_s"],
                "stack": hb.get("stack"),
                "diagnosis": found,
            }
        )
        self.job.live.said(time.monotonic())


def _catches_sigusr1(pid: int) -> bool:
    """Whether `pid` has a handler for SIGUSR1 (/proc/<pid>/status SigCgt, bit 10)."""
    return procfs.catches(pid, signals.SIGUSR1)


# What the job does for each of the machine's actions (machine.step returns them in order).
ACTIONS: dict[str, Callable[[Actions, dict[str, Any]], None]] = {
    "state": Actions._do_state,
    "snapshot": Actions._do_snapshot,
    "dump_stacks": Actions._do_dump_stacks,
    "cancel": Actions._do_cancel,
    "signal": Actions._do_signal,
    "look": Actions._do_look,
    "drain": Actions._do_drain,
    "finish": Actions._do_finish,
}
