"""The hang rules one at a time (bridge/diagnosis_hang_rules.py): each rule of KERNEL_RULES,
STACK_RULES and HANG_RULES on the smallest facts that make it name its kind, and on facts it
must pass over; then the order of the tables where two rules both match. The whole verdicts
(facts in, summary and hint out) are the vectors' (test_vectors.py)."""

from __future__ import annotations

import dataclasses

import pytest

from trainbridge.bridge import diagnosis_hang
from trainbridge.bridge import diagnosis_hang_rules as h

RULES = {r.__name__: r for table in (h.KERNEL_RULES, h.STACK_RULES, h.HANG_RULES) for r in table}


def wait(**kw):
    """A main thread waiting on nothing in particular, with kw changed."""
    base = dict(
        evidence={"pid": 100},
        status="sleeping",
        syscall="",
        wchan="",
        target="",
        cpu=0.0,
        spinning=False,
    )
    return h.MainWait(**{**base, **kw})


def top(function, path="/job/train.py", files=None):
    inner = {"file": path, "line": 3, "function": function}
    return h.StackTop(function=function, path=path, files=files or path, inner=inner)


def seen(**kw):
    base = dict(
        reason="stall",
        frames=[],
        evidence={"pid": 100},
        saw_hello=True,
        loaded=True,
        python_silent=False,
        kernel=None,
        stack=None,
    )
    return h.Seen(**{**base, **kw})


CHILD = {"pid": 201, "status": "sleeping"}
LIVE_SOCKET = {"fd": 5, "raddr": ["10.0.0.1", 443], "status": "ESTABLISHED"}

# (rule, facts it names a kind on, that kind, facts it passes over)
CASES = [
    ("process_stopped", wait(status="stopped"), "stopped", wait(status="sleeping")),
    (
        "gpu_busy",
        wait(evidence={"gpu": [{"util_percent": 90}]}),
        "gpu_busy",
        wait(evidence={"gpu": [{"util_percent": 90, "used_by_job": False}]}),
    ),
    ("disk_sleep", wait(status="disk-sleep"), "io_wait", wait(wchan="do_sys_poll")),
    ("spins", wait(spinning=True), "cpu_bound", wait(cpu=0.9)),
    ("waits_for_child", wait(syscall="wait4"), "child_wait", wait(syscall="read")),
    ("sleeps", wait(wchan="hrtimer_nanosleep"), "sleeping", wait(wchan="futex_wait_queue")),
    ("futex", wait(wchan="futex_wait_queue"), "lock_wait", wait(syscall="nanosleep")),
    (
        "local_socket_to_own_tree",
        wait(wchan="unix_stream_read_generic", evidence={"children": [CHILD]}),
        "child_wait",
        wait(wchan="unix_stream_read_generic"),  # a local socket to another program
    ),
    ("network_socket", wait(target="socket:[812]"), "network_wait", wait(target="/data/a.bin")),
    ("pipe", wait(target="pipe:[9]", evidence={"children": [CHILD]}), "child_wait", wait()),
    ("pipe", wait(target="pipe:[9]"), "io_wait", wait(target="/dev/null")),
    (
        "poll",
        wait(syscall="poll", evidence={"main_thread": {"fd": 5}, "sockets": [LIVE_SOCKET]}),
        "network_wait",
        wait(syscall="read"),
    ),
    ("poll", wait(syscall="poll", evidence={"children": [CHILD]}), "child_wait", wait()),
    ("poll", wait(wchan="ep_poll"), "io_wait", wait(wchan="do_wait")),
    ("reads_a_file", wait(syscall="read", target="/data/a.bin"), "io_wait", wait(syscall="read")),
    (
        "moves_bytes",
        wait(evidence={"io_delta": {"read_bytes": 1 << 20}}),
        "io_wait",
        wait(evidence={"io_delta": {"read_bytes": (1 << 20) - 1}}),
    ),
    ("busy_cpu", wait(cpu=0.5), "cpu_bound", wait(cpu=0.49)),
    ("sleep_call", top("sleep"), "sleeping", top("sleepy")),
    (
        "child_call",
        top("_recv_bytes", "/usr/lib/python3.11/multiprocessing/connection.py"),
        "child_wait",
        top("_recv_bytes", "/job/train.py"),
    ),
    (
        "child_call",
        top("select", "/usr/lib/python3.11/selectors.py", "multiprocessing/connection.py"),
        "child_wait",
        top("select", "/usr/lib/python3.11/selectors.py"),  # no child file near it
    ),
    ("network_call", top("readinto", "/usr/lib/python3.11/socket.py"), "network_wait", top("f")),
    ("network_call", top("getaddrinfo"), "network_wait", top("getattr")),
    ("lock_call", top("acquire"), "lock_wait", top("acquire", "/site-packages/x/y.py")),
    ("lock_call", top("get", "/usr/lib/python3.11/queue.py"), "lock_wait", top("put_nowait")),
    ("stopped", seen(kernel="stopped"), "stopped", seen(kernel="sleeping")),
    ("beacon_silent", seen(reason="heartbeat"), "gil_held", seen(reason="stall")),
    (
        "beacon_silent",
        seen(python_silent=True),
        "gil_held",
        seen(python_silent=True, saw_hello=False, loaded=False),
    ),
    (
        "beacon_silent",
        seen(reason="heartbeat", saw_hello=False, loaded=True),
        "gil_held",
        seen(reason="heartbeat", evidence={"alive": False}),  # a dead process holds nothing
    ),
    (
        "importing",
        seen(
            frames=[
                {"file": "<frozen importlib._bootstrap>", "line": 1, "function": "_load"},
                {"file": "/job/slow_mod.py", "line": 2, "function": "<module>"},
            ]
        ),
        "import_hang",
        seen(frames=[{"file": "/job/train.py", "line": 2, "function": "<module>"}]),
    ),
    (
        "never_said_hello",
        seen(reason="startup", saw_hello=False),
        "startup",
        seen(reason="startup", saw_hello=True),
    ),
    (
        "file_lock_held",
        seen(
            evidence={"file_locks": [{"path": "/c/x.lock", "blocked": True}]}, kernel="child_wait"
        ),
        "file_lock_wait",
        # polling a lock while waiting on a child: the child is the wait, not the lock
        seen(evidence={"file_locks": [{"path": "/c/x.lock"}]}, kernel="child_wait"),
    ),
    (
        "stack_names_the_futex",
        seen(kernel="lock_wait", stack="network_wait"),
        "network_wait",
        seen(kernel="lock_wait", stack="lock_wait"),
    ),
    (
        "stack_names_the_poll",
        seen(kernel="child_wait", stack="network_wait"),
        "network_wait",
        seen(kernel="child_wait", stack="sleeping"),
    ),
    (
        "stack_names_the_poll",
        seen(kernel="io_wait", stack="child_wait"),
        "child_wait",
        seen(kernel="child_wait", stack="child_wait"),
    ),
    ("kernel_decides", seen(kernel="sleeping", stack="lock_wait"), "sleeping", seen()),
    ("stack_decides", seen(stack="lock_wait"), "lock_wait", seen()),
]


