"""Bad disks: a --report or --log on a full or read-only file system.

Each test runs the real CLI in a private mount namespace (unshare) that has a 64 KiB tmpfs
(full) or a read-only tmpfs, so nothing is left mounted when it ends, even on a failure.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.client.conftest import ROOT, validate_report

UNSHARE = (
    ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() == 0
    else ["unshare", "--user", "--map-root-user", "--mount"]
)
LINE = "x" * 999  # 1,000 bytes with its newline: the 64 KiB disk fills at about line 65


def in_namespace(tmp_path, setup, cli_args, after="true"):
    """Run `setup` (sh), then `trainbridge run CLI_ARGS`, then `after`, in a mount namespace
    of their own; returns (exit status of trainbridge, stdout, stderr)."""
    assert shutil.which("unshare"), "unshare (util-linux) is needed: scripts/setup installs it"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    status = tmp_path / "status"
    script = f"set -e; {setup}; set +e; \"$@\"; echo $? > {status}; {after}"
    done = subprocess.run(
        [*UNSHARE, "sh", "-c", script, "sh", sys.executable, "-m", "trainbridge", "run", *cli_args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert status.exists(), done.stderr.decode()
    return int(status.read_text()), done.stdout.decode(), done.stderr.decode()


def test_report_on_a_read_only_disk_warns_once_and_changes_nothing_else(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    code, out, err = in_namespace(
        tmp_path,
        f"mount -t tmpfs -o ro,size=64k tmpfs {ro}",
        ["--report", str(ro / "report.json"), "--", sys.executable, "-c", "print('hello')"],
        after=f"ls -A {ro} > {tmp_path / 'left'}",
    )
    assert code == 0, err
    assert "hello" in out and "Job succeeded" in out, "the summary is printed as ever"
    warnings = [line for line in err.splitlines() if "report" in line]
    assert len(warnings) == 1, err
    assert "could not write the report to" in warnings[0] and "(EROFS)" in warnings[0]
    assert "Traceback" not in err
    assert (tmp_path / "left").read_text() == "", "nothing is left on that disk"


def test_report_on_a_full_disk_warns_and_leaves_no_temp_file(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    code, out, err = in_namespace(
        tmp_path,
        f"mount -t tmpfs -o size=64k tmpfs {full}; "
        f"head -c 1000000 /dev/zero > {full}/filler 2>/dev/null || true",
        [
            "--report",
            str(full / "report.json"),
            "--",
            sys.executable,
            "-c",
            "import sys; sys.exit(3)",
        ],
        after=f"ls -A {full} > {tmp_path / 'left'}",
    )
    assert code == 3, "the job's own exit status, not a failure of ours"
    assert "Job failed" in out and "exit status 3" in out
    warnings = [line for line in err.splitlines() if "could not write the report" in line]
    assert len(warnings) == 1 and "(ENOSPC)" in warnings[0], err
    assert "Traceback" not in err
    assert (tmp_path / "left").read_text().split() == ["filler"], "no report.json.tmpPID left"


def test_log_on_a_full_disk_says_from_which_line_it_is_incomplete(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    report_path = tmp_path / "report.json"
    copy = tmp_path / "log-copy"
    code, out, err = in_namespace(
        tmp_path,
        f"mount -t tmpfs -o size=64k tmpfs {full}",
        [
            "--log",
            str(full / "job.log"),
            "--report",
            str(report_path),
            "--",
            sys.executable,
            "-c",
            f"for i in range(200): print(f'{{i + 1:3d}} {LINE[4:]}')",
        ],
        after=f"cp {full}/job.log {copy}",
    )
    assert code == 0, err
    report = json.loads(report_path.read_text(encoding="ascii"))
    validate_report(report)
    assert report["outcome"] == "succeeded" and report["output"]["lines"]["stdout"] == 200
    log_error = report["log_error"]
    n = log_error["from_line"]
    assert log_error["path"] == str(full / "job.log") and "(ENOSPC)" in log_error["error"]
    assert 10 < n < 200
    kept = copy.read_bytes().split(b"\n")  # lines 1..N-1, then what fitted of line N
    assert len(kept) == n, "nothing after line N"
    assert [int(line[:3]) for line in kept[: n - 1]] == list(range(1, n)), "1..N-1 complete"
    assert f"{n:3d} {LINE[4:]}".encode().startswith(kept[n - 1])
    assert f"incomplete from line {n} on" in report["summary"]
    assert f"incomplete from line {n} on" in out, "the printed summary says it"
    assert f"the log file {full / 'job.log'} is incomplete from line {n} on" in err, (
        "and the view said so when it happened"
    )


def test_log_on_a_read_only_path_says_what_is_wrong(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    code, out, err = in_namespace(
        tmp_path,
        f"mount -t tmpfs -o ro,size=64k tmpfs {ro}",
        ["--log", str(ro / "job.log"), "--", sys.executable, "-c", "print('hello')"],
    )
    assert code == 125
    assert f"cannot write the log file {ro / 'job.log'}: Read-only file system (EROFS)" in err
    assert "executable" not in err, "not the command's fault"


def test_log_in_a_missing_directory_says_so_from_the_api(tmp_path):
    from trainbridge import bridge

    with pytest.raises(bridge.LaunchError, match=r"cannot write the log file .*\(ENOENT\)"):
        bridge.launch([sys.executable, "-c", "pass"], log_path=str(tmp_path / "no" / "job.log"))
