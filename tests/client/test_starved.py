"""A job starved of CPU is slow, not hung: its beacon goes silent past the
heartbeat deadline because the machine gives the process no CPU, and the look at the deadline
sees its threads waiting on a run queue: a `starved` event, the deadline extended, and the job
goes on to succeed once it gets a CPU again. The starving is real: the job's process is put
in a cgroup whose CPU quota is 1 ms a second (what a busy machine, or a container's limit,
does to it). Node twin: node-client/test/starved.test.js."""

import os
import sys
import threading

import pytest

from trainbridge import bridge

from .conftest import WAIT_S, assert_tree_gone

V1 = "/sys/fs/cgroup/cpu"  # cgroup v1's cpu controller (this machine's and CI's)
V2 = "/sys/fs/cgroup"  # cgroup v2, where its cpu controller is on


class Squeeze:
    """A cgroup with a CPU quota: put a process in, then squeeze it to 1 ms a second."""

    def __init__(self):
        name = f"tb-starve-{os.getpid()}-{threading.get_ident()}"
        if os.path.isfile(os.path.join(V1, "cpu.cfs_quota_us")):
            self.path, self.v2 = os.path.join(V1, name), False
        elif "cpu" in open(os.path.join(V2, "cgroup.subtree_control")).read().split():
            self.path, self.v2 = os.path.join(V2, name), True
        else:
            raise RuntimeError("no cgroup cpu controller: neither v1's nor v2's is on")
        os.mkdir(self.path)

    def add(self, pid):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def quota(self, us):
        if self.v2:
            self._write("cpu.max", f"{us if us else 'max'} 1000000")
        else:
            self._write("cpu.cfs_period_us", "1000000")
            self._write("cpu.cfs_quota_us", str(us if us else -1))

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def close(self):
        self.quota(None)
        try:
            os.rmdir(self.path)  # empty once the job's processes are gone
        except OSError:
            pass


@pytest.fixture
def squeeze():
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root (scripts/test runs as root in CI)")
    s = Squeeze()
    yield s
    s.close()


# Busy, as a training loop is, for 24 half-second steps: long enough to be squeezed mid-run.
TRAINS = """
import time
from trainbridge import worker
with worker.stage("train"):
    for i in range(1, 25):
        worker.progress(i, 24)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
"""


def test_a_job_starved_of_cpu_is_waiting_for_a_core_not_hung(squeeze):
    seen = []
    squeezed = threading.Event()

    def on_event(event):
        seen.append(event)
        if event["event"] == "spawn":
            squeeze.add(event["pid"])
        # From step 2 on, once: a loaded beacon's status may skip a step (CI: it never said 2,
        # so the job was never squeezed)
        elif event["event"] == "status" and (event["status"].get("step") or 0) >= 2:
            if not squeezed.is_set():
                squeezed.set()
                squeeze.quota(1000)  # 1 ms of CPU a second: its beacon falls silent
        elif event["event"] == "starved":
            squeeze.quota(None)  # the look said so: a CPU again, and it goes on

    job = bridge.launch(
        [sys.executable, "-c", TRAINS], on_event=on_event, heartbeat_timeout=3, stall_timeout=60
    )
    report = job.wait(WAIT_S)
    assert report is not None, "no report"
    starved = [e for e in seen if e["event"] == "starved"]
    said = [
        (e["event"], e.get("why") or e.get("status", {}).get("step"))
        for e in seen
        if e["event"] not in ("output", "message")
    ]
    # A message in full (a tuple's repr is cut short): the summary says when and why it was
    # declared hung, the events what the look and the status saw.
    assert squeezed.is_set() and starved, (
        f"squeezed: {squeezed.is_set()}; {report['outcome']}: {report['summary']}; "
        f"look: {report['look']}; diagnosis: {report.get('diagnosis')}; events: {said}"
    )
    assert "waiting for a free core" in starved[0]["why"], starved[0]
    assert starved[0]["for_s"] == 3
    assert report["outcome"] == "succeeded", report["summary"]
    assert not [e for e in seen if e["event"] == "hang"]
    assert report["progress"]["step"] == 24
    assert_tree_gone(job)


def test_a_process_held_back_by_its_cgroups_quota_is_read_so_and_judged_waiting(squeeze):
    """A thread's wait for a CPU shows in schedstat only once it runs again, so a lead that
    ran early in the look's window and was throttled by its cgroup's CPU quota since shows
    short waits only (CI once judged the starved job of test above `gil_held`). The cgroup's
    own count says it: procfs.cpu_throttled reads it by the cgroup's folder, it grows while
    the busy process is squeezed, and the look at a silent heartbeat calls it waiting."""
    import subprocess
    import time

    from trainbridge.bridge import look, procfs

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        squeeze.add(busy.pid)
        squeeze.quota(1000)  # 1 ms a second
        before = procfs.tree_sample(busy.pid, 0, time.monotonic())
        held = before["procs"][0]["throttled"]
        assert held is not None and squeeze.path in held, held
        deadline = time.monotonic() + WAIT_S
        while procfs.cpu_throttled(busy.pid)[squeeze.path] - held[squeeze.path] < 1.0:
            assert time.monotonic() < deadline, "the quota held nothing back"
            threading.Event().wait(0.1)
        after = procfs.tree_sample(busy.pid, 0, time.monotonic())
        assert after["procs"][0]["throttled"][squeeze.path] >= held[squeeze.path] + 1.0
        verdict = look.judge("heartbeat", before, after)
        assert verdict["working"] and "waiting for a free core" in verdict["why"], verdict
    finally:
        busy.kill()
        busy.wait()
