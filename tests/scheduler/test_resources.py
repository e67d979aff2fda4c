"""The supervisor samples the job's process tree (bridge/resources.py): the keeper writes a
`resources` event to the feed every second, CPU counting the children, GPU from nvidia-smi
(a fake one here, as node-client/test/dashboard.test.js uses), so a face that attaches later
draws the whole history."""

import sys

from trainbridge import bridge
from trainbridge.bridge import resources

from .conftest import WAIT_S, leftovers

# A parent that waits on a busy child for a while: the tree's CPU is the child's.
BUSY_CHILD = (
    "import subprocess, sys\n"
    "busy = 'import time\\nend = time.monotonic() + 4\\nwhile time.monotonic() < end: pass'\n"
    "subprocess.run([sys.executable, '-c', busy], check=True)\n"
)
# A fake nvidia-smi: the process that ran it (the keeper) has the job as its other child.
FAKE_NVIDIA_SMI = """#!{python}
import os, sys
import psutil
me = os.getpid()
job = [p.pid for p in psutil.Process(os.getppid()).children() if p.pid != me]
if sys.argv[1].startswith("--query-compute-apps"):
    for pid in job:
        print(f"{{pid}}, 1536, GPU-aaaa")
    print("999999, 100, GPU-bbbb")
elif sys.argv[1].startswith("--query-gpu"):
    print("GPU-aaaa, 87")
    print("GPU-bbbb, 5")
"""


def test_nvidia_smi_output_is_read_as_the_node_dashboard_reads_it():
    apps = resources.parse_apps("1234, 1536, GPU-aaaa\n99, [N/A], GPU-b\nNo running processes\n")
    assert apps == [
        {"pid": 1234, "mem_bytes": 1536 * 1048576, "uuid": "GPU-aaaa"},
        {"pid": 99, "mem_bytes": None, "uuid": "GPU-b"},
    ]
    assert resources.parse_gpus("GPU-aaaa, 87\nGPU-b, [N/A]\n") == {"GPU-aaaa": 87}
    assert resources.NvidiaSmi("/nonexistent/nvidia-smi")() is None


def test_the_keeper_writes_the_trees_cpu_rss_and_gpu_to_the_feed(store_path, tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(FAKE_NVIDIA_SMI.format(python=sys.executable))
    fake.chmod(0o755)
    # A keeper inherits the environment of the scheduler that starts it: the fake is its
    # nvidia-smi (the job's own environment is the job's).
    monkeypatch.setenv("TRAINBRIDGE_NVIDIA_SMI", str(fake))
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit([sys.executable, "-c", BUSY_CHILD])
        events = list(s.attach(job_id).events(timeout=WAIT_S))
        assert events[-1]["event"] == "end" and events[-1]["report"]["outcome"] == "succeeded"
        samples = [e for e in events if e["event"] == "resources"]
        assert len(samples) >= 2, samples  # about one a second for ~4 s
        assert all(e["rss_bytes"] > 0 and e["processes"] >= 1 for e in samples), samples
        assert max(e["processes"] for e in samples) >= 2, "the busy child is in the tree"
        assert max(e["cpu_percent"] or 0 for e in samples) >= 5, samples  # the child's CPU
        assert samples[-1]["gpu_mem_bytes"] == 1536 * 1048576 and samples[-1]["gpu_util"] == 87
        assert all(isinstance(e["seq"], int) and e["t"] > 0 for e in samples)
        assert not leftovers(job_id)
    finally:
        s.close()
