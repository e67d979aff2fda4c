"""The supervisor reads processes and sockets from /proc (bridge/procfs.py, bridge/sockets.py),
without psutil; its values are psutil's where callers and stored values depend on them (state
words, names, command lines, counters, descendants, sockets; a start time is psutil's less the
boot time). Checked here against psutil, a test dependency, on live processes."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from trainbridge.bridge import launcher, procfs, procs, sockets

DEADLINE_S = 10.0


def spawn(code: str, *args: str) -> subprocess.Popen:
    """A python child that prints 'ready' once it has set itself up, then sleeps."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    return proc


def kill_tree(parent: subprocess.Popen) -> None:
    """SIGKILL everything below `parent`, then `parent` (a test's processes, whatever happened)."""
    for pid in procfs.all_descendants(parent.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    parent.kill()
    parent.wait()


def wait_state(pid: int, word: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while procfs.state_word(pid) != word:
        assert time.monotonic() < deadline, f"pid {pid} never {word}"
        time.sleep(0.01)  # polling the process's state, with a deadline


def test_a_process_reads_as_psutil_reads_it():
    child = spawn(
        """
        import sys, time
        print("ready", flush=True)
        time.sleep(60)
        """,
        "an argument with spaces",
        "é",
    )
    try:
        wait_state(child.pid, "sleeping")
        p = psutil.Process(child.pid)
        # psutil's create_time less the boot time it added: the start after boot
        after_boot = p.create_time() - psutil.boot_time()
        assert procfs.started(child.pid) == pytest.approx(after_boot, abs=1e-6)
        assert procs.process_start(child.pid) == procfs.started(child.pid)
        assert procfs.process_name(child.pid) == p.name()
        assert procfs.cmdline(child.pid) == p.cmdline()
        assert procfs.state_word(child.pid) == p.status() == "sleeping"
        assert procfs.num_threads(child.pid) == p.num_threads()
        assert procfs.rss_bytes(child.pid) == p.memory_info().rss
        times = p.cpu_times()
        assert procfs.cpu_seconds(child.pid) == pytest.approx(times.user + times.system, abs=0.011)
        io = p.io_counters()
        assert procfs.io_counters(child.pid) == {
            "read_bytes": io.read_bytes,
            "write_bytes": io.write_bytes,
            "rchar": io.read_chars,
            "wchar": io.write_chars,
        }
        # stopped, then a zombie: gone for the pid-reuse checks, still there for the evidence
        os.kill(child.pid, signal.SIGSTOP)
        wait_state(child.pid, "stopped")
        assert p.status() == "stopped"
        os.kill(child.pid, signal.SIGKILL)
        wait_state(child.pid, "zombie")
        assert p.status() == "zombie"
        assert procfs.started(child.pid) == pytest.approx(after_boot, abs=1e-6)
        assert procfs.running_since(child.pid) is None
        assert procs.process_start(child.pid) is None
    finally:
        child.kill()
        child.wait()
    for read in (procfs.started, procfs.state_word, procfs.cmdline, procfs.io_counters):
        assert read(child.pid) is None  # reaped: gone, never an exception


def test_a_long_name_is_completed_from_the_command_line_as_psutil_does(tmp_path):
    program = tmp_path / "a-rather-long-program-name"
    program.symlink_to(sys.executable)
    child = spawn('print("ready", flush=True); import time; time.sleep(60)')
    long = subprocess.Popen(
        [str(program), "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert long.stdout is not None and long.stdout.readline().strip() == b"ready"
        for pid in (child.pid, long.pid):
            assert procfs.process_name(pid) == psutil.Process(pid).name()
    finally:
        for p in (child, long):
            p.kill()
            p.wait()


def test_descendants_are_psutils_children_zombies_included():
    parent = spawn(
        """
        import os, subprocess, sys, time
        sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
        kids = [subprocess.Popen(sleep) for _ in range(2)]
        inner = subprocess.Popen([sys.executable, "-c",
            "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(60)", *sleep])
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        while open(f"/proc/{dead.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    try:
        expected = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(expected) < 5 and time.monotonic() < deadline:  # the inner one's child
            expected = {c.pid for c in psutil.Process(parent.pid).children(recursive=True)}
            time.sleep(0.01)  # polling the tree, with a deadline
        found = procfs.all_descendants(parent.pid)
        assert len(expected) == 5 and set(found) == expected
        assert len(found) == len(set(found))
        assert sum(procfs.state_word(pid) == "zombie" for pid in found) == 1
        assert procfs.all_descendants(2**22 + 1) == []  # no such process
    finally:
        kill_tree(parent)


def test_the_tree_knows_start_times_psutil_agrees_with():
    parent = spawn(
        """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    try:
        tree = launcher.Tree(parent.pid)
        deadline = time.monotonic() + DEADLINE_S
        while len(tree.known) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling the tree, with a deadline
            tree.refresh()
        assert len(tree.known) == 2
        for pid, created in tree.known.items():
            assert procfs.started(pid) == created
        alive = tree.alive()
        assert sorted(p.pid for p in alive) == sorted(tree.known)
        assert [p.pid for p in tree.alive(include_root=False)] == [
            pid for pid in tree.known if pid != parent.pid
        ]
        created = tree.known[parent.pid]
        tree.known[parent.pid] = created - 1.0  # as if the pid were reused by another process
        assert parent.pid not in [p.pid for p in tree.alive()]
        tree.known[parent.pid] = created
        assert tree.signal(signal.SIGKILL) >= 1
        parent.wait()
        deadline = time.monotonic() + DEADLINE_S
        while tree.alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # death is asynchronous
        assert tree.alive() == []
    finally:
        parent.kill()
        parent.wait()


def _psutil_sockets(pid: int) -> set:
    return {
        (
            c.fd,
            "tcp" if c.type == socket.SOCK_STREAM else "udp",
            tuple(c.laddr) or None,
            tuple(c.raddr) or None,
            c.status,
        )
        for c in psutil.Process(pid).net_connections(kind="inet")
    }


def _ours(found: list) -> set:
    return {
        (
            s["fd"],
            s["type"],
            tuple(s["laddr"]) if s["laddr"] else None,
            tuple(s["raddr"]) if s["raddr"] else None,
            s["status"],
        )
        for s in found
    }


def test_inet_sockets_are_psutils_net_connections():
    held = []
    try:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        unbound = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        held += [server, client, accepted, udp, unbound]
        if socket.has_ipv6:
            try:
                server6 = socket.socket(socket.AF_INET6)
                server6.bind(("::1", 0))
            except OSError:
                pass  # no IPv6 here
            else:
                server6.listen(1)
                client6 = socket.create_connection(server6.getsockname()[:2])
                mapped = socket.socket(socket.AF_INET6)
                mapped.connect(("::ffff:127.0.0.1", server.getsockname()[1]))
                held += [server6, client6, mapped]
        notes: list = []
        found = sockets.inet_sockets([os.getpid()], notes)
        assert notes == []
        assert all(s["pid"] == os.getpid() for s in found)
        assert _ours(found) == _psutil_sockets(os.getpid())
        mine = {s["fd"]: s for s in found}
        assert mine[client.fileno()]["raddr"] == list(server.getsockname())
        assert mine[client.fileno()]["status"] == "ESTABLISHED"
        assert mine[server.fileno()]["status"] == "LISTEN"
        assert mine[udp.fileno()]["status"] == "NONE"
        # the other end of a loopback connection, as psutil's machine-wide table names it
        local = [mine[client.fileno()]]
        sockets.add_loopback_peers(local, [os.getpid()], notes)
        assert local[0]["peer"]["pid"] == os.getpid() and local[0]["peer"]["in_job"]
    finally:
        for s in held:
            s.close()


def test_sockets_of_a_gone_process_are_a_note():
    notes: list = []
    assert sockets.inet_sockets([2**22 + 1], notes) == []
    assert notes and "not readable" in notes[0]


@pytest.mark.parametrize(
    "text, family, expect",
    [
        ("0100007F:1F90", socket.AF_INET, ["127.0.0.1", 8080]),
        ("00000000:0000", socket.AF_INET, None),
        ("00000000000000000000000001000000:0016", socket.AF_INET6, ["::1", 22]),
        ("0000000000000000FFFF00000100007F:9E49", socket.AF_INET6, ["::ffff:127.0.0.1", 40521]),
        ("nonsense", socket.AF_INET, None),
        ("0100:0016", socket.AF_INET, None),
    ],
)
def test_decode_address(text, family, expect):
    if sys.byteorder != "little":
        pytest.skip("the vectors are a little-endian machine's")
    assert sockets.decode_address(text, family) == expect


def test_forked_copies_are_the_forks_that_kept_the_handler():
    """The hang's SIGUSR1 goes to a DataLoader's fork workers too: the children that fork()
    copied (their parent's command line) and that still catch the signal; not a child that
    exec'd another program, not a fork that reset the handler, not a pid that said hello."""
    parent = spawn(
        """
        import os, signal, subprocess, sys, time
        signal.signal(signal.SIGUSR1, lambda *a: None)
        def fork(reset):
            pid = os.fork()
            if pid == 0:
                if reset:
                    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
                time.sleep(60)
                os._exit(0)
            return pid
        kept, reset, hello = fork(False), fork(True), fork(False)
        other = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGUSR1, lambda *a: None); time.sleep(60)"])
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    try:
        kids = sorted(procfs.all_descendants(parent.pid))
        assert len(kids) == 4
        line = " ".join(procfs.cmdline(parent.pid) or [])
        forks = [k for k in kids if " ".join(procfs.cmdline(k) or []) == line]
        assert len(forks) == 3
        deadline = time.monotonic() + DEADLINE_S
        while True:  # the reset fork has run its signal() call
            catching = [k for k in forks if procfs.catches(k, signal.SIGUSR1)]
            if len(catching) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.01)  # polling the children's handlers, with a deadline
        assert len(catching) == 2
        found = procfs.forked_copies([parent.pid], signal.SIGUSR1, exclude={catching[1]})
        assert found == [catching[0]]
        assert procfs.forked_copies([], signal.SIGUSR1, set()) == []
    finally:
        kill_tree(parent)
