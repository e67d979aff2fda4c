"""A Job's end: the exit noticed, the drain (last messages and output, orphans asked to go),
the hang snapshot, the report built and published, the files closed; and the end of a job
whose handling hit a bug in trainbridge (fail_internal). A part of bridge.job.Job
(job.ending): it owns when the drain started and whether the job has ended (`finished`, which
job.wait() waits on), and reads the rest of the job's state through the Job it is given. The
one implementation: a Node job ends here too, through bridge/jobserve.py."""

from __future__ import annotations

import shutil
import signal as signals
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, Optional, cast

from trainbridge.bridge import job_facts, launcher, report_files, report_text
from trainbridge.bridge import report as reports
from trainbridge.bridge.job_leftovers import KILL_WAIT_S, LeftoverWait
from trainbridge.bridge.report import Report

if TYPE_CHECKING:
    from trainbridge.bridge.job import JobCore


class Ending:
    """Job's end room (I/O thread): job.ending."""

    def __init__(self, job: JobCore) -> None:
        self.job = job
        # Set once the report is out (any thread may wait on it: job.wait()).
        self.finished = threading.Event()
        # When the drain started (machine.drain_wait() says when it is done), till drained().
        self.drain_started: Optional[float] = None
        self.leftovers = LeftoverWait(job.hub)  # the finish's wait for the SIGKILLed leftovers

    def on_exit_ready(self) -> None:
        if self.job.proc is None or self.job.proc.poll() is None:
            return
        now = time.monotonic()
        self.job.facts["ended"] = now
        self.job.hub.resources.forget(self.job.id, self.job.proc.pid)
        self.job.exit_watch.stop()
        code, signal = launcher.exit_status(self.job.proc.returncode)
        self.job.facts["exit_code"], self.job.facts["exit_signal"] = code, signal
        self.job.facts.update(
            self.job.exit_watch.oom(code, signal, "SIGKILL" in self.job.facts["signals_sent"])
        )
        # A rank that led and died without a bye (torchrun SIGTERMs rank 0 when rank 1
        # dies) hands the lead back now, before the exit is judged: the launcher's last
        # words are the job's. The periodic look can miss it on a loaded machine.
        self.job.messages.check_lead_alive(now)
        self.job.actions.step(
            {
                "type": "exit",
                "t": now,
                "code": self.job.facts["exit_code"],
                "signal": self.job.facts["exit_signal"],
            }
        )

    def drain(self) -> None:
        self.job.hub.drain_router()
        self.job.output.read_all()
        # Whatever of the tree outlived the main process is an orphan now: ask it to go
        # (it is SIGKILLed at finish), so it cannot hold our pipes or the GPU.
        if self.job.tree is not None:
            self.job.tree.adopt_escapees()
            self.job.facts["leftovers"] = [p.pid for p in self.job.tree.alive(include_root=False)]
            if self.job.facts["leftovers"]:
                self.job.tree.signal(signals.SIGTERM, include_root=False)
        self.drain_started = time.monotonic()  # machine.drain_wait() says when it is done

    def drained(self, now: float) -> None:
        """The drain's wait is over (job.actions.tick): the pipes close, the machine hears it."""
        self.drain_started = None
        self.job.output.close_pipes()
        self.job.actions.step({"type": "drained", "t": now})

    def start_snapshot(self) -> None:
        # Not None: a hang (machine "snapshot") comes from a deadline, and the deadlines run
        # once the process exists (tick, _check_loaded, _end_look).
        pid = cast(int, self.job.pid)
        self.job.hang_snapshot.start(pid, lambda: self.job.hub.call(self._snapshotted))

    def _snapshotted(self) -> None:
        """The hang's evidence is in (job_snapshot): into the facts, and the machine told."""
        self.job.facts["snapshot"] = self.job.hang_snapshot.result
        self.job.actions.step({"type": "snapshotted", "t": time.monotonic()})

    def finish(self, hold: bool = False) -> None:
        """The machine's "finish": what of the tree is left is SIGKILLed, and the report is
        built once it is gone (bounded: job_leftovers), without holding the I/O thread for it
        unless `hold` (fail_internal: nothing of a failed job may run on meanwhile)."""
        self.leftovers.stop()
        tree = self.job.tree
        if tree is not None and tree.alive(include_root=False):
            tree.signal(signals.SIGKILL, include_root=False)
            # The end says nothing of the job is left (its `leftovers` were stopped): wait,
            # bounded, until that is true. Only a process in the kernel's uninterruptible
            # wait outlasts it, and it ends when that wait does (SIGKILL cannot be caught).
            if hold:
                tree.wait_gone(KILL_WAIT_S, include_root=False)
            elif self.leftovers.start(tree, self._report, owner=self.job):
                return
        self._report()

    def due(self) -> Optional[float]:
        """When the job's tick is next due for the end (the leftovers' wait), or None."""
        return self.leftovers.due()

    def tick(self, now: float) -> bool:
        """The job's tick while the end waits for its leftovers: True while it does (the
        machine has ended: nothing else of the job is due)."""
        if self.leftovers.deadline is None:
            return False
        self.leftovers.tick(now)
        return True

    def _report(self) -> None:
        """The rest of the finish: the snapshot joined, the last messages read, the report
        built and published, the job's files removed, `finished` set."""
        if self.finished.is_set():
            return
        if self.job.facts["snapshot"] is None:  # a snapshot not done when the job ended
            self.job.facts["snapshot"] = self.job.hang_snapshot.join()
        self.job.hub.drain_router()
        self.job.channel.give_up()
        unsent = self.job.outbox.drop()  # sends that waited for a hello that never came
        if unsent:
            self.job.channel.undelivered["user"] += unsent
        facts = self._final_facts()
        try:
            files = report_files.read_files(self.job.crash_file, facts["lead_pid"] or facts["pid"])
            self.job.report = Report(reports.build(facts, files))
        except Exception as exc:  # noqa: BLE001 - never leave a waiter hanging on a report bug
            self.job.report = Report(reports.minimal(facts, exc))
        self.job.hub.remove_job(self.job.id)
        self.job.output.end_log(report_text.log_footer(self.job.report))
        self._close_stdin()
        self.job.publisher.publish(
            {"event": "end", "outcome": self.job.m["outcome"], "report": self.job.report}
        )
        # After the end is out: removing the job's files took 1.4 ms at the median and up to
        # 14 ms on a loaded machine, on the path from a death to its report.
        shutil.rmtree(self.job.dir, ignore_errors=True)  # the crash file is in the report now
        self.finished.set()

    def _final_facts(self) -> dict[str, Any]:
        """The facts record as report.build() reads it: a copy with the machine's verdict,
        the hub's protocol counts and the end time (the exit's, else now) added."""
        facts = dict(self.job.facts)
        facts["machine"] = job_facts.machine_verdict(self.job.m)
        facts["pid"] = self.job.pid
        facts["rejected"] = dict(self.job.channel.rejected)
        facts["lost"] = self.job.channel.lost
        facts["undelivered"] = dict(self.job.channel.undelivered)
        facts["unrouted"] = self.job.unrouted
        if facts["ended"] is None:
            facts["ended"] = time.monotonic()
        return facts

    def _close_stdin(self) -> None:
        if self.job.stdin is not None:
            try:
                self.job.stdin.close()  # the process is gone: nobody reads it any more
            except OSError:
                pass

    # --- I/O thread: a bug while handling this job ------------------------------------------
    def fail_internal(self, exc: BaseException) -> None:
        """The hub calls this when handling this job raised (a bug in trainbridge): the job
        is stopped at once and ends `failed` with an `internal` diagnosis that carries the
        traceback. Other jobs are not touched."""
        if self.finished.is_set():
            return
        self.job.facts["internal_error"] = {
            "type": type(exc).__name__,
            "message": f"trainbridge failed while supervising this job: {exc}",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "kind": "internal",
            "fatal": True,
        }
        self.job.facts["error"] = self.job.facts["internal_error"]
        self.job.exit_watch.stop()
        if self.job.tree is not None:
            self.job.tree.signal(signals.SIGKILL)
            self.job.facts["signals_sent"].append("SIGKILL")
        if self.job.proc is not None:
            try:
                self.job.proc.wait(timeout=5)
                self.job.facts["exit_code"], self.job.facts["exit_signal"] = launcher.exit_status(
                    self.job.proc.returncode
                )
            except Exception:  # noqa: BLE001 - the report goes out regardless
                pass
        self.job.facts["ended"] = time.monotonic()
        self.job.output.abandon()
        self.job.m = {**self.job.m, "state": "ended", "outcome": "failed", "ending": None}
        self.job.publisher.publish({"event": "state", "state": "ended"})
        try:
            self.finish(hold=True)
        finally:
            if not self.finished.is_set():  # _finish itself failed: a waiter still gets a report
                self.job.report = Report(reports.minimal(self._final_facts(), exc))
                self.job.hub.remove_job(self.job.id)
                self.job.publisher.publish(
                    {"event": "end", "outcome": "failed", "report": self.job.report}
                )
                self.finished.set()
