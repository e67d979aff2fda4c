"""`trainbridge run --transparent -- CMD` as a drop-in under an existing integration: the
caller sees what it would see running CMD itself.

Every test compares the wrapper with the bare command where that is the claim: the same
bytes on stdout and stderr, the same exit, stdin passed through."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.client.conftest import ROOT, validate_report

WAIT_S = 60
GBK = "\u4e2d\u6587 \u8bad\u7ec3".encode("gbk")  # not valid UTF-8


def caller_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRAINBRIDGE_"))}
    env.update(extra)
    return env


def wrapped(code, *options):
    return [
        sys.executable,
        "-m",
        "trainbridge",
        "run",
        "--transparent",
        *options,
        "--",
        sys.executable,
        "-c",
        code,
    ]


def bare(code):
    return [sys.executable, "-c", code]


def both(code, stdin=b"", env=None):
    """(bare result, wrapped result) of the same command with the same stdin."""
    env = env or caller_env()
    return [
        subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=ROOT, timeout=WAIT_S)
        for cmd in (bare(code), wrapped(code))
    ]


WRITES = r"""
import sys, os
out = sys.stdout.buffer
out.write(b"prompt> 10%\r")
out.write(b"line one\r\nline two\n")
out.write(bytes(range(256)))
out.write(b"\n" + GBK + b"\n")
out.flush()
sys.stderr.buffer.write(b"warning: partial")
sys.stderr.flush()
out.write(b"no trailing newline")
"""


def test_stdout_and_stderr_are_the_childs_bytes_exactly(tmp_path):
    code = f"GBK = {GBK!r}\n" + WRITES
    report = tmp_path / "report.json"
    plain, wrap = both(code)
    assert plain.returncode == 0, plain.stderr
    assert wrap.stdout == plain.stdout  # \r, \r\n, 256 binary bytes, GBK, no final newline
    assert wrap.stderr == plain.stderr == b"warning: partial"  # nothing of trainbridge's own
    assert wrap.returncode == 0
    # ... while the same bytes are still lines for the report
    log = tmp_path / "out.log"
    done = subprocess.run(
        wrapped(code, "--report", str(report), "--log", str(log)),
        capture_output=True,
        env=caller_env(),
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.stdout == plain.stdout
    logged = log.read_text(encoding="utf-8").splitlines()
    assert "prompt> 10%" in logged and "line one" in logged and "warning: partial" in logged
    assert "\u4e2d\u6587 \u8bad\u7ec3" in logged  # a GBK line, decoded for the log
    data = json.loads(report.read_text(encoding="ascii"))
    validate_report(data)
    assert data["outcome"] == "succeeded"
    # (stdout's and stderr's last lines both end at EOF: in either order)
    assert any(line.endswith("no trailing newline") for line in data["log_tail"][-2:])
    assert any(line.startswith("line two") for line in data["log_tail"])


def test_stdin_is_passed_through_including_eof():
    code = "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(b'[%d]' % len(d) + d)"
    data = bytes(range(256)) + b"\r\nlast line, no newline"
    plain, wrap = both(code, stdin=data)
    assert wrap.stdout == plain.stdout == b"[%d]" % len(data) + data
    # python - <<EOF: the program itself comes on stdin
    done = subprocess.run(
        [sys.executable, "-m", "trainbridge", "run", "--transparent", "--", sys.executable, "-"],
        input=b"print('from stdin', 6 * 7)\n",
        capture_output=True,
        env=caller_env(),
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.stdout == b"from stdin 42\n" and done.stderr == b""


def test_a_prompt_without_newline_reaches_the_caller_before_the_answer():
    code = (
        "import sys\nsys.stdout.write('name? '); sys.stdout.flush()\n"
        "name = sys.stdin.readline().strip()\nprint('hello ' + name)\n"
    )
    proc = subprocess.Popen(
        wrapped(code),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=caller_env(),
        cwd=ROOT,
    )
    try:
        # The partial line must arrive while the child waits for its answer.
        assert os.read(proc.stdout.fileno(), 6) == b"name? "
        proc.stdin.write(b"ada\n")
        proc.stdin.close()
        assert proc.stdout.read() == b"hello ada\n"
        assert proc.wait(WAIT_S) == 0
        assert proc.stderr.read() == b""
    finally:
        proc.kill()
        proc.wait()


def test_the_environment_is_the_callers_plus_trainbridges_only():
    code = (
        "import os, json; print(json.dumps({k: v for k, v in os.environ.items()"
        " if k.startswith(('PYTHON', 'TRAINBRIDGE_', 'MY_'))}))"
    )
    env = caller_env(PYTHONIOENCODING="latin-1", MY_SETTING="1")
    plain, wrap = both(code, env=env)
    seen_bare, seen = json.loads(plain.stdout), json.loads(wrap.stdout)
    added = {k: v for k, v in seen.items() if k not in seen_bare or seen_bare[k] != v}
    assert seen["PYTHONIOENCODING"] == "latin-1" and seen["MY_SETTING"] == "1"
    for name in ("PYTHONUNBUFFERED", "PYTHONUTF8", "PYTHONFAULTHANDLER"):
        assert name not in seen
    assert set(added) - {"PYTHONPATH"} == {k for k in added if k.startswith("TRAINBRIDGE_")}
    assert seen["PYTHONPATH"].endswith(os.path.join("bridge", "inject"))


@pytest.mark.parametrize(
    "code, sig",
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", signal.SIGKILL),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", signal.SIGTERM),
    ],
)
def test_a_child_killed_by_a_signal_kills_the_wrapper_with_it(code, sig):
    plain, wrap = both(code)
    assert plain.returncode == wrap.returncode == -sig  # a signal, not 128+N


def test_exit_status_is_the_childs_own():
    plain, wrap = both("import sys; print('bye'); sys.exit(3)")
    assert wrap.returncode == plain.returncode == 3 and wrap.stdout == b"bye\n"
    plain, wrap = both("raise ValueError('boom')")
    assert wrap.returncode == plain.returncode == 1
    assert wrap.stderr == plain.stderr  # the traceback's last line is still the last line


# The child counts the signals it gets; after the first it watches a while for a second
# (an absence can only be observed over a window) and then exits with its own status.
COUNTER = r"""
import os, signal, sys, time
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda n, f: got.append(signal.Signals(n).name))
{hello}
print("ready", flush=True)
deadline = time.monotonic() + 20
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
window = time.monotonic() + 1.0
while time.monotonic() < window:
    time.sleep(0.01)
