"""CPU, RSS and GPU use of a job's process tree, sampled by its supervisor.

The job's supervisor samples it: a Job launched with sample_resources=True (the keeper
launches every scheduled job so) publishes a `resources` event at most once every
RESOURCES_EVERY_S, with its `status` heartbeat, and the keeper writes them to the feed, so
every face (the dashboard above all) draws the same history, from the job's start, whenever
it attaches: a restarted dashboard no longer starts the chart again. One Sampling thread per
hub samples every job due, with one nvidia-smi answer for all.
A Node process's launched jobs are sampled the same way, by its job server
(launch({sampleResources: true}); bridge/jobserve.py). The fields: `cpu_percent` (the
tree's CPU time since the previous sample over the wall time; 100 is one core; None for
the first), `rss_bytes`, `gpu_mem_bytes` (the tree's processes' sum), `gpu_util` (the
busiest device they use), `processes`, `gpus` (the devices nvidia-smi sees on the machine:
0 says "no GPU" plainly). GPU figures come from nvidia-smi (`$TRAINBRIDGE_NVIDIA_SMI`
names another program); without it they are None.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Any, Callable, Optional

from trainbridge.bridge import procfs

RESOURCES_EVERY_S = 1.0  # a point a second on the dashboard's chart
DUE_SLACK = 0.8  # a heartbeat a little early still takes a sample (else one in two is skipped)
_ASK = object()  # sample(): ask the probe
NVIDIA_SMI_TIMEOUT_S = 3.0
APPS_QUERY = ["--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"]
GPUS_QUERY = ["--query-gpu=uuid,utilization.gpu", "--format=csv,noheader,nounits"]


def parse_apps(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid` (MiB) -> [{pid, mem_bytes,
    uuid}]."""
    out = []
    for line in text.split("\n"):
        parts = [p.strip() for p in line.split(",")] + ["", ""]
        pid, mem, uuid = parts[0], parts[1], parts[2]
        if not pid.isdigit():
            continue
        out.append(
            {
                "pid": int(pid),
                "mem_bytes": int(mem) * 1048576 if mem.isdigit() else None,
                "uuid": uuid or None,
            }
        )
    return out


def parse_gpus(text: str) -> dict[str, int]:
    """`nvidia-smi --query-gpu=uuid,utilization.gpu` -> {uuid: percent}."""
    out = {}
    for line in text.split("\n"):
        parts = [p.strip() for p in line.split(",")] + [""]
        if parts[0] and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


