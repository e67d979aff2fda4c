"""A Job's end: the exit noticed, the drain (last messages and output, orphans asked to go),
the hang snapshot, the report built and published, the files closed; and the end of a job
whose handling hit a bug in trainbridge (fail_internal). Part of bridge.job.Job (a mixin: the
attributes it uses are set up in Job.__init__). The one implementation: a Node job ends here
too, through bridge/jobserve.py."""

from __future__ import annotations

import os
import shutil
import signal as signals
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, cast

from trainbridge.bridge import evidence, job_facts, launcher, oom, report_files, report_text
from trainbridge.bridge import report as reports
from trainbridge.bridge.report import Report

if TYPE_CHECKING:
    from trainbridge.bridge.job import JobHost
else:
    JobHost = object  # mypy's view of the Job this room is part of; a plain class at run time


KILL_WAIT_S = 1.0  # how long the end waits for SIGKILLed leftovers to be gone


class JobEnd(JobHost):
    """Job's end room (I/O thread)."""

    def _on_exit_ready(self) -> None:
        if self.proc is None or self.proc.poll() is None:
            return
        now = time.monotonic()
        self.facts["ended"] = now
        self.hub.resources.forget(self.id, self.proc.pid)
        if self._pidfd is not None:
            self.hub.remove_fd(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self.facts["exit_code"], self.facts["exit_signal"] = launcher.exit_status(
            self.proc.returncode
        )
        if self.facts["exit_signal"] == "SIGKILL" and "SIGKILL" not in self.facts["signals_sent"]:
            self.facts["oom_killed"] = oom.oom_killed(self._oom_before, oom.oom_kill_count())
        self.facts["oom_kills"] = oom.kills_since(
            self._oom_before, self.facts["exit_code"], self.facts["exit_signal"]
        )
        # A rank that led and died without a bye (torchrun SIGTERMs rank 0 when rank 1
        # dies) hands the lead back now, before the exit is judged: the launcher's last
        # words are the job's. The periodic look can miss it on a loaded machine.
        self._check_lead_alive(now)
        self._step(
            {
                "type": "exit",
                "t": now,
                "code": self.facts["exit_code"],
                "signal": self.facts["exit_signal"],
            }
        )

    def _drain(self) -> None:
        self.hub.drain_router()
        self.output.read_all()
        # Whatever of the tree outlived the main process is an orphan now: ask it to go
        # (it is SIGKILLed at finish), so it cannot hold our pipes or the GPU.
        if self.tree is not None:
            self.tree.adopt_escapees()
            self.facts["leftovers"] = [p.pid for p in self.tree.alive(include_root=False)]
            if self.facts["leftovers"]:
                self.tree.signal(signals.SIGTERM, include_root=False)
        self._drain_started = time.monotonic()  # machine.drain_wait() says when it is done

    def _start_snapshot(self) -> None:
        # Not None: a hang (machine "snapshot") comes from a deadline, and the deadlines run
        # once the process exists (tick, _check_loaded, _end_look).
        pid = cast(int, self.pid)

        def collect() -> None:
            try:
                self.facts["snapshot"] = evidence.collect(pid)
            except Exception as exc:  # noqa: BLE001 - evidence is best effort
                self.facts["snapshot"] = {
                    "notes": [f"evidence failed: {type(exc).__name__}: {exc}"]
                }
            self.hub.call(lambda: self._step({"type": "snapshotted", "t": time.monotonic()}))

        self._snapshot_thread = threading.Thread(
            target=collect, name="trainbridge-snapshot", daemon=True
        )
        self._snapshot_thread.start()

    def _finish(self) -> None:
        if self.tree is not None and self.tree.alive(include_root=False):
            self.tree.signal(signals.SIGKILL, include_root=False)
            # The end says nothing of the job is left (its `leftovers` were stopped): wait,
            # bounded, until that is true. Only a process in the kernel's uninterruptible
            # wait outlasts it, and it ends when that wait does (SIGKILL cannot be caught).
            self.tree.wait_gone(KILL_WAIT_S, include_root=False)
        if self._snapshot_thread is not None:
            self._snapshot_thread.join(timeout=3.0)
        self.hub.drain_router()
        self.channel.give_up()
        if self._outbox:  # sends that waited for a hello that never came
            self.channel.undelivered["user"] += len(self._outbox)
            self._outbox.clear()
        facts = self._final_facts()
        try:
            files = report_files.read_files(self.crash_file, facts["lead_pid"] or facts["pid"])
            self.report = Report(reports.build(facts, files))
        except Exception as exc:  # noqa: BLE001 - never leave a waiter hanging on a report bug
            self.report = Report(reports.minimal(facts, exc))
        self.hub.remove_job(self.id)
        self.output.end_log(report_text.log_footer(self.report))
        self._close_stdin()
        self._publish({"event": "end", "outcome": self.m["outcome"], "report": self.report})
        # After the end is out: removing the job's files took 1.4 ms at the median and up to
        # 14 ms on a loaded machine, on the path from a death to its report.
        shutil.rmtree(self.dir, ignore_errors=True)  # the crash file is in the report now
        self._done.set()

    def _final_facts(self) -> dict[str, Any]:
        """The facts record as report.build() reads it: a copy with the machine's verdict,
        the hub's protocol counts and the end time (the exit's, else now) added."""
        facts = dict(self.facts)
        facts["machine"] = job_facts.machine_verdict(self.m)
        facts["pid"] = self.pid
        facts["rejected"] = dict(self.channel.rejected)
        facts["lost"] = self.channel.lost
        facts["undelivered"] = dict(self.channel.undelivered)
        facts["unrouted"] = self.unrouted
        if facts["ended"] is None:
            facts["ended"] = time.monotonic()
        return facts

    def _close_stdin(self) -> None:
        if self.stdin is not None:
            try:
                self.stdin.close()  # the process is gone: nobody reads it any more
            except OSError:
                pass

    # --- I/O thread: a bug while handling this job ------------------------------------------
    def fail_internal(self, exc: BaseException) -> None:
        """The hub calls this when handling this job raised (a bug in trainbridge): the job
        is stopped at once and ends `failed` with an `internal` diagnosis that carries the
        traceback. Other jobs are not touched."""
        if self._done.is_set():
            return
        self.facts["internal_error"] = {
            "type": type(exc).__name__,
            "message": f"trainbridge failed while supervising this job: {exc}",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "kind": "internal",
            "fatal": True,
        }
        self.facts["error"] = self.facts["internal_error"]
        if self._pidfd is not None:
            self.hub.remove_fd(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self.tree is not None:
            self.tree.signal(signals.SIGKILL)
            self.facts["signals_sent"].append("SIGKILL")
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
                self.facts["exit_code"], self.facts["exit_signal"] = launcher.exit_status(
                    self.proc.returncode
                )
            except Exception:  # noqa: BLE001 - the report goes out regardless
                pass
        self.facts["ended"] = time.monotonic()
        self.output.abandon()
        self.m = {**self.m, "state": "ended", "outcome": "failed", "ending": None}
        self._publish({"event": "state", "state": "ended"})
        try:
            self._finish()
        finally:
            if not self._done.is_set():  # _finish itself failed: a waiter still gets a report
                self.report = Report(reports.minimal(self._final_facts(), exc))
                self.hub.remove_job(self.id)
                self._publish({"event": "end", "outcome": "failed", "report": self.report})
                self._done.set()
