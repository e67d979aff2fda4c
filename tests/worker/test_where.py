"""Where the main thread is (the heartbeat's `where`, worker/facts.py): the innermost frame
of the script's own code, a library's frames stepped over, and a lookup that does not grow
with the run."""

import sys
import threading

from trainbridge.worker import facts


def waits_in_a_library(ready, release):
    ready.set()
    release.wait(30)  # threading.Event.wait: the standard library's frames are innermost


def test_a_library_wait_is_named_by_the_scripts_own_function():
    ready, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=waits_in_a_library, args=(ready, release))
    thread.start()
    try:
        assert ready.wait(10)
        frame = sys._current_frames()[thread.ident]
        assert facts.where(frame) == "test_where.py:waits_in_a_library"
    finally:
        release.set()
        thread.join(10)


def test_code_made_at_run_time_does_not_grow_the_lookup():
    """torch.fx names each generated module "<eval_with_key>.N": one file each."""
    made = facts.LIBRARY_FILES_KEPT * 2
    for n in range(made):
        code = compile("import sys\nframe = sys._getframe()", f"<eval_with_key>.{n}", "exec")
        scope: dict = {}
        exec(code, scope)
        assert facts.where(scope["frame"]) == f"<eval_with_key>.{n}:<module>"
        assert len(facts._library_files) <= facts.LIBRARY_FILES_KEPT
    # The verdicts are still right after the lookup was cleared.
    assert facts.is_library_file(threading.__file__)
    assert not facts.is_library_file(__file__)
