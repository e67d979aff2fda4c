"""bridge/filelocks.py on real locks: a process blocked in flock() and one polling with
LOCK_NB see who holds the file they wait for. The verdict's words are pinned by
vectors/diagnosis.json."""

import fcntl
import os
import subprocess
import sys
import time

from trainbridge.bridge import filelocks

LOCKS = (
    "1: FLOCK  ADVISORY  WRITE 28502 fe:00:2146408 0 EOF\n"
    "1: -> FLOCK  ADVISORY  WRITE 28548 fe:00:2146408 0 EOF\n"
    "2: OFDLCK ADVISORY  READ  -1 00:2f:99 0 EOF\n"
    "3: POSIX  ADVISORY  WRITE 12 08:01:x 0 EOF\n"
    "not a lock\n"
)


def test_proc_locks_is_read_holders_waiters_and_hex_devices():
    assert filelocks.parse_locks(LOCKS) == [
        {
            "type": "FLOCK",
            "access": "WRITE",
            "pid": 28502,
            "dev": [254, 0],
            "inode": 2146408,
            "waiting": False,
        },
        {
            "type": "FLOCK",
            "access": "WRITE",
            "pid": 28548,
            "dev": [254, 0],
            "inode": 2146408,
            "waiting": True,
        },
        {
            "type": "OFDLCK",
            "access": "READ",
            "pid": -1,
            "dev": [0, 47],
            "inode": 99,
            "waiting": False,
        },
    ]


def _until(check, what, deadline_s=20.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {deadline_s} s")


def test_a_blocked_and_a_polling_waiter_see_the_holder(tmp_path):
    path = str(tmp_path / "cache.lock")
    code = {
        "blocked": "import fcntl,sys\nf=open(sys.argv[1],'a')\nfcntl.flock(f,fcntl.LOCK_EX)\n",
        "polling": (
            "import fcntl,sys,time\nf=open(sys.argv[1],'a')\nwhile True:\n"
            "    try:\n        fcntl.flock(f,fcntl.LOCK_EX|fcntl.LOCK_NB); break\n"
            "    except BlockingIOError:\n        time.sleep(0.05)\n"
        ),
    }
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiters = {k: subprocess.Popen([sys.executable, "-c", c, path]) for k, c in code.items()}
        try:
            blocked = _until(
                lambda: [
                    x for x in filelocks.file_locks(waiters["blocked"].pid, [], []) if x["blocked"]
                ],
                "blocked waiter",
            )
            polling = _until(
                lambda: filelocks.file_locks(waiters["polling"].pid, [], []), "polling waiter"
            )
            assert filelocks.file_locks(os.getpid(), [], []) == []  # its own lock: no wait
        finally:
            for p in waiters.values():
                p.kill()
                p.wait()
    for found, queued in ((blocked, True), (polling, False)):
        assert found[0]["path"] == path and found[0]["holder_pid"] == os.getpid(), found
        assert found[0]["blocked"] is queued and found[0]["lock"] == "FLOCK", found
        assert found[0]["holder_state"] in ("running", "sleeping") and found[0]["holder_cmd"]
