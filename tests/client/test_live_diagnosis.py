"""While a job is stalled, before any deadline, the client says why: the
"stalled" event and job.live_diagnosis carry the current diagnosis, refreshed every few
seconds, and the verdict at the deadline agrees with the last live one."""

import socket
import sys
import time

from tests.client.conftest import assert_tree_gone, validate_report
from trainbridge import bridge
from trainbridge.bridge import evidence

READS_A_SILENT_SERVER = """
    import socket, sys
    from trainbridge import worker

    def fetch_remote(port):
        sock = socket.create_connection(("127.0.0.1", port))
        print("connected, reading", flush=True)
        sock.recv(1024)

    with worker.stage("download"):
        fetch_remote(int(sys.argv[1]))
"""


def test_a_stalled_job_says_why_before_the_deadline(script):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        job = bridge.launch(
            [sys.executable, script(READS_A_SILENT_SERVER), str(port)],
            stall_timeout=7,
            stalled_after=0.5,
            zero_code=False,
        )
        live, hang_t, stalled_t, published = [], None, None, []
        for event in job.events():
            if event["event"] == "state" and event["state"] == "stalled" and stalled_t is None:
                stalled_t = time.monotonic()
            elif event["event"] == "stalled":
                live.append((time.monotonic(), event["diagnosis"]))
                published.append(event["t"])
            elif event["event"] == "hang":
                hang_t = time.monotonic()
        r = job.wait(20)
    finally:
        server.close()
    validate_report(r)
    assert r["outcome"] == "hung" and hang_t is not None and live, (r["summary"], live)
    first_t, first = live[0]
    assert first_t - stalled_t < 1.0  # said at once, not at the deadline
    assert first["kind"] == "network_wait", first
    assert f"127.0.0.1:{port}" in first["summary"]
    before = [d for t, d in live if t < hang_t]
    assert len(before) >= 2  # refreshed while stalled
    # The frame comes with the heartbeat's stack (the worker adds it once the main thread
    # has been idle a while): named before the deadline.
    assert any("fetch_remote" in d["summary"] for d in before), before
    # At most every LIVE_DIAGNOSIS_S (2 s), as the supervisor published them (when this
    # thread got them says little on a loaded machine: 2.29 then 1.82 s once). The next look
    # is due 2 s after the last was published, so a long look does not shorten the gap (Node's
    # twin test saw less than 1.9 s at load 5 when the 2 s ran from the look's start); a
    # refresh per heartbeat would be ~1 s.
    gaps = [b - a for a, b in zip(published, published[1:])]
    assert all(gap >= 1.9 for gap in gaps), gaps
    final = r["diagnosis"]
    assert (final["kind"], final["evidence"]["frame"]) == (
        live[-1][1]["kind"],
        live[-1][1]["frame"],
    )
    assert job.live_diagnosis == live[-1][1]
    assert_tree_gone(job)


def test_repeated_live_looks_at_a_sleeping_child_keep_answering():
    """The client looks at every stalled job again every LIVE_DIAGNOSIS_S: each look from the
    same mark still reads the child and still yields a diagnosis. What a look costs is
    measured in benchmarks/bench_live_look.py, not asserted here."""
    import subprocess

    from trainbridge.bridge import diagnosis

    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('r', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        proc.stdout.readline()
        mark = evidence.live(proc.pid)["mark"]
        looks = []
        for _ in range(20):
            ev = evidence.live(proc.pid, mark)
            found = diagnosis.diagnose_hang({"reason": "stall", "evidence": ev, "idle_s": 3})
            looks.append((ev.get("alive"), ev.get("status"), found["kind"]))
    finally:
        proc.kill()
        proc.wait()
    # Each look reads the child as it is and says something. What it says depends on timing
    # on a busy machine: the child may still be on its way into sleep() ("running"), and a
    # look under 0.2 s after the mark has no CPU fraction: the hunt saw "unknown" and
    # "sleeping" in one run.
    assert all(
        alive and status in ("running", "sleeping") and kind for alive, status, kind in looks
    ), looks


IGNORES_SIGTERM_AND_SLEEPS = """
    import signal, time
    from trainbridge import worker

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the hang's SIGTERM: SIGKILL after kill_grace
    with worker.stage("wait"):
        time.sleep(120)
"""


def test_no_live_look_once_the_hang_is_decided(script):
    """While a hung job is being stopped (its evidence taken, its tree signalled), the beacon
    still beats; a live look then saw a tree half gone ("a child process", under load) and
    was the last 'stalled' event a face showed. Once the verdict is being made, the live
    diagnosis stays the one before it: no 'stalled' event after 'hang'."""
    job = bridge.launch(
        [sys.executable, script(IGNORES_SIGTERM_AND_SLEEPS)],
        stall_timeout=2,
        stalled_after=0.5,
        kill_grace=5,  # the ending lasts this long: heartbeats keep coming meanwhile
        zero_code=False,
    )
    kinds = [e["event"] for e in job.events() if e["event"] in ("stalled", "hang", "signal")]
    report = job.wait(30)
    assert report["outcome"] == "hung", report["summary"]
    assert "signal" in kinds[kinds.index("hang") :], kinds  # the ending did take a while
    assert "stalled" in kinds[: kinds.index("hang")], kinds
    assert "stalled" not in kinds[kinds.index("hang") :], kinds
    assert_tree_gone(job)
