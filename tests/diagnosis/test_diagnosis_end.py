"""The end rules one at a time (bridge/diagnosis_end.py): each rule of END_RULES on the
smallest facts that make it name its kind, and on facts it must pass over; then the order
where two rules both match. The whole verdicts (facts in, summary and hint out) are the
vectors' (test_vectors.py)."""

from __future__ import annotations

import pytest

from trainbridge.bridge import diagnosis_end as d

RULES = {r.__name__: r for r in d.END_RULES}

TB = [
    "Traceback (most recent call last):",
    '  File "/job/train.py", line 9, in <module>',
    "    main()",
    "ValueError: bad shape",
]
ERROR = {
    "type": "ValueError",
    "message": "bad shape",
    "frames": [{"file": "/job/train.py", "line": 9, "function": "<module>"}],
}
OOM = {"type": "OutOfMemoryError", "message": "CUDA out of memory. Tried to allocate 2.00 GiB"}
DISK = {"type": "OSError", "message": "[Errno 28] No space left on device"}
WORKER = {
    "type": "RuntimeError",
    "message": "DataLoader worker (pid 812) is killed by signal: Killed. ",
}

# (rule, facts it names a kind on, that kind, facts it passes over)
CASES = [
    ("cuda_oom", {"error": OOM, "exit_code": 1}, "cuda_oom", {"error": ERROR, "exit_code": 1}),
    (
        "cuda_oom",
        {"log_tail": ["torch.OutOfMemoryError: CUDA out of memory."], "exit_code": 1},
        "cuda_oom",
        # the same words in the output of a job that ended well
        {"log_tail": ["torch.OutOfMemoryError: CUDA out of memory."], "exit_code": 0},
    ),
    ("ran_out", {"error": DISK, "exit_code": 1}, "disk_full", {"error": ERROR, "exit_code": 1}),
    (
        "ran_out",
        {"error": {"type": "MemoryError", "message": ""}, "exit_code": 1},
        "host_oom",
        # a non-fatal error that mentions memory does not make the end
        {"error": {"type": "MemoryError", "message": "", "fatal": False}, "exit_code": 0},
    ),
    ("oom_killed", {"oom_killed": True, "signal": "SIGKILL"}, "oom_killed", {"signal": "SIGKILL"}),
    ("native_crash", {"signal": "SIGSEGV"}, "native_crash", {"signal": "SIGTERM"}),
    ("native_crash", {"signal": "SIGABRT"}, "native_crash", {"signal": "SIGKILL"}),
    ("sigkill", {"signal": "SIGKILL"}, "killed", {"signal": "SIGTERM"}),
    ("other_signal", {"signal": "SIGTERM"}, "killed", {"exit_code": 143}),
    ("worker_died", {"error": WORKER, "exit_code": 1}, "child_killed", {"error": ERROR}),
    (
        "worker_died",
        {
            "log_tail": ["RuntimeError: DataLoader worker (pid(s) 5, 6) exited unexpectedly"],
            "exit_code": 1,
        },
        "child_killed",
        {
            "log_tail": ["RuntimeError: DataLoader worker (pid(s) 5, 6) exited unexpectedly"],
            "exit_code": 0,
        },
    ),
    (
        "fatal_error",
        {"error": ERROR, "exit_code": 0},
        "python_exception",
        {"error": {**ERROR, "fatal": False}, "exit_code": 0},
    ),
    (
        "fatal_error",
        {"error": ERROR},
        "python_exception",
        {"error": {**ERROR, "kind": "system_exit"}, "exit_code": 2},
    ),
    (
        "printed_traceback",
        {"log_tail": TB, "exit_code": 1},
        "python_exception",
        {"log_tail": TB, "exit_code": 0},
    ),
    (
        "printed_traceback",
        {"log_tail": TB, "exit_code": 1},
        "python_exception",
        # the worker's error is the better account; this rule is for scripts without one
        {"log_tail": TB, "exit_code": 1, "error": {**ERROR, "fatal": False}},
    ),
    ("exit_nonzero", {"exit_code": 3, "saw_bye": True}, "exit_nonzero", {"exit_code": 0}),
    ("exit_nonzero", {"exit_code": 7}, "exit_nonzero", {"exit_code": None}),
]


@pytest.mark.parametrize(
    "name,matches,kind,passes", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_alone(name, matches, kind, passes):
    rule = RULES[name]
    found = rule(d.ended(matches))
    assert found is not None and found["kind"] == kind
    assert rule(d.ended(passes)) is None


def test_every_rule_has_a_case():
    assert set(RULES) == {c[0] for c in CASES}
    assert {c[2] for c in CASES} == set(d.END_KINDS)


def first(facts):
    return next(r.__name__ for r in d.END_RULES if r(d.ended(facts)) is not None)


def test_the_order_decides_between_rules_that_both_match():
    # CUDA's OOM is the cause; the SIGABRT or exit status that follows it is not
    assert first({"error": OOM, "signal": "SIGABRT"}) == "cuda_oom"
    # the cgroup's OOM kill names the SIGKILL
    assert first({"oom_killed": True, "signal": "SIGKILL"}) == "oom_killed"
    # a signal ends the process, whatever error it had raised before
    assert first({"error": ERROR, "signal": "SIGSEGV"}) == "native_crash"
    # a dead DataLoader worker is the cause of the main process's RuntimeError
    assert first({"error": WORKER, "exit_code": 1}) == "worker_died"
    # the worker's error event is read before the traceback on stderr
    assert first({"error": ERROR, "log_tail": TB, "exit_code": 1}) == "fatal_error"
    # the printed traceback says more than the status
    assert first({"log_tail": TB, "exit_code": 1}) == "printed_traceback"


def test_a_clean_or_cancelled_end_has_no_diagnosis():
    assert d.diagnose_end({"exit_code": 0, "saw_bye": True}) is None
    assert d.diagnose_end({"outcome": "cancelled", "signal": "SIGTERM"}) is None
    assert all(rule(d.ended({"exit_code": 0})) is None for rule in d.END_RULES)