print(",".join(got), flush=True)
sys.exit(40 + len(got))
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("when", ["before_hello", "after_hello"])
@pytest.mark.parametrize("target", ["pid", "group"])
def test_a_signal_to_the_wrapper_reaches_the_child_exactly_once(sig, when, target):
    hello = (
        "from trainbridge import worker\nwith worker.stage('ready'): pass"
        if when == "after_hello"
        else ""
    )
    proc = subprocess.Popen(
        wrapped(COUNTER.format(hello=hello)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=caller_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline() == b"ready\n"
        if target == "pid":
            os.kill(proc.pid, sig)
        else:  # e.g. a scheduler ending the job's group: the wrapper's group, not the child's
            os.killpg(proc.pid, sig)
        out = proc.stdout.read()
        assert out == signal.Signals(sig).name.encode() + b"\n"
        assert proc.wait(WAIT_S) == 41  # the child's own status after handling it once
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_own_exit_code_after_a_cancel_and_nothing_left_behind(tmp_path):
    pidfile = tmp_path / "pid"
    code = (
        f"import os, signal, sys, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\ntime.sleep(30)\n"
    )
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        wrapped(code, "--report", str(report)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=caller_env(),
        cwd=ROOT,
    )
    assert proc.stdout.readline() == b"ready\n"
    proc.terminate()
    assert proc.wait(WAIT_S) == 7
    assert proc.stdout.read() == b"" and proc.stderr.read() == b""
    data = json.loads(report.read_text(encoding="ascii"))
    assert data["exit_code"] == 7
    # The user's SIGTERM stopped it: cancelled (not failed by its exit 7), by that signal.
    assert data["outcome"] == "cancelled" and data["error"] is None, data["summary"]
    assert data["cancel"]["by"] == "signal" and data["cancel"]["signal"] == "SIGTERM"
    assert "forwarded" in data["cancel"]["reason"]
    validate_report(data)
    child = int(pidfile.read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("hello", [False, True])
def test_ctrl_c_forwarded_is_a_cancel_and_the_wrapper_dies_by_it(tmp_path, hello):
    """SIGINT to the wrapper: the child's KeyboardInterrupt kills it by SIGINT, the wrapper
    dies the same way, and the report says cancelled by that signal, where it stopped."""
    code = (
        ("from trainbridge import worker\nwith worker.stage('ready'): pass\n" if hello else "")
        # 'ready' from inside train(): the signal follows the line at once, and the test
        # asserts where the script was stopped.
        + "import time\ndef train():\n    print('ready', flush=True)\n    time.sleep(30)\ntrain()\n"
    )
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        wrapped(code, "--report", str(report)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=caller_env(),
        cwd=ROOT,
        start_new_session=True,  # not the test's terminal group
    )
    try:
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(WAIT_S) == -signal.SIGINT
        assert b"KeyboardInterrupt" in proc.stderr.read()  # the child's own, passed through
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    data = json.loads(report.read_text(encoding="ascii"))
    validate_report(data)
    assert data["outcome"] == "cancelled", data["summary"]
    assert data["cancel"]["by"] == "signal" and data["cancel"]["signal"] == "SIGINT"
    assert data["error"] is None  # the user's stop is not an error
    if hello:  # the worker saw the KeyboardInterrupt: where the script was stopped
        assert "in train" in data["cancel"]["traceback"]


def test_a_reader_that_goes_away_gives_the_child_a_broken_pipe():
    code = "import sys, time\nfor i in range(100000):\n    print('x' * 100, flush=True)\n"
    plain = subprocess.Popen(
        bare(code), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=caller_env()
    )
    wrap = subprocess.Popen(
        wrapped(code),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=caller_env(),
        cwd=ROOT,
    )
    for proc in (plain, wrap):
        proc.stdout.readline()
        proc.stdout.close()  # the reader is gone
    plain_rc, wrap_rc = plain.wait(WAIT_S), wrap.wait(WAIT_S)
    assert plain_rc == wrap_rc == 120  # BrokenPipeError at exit, as Python reports it
    assert b"BrokenPipeError" in plain.stderr.read() and b"BrokenPipeError" in wrap.stderr.read()


def test_verdict_on_stderr_only_when_asked():
    done = subprocess.run(
        wrapped("print('hi')", "--verdict"),
        capture_output=True,
        env=caller_env(),
        cwd=ROOT,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout == b"hi\n"
    assert done.stderr.startswith(b"trainbridge: ") and b"succeeded" in done.stderr


def test_a_missing_command_exits_like_a_shell():
    done = subprocess.run(
        [sys.executable, "-m", "trainbridge", "run", "--transparent", "--", "/nonexistent/python3"],
        capture_output=True,
        env=caller_env(),
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.returncode == 127 and done.stdout == b""
    assert b"could not start" in done.stderr


def test_startup_cost_is_measured_in_benchmarks():
    # The number itself is machine-dependent (benchmarks/bench_transparent.py reports it
    # against bare python); here: the wrapper spawns before importing zmq or psutil.
    code = (
        "import sys; from trainbridge.bridge import cli\n"
        "argv = ['run', '--transparent', '--', sys.executable, '-c', 'pass']\n"
        "cli.build_parser(light=cli._transparent_run(argv)).parse_args(argv)\n"
        "print(sorted(m for m in ('zmq', 'psutil', 'msgpack', 'rich') if m in sys.modules))"
    )
    done = subprocess.run(
        bare(code), capture_output=True, env=caller_env(), cwd=ROOT, timeout=WAIT_S
    )
    assert done.stdout == b"[]\n", done.stderr


def test_ctrl_c_at_a_terminal_reaches_the_child_once_and_it_can_read_the_terminal():
    """In a terminal's foreground group the child stays in the wrapper's group (it may read
    the terminal); Ctrl-C reaches it from the terminal, and the wrapper does not add one."""
    import pty

    code = COUNTER.format(hello="name = input('name? ')\nprint('hi', name)")
    pid, master = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its controlling terminal
        try:
            os.execve(sys.executable, wrapped(code), caller_env())
        finally:
            os._exit(99)
    seen = b""
    try:

        def read_until(marker):
            nonlocal seen
            deadline = time.monotonic() + WAIT_S
            while marker not in seen:
                assert time.monotonic() < deadline, seen
                try:
                    seen += os.read(master, 1024)
                except OSError:
                    break

        read_until(b"name? ")
        os.write(master, b"ada\n")
        read_until(b"ready")
        os.write(master, b"\x03")  # Ctrl-C: SIGINT from the terminal to the foreground group
        read_until(b"SIGINT")
        read_until(b"\n")  # the rest of the child's report line
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 41, seen
        assert b"hi ada" in seen and b"SIGINT,SIGINT" not in seen
    finally:
        os.close(master)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def test_a_child_in_the_callers_group_is_never_signalled_through_that_group():
    """The terminal case without a terminal: a child that shares the wrapper's group (its
    tree has no group of its own) is stopped process by process, not with killpg."""
    import subprocess as sp

    from trainbridge.bridge import launcher

    proc = sp.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # our group
    try:
        tree = launcher.Tree(proc.pid)
        assert tree.pgid is None
        assert tree.signal(signal.SIGTERM) == 1  # the child itself, not our group
        assert proc.wait(WAIT_S) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_json_events_cannot_share_the_childs_stdout():
    done = subprocess.run(
        wrapped("print('x')", "--json"),
        capture_output=True,
        env=caller_env(),
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.returncode == 2 and done.stdout == b"" and b"--report" in done.stderr


def test_an_unwritable_log_stops_before_the_command_runs(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')"
    done = subprocess.run(
        wrapped(code, "--log", str(tmp_path / "no" / "such" / "dir.log")),
        capture_output=True,
        env=caller_env(),
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.returncode == 125 and b"cannot write the log file" in done.stderr
    assert not marker.exists() and done.stdout == b""


def test_no_zero_code_leaves_pythonpath_alone():
    code = "import os; print(os.environ.get('PYTHONPATH'))"
    done = subprocess.run(
        wrapped(code, "--no-zero-code", "--startup-timeout", "0"),
        capture_output=True,
        env=caller_env(PYTHONPATH="/x"),
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.stdout == b"/x\n" and done.returncode == 0


def test_a_runtime_path_too_long_for_ipc_supervises_over_tcp(tmp_path):
    """A TMPDIR whose socket path would pass sun_path's 108 bytes: the hub binds tcp before
    the command starts, and the command's worker still reaches it (its progress and stage are
    in the report), with the same bytes on stdout as bare."""
    long_dir = tmp_path / ("d" * 100)
    long_dir.mkdir()
    code = (
        "from trainbridge import worker\n"
        "with worker.stage('work'):\n"
        "    for i in range(3):\n"
        "        worker.progress(i + 1, 3)\n"
        "print('done')\n"
    )
    report_path = tmp_path / "report.json"
    env = caller_env(TMPDIR=str(long_dir), PYTHONPATH=ROOT)
    env.pop("XDG_RUNTIME_DIR", None)
    done = subprocess.run(
        wrapped(code, "--report", str(report_path)), capture_output=True, env=env, cwd=ROOT,
        timeout=WAIT_S,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, b"done\n", b""), done
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "succeeded" and report["progress"]["step"] == 3, report
    assert [s["name"] for s in report["stages"]][-1] == "work", report["stages"]
    assert os.listdir(long_dir) == []  # its runtime directory went with it
