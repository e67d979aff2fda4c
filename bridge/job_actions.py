"""A Job and its state machine: machine events in, the machine's actions performed (state
events, snapshots, stack dumps, the in-band cancel, signals, drain, finish); the hub's timer
calls (next_wakeup, tick); the look for a loaded worker before any hello; the live diagnosis
while stalled. Part of bridge.job.Job (a mixin: the attributes it uses are set up in
Job.__init__). The one implementation: a Node job's deadlines and live diagnosis are these,
through bridge/jobserve.py."""

from __future__ import annotations

import os
import signal as signals
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional, cast

from trainbridge.bridge import (
    diagnosis,
    evidence,
    launcher,
    look,
    machine,
    procfs,
    rankdumps,
    ranks,
    ranks_hang,
    report_files,
)

if TYPE_CHECKING:
    from collections import deque

    from trainbridge.bridge.job import JobHost
else:
    JobHost = object  # mypy's view of the Job this room is part of; a plain class at run time

LIVE_DIAGNOSIS_S = 2.0  # while stalled, the live diagnosis is refreshed at most this often
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


class JobActions(JobHost):
    """Job's machine room (I/O thread)."""

    def _step(self, event: dict[str, Any]) -> None:
        self.hub.io_only("a job's machine step")
        self.m, actions = machine.step(self.m, event)
        for action in actions:
            self._perform(action)

    def _perform(self, action: dict[str, Any]) -> None:
        """One action of the machine's, by its kind (ACTIONS)."""
        ACTIONS[action["do"]](self, action)

    def _do_state(self, action: dict[str, Any]) -> None:
        """The job's state changed: said in the feed, with the judged status; a stall is
        looked at at once."""
        self._publish({"event": "state", "state": action["state"]})
        self._publish_status()
        if action["state"] == "stalled":
            self._live_diagnose(force=True)

    def _do_snapshot(self, action: dict[str, Any]) -> None:
        """A hang: said in the feed, and the evidence gathered (on a thread of its own)."""
        hang = self.m["hang"] or {}
        self._publish({"event": "hang", "reason": action["reason"], "stage": hang.get("stage")})
        self._start_snapshot()

    def _do_dump_stacks(self, action: dict[str, Any]) -> None:
        """Ask every process of the job for its stacks, in band; the seqs asked are the hang's
        (their answers count as answered: _fallback_dumps)."""
        first = self.channel.seq + 1
        self._dump_seq = self.channel.command("dump_stacks")
        self._hang_seqs = range(first, (self._dump_seq or first - 1) + 1)

    def _do_cancel(self, action: dict[str, Any]) -> None:
        """The in-band cancel, with the user's reason; its seqs await the lead's answer."""
        first = self.channel.seq + 1
        reason = (self.facts["cancel"] or {}).get("reason") or "cancelled by the client"
        last = self.channel.command("cancel", {"reason": reason})
        self._cancel_seqs = range(first, last + 1) if last is not None else range(0)

    def _do_signal(self, action: dict[str, Any]) -> None:
        """A signal, recorded and said in the feed. SIGUSR1 (Python's dump) goes to every
        process that offered it and their fork workers; SIGUSR2 (the C dump) only to those
        whose SIGUSR1 did not answer; any other to the whole tree."""
        name = action["signal"]
        self.facts["signals_sent"].append(name)
        self._publish({"event": "signal", "signal": name})
        if name == "SIGUSR1":
            self._signal_dump_at = report_files.crash_file_size(self.crash_file)
            for pid in self.facts["dump_pids"]:
                launcher.signal_process(pid, signals.SIGUSR1)
            # Their fork workers (a DataLoader's) inherited the handler and the crash
            # file but say no hello: their own stacks come the same way.
            said_hello = {p["pid"] for p in self.facts["ranks"]["procs"].values()}
            dump_pids = [pid for pid in self.facts["dump_pids"] if isinstance(pid, int)]
            for pid in procfs.forked_copies(dump_pids, signals.SIGUSR1, said_hello):
                launcher.signal_process(pid, signals.SIGUSR1)
        elif name == "SIGUSR2":
            # Only to the processes whose SIGUSR1 handler did not answer: Python runs
            # in the others, and the C dump would race it (worker/hooks.py).
            answered = report_files.signal_dumped_pids(self.crash_file, self._signal_dump_at)
            for pid in self.facts["native_dump_pids"]:
                if pid not in answered and pid not in (self._fallback_pids or ()):
                    launcher.signal_process(pid, SIGNALS[name])
        elif self.tree is not None:
            self.tree.signal(SIGNALS[name])

    def _do_look(self, action: dict[str, Any]) -> None:
        self._start_look(action["reason"])

    def _do_drain(self, action: dict[str, Any]) -> None:
        self._drain()

    def _do_finish(self, action: dict[str, Any]) -> None:
        self._finish()

    def _publish_status(self) -> None:
        """The feed's `status` event: the judge's snapshot (bridge/status.py), which every
        face renders as it is (docs/CLIENT.md "The status event")."""
        self.live_status.published(time.monotonic())
        self._publish({"event": "status", "status": self.status()})
        if self.sample_resources and self.pid and self.m["exit"] is None:
            self.hub.resources.due(self.id, self.pid, self._sampled)

    def _sampled(self, sample: dict[str, Any]) -> None:
        """A sample of the job's tree (bridge/resources.py; its thread): published as a
        `resources` event on the I/O thread, unless the job ended meanwhile."""

        def publish() -> None:
            if self.m["exit"] is None:
                self._publish({"event": "resources", **sample})

        self.hub.call(publish)

    def _due(
        self, now: float
    ) -> tuple[dict[bytes, deque[tuple[str, Any]]], Optional[float], Optional[float]]:
        """What of this job's timed work is due, the one account next_wakeup and tick both
        read (two copies drifted once: a job whose pipes had closed was kept for the pipe
        linger): (sends held back by a full worker queue, retried on every tick; when the
        drain ends, `now` once the pipes are done; when the process tree is next re-read,
        only while the job runs and does not drain). The machine's own deadline is read
        apart, after the work above, which may move it."""
        if self._drain_started is not None:
            wait = machine.drain_wait(
                pipes_open=self.output.open,
                since_drain_s=now - self._drain_started,
                bye=self.facts["bye"] is not None,
                # This hub has no end notices; it read every message queued at the exit.
                connections_ended=False,
                notice_due=False,
                quiet_s=now - max(self.last_message_t or 0.0, self.facts["ended"] or 0.0),
            )
            return self.channel.held, now + wait, None
        tree = self._tree_next if self.m["exit"] is None else None
        return self.channel.held, None, tree

    def hold(self, held: bool) -> None:
        """The job's processes wait in another scheduler's queue (held: a Slurm job PENDING)
        or no longer do: its start-up and stall deadlines wait meanwhile (machine.py "held").
        Any thread."""

        def step() -> None:
            if self.proc is not None and not self._done.is_set():
                self._step({"type": "held", "t": time.monotonic(), "held": bool(held)})

        self.hub.call(step)

    def paused(self, seconds: float) -> None:
        """The hub did not run for `seconds` (machine.py "paused")."""
        if self.proc is not None and not self._done.is_set():
            self._step({"type": "paused", "t": time.monotonic(), "paused_s": seconds})

    def next_wakeup(self) -> Optional[float]:
        if self.proc is None or self._done.is_set():
            return None
        now = time.monotonic()
        held, drain, tree = self._due(now)
        status = self.live_status.next_at if self.m["exit"] is None else None
        times = [machine.next_deadline(self.m), drain, tree, status, self._look_due]
        if held:
            times.append(now + SEND_RETRY_S)
        return min((t for t in times if t is not None), default=None)

    def tick(self, now: float) -> None:
        if self.proc is None or self._done.is_set():
            return
        held, drain, tree = self._due(now)
        if held:
            self.channel.flush()
        if self.m["exit"] is None and now >= self.live_status.next_at:
            self._publish_status()
        if drain is not None and now >= drain:
            self._drain_started = None
            self.output.close_pipes()
            self._step({"type": "drained", "t": now})
            return
        if self._look_due is not None and now >= self._look_due:
            self._end_look(now)
        if tree is not None and now >= tree:
            # One /proc read for all jobs. Not None: _attach sets it with self.proc (see above).
            cast(launcher.Tree, self.tree).refresh(max_age=launcher.SHARED_TABLE_S)
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
                and self.facts["lead_pid"]
                in report_files.signal_dumped_pids(self.crash_file, self._signal_dump_at)
            ):
                self._step({"type": "signal_dumped", "t": now})
            if ending is not None and ending["step"] == "signal_dump":
                self._rank_dumps_fallback()
            self._step({"type": "timer", "t": now})

    def _output_lines(self) -> int:
        return int(self.facts["lines"]["stdout"]) + int(self.facts["lines"]["stderr"])

    def _sample(self, now: float) -> dict[str, Any]:
        lead = self.facts["lead_pid"] or self.pid
        # Not None: both callers (_start_look, _end_look) return first while it is.
        return procfs.tree_sample(cast(int, self.pid), self._output_lines(), now, lead=lead)

    def _start_look(self, reason: str) -> None:
        """A startup, heartbeat or stall deadline passed: sample the job's tree now and again LOOK_S
        later (machine.py "look"; the verdict is bridge/look.py's)."""
        if self.pid is None:
            return  # no process: the look's own deadline decides
        now = time.monotonic()
        self._look = {"reason": reason, "sample": self._sample(now)}
        self._look_due = now + machine.LOOK_S

    def _end_look(self, now: float) -> None:
        asked, self._look, self._look_due = self._look, None, None
        if asked is None or self.pid is None or self.m["exit"] is not None:
            return
        reason, after = asked["reason"], self._sample(now)
        if reason == "stall" and self.m["last_activity_t"] is not None:
            start = self.m["last_activity_t"]
            wheres = look.stall_wheres(self._heard.get("wheres") or [], start)
            after.update({"from": start, "wheres": wheres})
        verdict = look.judge(reason, asked["sample"], after)
        if verdict["working"]:  # said before the machine moves on: faces show why it waits
            timeout = self.m["config"][f"{reason}_timeout"]
            event = LOOKED_EVENTS[reason]
            self._publish({"event": event, "why": verdict["why"], "for_s": timeout})
        looked = {"type": "looked", "t": now, "reason": reason, "working": verdict["working"]}
        if "since" in verdict:
            looked["since"] = verdict["since"]
        self._step(looked)

    def _rank_dumps_fallback(self) -> None:
        """After SIGUSR1 at hang time: each local rank that did not answer the hang's
        dump_stacks gets its stack into `ranks` from its SIGUSR1 dump, else from SIGUSR2
        (bridge/rankdumps.py), once."""
        if self._fallback_pids is not None or not self.crash_file:
            return
        self._fallback_pids = set()
        sections = rankdumps.sigusr1_sections(
            rankdumps.read_from(self.crash_file, self._signal_dump_at or 0)
        )
        state = self.facts["ranks"]
        for key, p in list(state["procs"].items()):
            pid = p["pid"]
            if (
                p["world_size"] is None
                or p.get("addr")  # another host's: no signal goes there
                or p["exit"] is not None
                or key.encode("ascii", "replace") in self._hang_answered
                or not isinstance(pid, int)
            ):
                continue
            text = sections.get(pid)
            if text is None and pid in self.facts["native_dump_pids"] and "SIGUSR2" in SIGNALS:
                # Not in signals_sent: that list is the lead's escalation (a SIGUSR2 there
                # means the lead's Python was silent); the dump shows in the crash file.
                self._fallback_pids.add(pid)

                def send_sigusr2(q: int) -> None:  # native_dump's `send` returns nothing
                    launcher.signal_process(q, SIGNALS["SIGUSR2"])

                text = rankdumps.native_dump(self.crash_file, pid, send_sigusr2)
            if text:
                ranks.observe(state, key, "signal_dump", {"stacks": text}, p["last_beat"])

    def _check_loaded(self, now: float) -> None:
        """Before any hello: has the worker loaded in the launched process? Its stage box
        is written synchronously at `import worker`, before the beacon can speak; a GIL held
        right after would otherwise be seen only at the startup timeout.
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
        native = procfs.catches(self.pid, signals.SIGUSR2) and "SIGUSR2" in SIGNALS
        if native and self.pid not in self.facts["native_dump_pids"]:
            self.facts["native_dump_pids"].append(self.pid)
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
            ev = evidence.live(self.pid, self._live_mark)
            self._live_mark = ev.pop("mark", None)
            hb = self.facts["heartbeat"] or {}
            running = [s["name"] for s in self.facts["stages"] if s["status"] == "running"]
            last = self.m.get("last_activity_t")
            idle = round(now - last, 1) if last is not None else hb.get("idle_s")
            found = diagnosis.diagnose_hang(
                {
                    "reason": "stall",
                    "stage": running[-1] if running else None,
                    "stages": running,
                    "idle_s": idle,
                    "stack": hb.get("stack"),
                    "saw_hello": bool(self.facts["hellos"]),
                    "evidence": ev,
                    "progress": self.facts["progress"],
                }
            )
            # Ranks waiting in a collective for one that is elsewhere.
            found = ranks_hang.live_collective(self.ranks) or found
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
        hb = self.facts["heartbeat"] or {}
        self._publish(
            {
                "event": "stalled",
                "stage": hb.get("stage"),  # the fields of Node's 'stalled' (src/feed_job.js)
                "idle_s": self.live_diagnosis["idle_s"],
                "stack": hb.get("stack"),
                "diagnosis": self.live_diagnosis,
            }
        )


def _catches_sigusr1(pid: int) -> bool:
    """Whether `pid` has a handler for SIGUSR1 (/proc/<pid>/status SigCgt, bit 10)."""
    return procfs.catches(pid, signals.SIGUSR1)


# What the job does for each of the machine's actions (machine.step returns them in order).
ACTIONS: dict[str, Callable[[JobActions, dict[str, Any]], None]] = {
    "state": JobActions._do_state,
    "snapshot": JobActions._do_snapshot,
    "dump_stacks": JobActions._do_dump_stacks,
    "cancel": JobActions._do_cancel,
    "signal": JobActions._do_signal,
    "look": JobActions._do_look,
    "drain": JobActions._do_drain,
    "finish": JobActions._do_finish,
}
