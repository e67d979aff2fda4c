"""Trust in hellos: a process outside the job's tree that holds the key
and says "rank 0" is ignored and counted, never leads. Real processes: the foreign one gets
the job's variables the way a same-user process could, from /proc/<pid>/environ."""

import os
import subprocess
import sys
import threading

from tests.client.conftest import ROOT, WAIT_S, assert_tree_gone, validate_report
from trainbridge import bridge


def test_a_rank_0_hello_from_outside_the_tree_is_ignored_and_counted(script, tmp_path):
    gate = str(tmp_path / "go")
    path = script("""
        from trainbridge import worker
        worker.progress(1, total=2)
        wait_go()
        worker.progress(2, total=2)
    """)
    job = _launch_until(path, gate, "progress")  # the job's first step

    with open(f"/proc/{job.pid}/environ", "rb") as f:
        environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    env = {k.decode(): v.decode() for k, v in environ.items()}
    env.pop("TRAINBRIDGE_CLIENT_PID", None)
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    foreign = subprocess.run(
        [sys.executable, "-c", "from trainbridge import worker\nworker.progress(99, total=99)"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert foreign.returncode == 0, foreign.stderr[-2000:]

    report = _open_gate_and_wait(job, gate)
    assert (report["progress"]["step"], report["progress"]["total"]) == (2, 2), report["progress"]
    assert report["protocol"]["foreign_hello"] == 1, report["protocol"]
    assert report["protocol"]["rejected"].get("foreign", 0) >= 1, report["protocol"]
    assert report["worker"]["leads"] == [job.pid], report["worker"]
    assert report["worker"]["ranks"] == [0] and report["environment"]["host"]


def test_a_childs_hello_read_before_the_launched_processs_does_not_keep_the_lead(script, tmp_path):
    """The pure election is pinned by vectors/lead.json; this forces the order with real
    processes: the launched script starts a Python child that says hello, and imports the
    worker itself only after the client has read that hello."""
    gate = str(tmp_path / "go")
    path = script("""
        import subprocess, sys
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import sys\\nfrom trainbridge import worker\\nworker.progress(7, total=99)\\n"
             "sys.stdin.read()"],
            stdin=subprocess.PIPE,
        )
        wait_go()  # the client has read the child's hello
        from trainbridge import worker
        worker.progress(1, total=2)
        child.stdin.close()
        child.wait()
        worker.progress(2, total=2)
    """)
    job = _launch_until(path, gate, "hello")  # before the gate, only the child's
    report = _open_gate_and_wait(job, gate)
    assert report["worker"]["lead_pid"] == job.pid, report["worker"]
    assert report["worker"]["leads"][-1] == job.pid, report["worker"]
    assert report["worker"]["leads"][0] != job.pid, "the child's hello was not read first"
    assert (report["progress"]["step"], report["progress"]["total"]) == (2, 2), report["progress"]


def _launch_until(path, gate, kind):
    """Launch the gated script (explicit API) and wait for its first `kind` message."""
    seen = threading.Event()

    def on_event(event):
        if event["event"] == "message" and event["kind"] == kind:
            seen.set()

    job = bridge.launch(
        [sys.executable, path],
        cwd=ROOT,
        zero_code=False,
        on_event=on_event,
        env={**os.environ, "TB_TEST_GO": gate},
        heartbeat_timeout=10,
    )
    assert seen.wait(WAIT_S), f"no {kind} message came"
    return job


def _open_gate_and_wait(job, gate):
    """Let the script go on; its report, checked, of a job that succeeded and left nothing."""
    open(gate, "w").close()
    report = job.wait(WAIT_S)
    assert report is not None, job.state
    validate_report(report)
    assert_tree_gone(job)
    assert report["outcome"] == "succeeded", report["summary"]
    return report


def test_a_launcher_whose_rank_0_died_without_a_bye_gives_the_job_its_own_last_words(
    script, tmp_path
):
    """torchrun SIGTERMs rank 0 when rank 1 dies, then raises ChildFailedError and exits 1.
    Rank 0 led and said no bye; the periodic look at the tree (once a second) can come after
    the launcher's exit on a loaded machine, and then the job was judged on a dead rank's
    silence ("crashed", the error read off stderr). Here the launcher exits a few
    milliseconds after its rank 0's death, well inside that second: its own error and bye
    must be the job's."""
    gate = str(tmp_path / "go")
    path = script(
        """
        import os, signal, subprocess, sys
        from trainbridge import worker
        rank0 = subprocess.Popen(
            [sys.executable, "-c",
             "import sys\\nfrom trainbridge import worker\\nworker.progress(1, total=9)\\n"
             "sys.stdin.read()"],
            stdin=subprocess.PIPE,
            env=dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="2"),
        )
        wait_go()  # the client has read rank 0's progress: it leads
        rank0.send_signal(signal.SIGTERM)  # as torchrun stops the ranks left
        rank0.wait()
        raise RuntimeError("rank 1 failed (exitcode: -9)")
        """,
        name="torchrun",  # machine.is_launcher: the launched process is a launcher
    )
    job = _launch_until(path, gate, "progress")
    open(gate, "w").close()
    report = job.wait(WAIT_S)
    assert report is not None, job.state
    validate_report(report)
    assert_tree_gone(job)
    leads = report["worker"]["leads"]
    assert any(pid != job.pid for pid in leads), f"rank 0 never led: {leads}"
    assert leads[-1] == job.pid, f"the lead did not come back to the launcher: {leads}"
    assert report["worker"]["bye"] is not None, report["worker"]
    assert report["outcome"] == "failed", report["summary"]
    assert report["error"]["type"] == "RuntimeError", report["error"]
    assert "rank 1 failed" in report["error"]["message"], report["error"]
