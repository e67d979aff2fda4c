"""The per-rank faulthandler fallback's I/O (bridge/rankdumps.py): SIGUSR2 to a process
stuck in C with the GIL held returns its own dump, which the ranks rule reads. Telling the
SIGUSR1 dumps apart by pid is tests/client/test_crash_text.py's."""

import os
import signal
import subprocess
import sys
import textwrap

from trainbridge.bridge import rankdumps, ranks_hang


def test_sigusr2_to_a_process_stuck_in_c_returns_its_dump(tmp_path):
    crash = tmp_path / "crash.txt"
    crash.write_text("[trainbridge] pid 1: written by another process before\n")
    script = textwrap.dedent(
        """
        import ctypes, faulthandler, signal, sys
        f = open(sys.argv[1], "a")
        faulthandler.register(signal.SIGUSR2, file=f, all_threads=False)
        # Loaded before "ready": PyDLL's constructor is Python code, and a SIGUSR2 landing
        # in it on a loaded machine dumped its frame too (hunt 9).
        pause = ctypes.PyDLL(None).pause
        def stuck_in_c():
            print("ready", flush=True)
            while True:
                pause()  # the GIL stays held
        stuck_in_c()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(crash)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline() == "ready\n"
        text = rankdumps.native_dump(
            str(crash), child.pid, lambda pid: os.kill(pid, signal.SIGUSR2)
        )
    finally:
        child.kill()
        child.wait()
    assert text is not None and text.startswith("Stack (most recent call first):"), text
    frames = ranks_hang.main_thread_frames(text)
    assert [f["function"] for f in frames] == ["<module>", "stuck_in_c"], text


def test_no_dump_from_a_process_without_the_handler_is_none(tmp_path):
    crash = tmp_path / "crash.txt"
    crash.write_text("")
    assert rankdumps.native_dump(str(crash), os.getpid(), lambda pid: None) is None
