"""`trainbridge doctor` against fake environments, with real target interpreters.

Each test builds a target that is broken in one way (no torch, `import torch` that hangs, a
CUDA_VISIBLE_DEVICES naming a missing GPU, a non-UTF-8 locale, ...) and asserts the verdict,
the time to know, and (conftest) that no process is left behind."""

import json
import sys

import psutil
import pytest

from trainbridge.bridge.doctor import doctor
from trainbridge.bridge.doctor.run import PROBE_PACKAGES

from .conftest import base_env, by_name

SHORT = 2.0  # per-check deadline for the hang tests: far above what a healthy check takes here


def test_this_machine_tells_the_truth(tmp_path):
    """No GPU, CPU-only torch 2.13.0, Python 3.11 in the project venv: nothing stops a CPU job."""
    report = doctor(timeout=30, env=base_env(), cwd=str(tmp_path))
    rows = by_name(report)
    assert (
        rows["python"]["verdict"] == "ok"
        and rows["python"]["facts"]["executable"] == sys.executable
    )
    assert rows["torch"]["verdict"] == "ok"
    assert rows["torch"]["facts"]["version"].startswith("2.13.0")
    assert rows["torch"]["facts"]["cuda"] is None and "CPU-only build" in rows["torch"]["detail"]
    assert (
        rows["torch_cuda"]["verdict"] == "skip"
        and rows["torch_cuda"]["facts"]["is_available"] is False
    )
    assert (
        rows["nvidia_driver"]["verdict"] == "warn"
        and "no NVIDIA driver or GPU" in rows["nvidia_driver"]["detail"]
    )
    assert rows["cuda_visible_devices"]["facts"]["gpu_count"] == 0
    assert rows["cuda_driver_compat"]["verdict"] == "skip"
    # The probe reports the versions of the list the doctor gives it (--packages): the
    # training stack and what the worker needs, found in this venv.
    versions = rows["packages"]["facts"]["versions"]
    assert list(versions) == list(PROBE_PACKAGES) and rows["packages"]["verdict"] == "ok"
    assert versions["torch"].startswith("2.13.0") and versions["pyzmq"] and versions["msgpack"]
    assert rows["torch_tensor"]["verdict"] == "ok"
    assert [d["device"] for d in rows["torch_tensor"]["facts"]["devices"]] == ["cpu"]
    assert rows["reach_hf_endpoint"]["verdict"] == "skip"  # base_env sets HF_HUB_OFFLINE=1
    assert report["exit_code"] == 0 and report["ok"] is True
    assert {r["verdict"] for r in report["checks"]} <= {"ok", "warn", "skip"}
    json.dumps(report, ensure_ascii=True)  # the report is plain JSON data


def test_venv_without_torch(bare_venv_python, tmp_path):
    report = doctor(bare_venv_python, timeout=10, env=base_env(), cwd=str(tmp_path))
    rows = by_name(report)
    assert rows["torch"]["verdict"] == "fail" and "not installed" in rows["torch"]["detail"]
    assert bare_venv_python in rows["torch"]["detail"]
    assert rows["torch_cuda"]["verdict"] == "skip" and rows["torch_tensor"]["verdict"] == "skip"
    assert rows["python"]["facts"]["in_venv"] is True
    # pynvml is not in the bare venv: the driver is asked through doctor's own interpreter.
    assert rows["nvidia_driver"]["facts"]["source"].startswith("doctor's interpreter")
    assert rows["packages"]["facts"]["versions"]["torch"] is None
    assert report["exit_code"] == 1


HANGING_TORCH_IMPORT = """
    import os, subprocess, sys, threading
    class _HangOnTorch:
        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            with open(os.path.join(MARKS, "pids"), "w") as f:
                f.write("%d %d" % (os.getpid(), child.pid))
            threading.Event().wait()  # like a CUDA init that never returns
    sys.meta_path.insert(0, _HangOnTorch())
"""


