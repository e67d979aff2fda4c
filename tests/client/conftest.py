"""Helpers for the client's end-to-end tests: real child processes, short timeouts.

Each test writes a small child script, launches it with the real bridge, waits on the job
(with a deadline, never a sleep) and checks the report against docs/report.schema.json and
that no process of the child's tree is left.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from trainbridge import bridge
from trainbridge.bridge import procfs

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCENARIOS = os.path.join(ROOT, "tests", "faults", "scenarios")
SCHEMA = json.load(open(os.path.join(ROOT, "docs", "report.schema.json"), encoding="ascii"))
WAIT_S = 30  # a generous upper bound: a test that needs it has failed anyway


def validate_report(report):
    """The report is ASCII JSON that matches the schema, and survives a JSON round trip."""
    import jsonschema

    from trainbridge.bridge.report_text import to_json

    text = to_json(report)
    assert text.isascii()
    jsonschema.validate(json.loads(text), SCHEMA)


def tree_pids(job):
    return set(job.tree.known) if job.tree is not None else {job.pid}


# The client SIGKILLs what is left of the tree as the job ends and does not wait for it:
# death is asynchronous (a loaded machine may take a while to run the exit). A process that
# lives this long after its SIGKILL is left behind.
GONE_WAIT_S = 3.0


def on_hub(hub, fn):
    """fn() run on the hub's I/O thread (where its state may be touched); its result."""
    box = []
    done = threading.Event()
    hub.call(lambda: (box.append(fn()), done.set()))
    assert done.wait(WAIT_S), "the hub's I/O thread did not answer"
    return box[0]


def assert_tree_gone(job):
    """Every process ever seen in the job's tree is gone (zombies of others count as gone)."""
    candidates = []
    for pid, created in job.tree.known.items():
        try:
            proc = psutil.Process(pid)
            if procfs.started(pid) == created:
                candidates.append(proc)
        except psutil.Error:
            pass
    deadline = time.monotonic() + GONE_WAIT_S
    left = []
    for proc in candidates:
        while True:
            try:
                running = proc.status() != psutil.STATUS_ZOMBIE
            except psutil.Error:
                running = False
            if not running:
                break
            if time.monotonic() > deadline:
                left.append(proc.pid)
                break
            time.sleep(0.01)  # polling the process's state, with a deadline
    assert not left, f"processes left behind {GONE_WAIT_S} s after the end: {left}"


# Every child script starts with wait_go(): it blocks until the test opens the gate (a file),
# so a child acts only after the client has seen what the test needs (hello, a stage...).
PRELUDE = """\
import os as _os, time as _time
def wait_go(timeout=20):
    path = _os.environ["TB_TEST_GO"]
    deadline = _time.monotonic() + timeout
    while not _os.path.exists(path):
        if _time.monotonic() > deadline:
            raise SystemExit("the test's gate never opened")
        _time.sleep(0.005)
"""


@pytest.fixture
def script(tmp_path):
    """script(code) -> path of a Python file holding the dedented code (after PRELUDE)."""
    counter = [0]

    def make(code, name=None):
        counter[0] += 1
        path = tmp_path / (name or f"child{counter[0]}.py")
        path.write_text(PRELUDE + textwrap.dedent(code), encoding="utf-8")
        return str(path)

    return make


def opens_gate(path, when):
    """An on_event callback that creates the gate file once when(event) is true."""

    def on_event(event):
        if not os.path.exists(path) and when(event):
            open(path, "w").close()

    return on_event


def message(kind, **fields):
    """A predicate: a worker message of this kind whose body has these fields."""

    def match(event):
        return (
            event["event"] == "message"
            and event["kind"] == kind
            and all(event["body"].get(k) == v for k, v in fields.items())
        )

    return match


def wait_for_report(job, moving=None):
    """The job's report, waited for WAIT_S, and for WAIT_S more each time `moving()` (a count
    that grows while the job works) grew during the last wait: a loaded machine takes longer
    to move a big job through (200,000 records once took more than 30 s beside two CPU
    loops and the rest of the suite), and a job that stopped moving fails within WAIT_S.
    None when it did not end."""
    count = moving() if moving is not None else None
    while True:
        report = job.wait(WAIT_S)
        if report is not None or moving is None:
            return report
        now = moving()
        if now == count:
            return None
        count = now


@pytest.fixture
def run(script):
    """run(code, **launch options) -> (job, report): launch a Python child (`code`, or
    scenario="name.py" of tests/faults/scenarios), wait for the end, check the report's schema
    and that the tree is gone. moving: a count the test sees grow while the job works (records
    received): the wait goes on while it grows (wait_for_report)."""

    def go(code, args=(), go_when=None, scenario=None, moving=None, **options):
        gate = os.path.join(os.path.dirname(script("")), "go")
        if go_when is None:
            open(gate, "w").close()
        else:
            options["on_event"] = opens_gate(gate, go_when)
        options["env"] = {**os.environ, **options.get("env", {}), "TB_TEST_GO": gate}
        options.setdefault("startup_timeout", 20)
        options.setdefault("heartbeat_timeout", 5)
        options.setdefault("kill_grace", 1)
        options.setdefault("zero_code", False)  # the scripts import worker themselves
        # A scenario of tests/faults/scenarios (shared with the Node tests), or code here.
        path = os.path.join(SCENARIOS, scenario) if scenario else script(code)
        job = bridge.launch([sys.executable, path, *args], cwd=ROOT, **options)
        report = wait_for_report(job, moving)
        assert report is not None, f"no report within {WAIT_S} s; state {job.state}" + (
            f"; the count had not grown in the last {WAIT_S} s: {moving()}" if moving else ""
        )
        validate_report(report)
        assert_tree_gone(job)
        return job, report

    return go


@pytest.fixture
def sleeping_python():
    """A real Python process asleep in time.sleep: it says it is about to sleep, and is
    given once the kernel shows it in the sleep (its wchan), not between its print and its
    sleep. For a part of the Job that reads /proc. Killed and reaped after the test."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while "nanosleep" not in (_read(f"/proc/{child.pid}/wchan") or ""):
            assert time.monotonic() < deadline, "the child never went to sleep"
            time.sleep(0.005)  # polling /proc: the kernel says nothing when it gets there
        yield child
    finally:
        child.kill()
        child.wait(10)
        child.stdout.close()


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None
