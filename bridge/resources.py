"""CPU, RSS and GPU use of a job's process tree, sampled by its supervisor.

The keeper samples its job once every RESOURCES_EVERY_S and writes each sample to the feed as
a `resources` event, so every face (the dashboard above all) draws the same history, from the
job's start, whenever it attaches: a restarted dashboard no longer starts the chart again.
The fields are those of node-client/dashboard/resources.js, which samples the jobs a Node
process launches itself: `cpu_percent` (the tree's CPU time since the previous sample over the
wall time; 100 is one core; None for the first), `rss_bytes`, `gpu_mem_bytes` (the tree's
processes' sum), `gpu_util` (the busiest device they use), `processes`. GPU figures come from
nvidia-smi (`$TRAINBRIDGE_NVIDIA_SMI` names another program), read as the Node twin reads it;
without it they are None.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Callable, Optional

import psutil

RESOURCES_EVERY_S = 1.0  # as the dashboard's own sampler (sampleMs 1000)
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

    def sample(self, root: int) -> Optional[dict[str, Any]]:
        try:
            top = psutil.Process(root)
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            return None
        cpu_s, rss, pids = 0.0, 0, []
        for proc in procs:
            try:
                times = proc.cpu_times()
                cpu_s += times.user + times.system
                rss += proc.memory_info().rss
                pids.append(proc.pid)
            except psutil.Error:
                continue  # ended meanwhile
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
        gpu = self.probe()
        if gpu:
            mine = [a for a in gpu["apps"] if a["pid"] in pids]
            if mine:
                sample["gpu_mem_bytes"] = sum(a["mem_bytes"] or 0 for a in mine)
                utils = [gpu["gpus"][a["uuid"]] for a in mine if a["uuid"] in gpu["gpus"]]
                sample["gpu_util"] = max(utils) if utils else None
        return sample