def test_sitecustomize_makes_import_torch_hang(write_sitecustomize, tmp_path):
    site, marks = write_sitecustomize(HANGING_TORCH_IMPORT)
    report = doctor(timeout=SHORT, env=base_env(PYTHONPATH=site), cwd=str(tmp_path))
    rows = by_name(report)
    torch = rows["torch"]
    assert torch["verdict"] == "hung"
    assert "sitecustomize.py" in torch["stack"] and "find_spec" in torch["stack"]
    assert "import torch" in torch["fix"]
    assert rows["torch_cuda"]["verdict"] == "skip" and "torch hung" in rows["torch_cuda"]["detail"]
    assert rows["python"]["verdict"] == "ok" and rows["disk"]["verdict"] == "ok"
    assert report["exit_code"] == 1
    # Time to know: one deadline plus process overhead, not the hang's length.
    assert report["duration_s"] < SHORT + 6
    # The hung probe and the process it started are gone (the tree was killed).
    probe_pid, grandchild_pid = map(int, (marks / "pids").read_text().split())
    for pid in (probe_pid, grandchild_pid):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_hang_in_one_check_lets_the_rest_run_in_a_fresh_child(
    write_sitecustomize, bare_python, tmp_path
):
    """A hung check mid-list: its stack is taken, the checks after it still get verdicts."""
    site, _marks = write_sitecustomize("""
        import os, sys, threading
        class _HangOnPynvml:
            def find_spec(self, name, path=None, target=None):
                # Only the first child hangs: the fresh one must be able to go on.
                mark = os.path.join(MARKS, "hung-once")
                if name == "pynvml" and not os.path.exists(mark):
                    open(mark, "w").close()
                    threading.Event().wait()
        sys.meta_path.insert(0, _HangOnPynvml())
    """)
    report = doctor(bare_python, timeout=SHORT, env=base_env(PYTHONPATH=site), cwd=str(tmp_path))
    rows = by_name(report)
    assert (
        rows["nvidia_driver"]["verdict"] == "hung"
        and "sitecustomize.py" in rows["nvidia_driver"]["stack"]
    )
    assert "NVML" in rows["nvidia_driver"]["detail"]
    # torch comes after nvidia_driver: it ran, in the fresh child, and got its real verdict.
    assert rows["torch"]["verdict"] == "fail" and "not installed" in rows["torch"]["detail"]
    assert rows["disk"]["verdict"] == "ok"
    assert rows["cuda_visible_devices"]["verdict"] == "skip"  # GPUs unknown once NVML hung
    assert report["exit_code"] == 1


def test_hang_while_a_thread_runs_python_is_dumped_from_python(write_sitecustomize, tmp_path):
    """The stack of a hung check whose process has another thread running Python comes from
    the probe's Python-level SIGUSR1 handler (every thread, the hung one last), not from
    faulthandler's C handler, whose read of the running thread's frames can crash (gh-116008)."""
    site, _marks = write_sitecustomize("""
        import json, sys, threading
        def churn():
            while True:  # Python frames entered from C all the time, as in a loader thread
                json.loads('[{"a": 1}, {"b": 2}]', object_hook=dict)
        class _HangOnTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    threading.Thread(target=churn, name="churn", daemon=True).start()
                    threading.Event().wait()
        sys.meta_path.insert(0, _HangOnTorch())
    """)
    report = doctor(timeout=SHORT, env=base_env(PYTHONPATH=site), cwd=str(tmp_path))
    torch = by_name(report)["torch"]
    assert torch["verdict"] == "hung"
    stack = torch["stack"]
    assert "in churn" in stack  # every thread, as only the Python-level dump writes it here
    hung = stack[stack.index("Current thread") :]  # the interrupted thread: the main one
    assert "in find_spec" in hung and "in churn" not in hung, stack
    assert "Fatal Python error" not in stack


