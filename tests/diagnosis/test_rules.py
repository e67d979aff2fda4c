"""The stack parser on its own (bridge/diagnosis_stack.py). The verdict cases (facts in ->
kind, frame, summary, hint out) are in vectors/diagnosis.json, run by test_vectors.py here."""

import pytest

from tests.diagnosis.make_diagnosis_vectors import (
    FH_CRASH,
    FH_SLEEP,
    PYSPY_LOCK,
    TB_JOIN,
    TB_SOCKET,
)
from trainbridge.bridge import diagnosis as d


# --- the stack parser on its own --------------------------------------------------------
@pytest.mark.parametrize(
    "text,prefer,innermost,outermost",
    [
        (
            FH_SLEEP,
            "main",
            ("/job/train.py", 12, "wait_for_data"),
            ("/job/train.py", 33, "<module>"),
        ),
        (
            TB_SOCKET,
            "main",
            ("/usr/lib/python3.11/socket.py", 706, "readinto"),
            ("/job/train.py", 40, "<module>"),
        ),
        (PYSPY_LOCK, "main", ("train.py", 8, "acquire_both"), ("train.py", 15, "<module>")),
        (
            FH_CRASH,
            "current",
            ("/usr/lib/python3.11/ctypes/__init__.py", 519, "string_at"),
            ("/job/crash.py", 10, "<module>"),
        ),
        (
            "Traceback (most recent call last):\n" + TB_JOIN,
            "main",
            ("/usr/lib/python3.11/threading.py", 1132, "_wait_for_tstate_lock"),
            ("/job/train.py", 9, "<module>"),
        ),
    ],
)
def test_parse_stack(text, prefer, innermost, outermost):
    frames = d.parse_stack(text, prefer=prefer)

    def as_tuple(f):
        return (f["file"], f["line"], f["function"])

    assert as_tuple(frames[-1]) == innermost
    assert as_tuple(frames[0]) == outermost


@pytest.mark.parametrize("text", [None, "", "no frames here\n  at all", "\x00\xff" * 50])
def test_parse_stack_without_frames(text):
    assert d.parse_stack(text) == []


def test_importing_module_outside_import_is_none():
    assert d.importing_module(d.parse_stack(FH_SLEEP)) is None


def test_the_crashed_thread_is_faulthandlers_current_one_main_when_listed_last():
    from trainbridge.bridge.diagnosis_stack import crashed_thread

    main_crashed = (
        "Fatal Python error: Segmentation fault\n\n"
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "/x.py", line 3 in loop\n\n'
        "Current thread 0x00007f00 (most recent call first):\n"
        '  File "/x.py", line 9 in crash\n'
    )
    other_crashed = (
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x00007f01 (most recent call first):\n"
        '  File "/x.py", line 3 in decode\n\n'
        "Thread 0x00007f00 (most recent call first):\n"
        '  File "/x.py", line 9 in main\n'
    )
    # an earlier SIGUSR1 dump in the same file: the last dump is the crash's
    earlier = "[trainbridge] pid 7: stacks on SIGUSR1\n" + main_crashed.split("\n\n", 1)[1]
    assert crashed_thread(main_crashed) == "MainThread"
    assert crashed_thread(other_crashed) == "0x00007f01"
    assert crashed_thread(earlier + "\n" + other_crashed) == "0x00007f01"
    assert (
        crashed_thread("Fatal Python error: Aborted\n\nStack (most recent call first):\n") is None
    )
    assert crashed_thread(None) is None
    # the ident, by which a face finds the crashed thread's block, for the main thread too
    from trainbridge.bridge.diagnosis_stack import crash_dump_thread

    assert crash_dump_thread(main_crashed) == ("0x00007f00", True)
    assert crash_dump_thread(earlier + "\n" + other_crashed) == ("0x00007f01", False)
