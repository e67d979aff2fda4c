"""Spawning details a user relies on, and the fallbacks: tcp instead of ipc, a waiting
thread instead of a pidfd, the zero-code hook."""

import json
import os
import subprocess
import sys

from tests.client.conftest import assert_tree_gone, validate_report
from trainbridge.bridge import hub as hub_module
from trainbridge.bridge import launcher
from trainbridge.bridge.job import Job

REAL_USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_child_environment_stdin_and_session(script):
    path = script("""
        import json, os, sys
        print(json.dumps({
            "stdin": sys.stdin.read(),
            "sid_is_own": os.getsid(0) == os.getpid(),
            "pgid_is_own": os.getpgid(0) == os.getpid(),
            "env": {k: os.environ.get(k) for k in ("PYTHONUNBUFFERED", "PYTHONIOENCODING",
                    "PYTHONUTF8", "PYTHONFAULTHANDLER", "TRAINBRIDGE_JOB_ID", "USER_SETTING")},
            "crash_file_dir_mode": oct(os.stat(os.path.dirname(
                os.environ["TRAINBRIDGE_CRASH_FILE"])).st_mode & 0o777),
            "argv_has_key": any(os.environ["TRAINBRIDGE_KEY"] in a for a in sys.argv),
        }))
    """)
    job = Job(
        [sys.executable, path], env={**REAL_USER_ENV, "USER_SETTING": "kept"}, zero_code=False
    ).start()
    report = job.wait(20)
    seen = json.loads(report["log_tail"][0])
    assert seen["stdin"] == "" and seen["sid_is_own"] and seen["pgid_is_own"]
    assert seen["env"] == {
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUTF8": "1",
        "PYTHONFAULTHANDLER": "1",
        "TRAINBRIDGE_JOB_ID": job.id,
        "USER_SETTING": "kept",
    }
    assert seen["crash_file_dir_mode"] == "0o700"
    assert not seen["argv_has_key"]


def test_tcp_when_ipc_is_unavailable(script, monkeypatch):
    monkeypatch.setattr(hub_module, "IPC_PATH_MAX", 0)  # as if the path were too long
    hub = hub_module.Hub()
    try:
        assert hub.endpoint.startswith("tcp://127.0.0.1:")
        path = script("""
            from trainbridge import worker
            worker.progress(2, 2)
        """)
        job = Job([sys.executable, path], hub=hub, zero_code=False).start()
        report = job.wait(20)
        validate_report(report)
        assert report["outcome"] == "succeeded" and report["progress"]["step"] == 2
        assert report["worker"]["hello"]
    finally:
        hub.close()
    assert not os.path.exists(hub.runtime_dir)


def test_exit_through_a_waiting_thread_without_pidfd(script, monkeypatch):
    monkeypatch.setattr(launcher, "open_pidfd", lambda pid: None)
    path = script("""
        import os
        os._exit(4)
    """)
    job = Job([sys.executable, path], zero_code=False).start()
    report = job.wait(20)
    assert report["exit_code"] == 4
    assert_tree_gone(job)


def test_zero_code_hook_makes_an_unmodified_script_say_hello(script):
    path = script("""
        print("no import of worker here")
    """)
    job = Job(
        [sys.executable, path], env=REAL_USER_ENV, zero_code=True, config={"startup_timeout": 20}
    ).start()
    report = job.wait(20)
    validate_report(report)
    assert report["outcome"] == "succeeded"
    assert report["worker"]["hello"]
    assert report["log_tail"] == ["no import of worker here"]


def test_an_interpreter_without_the_worker_is_not_killed_at_startup(script, tmp_path):
    # A training interpreter without pyzmq (a bare venv): the zero-code hook says so on
    # stderr, naming the interpreter and the fix, and the startup deadline must not end
    # this healthy run.
    venv = tmp_path / "bare"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    python = str(venv / "bin" / "python")
    path = script("""
        import time
        deadline = time.monotonic() + 1.5  # outlive the 0.5 s startup deadline
        while time.monotonic() < deadline:
            time.sleep(0.05)
        print("finished")
    """)
    job = Job(
        [python, path], env=dict(REAL_USER_ENV), zero_code=True, config={"startup_timeout": 0.5}
    ).start()
    report = job.wait(20)
    validate_report(report)
    assert report["outcome"] == "succeeded", report["summary"]
    assert report["log_tail"][-1] == "finished"
    first = report["log_tail"][0]
    assert first.startswith("[trainbridge] zero-code mode is off"), first
    assert "pyzmq and msgpack not installed for " + python in first, first
    assert job.m["no_worker"] is not None


