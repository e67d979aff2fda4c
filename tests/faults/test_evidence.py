"""bridge.evidence (sample + measure, and collect) on real blocked processes, judged by the
pure rules with the OS evidence alone (no Python stack): docs/DIAGNOSIS.md's "blocking
direction, judged from outside"."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from trainbridge.bridge import diagnosis, evidence, oom, procfs

DEADLINE_S = 10.0


def spawn(code: str) -> subprocess.Popen:
    """Start a python child that prints 'ready' right before it blocks."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_ready(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline()
    assert line.strip() == b"ready", line


def wait_in_syscall(pid: int, names) -> None:
    """Wait (with a deadline) until the main thread sits in one of the named syscalls:
    'ready' is printed just before the blocking call, so the kernel state lags a little."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/syscall") as f:
                got = procfs.parse_syscall_line(f.read()).get("syscall")
        except OSError:
            got = None
        if got in names:
            return
        time.sleep(0.01)  # polling a condition, with a deadline
    raise AssertionError(f"pid {pid} never reached {names}")


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    for p in [proc] + kids:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    psutil.wait_procs([k for k in kids if k.is_running()], timeout=5)
    for k in kids:
        assert not k.is_running() or k.status() == psutil.STATUS_ZOMBIE


@pytest.fixture
def silent_server():
    """A loopback server that accepts and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    yield srv
    srv.close()


def collect_and_judge(pid: int, reason: str = "stall", saw_hello: bool = True):
    started = time.monotonic()
    ev = evidence.collect(pid, window_s=0.3)
    took = time.monotonic() - started
    assert took < 0.3 + 1.0, took  # bounded: window plus reading, generous for a busy CI
    return ev, diagnosis.diagnose_hang(
        {"reason": reason, "evidence": ev, "idle_s": 5, "saw_hello": saw_hello}
    )


def test_sleeping():
    proc = spawn("""
        import time
        print("ready", flush=True)
        time.sleep(3600)
    """)
    try:
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"clock_nanosleep", "nanosleep"})
        ev, diag = collect_and_judge(proc.pid)
        assert ev["alive"] and ev["main_thread"]["syscall"] in ("clock_nanosleep", "nanosleep")
        assert diag["kind"] == "sleeping", diag
    finally:
        kill_tree(proc)


def test_network_wait_names_the_remote(silent_server):
    port = silent_server.getsockname()[1]
    proc = spawn(f"""
        import socket
        s = socket.create_connection(("127.0.0.1", {port}))
        print("ready", flush=True)
        s.recv(1)
    """)
    try:
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"recvfrom", "read"})
        ev, diag = collect_and_judge(proc.pid)
        assert ev["main_thread"]["fd_target"].startswith("socket:")
        assert diag["kind"] == "network_wait", diag
        assert f"127.0.0.1:{port}" in diag["summary"]
        assert f"127.0.0.1:{port}" in diag["hint"]
    finally:
        kill_tree(proc)


def test_unix_socket_peer_is_the_job_process_that_holds_it():
    """A read on a socketpair whose other end is held by a stopped child is
    a wait on that child, found through the socket inodes, not a network wait."""
    proc = spawn("""
        import os, signal, socket
        mine, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            mine.close()
            os.kill(os.getpid(), signal.SIGSTOP)
            os._exit(0)
        theirs.close()
        print(pid, flush=True)
        mine.recv(1)
    """)
    try:
        child = int(proc.stdout.readline())
        wait_in_syscall(proc.pid, {"recvfrom", "read"})
        ev, diag = collect_and_judge(proc.pid)
        assert ev["main_thread"]["fd_family"] == "unix"
        assert ev["unix_peer"]["pid"] == child, ev.get("unix_peer")
        assert diag["kind"] == "child_wait", diag
        assert f"child pid {child} " in diag["summary"]
        assert diag["evidence"]["via"] == "unix socket"
    finally:
        kill_tree(proc)


