"""bridge/crash_text.py: what a crash file's text says. Every process of a job writes into
the one crash file; a SIGUSR1 dump is found by its pid's marker among the others' writes, and
the worker's banner lines are not stacks."""

from trainbridge.bridge import crash_text, ranks_hang

TEXT = (
    "[trainbridge] pid 7: native crashes, SIGUSR1 dumps and GIL-freeze dumps go here\n"
    "[trainbridge] pid 11: stacks on SIGUSR1\n"
    'Current thread 0x1 (most recent call first):\n  File "/w/a.py", line 3 in f\n\n'
    "[trainbridge] pid 12: stacks on SIGUSR1\n"
    'Current thread 0x2 (most recent call first):\n  File "/w/b.py", line 4 in g\n'
)


def test_sigusr1_sections_are_told_apart_by_pid():
    got = crash_text.sigusr1_sections(TEXT)
    assert sorted(got) == [11, 12]
    assert [f["function"] for f in ranks_hang.main_thread_frames(got[11])] == ["f"]
    assert [f["function"] for f in ranks_hang.main_thread_frames(got[12])] == ["g"]
    # the report's "did its Python answer" reads the same markers (one pattern for both)
    assert crash_text.signal_dumped_in(TEXT) == {11, 12}
    assert crash_text.signal_dumped_in(None) == set()


def test_banner_lines_are_not_stacks_but_each_dumps_marker_is_kept():
    kept = crash_text.stacks_only(TEXT)
    assert "native crashes" not in kept
    assert kept.startswith("[trainbridge] pid 11: stacks on SIGUSR1\n")
    assert "[trainbridge] pid 12: stacks on SIGUSR1" in kept
    assert crash_text.stacks_only("[trainbridge] pid 7: banner only\n\n") is None