def test_a_daemon_that_left_tree_and_group_is_found_by_its_job_id_and_killed(script):
    # Double fork + setsid, the intermediate gone at once: the daemon is in neither the
    # tree nor the group by the time the client looks; only the drain's scan of /proc for
    # the job id it inherited finds it (launcher.job_marked_pids).
    path = script("""
        import os, time
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)  # holds none of the job's pipes
                os.write(w, b"%d" % os.getpid())
                time.sleep(60)
            os._exit(0)
        os.close(w)
        print("daemon", int(os.read(r, 32)), flush=True)
        os.wait()
    """)
    job = Job([sys.executable, path], env=REAL_USER_ENV, zero_code=False).start()
    report = job.wait(20)
    daemon = int(report["log_tail"][0].split()[1])
    assert report["leftovers"] == [daemon]
    assert daemon in job.tree.known
    assert_tree_gone(job)


def test_job_marked_pids_matches_the_whole_variable_only(tmp_path):
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    first = subprocess.Popen(sleep, env={"TRAINBRIDGE_JOB_ID": "j1"})
    later = subprocess.Popen(sleep, env={"A": "1", "TRAINBRIDGE_JOB_ID": "j1", "B": "2"})
    longer = subprocess.Popen(sleep, env={"TRAINBRIDGE_JOB_ID": "j10"})
    other = subprocess.Popen(sleep, env={"X_TRAINBRIDGE_JOB_ID": "j1"})
    try:
        found = launcher.job_marked_pids("j1", skip=[later.pid])
        assert first.pid in found
        assert later.pid not in found  # skipped
        assert longer.pid not in found and other.pid not in found
        assert sorted(
            p for p in launcher.job_marked_pids("j1") if p in (first.pid, later.pid)
        ) == sorted([first.pid, later.pid])
    finally:
        for proc in (first, later, longer, other):
            proc.kill()
            proc.wait()


def test_tree_refresh_shares_one_proc_table_per_round_and_reads_a_fresh_one_when_asked():
    # A child leading its group, with a grandchild: both are the job's.
    code = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "print(g.pid, flush=True); time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    late = None
    try:
        grandchild = int(child.stdout.readline())
        tree = launcher.Tree(child.pid)
        assert {child.pid, grandchild} <= set(tree.known)
        launcher.process_table()  # a round's table, taken now
        late = subprocess.Popen(["sleep", "30"], start_new_session=True)
        tree.pgid = late.pid  # as if it had joined the job's group: the table must list it
        tree.refresh(max_age=60)  # the shared table predates it
        assert late.pid not in tree.known
        tree.refresh()  # a fresh one (signals, hellos) sees it
        assert late.pid in tree.known
    finally:
        for proc in (child, late):
            if proc is not None:
                os.killpg(proc.pid, 9)
                proc.wait()


def test_a_job_whose_worker_cannot_reach_the_hub_is_not_killed_at_the_startup_deadline(script):
    """job.no_worker(reason): what `run --transparent` and the job server say when the hub
    could not bind the endpoint the process was spawned with. No hello can come, so the
    startup deadline is off: a silent Python process runs to its own end, and the report
    says why the worker was off."""
    path = script("""
        import sys
        sys.stdin.readline()  # until the test lets it go
    """)
    job = Job(
        [sys.executable, path], zero_code=False, stdin="pipe", config={"startup_timeout": 1.0}
    )
    job.start()
    job.no_worker("the hub could not bind ipc:///nowhere")
    # Three startup deadlines pass: it is still running (without no_worker: hung, killed).
    assert job.wait(3.0) is None, job.report and job.report["summary"]
    assert job.state in ("starting", "running"), job.state
    job.stdin.write(b"go\n")
    job.stdin.flush()
    report = job.wait(20)
    validate_report(report)
    assert report["outcome"] == "succeeded", report["summary"]
    assert report["worker"]["off"] == "the hub could not bind ipc:///nowhere"
    assert not report["signals_sent"]
    assert_tree_gone(job)


HOLDS_MEMORY = (
    "import sys, time\n"
    "b = bytearray(256 << 20)\n"
    "for i in range(0, len(b), 4096): b[i] = 1\n"
    "print('touched', flush=True)\n"
    "time.sleep(120)"
)


def _killed_tree_waited(monkeypatch, pidfd):
    """A process holding 256 MiB is SIGKILLed; Tree.wait_gone returns once it is gone."""
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)  # kernels before 5.3
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDS_MEMORY], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout.readline() == b"touched\n"
        tree = launcher.Tree(proc.pid)
        tree.signal(launcher.signal.SIGKILL)
        left = tree.wait_gone(5.0)
        with open(f"/proc/{proc.pid}/stat") as f:  # not reaped yet: its own parent is us
            state = f.read().rsplit(")", 1)[1].split()[0]
        return left, state
    finally:
        proc.kill()
        proc.wait()


def test_wait_gone_returns_once_a_killed_process_has_ended():
    assert _killed_tree_waited(None, pidfd=True) == ([], "Z")


def test_wait_gone_without_pidfd_polls_until_the_process_has_ended(monkeypatch):
    assert _killed_tree_waited(monkeypatch, pidfd=False) == ([], "Z")