class NvidiaSmi:
    """A GPU probe: () -> {"apps": [...], "gpus": {...}} or None (no GPU, no nvidia-smi).
    A program that is not there is asked once, not every second."""

    def __init__(self, program: Optional[str] = None):
        self.program = program or os.environ.get("TRAINBRIDGE_NVIDIA_SMI") or "nvidia-smi"
        self.missing = False

    def _run(self, args: list[str]) -> Optional[str]:
        try:
            done = subprocess.run(
                [self.program, *args],
                capture_output=True,
                timeout=NVIDIA_SMI_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.decode("latin-1") if done.returncode == 0 else None

    def indices(self) -> list[int]:
        """The GPUs nvidia-smi lists ([] where there is none, or no nvidia-smi): what the
        scheduler offers when nvidia-ml-py is not installed."""
        text = self._run(["--query-gpu=index", "--format=csv,noheader,nounits"]) or ""
        return [int(line.strip()) for line in text.split("\n") if line.strip().isdigit()]

    def __call__(self) -> Optional[dict[str, Any]]:
        if self.missing:
            return None
        apps, gpus = self._run(APPS_QUERY), self._run(GPUS_QUERY)
        if apps is None and gpus is None:
            self.missing = True
            return None
        return {"apps": parse_apps(apps or ""), "gpus": parse_gpus(gpus or "")}


class Sampler:
    """sample(root) -> the sample of root's process tree, or None when root is gone."""

    def __init__(
        self,
        probe: Optional[Callable[[], Optional[dict[str, Any]]]] = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.probe = probe if probe is not None else NvidiaSmi()
        self.clock = clock
        self._last: dict[int, tuple[float, float]] = {}  # root -> (t, cpu_s)

    def forget(self, root: int) -> None:
        self._last.pop(root, None)

    def sample(self, root: int, gpu: Any = _ASK) -> Optional[dict[str, Any]]:
        """gpu: the probe's answer when the caller asked it once for many roots."""
        if procfs.stat_fields(root) is None:
            return None  # gone
        below = procfs.descendants([root])  # its own tree's files, not all of /proc
        if below is None:  # a kernel without them: one read of every process
            below = set(procfs.all_descendants(root))
        cpu_s, rss, pids = 0.0, 0, []
        for pid in [root, *sorted(below)]:
            cpu, resident = procfs.cpu_seconds(pid), procfs.rss_bytes(pid)
            if cpu is None or not resident:
                # Ended meanwhile, a zombie, or exiting (the kernel gives its memory back
                # before it marks it a zombie): a live process always has resident pages,
                # and one of 0 bytes made the job's memory curve fall to 0 at its end.
                continue
            cpu_s += cpu
            rss += resident
            pids.append(pid)
        if not pids:
            return None
        t = self.clock()
        previous = self._last.get(root)
        self._last[root] = (t, cpu_s)
        cpu_percent = None
        if previous is not None and t > previous[0]:
            cpu_percent = round(max(0.0, (cpu_s - previous[1]) * 100 / (t - previous[0])))
        sample: dict[str, Any] = {
            "cpu_percent": cpu_percent,
            "rss_bytes": rss,
            "gpu_mem_bytes": None,
            "gpu_util": None,
            "processes": len(pids),
        }
        if gpu is _ASK:
            gpu = self.probe()
        sample["gpus"] = len(gpu["gpus"]) if gpu else 0  # 0: none seen on this machine
        if gpu:
            mine = [a for a in gpu["apps"] if a["pid"] in pids]
            if mine:
                sample["gpu_mem_bytes"] = sum(a["mem_bytes"] or 0 for a in mine)
                utils = [gpu["gpus"][a["uuid"]] for a in mine if a["uuid"] in gpu["gpus"]]
                sample["gpu_util"] = max(utils) if utils else None
        return sample


class Sampling:
    """The hub's resource sampler (one thread for all its jobs, started with the first).
    due(key, root, deliver) is called with a job's heartbeat, on the hub's I/O thread; at most
    every RESOURCES_EVERY_S per job, the thread samples root's tree and calls deliver(sample)
    (off the I/O thread: nvidia-smi may take seconds). No wake-up of its own: an idle hub
    wakes for its jobs' heartbeats only.
    The first sample is one period after a job's first heartbeat, not at it: that heartbeat
    comes as the spawn returns, which can be while the kernel is still loading the program
    (the old memory freed, the new one not yet mapped: a few KiB resident), and the chart
    began with a 0 MB point (hunt on 7c1dc5c, CI on 3800127)."""

    def __init__(
        self,
        probe: Optional[Callable[[], Optional[dict[str, Any]]]] = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._probe = probe
        self._clock = clock
        self._sampler: Optional[Sampler] = None  # made on the thread: nothing runs before
        self._cond = threading.Condition()
        self._due: dict[Any, tuple[int, Callable[[dict[str, Any]], None]]] = {}
        self._last: dict[Any, float] = {}
        self._gone: list[int] = []  # roots whose CPU baseline the thread drops
        self._thread: Optional[threading.Thread] = None

    def due(self, key: Any, root: int, deliver: Callable[[dict[str, Any]], None]) -> None:
        now = self._clock()
        with self._cond:
            last = self._last.get(key)
            if last is None:
                self._last[key] = now  # the period starts: see the class's doc
                return
            if now - last < RESOURCES_EVERY_S * DUE_SLACK:
                return
            self._last[key] = now
            self._due[key] = (root, deliver)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="trainbridge-resources", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def forget(self, key: Any, root: Optional[int]) -> None:
        """The job ended: no more samples for it."""
        with self._cond:
            self._last.pop(key, None)
            self._due.pop(key, None)
            if root is not None:
                self._gone.append(root)

    def _run(self) -> None:
        sampler = self._sampler = Sampler(self._probe)
        while True:
            with self._cond:
                while not self._due:
                    self._cond.wait()
                due, self._due = self._due, {}
                gone, self._gone = self._gone, []
            for root in gone:
                sampler.forget(root)
            gpu = sampler.probe()  # one answer for every job due now
            for root, deliver in due.values():
                sample = sampler.sample(root, gpu)
                if sample is not None:
                    deliver(sample)
