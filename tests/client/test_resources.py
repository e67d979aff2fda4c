"""launch(sample_resources=True): the Job itself samples its process tree with its status
heartbeat (bridge/resources.py), the same code a scheduled job's keeper runs, so a launched
job's face gets the same `resources` events as an attached one. One sampling thread per hub,
and nothing sampled for a job that did not ask."""

import os
import sys
import threading

from trainbridge import bridge
from trainbridge.bridge import resources
from trainbridge.bridge.hub import Hub
from trainbridge.bridge.job import Job

# A parent that waits on a busy child for ~3 s: the tree's CPU is the child's.
BUSY_CHILD = (
    "import subprocess, sys\n"
    "busy = 'import time\\nend = time.monotonic() + 3\\nwhile time.monotonic() < end: pass'\n"
    "subprocess.run([sys.executable, '-c', busy], check=True)\n"
)


def test_a_launched_job_publishes_its_trees_samples_and_one_that_did_not_ask_none():
    asked = []
    pids = set()
    lock = threading.Lock()

    def probe():  # nvidia-smi as the Node dashboard reads it: the jobs hold 1.5 GiB each
        with lock:
            asked.append(1)
            apps = [{"pid": pid, "mem_bytes": 1536 * 1048576, "uuid": "GPU-a"} for pid in pids]
        return {"apps": apps, "gpus": {"GPU-a": 87}}

    hub = Hub()
    hub.resources = resources.Sampling(probe)
    try:
        jobs = [
            Job([sys.executable, "-c", BUSY_CHILD], hub=hub, sample_resources=True).start()
            for _ in range(2)
        ]
        quiet = Job([sys.executable, "-c", BUSY_CHILD], hub=hub).start()
        with lock:
            pids.update(job.pid for job in jobs)
        events = [list(job.events(timeout=30)) for job in (*jobs, quiet)]
    finally:
        hub.close()
    for job, seen in zip(jobs, events):
        assert seen[-1]["event"] == "end" and job.report["outcome"] == "succeeded"
        samples = [e for e in seen if e["event"] == "resources"]
        assert len(samples) >= 2, samples  # about one a second for ~3 s
        assert all(e["rss_bytes"] > 0 for e in samples), samples
        assert max(e["processes"] for e in samples) >= 2, "the busy child is in the tree"
        assert max(e["cpu_percent"] or 0 for e in samples) > 0, samples
        # (the first may come before the test told its fake nvidia-smi the job's pid)
        assert {e["gpu_mem_bytes"] for e in samples[1:]} == {1536 * 1048576}, samples
        assert {e["gpu_util"] for e in samples[1:]} == {87}, samples
        assert {e["gpus"] for e in samples} == {1}, "one device on this (fake) machine"
        # Each follows a status event (the heartbeat), never comes after the exit.
        kinds = [e["event"] for e in seen]
        assert kinds.index("resources") > kinds.index("status")
        assert max(i for i, k in enumerate(kinds) if k == "resources") < kinds.index("end")
    assert not [e for e in events[2] if e["event"] == "resources"], "the quiet job asked none"
    assert (
        len(asked)
        <= sum(len([e for e in seen if e["event"] == "resources"]) for seen in events[:2]) + 2
    )  # one probe for all the jobs due at once, never one per job and sample


def test_launch_takes_sample_resources():
    job = bridge.launch([sys.executable, "-c", "pass"], sample_resources=True, zero_code=False)
    assert job.wait(30)["outcome"] == "succeeded"
    assert job.sample_resources is True


def test_the_first_sample_is_a_period_after_the_first_heartbeat_not_at_the_spawn():
    """The first heartbeat comes as the spawn returns, which can be while the kernel is still
    loading the program (a few KiB resident): the chart began at 0 MB. Sampling starts the
    period there and samples at its end."""
    now = [100.0]
    got: list[dict] = []
    delivered = threading.Event()

    def deliver(sample):
        got.append(sample)
        delivered.set()

    sampling = resources.Sampling(probe=lambda: None, clock=lambda: now[0])
    me = os.getpid()
    sampling.due("job", me, deliver)  # the spawn's heartbeat: the period starts
    now[0] += resources.RESOURCES_EVERY_S * resources.DUE_SLACK / 2
    sampling.due("job", me, deliver)  # too early still
    assert sampling._thread is None, "nothing sampled, no thread started"
    now[0] += resources.RESOURCES_EVERY_S
    sampling.due("job", me, deliver)
    assert delivered.wait(30), "no sample a period after the first heartbeat"
    assert len(got) == 1 and got[0]["rss_bytes"] > 1024 * 1024, got


def test_a_zombie_is_not_sampled_as_a_process_of_no_memory():
    """The last sample of a job could come while its process had ended and was not reaped
    yet: /proc still lists a zombie, with no memory, and the job's memory curve fell to 0 at
    its end (a full run beside CPU loops caught it). A zombie is not sampled: a tree's
    zombie child is left out, and a zombie root is gone."""
    import subprocess
    import time

    from trainbridge.bridge import procfs

    def zombie_soon(pid):
        deadline = time.monotonic() + 30
        while (procfs.stat_fields(pid) or ["?"])[0] != "Z":
            assert time.monotonic() < deadline, f"{pid} did not become a zombie"
            time.sleep(0.02)  # polling /proc with a deadline: nothing tells us

    sampler = resources.Sampler(probe=lambda: None)
    # A parent that never reaps its child: the child stays a zombie below a live root.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "child = subprocess.Popen(['true'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child = int(parent.stdout.readline())
        zombie_soon(child)
        sample = sampler.sample(parent.pid)
        assert sample is not None and sample["processes"] == 1, sample
        assert sample["rss_bytes"] > 0, sample
    finally:
        parent.kill()
        parent.wait()
    # A root that ended, not reaped yet (Popen without wait): no sample, as a gone one.
    ended = subprocess.Popen(["true"])
    try:
        zombie_soon(ended.pid)
        assert sampler.sample(ended.pid) is None
    finally:
        ended.wait()
