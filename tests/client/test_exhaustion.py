"""A resource that runs out under a library's generic error is named (docs/DIAGNOSIS.md
host_oom, disk_full): real children that really run out of memory under an address-space
limit, and of disk on a small tmpfs, plain Python and torch, unmodified (zero-code). The
verdict names the resource, the limit or the filesystem and its free space, and the frame;
no process is left. The verdict's rule is pinned by vectors/diagnosis.json."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from trainbridge import bridge

from .conftest import WAIT_S, assert_tree_gone, validate_report

# The limit is set by the script itself, above what it holds already: the allocation that
# follows cannot fit.
UNDER_A_LIMIT = """
    {prelude}
    import resource
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    limit = vm + (256 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print("limit", limit, flush=True)
    {allocate}
"""


def _run(script_path, **kw):
    job = bridge.launch([sys.executable, script_path], **kw)
    report = job.wait(WAIT_S * 2)
    assert report is not None, "the job did not end"
    assert_tree_gone(job)
    validate_report(report)
    return report


def test_memory_error_under_an_address_space_limit_names_the_limit(script):
    report = _run(script(UNDER_A_LIMIT.format(prelude="", allocate="blob = bytearray(1 << 30)")))
    limit = int(next(line for line in report.log_tail if line.startswith("limit")).split()[1])
    d = report.diagnosis
    assert report.outcome == "failed" and d["kind"] == "host_oom", report.summary
    assert d["evidence"]["memory"]["as_limit_bytes"] == limit
    assert "out of host memory" in d["summary"] and ", ulimit -v" in d["summary"], d["summary"]
    assert "MemoryError" in d["summary"]
    assert d["hint"].startswith("the process hit its address-space limit"), d["hint"]
    assert d["evidence"]["user_frame"].endswith(" <module>"), d["evidence"]


def test_torch_running_out_of_host_memory_is_named_not_a_generic_runtime_error(script):
    pytest.importorskip("torch")  # scripts/setup installs it (requirements-dev.txt)
    path = script(
        UNDER_A_LIMIT.format(
            prelude="import torch  # before the limit: its libraries are mapped at import",
            allocate="x = torch.empty(1 << 33, dtype=torch.uint8)",
        )
    )
    report = _run(path)
    d = report.diagnosis
    assert d["kind"] == "host_oom", report.summary
    assert "DefaultCPUAllocator" in d["summary"] and "address-space limit" in d["summary"]


def in_full_tmpfs(tmp_path, code):
    """`trainbridge run --json` of `code` (its argv[1]: a folder on a 64 KiB tmpfs) in a
    private mount namespace; the end event."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace (CI has both)")
    folder, path = tmp_path / "small", tmp_path / "job.py"
    folder.mkdir()
    path.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    line = (
        f"mount -t tmpfs -o size=64k tmpfs {folder} && "
        f"{sys.executable} -m trainbridge run --json -- {sys.executable} {path} {folder}"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-uc", line],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_S * 3,
    )
    end = json.loads(done.stdout.splitlines()[-1])
    assert end["event"] == "end", done.stdout[-2000:] + done.stderr[-2000:]
    return end["report"], str(folder)


def test_a_full_disk_names_the_file_the_filesystem_and_its_free_space(tmp_path):
    code = (
        "import os, sys\n"
        "def save(path):\n"
        "    with open(path, 'wb') as f:\n"
        "        f.write(b'x' * (1 << 20))\n"
        "save(os.path.join(sys.argv[1], 'ckpt.bin'))\n"
    )
    report, folder = in_full_tmpfs(tmp_path, code)
    d = report["diagnosis"]
    assert d["kind"] == "disk_full", report["summary"]
    assert d["evidence"]["disk"]["filesystem"] == folder
    assert d["evidence"]["disk"]["free_bytes"] == 0
    assert d["evidence"]["disk"]["path"] == os.path.join(folder, "ckpt.bin")
    assert f"{folder} has 0 KiB free of 64 KiB" in d["summary"], d["summary"]
    assert "job.py:4 save" in d["summary"] and "No space left on device" in d["summary"]
    assert d["hint"].startswith(f"free space on {folder}"), d["hint"]


def test_torch_save_on_a_full_disk_is_named_not_unexpected_pos(tmp_path):
    pytest.importorskip("torch")
    code = (
        "import os, sys, torch\n"
        "torch.save({'w': torch.zeros(1 << 18)}, os.path.join(sys.argv[1], 'ckpt.pt'))\n"
    )
    report, folder = in_full_tmpfs(tmp_path, code)
    d = report["diagnosis"]
    assert d["kind"] == "disk_full", report["summary"]
    assert d["evidence"]["disk"]["filesystem"] == folder, d["evidence"]
    assert "job.py:2 <module>" in d["summary"], d["summary"]


def test_a_disk_full_error_on_a_hung_mount_is_reported_without_waiting_on_it(tmp_path):
    """statvfs on a hung network mount blocks in the kernel; the crash report must not wait
    on it (worker/exhaustion.DISK_LOOK_S). Here statvfs never returns, as on such a mount:
    the job still ends at once, failed, disk full, and says the free space is unknown."""
    script = tmp_path / "job.py"
    script.write_text(
        "import errno, os, threading\n"
        "from trainbridge import worker\n"
        "os.statvfs = lambda path: threading.Event().wait()  # a hung mount: never answers\n"
        "with worker.stage('save'):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', '/mnt/nfs/ckpt.pt')\n"
    )
    report = _run(str(script), zero_code=False)
    d = report["diagnosis"]
    assert report["outcome"] == "failed" and d["kind"] == "disk_full", report["summary"]
    assert "the filesystem did not answer statvfs in 2 s" in d["summary"], d["summary"]
    assert d["evidence"]["disk"] == {
        "unknown": "the filesystem did not answer statvfs in 2 s (a hung mount?)"
    }