def test_lock_wait():
    proc = spawn("""
        import threading
        lock = threading.Lock()
        lock.acquire()
        print("ready", flush=True)
        lock.acquire()
    """)
    try:
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"futex"})
        _, diag = collect_and_judge(proc.pid)
        assert diag["kind"] == "lock_wait", diag
    finally:
        kill_tree(proc)


def test_cpu_bound():
    proc = spawn("""
        print("ready", flush=True)
        x = 0
        while True:
            x += 1
    """)
    try:
        wait_ready(proc)
        ev, diag = collect_and_judge(proc.pid)
        # on a loaded CI machine the loop may get little CPU, but it does get some
        assert ev["cpu_fraction"] > 0 and ev["main_thread"]["runnable_fraction"] > 0, ev
        assert diag["kind"] == "cpu_bound", diag
    finally:
        kill_tree(proc)


def test_child_stopped_is_named():
    proc = spawn("""
        import os, signal, subprocess, sys
        child = subprocess.Popen([sys.executable, "-c",
                                  "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"],
                                 stdout=subprocess.PIPE)
        print("ready", flush=True)
        child.stdout.read()
    """)
    try:
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"read"})
        child = psutil.Process(proc.pid).children()[0]
        deadline = time.monotonic() + DEADLINE_S
        while child.status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)
        ev, diag = collect_and_judge(proc.pid)
        assert diag["kind"] == "child_wait", diag
        assert f"child pid {child.pid}" in diag["summary"] and "stopped" in diag["summary"]
        assert f"kill -CONT {child.pid}" in diag["hint"]
    finally:
        kill_tree(proc)


def test_waiting_on_a_child_process():
    proc = spawn("""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        print("ready", flush=True)
        child.wait()
    """)
    try:
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"wait4", "waitid"})
        _, diag = collect_and_judge(proc.pid)
        assert diag["kind"] == "child_wait", diag
        assert "sleeping" in diag["summary"]
    finally:
        kill_tree(proc)


def test_children_the_first_look_saw_survive_a_stop_during_the_window():
    """A hang's snapshot on a loaded machine can outlast its timeout and meet the stop's
    SIGTERM: the job's processes are gone when measure() lists the children. The children
    are then shown as the window's first look saw them (state, parent, kernel wait), so the
    verdict still names what the job waited on, not "no children"."""
    proc = spawn("""
        import subprocess, sys
        kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
                for _ in range(2)]
        print(" ".join(str(k.pid) for k in kids), flush=True)
        print("ready", flush=True)
        kids[0].wait()
    """)
    try:
        kids = [int(x) for x in proc.stdout.readline().split()]
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"wait4", "waitid"})
        for kid in kids:
            wait_in_syscall(kid, {"clock_nanosleep", "select", "pselect6"})
        first = evidence.sample(proc.pid)
        kill_tree(proc)  # the stop, during the window: it waits until all are gone
        ev = evidence.measure(first)
        got = {c["pid"]: c for c in ev["children"]}
        assert sorted(got) == sorted(kids), ev
        for kid in kids:
            assert got[kid]["gone_at_end"] is True, got[kid]
            assert got[kid]["status"] == "sleeping" and got[kid]["ppid"] == proc.pid, got[kid]
            assert got[kid]["name"].startswith("python") and got[kid]["started"] > 0, got[kid]
        assert any("2 child process(es) seen at the start" in n for n in ev["notes"]), ev["notes"]
        # the main process too: its wait is the one the first look saw, and it is judged
        assert ev["alive"] is False and ev["ended_in_window"] is True, ev
        assert ev["main_thread"]["syscall"] in ("wait4", "waitid"), ev["main_thread"]
        assert ev["main_thread"]["gone_at_end"] is True, ev["main_thread"]
        diag = diagnosis.diagnose_hang({"reason": "stall", "saw_hello": True, "evidence": ev})
        assert diag["kind"] == "child_wait", diag
        assert f"child pid {kids[0]}" in diag["summary"] and "sleeping" in diag["summary"], diag
    finally:
        kill_tree(proc)