@pytest.mark.parametrize(
    "name,matches,kind,passes", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_alone(name, matches, kind, passes):
    rule = RULES[name]
    assert rule(matches) == kind
    assert rule(passes) is None


def test_every_rule_has_a_case():
    assert set(RULES) == {c[0] for c in CASES}


def first(table, facts):
    return next(r.__name__ for r in table if r(facts) is not None)


def test_the_order_decides_between_rules_that_both_match():
    # stopped wins over everything the stopped process still shows
    both = wait(
        status="stopped",
        spinning=True,
        wchan="futex_wait_queue",
        evidence={"gpu": [{"util_percent": 95}]},
    )
    assert first(h.KERNEL_RULES, both) == "process_stopped"
    # a busy GPU over a main thread that spins feeding it
    assert (
        first(h.KERNEL_RULES, wait(evidence={"gpu": [{"util_percent": 95}]}, spinning=True))
        == "gpu_busy"
    )
    # a thread that spins is computing, whatever syscall the one read at the end caught
    assert first(h.KERNEL_RULES, wait(spinning=True, syscall="futex")) == "spins"
    # a socketpair into the job's own tree is a child, before any socket wait
    into_tree = wait(
        wchan="unix_stream_read_generic", target="socket:[3]", evidence={"children": [CHILD]}
    )
    assert first(h.KERNEL_RULES, into_tree) == "local_socket_to_own_tree"
    # time.sleep inside a child wait's file is a sleep
    assert first(h.STACK_RULES, top("sleep", "/usr/lib/python3.11/subprocess.py")) == "sleep_call"
    # a multiprocessing recv is a child before it is a network receive
    assert first(h.STACK_RULES, top("recv", "/x/multiprocessing/connection.py")) == "child_call"
    # the GIL holder's hang is not its import's, nor its stack's
    held = seen(
        reason="heartbeat",
        kernel="lock_wait",
        stack="network_wait",
        frames=[{"file": "<frozen importlib._bootstrap>", "line": 1, "function": "_load"}],
    )
    assert first(h.HANG_RULES, held) == "beacon_silent"
    assert h.hang_kind(dataclasses.replace(held, kernel="stopped")) == "stopped"


def test_no_rule_matches_unknown():
    assert h.hang_kind(seen()) == "unknown"
    assert h.hang_kind(h.see("stall", [], {"pid": 100, "alive": False})) == "unknown"


def test_every_kind_has_words_and_only_kinds_do():
    assert set(diagnosis_hang.WORDS) == set(diagnosis_hang.HANG_KINDS)
    rule_kinds = {c[2] for c in CASES} | {"unknown"}
    assert rule_kinds == set(diagnosis_hang.HANG_KINDS)