def test_the_probe_survives_a_flood_of_sigusr1_while_a_thread_runs_python(
    write_sitecustomize, tmp_path
):
    """The race itself: 3,000 SIGUSR1s to a probe hung in a check while another thread runs
    Python that C keeps calling back into. With the old faulthandler.register(all_threads=True)
    4 of 5 runs of this test died of SIGSEGV; now each dump is written by Python
    with the GIL held, and the probe dies of the SIGTERM that follows."""
    import os
    import signal
    import subprocess
    import time

    from trainbridge.bridge.doctor import run as doctor_run

    site, _marks = write_sitecustomize("""
        import json, sys, threading
        class Row:
            def __init__(self, d):
                self.d = d
        def churn():
            rows = json.dumps([{"a": i} for i in range(40)])
            while True:
                json.loads(rows, object_hook=Row)
                sorted(range(100), key=lambda v: -v)
        class _HangOnTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    threading.Thread(target=churn, name="churn", daemon=True).start()
                    threading.Event().wait()
        sys.meta_path.insert(0, _HangOnTorch())
    """)
    stack_file = tmp_path / "stack.txt"
    probe = subprocess.Popen(
        [
            sys.executable,
            doctor_run.PROBE,
            "--checks",
            "torch",
            "--stack-file",
            str(stack_file),
            "--deadline",
            "60",
        ],
        env=base_env(PYTHONPATH=site),
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        for line in probe.stdout:  # the probe's own JSON lines, until the check has begun
            if b'"begin"' in line:
                break
        deadline = time.monotonic() + 20
        while "in churn" not in stack_file.read_text():
            assert time.monotonic() < deadline, "the churn thread never showed up"
            probe.send_signal(signal.SIGUSR1)
            time.sleep(0.05)  # polling the dump for a condition, with a deadline
        for i in range(3000):
            probe.send_signal(signal.SIGUSR1)
            if i % 10 == 0:
                time.sleep(0.002)  # let some dumps run while the next signals arrive
        probe.send_signal(signal.SIGTERM)
        code = probe.wait(timeout=20)
        text = stack_file.read_text()
        assert code == -signal.SIGTERM, f"died of {code}: {text[-1500:]}"
        assert "Fatal Python error" not in text
    finally:
        if probe.poll() is None:
            os.kill(probe.pid, signal.SIGKILL)
            probe.wait()
        probe.stdout.close()


def test_hang_in_c_with_the_gil_held_is_dumped_by_sigusr2(write_sitecustomize, tmp_path):
    """No Python runs (a native deadlock through ctypes.PyDLL keeps the GIL; no signal ends
    a mutex wait): the SIGUSR1 handler never runs, so doctor sends SIGUSR2 and faulthandler's
    C handler writes the main thread's stack."""
    site, _marks = write_sitecustomize("""
        import ctypes, sys
        class _HangOnTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    libc = ctypes.PyDLL(None)
                    mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER
                    libc.pthread_mutex_lock(mutex)
                    libc.pthread_mutex_lock(mutex)
        sys.meta_path.insert(0, _HangOnTorch())
    """)
    report = doctor(timeout=SHORT, env=base_env(PYTHONPATH=site), cwd=str(tmp_path))
    torch = by_name(report)["torch"]
    assert torch["verdict"] == "hung"
    assert torch["stack"].startswith("Stack (most recent call first):"), torch["stack"]  # C's
    assert "sitecustomize.py" in torch["stack"] and "in find_spec" in torch["stack"]
    assert report["duration_s"] < 3 * SHORT + 10


def test_interpreter_that_hangs_at_startup(write_sitecustomize, bare_python, tmp_path):
    site, _marks = write_sitecustomize("""
        import threading
        threading.Event().wait()  # blocks before any script runs
    """)
    report = doctor(bare_python, timeout=SHORT, env=base_env(PYTHONPATH=site), cwd=str(tmp_path))
    rows = by_name(report)
    assert (
        rows["python"]["verdict"] == "hung"
        and "never reached the probe" in rows["python"]["detail"]
    )
    assert "sitecustomize.py" in rows["python"]["stack"]
    assert rows["torch"]["verdict"] == "skip"
    assert report["exit_code"] == 1 and report["duration_s"] < SHORT + 6


def test_check_that_crashes_the_interpreter(write_sitecustomize, tmp_path):
    site, _marks = write_sitecustomize("""
        import os, signal, sys
        class _CrashOnTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    os.kill(os.getpid(), signal.SIGSEGV)
        sys.meta_path.insert(0, _CrashOnTorch())
    """)
    report = doctor(timeout=10, env=base_env(PYTHONPATH=site), cwd=str(tmp_path))
    rows = by_name(report)
    assert rows["torch"]["verdict"] == "fail" and "SIGSEGV" in rows["torch"]["detail"]
    assert "sitecustomize.py" in rows["torch"]["stack"]  # faulthandler's fatal-signal dump
    assert rows["torch_tensor"]["verdict"] == "skip"
    assert report["exit_code"] == 1


@pytest.mark.parametrize("value, needle", [("7", "'7'"), ("0,GPU-0000dead", "'0'")])
def test_visible_devices_naming_a_missing_gpu(bare_python, tmp_path, value, needle):
    report = doctor(
        bare_python, timeout=10, env=base_env(CUDA_VISIBLE_DEVICES=value), cwd=str(tmp_path)
    )
    row = by_name(report)["cuda_visible_devices"]
    assert row["verdict"] == "fail" and needle in row["detail"] and "no NVIDIA GPU" in row["detail"]
    assert row["facts"] == {"value": value, "gpu_count": 0}
    assert report["exit_code"] == 1


@pytest.mark.parametrize(
    "extra, stdout, preferred",
    [
        ({"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "gbk"}, "gbk", "ANSI_X3.4-1968"),
        ({"LC_ALL": "C", "PYTHONUTF8": "0"}, "ascii", "ANSI_X3.4-1968"),
    ],
)
def test_non_utf8_locale_is_flagged_with_the_fix(bare_python, tmp_path, extra, stdout, preferred):
    env = base_env(**extra)
    env.pop("LANG", None)
    report = doctor(bare_python, timeout=10, env=env, cwd=str(tmp_path))
    row = by_name(report)["encoding"]
    assert row["verdict"] == "warn"
    assert row["facts"]["stdout"] == stdout and row["facts"]["preferred"] == preferred
    assert "PYTHONUTF8=1" in row["fix"] and "PYTHONIOENCODING=utf-8" in row["fix"]


def test_utf8_mode_fixes_the_locale(bare_python, tmp_path):
    report = doctor(
        bare_python, timeout=10, env=base_env(LC_ALL="C", PYTHONUTF8="1"), cwd=str(tmp_path)
    )
    assert by_name(report)["encoding"]["verdict"] == "ok"


@pytest.mark.parametrize("unbuffered, verdict", [(None, "warn"), ("1", "ok")])
def test_stdout_buffering_of_a_piped_job(bare_python, tmp_path, unbuffered, verdict):
    env = base_env()
    env.pop("PYTHONUNBUFFERED", None)  # real users do not have it; this machine sets it
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    row = by_name(doctor(bare_python, timeout=10, env=env, cwd=str(tmp_path)))["stdout_buffering"]
    assert row["verdict"] == verdict
    if verdict == "warn":
        assert "PYTHONUNBUFFERED=1" in row["fix"]


def test_host_that_never_answers(bare_python, tmp_path, silent_server, closed_port):
    env = base_env(HTTPS_PROXY="http://127.0.0.1:%d" % closed_port)
    env.pop("HF_HUB_OFFLINE")
    report = doctor(
        bare_python,
        timeout=10,
        hosts=["http://127.0.0.1:%d" % silent_server],
        connect_timeout=0.5,
        env=env,
        cwd=str(tmp_path),
    )
    rows = by_name(report)
    host = rows["reach_host:127.0.0.1:%d" % silent_server]
    assert host["verdict"] == "fail" and host["facts"]["stage"] == "reply"
    assert (
        rows["reach_https_proxy"]["verdict"] == "fail"
        and "refused" in rows["reach_https_proxy"]["detail"]
    )
    assert rows["reach_hf_endpoint"]["verdict"] == "warn"  # through the dead proxy
    assert rows["reach_hf_endpoint"]["facts"]["via"] == "http://127.0.0.1:%d" % closed_port
    assert report["exit_code"] == 1


def test_missing_interpreter(tmp_path):
    missing = str(tmp_path / "nope" / "python")
    report = doctor(missing, timeout=5, env=base_env(), cwd=str(tmp_path))
    rows = by_name(report)
    assert rows["python"]["verdict"] == "fail" and "cannot start" in rows["python"]["detail"]
    assert report["exit_code"] == 1


def test_interpreter_that_cannot_run_the_probe(tmp_path):
    """Like pointing --python at a Python 2: it starts, prints an error and exits."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\necho '  File \"probe.py\", line 1' >&2\n"
        "echo 'SyntaxError: invalid syntax' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    report = doctor(str(fake), timeout=5, env=base_env(), cwd=str(tmp_path))
    row = by_name(report)["python"]
    assert (
        row["verdict"] == "fail"
        and "(exited with code 1) before running any check" in row["detail"]
    )
    assert "SyntaxError" in row["stack"]  # its stderr, for the user to read
    assert by_name(report)["torch"]["verdict"] == "skip" and report["exit_code"] == 1


A100 = {
    "name": "NVIDIA A100-SXM4-80GB",
    "uuid": "GPU-1111aaaa",
    "memory": 80 * 2**30,
    "capability": "8.0",
}
A100B = dict(A100, uuid="GPU-2222bbbb")


def test_driver_too_old_for_the_torch_build(bare_python, fake_gpu_env, tmp_path):
    """The classic: torch cu121 on a driver that supports CUDA 11.4 at most."""
    site = fake_gpu_env(
        driver="470.82.01",
        driver_cuda=11040,
        gpus=[A100, A100B],
        torch="2.4.0+cu121",
        torch_cuda="12.1",
        cuda_available=False,
        arch_list=["sm_80", "sm_90"],
    )
    report = doctor(
        bare_python,
        timeout=10,
        env=base_env(PYTHONPATH=site, CUDA_VISIBLE_DEVICES="1"),
        cwd=str(tmp_path),
    )
    rows = by_name(report)
    assert (
        rows["nvidia_driver"]["verdict"] == "ok" and "2 GPU(s)" in rows["nvidia_driver"]["detail"]
    )
    compat = rows["cuda_driver_compat"]
    assert (
        compat["verdict"] == "fail" and "too old for torch built with CUDA 12.1" in compat["detail"]
    )
    assert "upgrade the NVIDIA driver" in compat["fix"]
    assert (
        rows["torch_cuda"]["verdict"] == "fail"
        and "driver on your system is too old" in rows["torch_cuda"]["detail"]
    )
    assert rows["cuda_visible_devices"]["verdict"] == "ok"
    assert [d["device"] for d in rows["torch_tensor"]["facts"]["devices"]] == ["cpu"]
    assert report["exit_code"] == 1


def test_healthy_gpu_box(bare_python, fake_gpu_env, tmp_path):
    site = fake_gpu_env(
        driver="550.54.14",
        driver_cuda=12040,
        gpus=[A100, A100B],
        torch="2.4.0+cu121",
        torch_cuda="12.1",
        cuda_available=True,
        arch_list=["sm_80", "sm_90"],
    )
    env = base_env(PYTHONPATH=site, PYTHONUTF8="1")
    report = doctor(bare_python, timeout=10, env=env, cwd=str(tmp_path))
    rows = by_name(report)
    for name in (
        "nvidia_driver",
        "cuda_visible_devices",
        "torch",
        "torch_cuda",
        "cuda_driver_compat",
        "torch_tensor",
    ):
        assert rows[name]["verdict"] == "ok", rows[name]
    assert [d["device"] for d in rows["torch_tensor"]["facts"]["devices"]] == [
        "cpu",
        "cuda:0",
        "cuda:1",
    ]
    assert "sm_80" in rows["torch_cuda"]["detail"]
    assert report["exit_code"] == 0


@pytest.mark.parametrize(
    "change, check, needle",
    [
        (
            {"gpus": [dict(A100, name="NVIDIA GeForce RTX 5090", capability="12.0")]},
            "torch_cuda",
            "sm_120",
        ),
        ({"broken_devices": ["cuda:1"]}, "torch_tensor", "cuda:1: RuntimeError: CUDA error"),
        ({"nvml_error": "Driver/library version mismatch"}, "nvidia_driver", "version mismatch"),
    ],
)
def test_broken_gpu_boxes(bare_python, fake_gpu_env, tmp_path, change, check, needle):
    config = dict(
        driver="550.54.14",
        driver_cuda=12040,
        gpus=[A100, A100B],
        torch="2.4.0+cu121",
        torch_cuda="12.1",
        cuda_available=True,
        arch_list=["sm_80", "sm_90"],
    )
    config.update(change)
    report = doctor(
        bare_python, timeout=10, env=base_env(PYTHONPATH=fake_gpu_env(**config)), cwd=str(tmp_path)
    )
    row = by_name(report)[check]
    assert row["verdict"] == "fail" and needle in row["detail"], row
    assert report["exit_code"] == 1