def test_a_child_alive_at_both_looks_is_not_marked_gone():
    proc = spawn("""
        import subprocess, sys
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        print("ready", flush=True)
        kid.wait()
    """)
    try:
        wait_ready(proc)
        wait_in_syscall(proc.pid, {"wait4", "waitid"})
        ev = evidence.measure(evidence.sample(proc.pid))
        assert len(ev["children"]) == 1 and "gone_at_end" not in ev["children"][0], ev
        assert not any("seen at the start" in n for n in ev["notes"]), ev["notes"]
    finally:
        kill_tree(proc)


def test_stopped_process():
    proc = spawn("""
        import time
        print("ready", flush=True)
        time.sleep(3600)
    """)
    try:
        wait_ready(proc)
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + DEADLINE_S
        while psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        _, diag = collect_and_judge(proc.pid, reason="heartbeat_silence")
        assert diag["kind"] == "stopped", diag
    finally:
        kill_tree(proc)


def test_gone_process_gives_notes_not_errors():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    ev = evidence.collect(proc.pid, window_s=0.05)
    assert ev["alive"] is False and ev["notes"]
    assert diagnosis.diagnose_hang({"reason": "stall", "evidence": ev})["kind"] == "unknown"


def test_no_gpu_is_a_clear_fact():
    ev = evidence.collect(os.getpid(), window_s=0.0)
    if ev["gpu"] is None:
        assert ev["gpu_note"].startswith("no NVIDIA GPU")
    else:
        assert all("util_percent" in g and "mem_total" in g for g in ev["gpu"])


def test_oom_kill_count_reads_the_cgroup():
    count = oom.oom_kill_count()
    assert count is None or count >= 0
    assert oom.oom_killed(0, 1) is True
    assert oom.oom_killed(2, 2) is False
    assert oom.oom_killed(None, 1) is None


@pytest.mark.parametrize(
    "line,expect",
    [
        ("230 0x0 0x0 0x7ffe 0x7ffe 0x0 0x0 0x7ffe 0x7f9c", {"syscall": "clock_nanosleep"}),
        ("45 0x5 0x7f 0x1 0x0 0x0 0x0 0x7ffe 0x7f9c", {"syscall": "recvfrom", "fd": 5}),
        ("0 0x1a 0x7f 0x1 0x0 0x0 0x0 0x7ffe 0x7f9c", {"syscall": "read", "fd": 26}),
        ("running", {"syscall": "running"}),
        ("-1 0x7ffe 0x7f9c", {"syscall": "none"}),
        ("", {}),
    ],
)
def test_parse_syscall_line_x86_64(line, expect):
    got = procfs.parse_syscall_line(line, machine="x86_64")
    assert {k: got[k] for k in expect} == expect


def test_measure_counts_the_states_sampled_in_the_window_as_node_does():
    """sample() + measure(first, states), the window's two looks apart: the share of
    runnable samples and the waits counted, samples of a gone moment left out."""
    first = evidence.sample(os.getpid())
    states = [
        {"state": "R", "wait": "running"},
        {"state": "S", "wait": "do_epoll_wait"},
        None,
        {"state": "R", "wait": "running"},
    ]
    ev = evidence.measure(first, states)
    assert ev["alive"] is True and ev["window_s"] >= 0
    assert ev["main_thread"]["runnable_fraction"] == 0.667
    assert ev["main_thread"]["wait_samples"] == {"running": 2, "do_epoll_wait": 1}
    assert "runnable_fraction" not in evidence.measure(evidence.sample(os.getpid()))["main_thread"]


def test_a_failure_in_the_window_keeps_what_the_first_look_read(monkeypatch):
    """collect() never raises; what sample() read survives a failure in measure()."""

    def broken(first, states=()):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(evidence, "measure", broken)
    ev = evidence.collect(os.getpid(), window_s=0.0)
    assert ev["alive"] is True and ev["status"] and ev["name"], ev
    assert ev["notes"][-1] == "evidence failed: RuntimeError: disk gone", ev
