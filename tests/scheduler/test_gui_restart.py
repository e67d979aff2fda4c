"""Kill the GUI mid-job and start it again, with real processes. A GUI
(tests/scheduler/gui_many.py) owns a Scheduler with two slots and four jobs, two of them
queued. It is SIGKILLed while jobs run, twice; each new GUI attaches to what is left. In the
end no job is lost, each has run exactly once with its own outcome, exit code and signal,
every output line is in its log and in a fresh attach, and nothing is left running (the
store_path fixture). scripts/stress-scheduler repeats this 20 times."""

import json
import subprocess
import sys
import threading

from .conftest import WAIT_S, child, user_env, wait_for

GUI = __file__.replace("test_gui_restart.py", "gui_many.py")

# (child mode, steps printed, outcome, exit code, signal)
JOBS = [
    (("steps", 40), 40, "succeeded", 0, None),
    (("die", 25, "SIGSEGV"), 25, "crashed", None, "SIGSEGV"),
    (("steps", 20), 20, "succeeded", 0, None),
    (("die", 15, "SIGKILL"), 15, "crashed", None, "SIGKILL"),
]


class Gui:
    """One GUI process; a thread collects its lines so waits have deadlines."""

    def __init__(self, store_path, submit=()):
        self.proc = subprocess.Popen(
            [sys.executable, GUI, store_path, *[json.dumps(child(*mode)) for mode in submit]],
            stdout=subprocess.PIPE,
            text=True,
            env=user_env(),
        )
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        wait_for(lambda: "ready" in self.lines, what="the GUI to follow its jobs")

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def saw(self, job_id, event):
        return any(line.startswith(f"{job_id} {event}") for line in list(self.lines))

    def kill(self):
        self.proc.kill()  # SIGKILL: no cleanup of any kind
        self.proc.wait()
        self.reader.join()
        self.proc.stdout.close()


def test_kill_the_gui_mid_job_and_start_it_again_loses_nothing(store_path):
    from trainbridge import bridge

    gui = Gui(store_path, submit=[job[0] for job in JOBS])
    s = bridge.Scheduler(store=store_path, tick=None)  # a reader; it starts nothing itself
    try:
        ids = [row["id"] for row in sorted(s.jobs(), key=lambda r: r["submitted_at"])]
        assert len(ids) == len(JOBS)
        try:
            # Kill 1: two jobs run mid-way, two wait in the queue.
            wait_for(
                lambda: gui.saw(ids[0], "output") and gui.saw(ids[1], "output"),
                what="the first GUI to see both running jobs' output",
            )
            assert [s.get(i)["state"] for i in ids[2:]] == ["queued", "queued"]
        finally:
            gui.kill()
        gui = Gui(store_path)
        try:
            # Kill 2: once a queued job started and printed under the second GUI.
            wait_for(lambda: gui.saw(ids[2], "output"), what="the third job's output")
        finally:
            gui.kill()
        gui = Gui(store_path)
        try:
            wait_for(
                lambda: all(gui.saw(i, "end") or s.get(i)["state"] == "ended" for i in ids),
                timeout=WAIT_S * 2,
                what="every job to end",
            )
        finally:
            gui.kill()
        for job_id, (mode, steps, outcome, exit_code, sig) in zip(ids, JOBS):
            row = s.get(job_id)
            assert (row["state"], row["outcome"], row["exit_code"], row["signal"]) == (
                "ended",
                outcome,
                exit_code,
                sig,
            ), (job_id, mode, row["note"])
            assert row["report"]["outcome"] == outcome
            assert row["attempt"] == 1 and len(row["attempts"]) == 1, (job_id, row["attempts"])
            with open(row["log_path"], encoding="utf-8") as f:
                assert [line for line in f.read().splitlines() if line.startswith("step")] == [
                    f"step {i}" for i in range(1, steps + 1)
                ], job_id
            # And a GUI that comes later still gets the whole story from the first event.
            job = s.attach(job_id)
            events = list(job.events(timeout=WAIT_S))
            assert [
                e["text"] for e in events if e["event"] == "output" and e["text"].startswith("step")
            ] == [f"step {i}" for i in range(1, steps + 1)]
            assert events[-1]["event"] == "end" and job.report["outcome"] == outcome
    finally:
        s.close()
