"""No drift: random sequences of submit / cancel / kill the scheduler /
restart it / kill a keeper / kill a training process, against real processes. After every
step, once the system settled (a deadline, not a sleep), the store matches reality:

- an active row's keeper (pid + start time) is alive, an ended row's is not;
- no process of a queued or ended job runs (no orphans), and no more jobs run than slots;
- a gone keeper's runtime directory is gone too;
- each job we acted on ends with the outcome that action means: cancelled, lost (keeper
  killed), crashed by SIGKILL (training process killed).
"""

import os
import signal
import subprocess
import sys

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from trainbridge import bridge
from trainbridge.bridge import procs
from trainbridge.bridge.store import ACTIVE, Store

from .conftest import child, leftovers, runtime_dir_left, user_env, wait_for

SLOTS = 2
ACTIONS = [
    "submit_forever",
    "submit_forever",
    "submit_short",
    "cancel",
    "kill_scheduler",
    "start_scheduler",
    "kill_keeper",
    "kill_keeper",
    "kill_job",
    "kill_job",
]


def violations(store):
    found = []
    rows = store.jobs()
    active = [r for r in rows if r["state"] in ACTIVE]
    if len(active) > SLOTS:
        found.append(f"{len(active)} active jobs on {SLOTS} slots")
    for row in rows:
        alive = procs.same_process(row["keeper_pid"], row["keeper_start"])
        running = leftovers(row["id"])
        if row["state"] in ACTIVE and row["keeper_pid"] and not alive:
            found.append(f"{row['id']} is {row['state']} but its keeper is gone")
        if row["state"] == "queued" and running:
            found.append(f"{row['id']} is queued but {running} run")
        if row["state"] == "ended" and (running or alive):
            found.append(
                f"{row['id']} ended but processes run: job {running}, "
                f"keeper {alive and row['keeper_pid']}"
            )
        if row["state"] == "ended" and not alive and runtime_dir_left(row):
            found.append(
                f"{row['id']} ended, its keeper is gone, but its runtime directory "
                f"{runtime_dir_left(row)} is left"
            )
    return found


class World:
    def __init__(self, store_path):
        self.path = store_path
        self.store = Store(store_path)
        self.cli = bridge.Scheduler(store=store_path, slots={"jobs": SLOTS, "gpus": []}, tick=None)
        self.host = None
        self.expected = {}  # job id -> the outcome our action means
        self.forever = set()

    def settle(self):
        def check():
            self.cli.tick() if self.host is None else None  # someone must reconcile
            # Also wait out the transient: a started job runs and its row says so.
            moving = [
                r for r in self.store.jobs("active") if r["state"] == "starting" or not r["job_pid"]
            ]
            # And the effect of our last action: a job we cancelled or killed has ended
            # (else the next action could race it: a cancel before the kill is seen).
            acted = [r for r in self.store.jobs("active") if r["id"] in self.expected]
            return not moving and not acted and not violations(self.store)

        try:
            wait_for(check, timeout=20, what="the store to match the processes")
        except AssertionError:
            raise AssertionError(f"drift: {violations(self.store)}") from None

    def do(self, action, pick):
        rows = self.store.jobs()
        if action in ("submit_forever", "submit_short"):
            cmd = child("forever") if action == "submit_forever" else child("steps", 3)
            job_id = self.cli.submit(cmd, env=user_env())
            if action == "submit_forever":
                self.forever.add(job_id)
        elif action == "cancel":
            live = [r for r in rows if r["state"] != "ended"]
            if live:
                row = live[pick % len(live)]
                if self.cli.cancel(row["id"]) and row["id"] in self.forever:
                    self.expected.setdefault(row["id"], "cancelled")
        elif action == "kill_scheduler" and self.host is not None:
            self.host.kill()
            self.host.wait()
            self.host.stdout.close()
            self.host = None
        elif action == "start_scheduler" and self.host is None:
            self.host = subprocess.Popen(
                [sys.executable, os.path.join(os.path.dirname(__file__), "host.py"), self.path],
                stdout=subprocess.PIPE,
                text=True,
                env=user_env(),
            )
            assert self.host.stdout.readline().strip() == "ready"
        elif action in ("kill_keeper", "kill_job"):
            running = [
                r
                for r in rows
                if r["id"] in self.forever
                and r["state"] == "running"
                and r["job_pid"]
                and r["id"] not in self.expected
                and procs.same_process(r["keeper_pid"], r["keeper_start"])
                and procs.same_process(r["job_pid"], r["job_start"])
            ]
            if running:
                row = running[pick % len(running)]
                if action == "kill_keeper":
                    os.kill(row["keeper_pid"], signal.SIGKILL)
                    self.expected[row["id"]] = "lost"
                else:
                    os.kill(row["job_pid"], signal.SIGKILL)
                    self.expected[row["id"]] = "crashed"

    def finish(self):
        for row in self.store.jobs():
            if row["state"] != "ended":
                self.cli.cancel(row["id"])
                self.expected.setdefault(row["id"], "cancelled")
        wait_for(
            lambda: (self.cli.tick(), all(r["state"] == "ended" for r in self.store.jobs()))[1],
            timeout=20,
            what="every job to end",
        )
        self.settle()
        for job_id, outcome in self.expected.items():
            row = self.store.get(job_id)
            if row["id"] not in self.forever:
                continue
            assert row["outcome"] == outcome, (job_id, row["outcome"], outcome, row["note"])
            if outcome == "crashed":
                assert row["signal"] == "SIGKILL"

    def close(self):
        if self.host is not None:
            self.host.kill()
            self.host.wait()
            self.host.stdout.close()
        self.cli.close()
        self.store.close()


# Not derandomized: each run (the 20x loops included) tries new sequences; a failure prints
# its steps. No shrinking: each example costs seconds of real processes.
@settings(max_examples=10, deadline=None, phases=[Phase.explicit, Phase.generate])
@given(
    steps=st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 7)), min_size=6, max_size=14)
)
def test_random_submit_cancel_kill_sequences_never_drift(tmp_path_factory, steps):
    store_path = str(tmp_path_factory.mktemp("nodrift") / "jobs.db")
    world = World(store_path)
    try:
        world.do("start_scheduler", 0)
        for action, pick in steps:
            world.do(action, pick)
            world.settle()
        world.finish()
    finally:
        world.close()
        left = {r["id"]: leftovers(r["id"]) for r in Store(store_path).jobs()}
        for pids in left.values():
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        assert not any(left.values()), f"orphans: {left}"
