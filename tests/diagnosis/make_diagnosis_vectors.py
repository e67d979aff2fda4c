"""Writes vectors/diagnosis.json: the diagnosis cases (facts in -> kind, frame, summary, hint
out) that pin bridge/diagnosis*.py, the one implementation; tests/diagnosis/test_vectors.py
runs them.

Each case below is a situation a user meets, with the real formats (faulthandler, traceback,
py-spy stacks; Linux x86_64 wchan and syscall names; psutil-shaped sockets and children).
The hand-written part of a case is its kind and the substrings its summary and hint must
contain (summary_has, hint_has): this script refuses to write a row whose verdict breaks them.
The exact summary, hint and frame are then taken from bridge/diagnosis.py and reviewed in the
diff: the committed JSON is the contract, and a client that drifts from it fails.

Run: .venv/bin/python tests/diagnosis/make_diagnosis_vectors.py
"""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

# --- stacks in the three formats -------------------------------------------------------
FH_SLEEP = '''Thread 0x00007f39f7b1d6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "/venv/lib/python3.11/site-packages/worker/beacon.py", line 40 in _run

Current thread 0x00007f39f868bb80 (most recent call first):
  File "/job/train.py", line 12 in wait_for_data
  File "/job/train.py", line 30 in main
  File "/job/train.py", line 33 in <module>
'''
TB_SOCKET = '''  File "/job/train.py", line 40, in <module>
    main()
  File "/job/train.py", line 21, in download
    data = conn.recv(1024)
  File "/usr/lib/python3.11/socket.py", line 706, in readinto
    return self._sock.recv_into(b)
'''
FH_IMPORT = '''Current thread 0x00007f0000000001 (most recent call first):
  File "/job/slowmod.py", line 3 in <module>
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "<frozen importlib._bootstrap_external>", line 940 in exec_module
  File "<frozen importlib._bootstrap>", line 690 in _load_unlocked
  File "<frozen importlib._bootstrap>", line 1147 in _find_and_load_unlocked
  File "<frozen importlib._bootstrap>", line 1176 in _find_and_load
  File "/job/train.py", line 2 in <module>
'''
FH_PKG_IMPORT = FH_IMPORT.replace("/job/slowmod.py", "/venv/site-packages/bigpkg/__init__.py")
PYSPY_LOCK = '''Process 123: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 0x7F39F7B1D6C0 (idle): "MainThread"
    acquire_both (train.py:8)
    <module> (train.py:15)
Thread 0x7F39F7B1D6C1 (idle): "Thread-1"
    run (threading.py:982)
'''
FH_CRASH = '''Fatal Python error: Segmentation fault

Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/job/crash.py", line 7 in poke
  File "/job/crash.py", line 10 in <module>

Extension modules: numpy.core._multiarray_umath (total: 1)
'''
TB_JOIN = '''  File "/job/train.py", line 9, in <module>
    t.join()
  File "/usr/lib/python3.11/threading.py", line 1112, in join
    self._wait_for_tstate_lock()
  File "/usr/lib/python3.11/threading.py", line 1132, in _wait_for_tstate_lock
    if lock.acquire(block, timeout):
'''
FH_LOOP = '''Current thread 0x00007f0000000001 (most recent call first):
  File "/job/spin.py", line 4 in busy
  File "/job/spin.py", line 6 in <module>
'''
FH_GIL = '''Current thread 0x00007f0000000001 (most recent call first):
  File "/job/gil.py", line 5 in hold
  File "/job/gil.py", line 8 in <module>
'''
FH_QUEUE = '''Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 395 in _recv
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 430 in _recv_bytes
  File "/usr/lib/python3.11/multiprocessing/queues.py", line 103 in get
  File "/job/loader.py", line 20 in next_batch
  File "/job/loader.py", line 30 in <module>
'''


def proc(
    syscall=None,
    wchan=None,
    status="sleeping",
    cpu=0.0,
    fd=None,
    fd_target=None,
    sockets=(),
    children=(),
    gpu=None,
    alive=True,
    io=None,
):
    main = {
        "tid": 100,
        "state": {"sleeping": "S", "running": "R", "disk-sleep": "D", "stopped": "T"}.get(
            status, "S"
        ),
    }
    if syscall:
        main["syscall"] = syscall
    if wchan:
        main["wchan"] = wchan
    if fd is not None:
        main["fd"] = fd
    if fd_target:
        main["fd_target"] = fd_target
    return {
        "pid": 100,
        "alive": alive,
        "status": status,
        "cpu_fraction": cpu,
        "main_thread": main,
        "sockets": list(sockets),
        "children": list(children),
        "io_delta": io or {"read_bytes": 0, "write_bytes": 0},
        "gpu": gpu,
        "gpu_note": None if gpu else "no NVIDIA GPU (pynvml: test)",
    }


def always_runnable_loop(samples):
    """A spinning main thread that got no CPU: state R in every one of `samples` samples."""
    return {
        "reason": "stall",
        "stacks": FH_LOOP,
        "evidence": {
            **proc("running", None, status="running", cpu=0.0),
            "main_thread": {
                "state": "R",
                "syscall": "running",
                "runnable_fraction": 1.0,
                "wait_samples": {"running": samples},
            },
        },
    }


FH_UNIX_RECV = '''Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 395 in _recv
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 430 in _recv_bytes
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 250 in recv
  File "/usr/lib/python3.11/multiprocessing/resource_sharer.py", line 86 in get_connection
  File "/venv/site-packages/torch/multiprocessing/reductions.py", line 541 in rebuild_storage_fd
  File "/venv/site-packages/torch/utils/data/dataloader.py", line 1325 in _next_data
  File "/job/makemore.py", line 684 in <module>
'''
# The main thread of tests/faults/scenarios/dataloader_worker_stopped.py, from a real report.
TB_DATALOADER_SELECT = '''Thread 0x7f71bd53cb80 "MainThread" (most recent call last):
  File "/job/scenarios/dataloader_worker_stopped.py", line 34, in <module>
    train()
  File "/job/scenarios/dataloader_worker_stopped.py", line 28, in train
    for batch in loader:
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 725, in __next__
    data = self._next_data()
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1505, in _next_data
    idx, data = self._get_data()
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1464, in _get_data
    success, data = self._try_get_data()
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1291, in _try_get_data
    data = self._data_queue.get(timeout=timeout)
  File "/usr/lib/python3.11/multiprocessing/queues.py", line 113, in get
    if not self._poll(timeout):
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 257, in poll
    return self._poll(timeout)
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 440, in _poll
    r = wait([self], timeout)
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 947, in wait
    ready = selector.select(timeout)
  File "/usr/lib/python3.11/selectors.py", line 415, in select
    fd_event_list = self._selector.poll(timeout)
'''
# Four DataLoader workers, started in pid order 201..204 except that 203 started last but
# one: worker ids follow the start time, not the pid.
DL_WORKERS = [
    {"pid": 201, "name": "pt_data_worker", "status": "sleeping", "ppid": 100, "started": 5000},
    {"pid": 202, "name": "pt_data_worker", "status": "sleeping", "ppid": 100, "started": 5001},
    {"pid": 204, "name": "pt_data_worker", "status": "sleeping", "ppid": 100, "started": 5003},
    {"pid": 203, "name": "pt_data_worker", "status": "stopped", "ppid": 100, "started": 5002},
]
HTTPS = {
    "pid": 100,
    "fd": 5,
    "type": "tcp",
    "laddr": ["10.0.0.2", 50000],
    "raddr": ["1.2.3.4", 443],
    "status": "ESTABLISHED",
}
ZOMBIE_OR_STOPPED = {"pid": 101, "name": "python", "status": "stopped", "ppid": 100}

# The hf cache's lock, held by another job (bridge/filelocks.py).
TB_FLOCK = '''  File "/job/train.py", line 12, in <module>
    fetch_weights()
  File "/job/train.py", line 7, in fetch_weights
    fcntl.flock(lock, fcntl.LOCK_EX)
'''
TB_FILELOCK_POLL = '''  File "/job/train.py", line 12, in <module>
    fetch_weights()
  File "/venv/lib/python3.11/site-packages/huggingface_hub/file_download.py", line 1010, in fetch_weights
    with WeakFileLock(lock_path):
  File "/venv/lib/python3.11/site-packages/filelock/_api.py", line 344, in acquire
    time.sleep(poll_interval)
'''
HF_LOCK = "/root/.cache/huggingface/hub/.locks/models--gpt2/6f0a.lock"
# The wait chain inside the process: the main thread joins a loader thread
# that reads from a server through urllib (socket.py's readinto), or waits on a queue that a
# thread fills from a subprocess; the worker's own thread is never the end.
MAIN_JOINS = '''Thread 0x7f0000000001 "MainThread" (most recent call last):
  File "/job/train.py", line 20, in <module>
    loader.join()
  File "/usr/lib/python3.11/threading.py", line 1119, in join
    self._wait_for_tstate_lock()
  File "/usr/lib/python3.11/threading.py", line 1139, in _wait_for_tstate_lock
    if lock.acquire(block, timeout):
'''
BEACON_THREAD = '''Thread 0x7f0000000009 "trainbridge-beacon" (most recent call last):
  File "/venv/site-packages/trainbridge/worker/beacon.py", line 210, in run
    self._loop()
  File "/venv/site-packages/http/client.py", line 300, in _read_status
    line = str(self.fp.readline(_MAXLINE + 1), "iso-8859-1")
'''
LOADER_READS = '''Thread 0x7f0000000002 "loader" (most recent call last):
  File "/usr/lib/python3.11/threading.py", line 982, in run
    self._target(*self._args, **self._kwargs)
  File "/job/train.py", line 12, in fetch_shards
    return urllib.request.urlopen(url).read()
  File "/usr/lib/python3.11/http/client.py", line 300, in _read_status
    line = str(self.fp.readline(_MAXLINE + 1), "iso-8859-1")
  File "/usr/lib/python3.11/socket.py", line 706, in readinto
    return self._sock.recv_into(b)
'''
MAIN_GETS = '''Thread 0x7f0000000001 "MainThread" (most recent call last):
  File "/job/train.py", line 30, in <module>
    batch = batches.get()
  File "/usr/lib/python3.11/queue.py", line 171, in get
    self.not_empty.wait()
  File "/usr/lib/python3.11/threading.py", line 327, in wait
    waiter.acquire()
'''
FEEDER_WAITS = '''Thread 0x7f0000000003 "feeder" (most recent call last):
  File "/job/train.py", line 18, in feed
    out = subprocess.run(["./decode", path], capture_output=True)
  File "/usr/lib/python3.11/subprocess.py", line 1209, in communicate
    stdout, stderr = self._communicate(input, endtime, timeout)
'''


def held_lock(blocked, pid=812, in_job=False, state="sleeping"):
    return {
        "path": HF_LOCK,
        "lock": "FLOCK",
        "access": "WRITE",
        "holder_pid": pid,
        "holder_cmd": "python prefetch.py gpt2",
        "holder_state": state,
        "in_job": in_job,
        "blocked": blocked,
    }


# (name, facts, kind, substrings the summary must contain, substrings the hint must contain)
HANGS = [
    (
        "sleep from kernel and stack",
        {
            "reason": "stall",
            "idle_s": 12,
            "stack": FH_SLEEP,
            "evidence": proc("clock_nanosleep", "hrtimer_nanosleep"),
        },
        "sleeping",
        ["train.py:12 wait_for_data", "12 s"],
        [],
    ),
    (
        "socket read names the remote",
        {
            "reason": "stall",
            "idle_s": 300,
            "stack": TB_SOCKET,
            "evidence": proc(
                "recvfrom", "wait_woken", fd=5, fd_target="socket:[123]", sockets=[HTTPS]
            ),
        },
        "network_wait",
        ["1.2.3.4:443", "socket.py:706 readinto", "train.py:21 download"],
        ["1.2.3.4:443 for 300 s", "HTTPS_PROXY"],
    ),
    (
        "socket in poll, found by its connection",
        {
            "reason": "stage_budget",
            "stage": "data",
            "stack": TB_SOCKET,
            "evidence": proc("poll", "do_sys_poll", sockets=[HTTPS]),
        },
        "network_wait",
        ["1.2.3.4:443", "stage 'data'"],
        [],
    ),
    (
        "socket known from the stack only",
        {"reason": "stall", "stack": TB_SOCKET},
        "network_wait",
        ["socket.py:706 readinto"],
        [],
    ),
    (
        "connect in progress",
        {
            "reason": "stall",
            "stack": TB_SOCKET,
            "evidence": proc(
                "connect", "inet_wait_for_connect", fd=5, sockets=[{**HTTPS, "status": "SYN_SENT"}]
            ),
        },
        "network_wait",
        ["connecting to 1.2.3.4:443"],
        [],
    ),
    (
        "lock from py-spy",
        {
            "reason": "stall",
            "evidence": {**proc("futex", "futex_wait_queue"), "py_spy": PYSPY_LOCK},
        },
        "lock_wait",
        ["train.py:8 acquire_both"],
        ["deadlock"],
    ),
    (
        "blocked in flock() on a lock another process holds: its holder named",
        {
            "reason": "stall",
            "stack": TB_FLOCK,
            "evidence": {
                **proc("flock", "locks_lock_inode_wait"),
                "file_locks": [held_lock(True)],
            },
        },
        "file_lock_wait",
        [
            f"waiting for a lock on {HF_LOCK} (flock), held by pid 812 (python prefetch.py "
            "gpt2, sleeping)",
            "train.py:7 fetch_weights",
        ],
        ["kill 812", "own cache directory"],
    ),
    (
        "polling a lock as filelock does (sleeping): the holder is the job's own process",
        {
            "reason": "stall",
            "stack": TB_FILELOCK_POLL,
            "evidence": {
                **proc("clock_nanosleep", "hrtimer_nanosleep"),
                "file_locks": [held_lock(False, pid=901, in_job=True, state="stopped")],
            },
        },
        "file_lock_wait",
        ["held by the job's own process pid 901 (python prefetch.py gpt2, stopped)"],
        [],
    ),
    (
        "a locked file open while the main thread waits on a socket: the socket is the wait",
        {
            "reason": "stall",
            "evidence": {
                **proc("recvfrom", "sk_wait_data", fd=5, fd_target="socket:[1]", sockets=[HTTPS]),
                "file_locks": [held_lock(False)],
            },
        },
        "network_wait",
        ["reading from 1.2.3.4:443"],
        [],
    ),
    (
        "a lock held by an open file description: no pid to name",
        {
            "reason": "stall",
            "evidence": {
                **proc("flock", "locks_lock_inode_wait"),
                "file_locks": [
                    {
                        **held_lock(True),
                        "holder_pid": None,
                        "holder_cmd": None,
                        "holder_state": None,
                        "lock": "OFDLCK",
                    }
                ],
            },
        },
        "file_lock_wait",
        ["(fcntl, open file), held by another process's open file (its pid is not known)"],
        ["let it finish, stop it if"],
    ),
    (
        "reading from a server on this machine: the process that holds the other end is named",
        {
            "reason": "stall",
            "evidence": proc(
                "recvfrom",
                "sk_wait_data",
                fd=7,
                fd_target="socket:[2]",
                sockets=[
                    {
                        **HTTPS,
                        "fd": 7,
                        "laddr": ["127.0.0.1", 50123],
                        "raddr": ["127.0.0.1", 8000],
                        "peer": {
                            "pid": 733,
                            "cmd": "python -m tokenizer_server --port 8000",
                            "state": "stopped",
                            "in_job": False,
                        },
                    }
                ],
            ),
        },
        "network_wait",
        [
            "reading from 127.0.0.1:8000, served by pid 733 (python -m tokenizer_server "
            "--port 8000, stopped)"
        ],
        ["the local server, pid 733, does not answer", "py-spy dump --pid 733"],
    ),
    (
        "the main thread joins a thread that reads from a server: the chain's end is named",
        {
            "reason": "stall",
            "stacks": MAIN_JOINS + "\n" + BEACON_THREAD + "\n" + LOADER_READS,
            "evidence": {**proc("futex", "futex_wait_queue"), "sockets": [HTTPS]},
        },
        "network_wait",
        [
            "reading from 1.2.3.4:443",
            "(from job/train.py:12 fetch_shards), in thread 'loader'; the main thread waits "
            "for it (join) at python3.11/threading.py:1139 _wait_for_tstate_lock (from "
            "job/train.py:20 <module>)",
        ],
        ["HTTPS_PROXY"],
    ),
    (
        "the main thread waits on a queue a thread fills from a subprocess",
        {
            "reason": "stall",
            "stacks": MAIN_GETS + "\n" + FEEDER_WAITS,
            "evidence": proc("futex", "futex_wait_queue"),
        },
        "child_wait",
        ["job/train.py:18 feed), in thread 'feeder'; the main thread waits for it (get)"],
        [],
    ),
    (
        "a lock wait with only the worker's own thread beside it stays a lock wait",
        {
            "reason": "stall",
            "stacks": MAIN_JOINS + "\n" + BEACON_THREAD,
            "evidence": proc("futex", "futex_wait_queue"),
        },
        "lock_wait",
        ["waiting on a lock", "job/train.py:20 <module>"],
        [],
    ),
    (
        "join on a thread",
        {"reason": "stall", "stack": TB_JOIN, "evidence": proc("futex")},
        "lock_wait",
        ["threading.py:1132 _wait_for_tstate_lock", "train.py:9 <module>"],
        [],
    ),
    (
        "cpu loop",
        {
            "reason": "stall",
            "stacks": FH_LOOP,
            "evidence": proc("running", None, status="running", cpu=0.98),
        },
        "cpu_bound",
        ["spin.py:4 busy", "98%"],
        ["infinite loop"],
    ),
    (
        "cpu loop on a loaded machine: little CPU, always runnable",
        {
            "reason": "stall",
            "stacks": FH_LOOP,
            "evidence": {
                **proc("running", None, status="running", cpu=0.2),
                "main_thread": {"state": "R", "syscall": "running", "runnable_fraction": 1.0},
            },
        },
        "cpu_bound",
        ["spin.py:4 busy"],
        [],
    ),
    (
        "cpu loop given no CPU at all: runnable in every sample (every core busy elsewhere)",
        always_runnable_loop(samples=25),
        "cpu_bound",
        ["spin.py:4 busy", "CPU 0%, always runnable: waiting for a free core"],
        [],
    ),
    (
        "runnable in too few samples to call it a loop, and no CPU",
        always_runnable_loop(samples=3),
        "unknown",
        ["spin.py:4 busy"],
        [],
    ),
    (
        "cpu loop sharing the GIL on a loaded machine",
        {
            "reason": "stall",
            "stacks": FH_LOOP,
            "evidence": {
                **proc("running", None, status="running", cpu=0.16),
                "main_thread": {"state": "R", "syscall": "running", "runnable_fraction": 0.4},
            },
        },
        "cpu_bound",
        ["spin.py:4 busy"],
        [],
    ),
    (
        "cpu loop caught waiting for the GIL at the last read",
        {
            "reason": "stall",
            "stacks": FH_LOOP,
            "evidence": {
                **proc("futex", "futex_do_wait", status="sleeping", cpu=0.54),
                "main_thread": {
                    "state": "S",
                    "syscall": "futex",
                    "wchan": "futex_do_wait",
                    "runnable_fraction": 0.96,
                },
            },
        },
        "cpu_bound",
        ["spin.py:4 busy"],
        [],
    ),
    (
        "main thread waits while another thread computes",
        {
            "reason": "stall",
            "stack": TB_JOIN,
            "evidence": {
                **proc("futex", status="sleeping", cpu=1.0),
                "main_thread": {"state": "S", "syscall": "futex", "runnable_fraction": 0.0},
            },
        },
        "lock_wait",
        [],
        [],
    ),
    (
        "a lock waiter that was R once is not a CPU loop",
        {
            "reason": "stall",
            "stack": TB_JOIN,
            "evidence": {
                **proc("futex", status="sleeping", cpu=0.06),
                "main_thread": {"state": "S", "syscall": "futex", "runnable_fraction": 0.04},
            },
        },
        "lock_wait",
        [],
        [],
    ),
    (
        "a short wake-up is not a CPU loop",
        {
            "reason": "stall",
            "stacks": FH_SLEEP,
            "evidence": {
                **proc("clock_nanosleep", status="sleeping", cpu=0.01),
                "main_thread": {
                    "state": "S",
                    "syscall": "clock_nanosleep",
                    "runnable_fraction": 0.1,
                },
            },
        },
        "sleeping",
        [],
        [],
    ),
    (
        "gil held in native code",
        {
            "reason": "heartbeat",
            "stacks": FH_GIL,
            "evidence": proc("clock_nanosleep", "hrtimer_nanosleep"),
        },
        "gil_held",
        ["gil.py:5 hold", "blocked in native code"],
        ["GIL"],
    ),
    (
        "stall where no Python answered a dump (SIGUSR2 sent)",
        {
            "reason": "stall",
            "stacks": FH_GIL,
            "python_silent": True,
            "evidence": proc("futex", "futex_wait_queue"),
        },
        "gil_held",
        ["gil.py:5 hold", "blocked in native code"],
        ["GIL"],
    ),
    (
        "the same stall when Python answered: a lock",
        {
            "reason": "stall",
            "stacks": FH_GIL,
            "python_silent": False,
            "evidence": proc("futex", "futex_wait_queue"),
        },
        "lock_wait",
        [],
        [],
    ),
    (
        "gil held, spinning",
        {
            "reason": "heartbeat_silence",
            "stacks": FH_GIL,
            "evidence": proc("running", status="running", cpu=1.0),
        },
        "gil_held",
        ["spinning"],
        [],
    ),
    (
        "child stopped while parent reads its queue",
        {
            "reason": "stall",
            "stack": FH_QUEUE,
            "evidence": proc(
                "read", "pipe_read", fd=7, fd_target="pipe:[999]", children=[ZOMBIE_OR_STOPPED]
            ),
        },
        "child_wait",
        ["child pid 101 (python, stopped)", "loader.py:20 next_batch"],
        ["kill -CONT 101"],
    ),
    (
        "parent in wait4 on a child",
        {
            "reason": "stall",
            "evidence": proc(
                "wait4", "do_wait", children=[{"pid": 102, "name": "tar", "status": "sleeping"}]
            ),
        },
        "child_wait",
        ["child pid 102 (tar, sleeping)"],
        [],
    ),
    (
        "import hang",
        {
            "reason": "stall",
            "stacks": FH_IMPORT,
            "saw_hello": True,
            "evidence": proc("clock_nanosleep"),
        },
        "import_hang",
        ["stuck importing slowmod", "slowmod.py:3 <module>"],
        ["import slowmod"],
    ),
    (
        "import hang of a package before hello",
        {"reason": "startup", "stacks": FH_PKG_IMPORT, "saw_hello": False},
        "import_hang",
        ["stuck importing bigpkg", "never said hello"],
        [],
    ),
    (
        "no hello, no stack",
        {
            "reason": "startup",
            "saw_hello": False,
            "idle_s": 5,
            "evidence": proc("clock_nanosleep", "hrtimer_nanosleep"),
        },
        "startup",
        ["never said hello", "sleeping"],
        ["--startup-timeout", "started and then did nothing"],
    ),
    (
        "no hello, faulthandler stack",
        {"reason": "startup", "saw_hello": False, "stacks": FH_SLEEP},
        "startup",
        ["train.py:12 wait_for_data"],
        ["stuck before trainbridge's hello", "named frame"],
    ),
    (
        "disk sleep",
        {
            "reason": "stall",
            "evidence": proc(
                "read", "folio_wait_bit", "disk-sleep", fd=3, fd_target="/mnt/nfs/data.bin"
            ),
        },
        "io_wait",
        ["/mnt/nfs/data.bin"],
        ["mount"],
    ),
    (
        "reading a FIFO with no children",
        {"reason": "stall", "evidence": proc("read", "pipe_read", fd=0, fd_target="pipe:[5]")},
        "io_wait",
        [],
        [],
    ),
    (
        "gpu busy",
        {
            "reason": "stall",
            "evidence": proc(
                "running",
                status="running",
                cpu=1.0,
                gpu=[{"index": 0, "util_percent": 99, "used_by_job": True}],
            ),
        },
        "gpu_busy",
        ["GPU is busy"],
        ["nvidia-smi"],
    ),
    (
        "gpu busy with another job is not ours",
        {
            "reason": "stall",
            "evidence": proc(
                "clock_nanosleep", gpu=[{"index": 0, "util_percent": 99, "used_by_job": False}]
            ),
        },
        "sleeping",
        [],
        [],
    ),
    (
        "process stopped",
        {"reason": "heartbeat_silence", "evidence": proc(None, "do_signal_stop", status="stopped")},
        "stopped",
        ["stopped"],
        ["kill -CONT 100"],
    ),
    (
        "after bye, stuck joining a thread",
        {"reason": "after_bye", "stack": TB_JOIN, "evidence": proc("futex")},
        "lock_wait",
        ["after the script said bye", "train.py:9 <module>"],
        [],
    ),
    ("nothing known", {"reason": "stall"}, "unknown", ["no progress"], []),
]


ERR_VALUE = {
    "type": "ValueError",
    "message": "bad batch",
    "kind": "exception",
    "fatal": True,
    "thread": "MainThread",
    "stage": "train",
    "frames": [
        {"file": "/job/train.py", "line": 30, "function": "<module>"},
        {"file": "/job/train.py", "line": 12, "function": "step"},
    ],
}
ERR_OOM = {
    "type": "torch.OutOfMemoryError",
    "kind": "cuda_oom",
    "fatal": True,
    "message": "CUDA out of memory. Tried to allocate 2.00 GiB",
    "frames": [{"file": "/job/train.py", "line": 50, "function": "forward"}],
}
ERR_OOM_TEXT = {
    "type": "RuntimeError",
    "kind": "exception",
    "fatal": True,
    "message": "CUDA out of memory. Tried to allocate 20.00 MiB",
    "frames": [],
}
ERR_EXIT = {
    "type": "SystemExit",
    "kind": "system_exit",
    "fatal": True,
    "message": "config file missing",
    "exit_code": 1,
    "frames": [{"file": "/job/train.py", "line": 5, "function": "load_config"}],
}
ERR_THREAD = {**ERR_VALUE, "fatal": False, "thread": "Thread-1"}
ERR_ZH = {**ERR_VALUE, "message": "\u6570\u636e\u96c6\u4e0d\u5b58\u5728"}
ERR_WORKER_KILLED = {
    "type": "RuntimeError",
    "kind": "exception",
    "fatal": True,
    "thread": "MainThread",
    "message": "DataLoader worker (pid(s) 17660) exited unexpectedly",
    "stage": "train",
    "chain": [
        {
            "type": "RuntimeError",
            "relation": "cause",
            "message": "DataLoader worker (pid 17660) is killed by signal: Killed. ",
        }
    ],
    "frames": [
        {"file": "/job/makemore.py", "line": 684, "function": "<module>"},
        {
            "file": "/venv/site-packages/torch/utils/data/dataloader.py",
            "line": 1304,
            "function": "_try_get_data",
        },
    ],
}
ERR_HOST_OOM = {
    "type": "RuntimeError",
    "kind": "exception",
    "fatal": True,
    "thread": "MainThread",
    "stage": "train",
    "message": "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
    "allocate memory: you tried to allocate 8589934592 bytes. Error code 12 (Cannot allocate "
    "memory)",
    "frames": [
        {"file": "/job/makemore.py", "line": 684, "function": "<module>"},
        {"file": "/job/makemore.py", "line": 145, "function": "forward"},
        {
            "file": "/venv/site-packages/torch/nn/functional.py",
            "line": 2264,
            "function": "embedding",
        },
    ],
    "resources": {
        "memory": {
            "as_limit_bytes": 3 << 30,
            "data_limit_bytes": None,
            "vm_bytes": 2_950_000_000,
            "rss_bytes": 1_200_000_000,
            "peak_rss_bytes": 1_250_000_000,
            "cgroup_limit_bytes": None,
        }
    },
}
ERR_MEMORY_CGROUP = {
    "type": "MemoryError",
    "kind": "exception",
    "fatal": True,
    "thread": "MainThread",
    "message": "",
    "frames": [{"file": "/job/prep.py", "line": 12, "function": "load_all"}],
    "resources": {"memory": {"as_limit_bytes": None, "cgroup_limit_bytes": 4 << 30}},
}
ERR_ENOSPC = {
    "type": "OSError",
    "kind": "exception",
    "fatal": True,
    "thread": "MainThread",
    "stage": "save",
    "message": "[Errno 28] No space left on device: '/ckpt/model-0004.pt'",
    "frames": [{"file": "/job/train.py", "line": 286, "function": "save_checkpoint"}],
    "resources": {
        "disk": {
            "path": "/ckpt/model-0004.pt",
            "filesystem": "/ckpt",
            "free_bytes": 0,
            "total_bytes": 64 << 20,
        }
    },
}
ERR_TORCH_SAVE = {
    "type": "RuntimeError",
    "kind": "exception",
    "fatal": True,
    "thread": "MainThread",
    "message": "[enforce fail at inline_container.cc:603] . unexpected pos 47168 vs 47120",
    "chain": [
        {
            "type": "RuntimeError",
            "relation": "context",
            "message": "[enforce fail at inline_container.cc:778] . PytorchStreamWriter failed "
            "writing file data/3: file write failed",
        }
    ],
    "frames": [
        {"file": "/job/train.py", "line": 286, "function": "<module>"},
        {"file": "/venv/site-packages/torch/serialization.py", "line": 651, "function": "save"},
    ],
    "resources": {
        "disk": {"path": None, "filesystem": "/", "free_bytes": 12288, "total_bytes": 1 << 34}
    },
}
# torch 2.6+'s torch.load of a checkpoint with a numpy global: the error itself
# comes after some 500 characters of advice.
ERR_WEIGHTS_ONLY = {
    **ERR_VALUE,
    "type": "_pickle.UnpicklingError",
    "message": "Weights only load failed. This file can still be loaded, to do so you have two "
    "options, \x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) "
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in "
    "`torch.load` from `False` to `True`. Re-running `torch.load` with `weights_only` set to "
    "`False` will likely succeed, but it can result in arbitrary code execution. Do it only if "
    "you got the file from a trusted source.\n\t(2) Alternatively, to load with "
    "`weights_only=True` please check the recommended steps in the following error message."
    "\n\tWeightsUnpickler error: Unsupported global: GLOBAL numpy.core.multiarray._reconstruct "
    "was not an allowed global by default. Please use `torch.serialization.add_safe_globals("
    "[_reconstruct])` or the `torch.serialization.safe_globals([_reconstruct])` context "
    "manager to allowlist this global if you trust this class/function.\n\nCheck the "
    "documentation of torch.load to learn more about types of dangerous globals, "
    "https://pytorch.org/docs/stable/generated/torch.load.html.",
}
PRINTED_TB = [
    "step 1",
    "Traceback (most recent call last):",
    '  File "/job/plain.py", line 9, in <module>',
    "    load()",
    '  File "/job/plain.py", line 4, in load',
    "    raise KeyError('x')",
    "KeyError: 'x'",
]

# (name, facts, kind or None, substrings the summary must contain)
ENDS = [
    ("clean success", {"outcome": "succeeded", "exit_code": 0, "saw_bye": True}, None, []),
    ("cancelled", {"outcome": "cancelled", "exit_code": None, "signal": "SIGTERM"}, None, []),
    ("thread error, exit 0", {"exit_code": 0, "error": ERR_THREAD, "saw_bye": True}, None, []),
    (
        "sys.exit(0)",
        {"exit_code": 0, "error": {**ERR_EXIT, "exit_code": 0, "message": "0"}},
        None,
        [],
    ),
    (
        "exception",
        {"exit_code": 1, "error": ERR_VALUE, "stage": "train"},
        "python_exception",
        ["ValueError: bad batch", "stage 'train'", "train.py:12 step"],
    ),
    (
        "a long message keeps the line that names the error (torch.load's weights_only)",
        {"exit_code": 1, "error": ERR_WEIGHTS_ONLY, "stage": "train"},
        "python_exception",
        [
            "UnpicklingError: Weights only load failed.",
            "checkpoint. ... (2) Alternatively, to load with `weights_only=True`",
            "error message. WeightsUnpickler error: Unsupported global: GLOBAL "
            "numpy.core.multiarray._reconstruct was not an allowed global by default.",
            "if you trust this class/function. ... in stage 'train'",
        ],
    ),
    (
        "a long message with no line that names an error is cut at its end",
        {"exit_code": 1, "error": {**ERR_VALUE, "message": "advice line\n" + "word " * 200}},
        "python_exception",
        ["ValueError: advice line word word", "word ... in stage"],
    ),
    (
        "a long message whose error line is long too: the first line keeps a third",
        {
            "exit_code": 1,
            "error": {
                **ERR_VALUE,
                "message": "head " * 100 + "\nSomeError: " + "detail " * 150,
            },
        },
        "python_exception",
        ["ValueError: head head", "he... ... SomeError: detail detail", "det... in stage"],
    ),
    (
        "exception in Chinese",
        {"exit_code": 1, "error": ERR_ZH},
        "python_exception",
        ["\u6570\u636e\u96c6"],
    ),
    (
        "exit 0 after a fatal error",
        {"exit_code": 0, "error": ERR_VALUE},
        "python_exception",
        ["ValueError"],
    ),
    (
        "exception printed, no worker",
        {"exit_code": 1, "log_tail": PRINTED_TB},
        "python_exception",
        ["KeyError: 'x'", "plain.py:4 load"],
    ),
    (
        "cuda oom from the worker",
        {"exit_code": 1, "error": ERR_OOM},
        "cuda_oom",
        ["CUDA out of memory", "train.py:50 forward"],
    ),
    ("cuda oom as RuntimeError", {"exit_code": 1, "error": ERR_OOM_TEXT}, "cuda_oom", []),
    (
        "cuda oom on stderr only",
        {
            "exit_code": 1,
            "log_tail": ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB"],
        },
        "cuda_oom",
        ["Tried to allocate"],
    ),
    (
        "segfault names the frame",
        {"signal": "SIGSEGV", "crash_text": FH_CRASH, "stage": "model"},
        "native_crash",
        ["SIGSEGV", "ctypes/__init__.py:519 string_at", "crash.py:7 poke", "stage 'model'"],
    ),
    (
        "abort, faulthandler on stderr",
        {"signal": "SIGABRT", "log_tail": ["x"] + FH_CRASH.splitlines()},
        "native_crash",
        ["SIGABRT", "crash.py:7 poke"],
    ),
    ("bus error without a stack", {"signal": "SIGBUS"}, "native_crash", ["unknown frame"]),
    (
        "sigkill",
        {"signal": "SIGKILL", "log_tail": ["epoch 3", ""]},
        "killed",
        ["SIGKILL", "epoch 3"],
    ),
    ("oom killer", {"signal": "SIGKILL", "oom_killed": True}, "oom_killed", ["out-of-memory"]),
    (
        "host memory under an address-space limit (torch's allocator)",
        {"exit_code": 1, "error": ERR_HOST_OOM},
        "host_oom",
        [
            "out of host memory in stage 'train' at nn/functional.py:2264 embedding "
            "(from job/makemore.py:145 forward)",
            "address-space limit 3.0 GiB, ulimit -v",
            "peak RSS 1.2 GiB",
            "DefaultCPUAllocator",
        ],
    ),
    (
        "MemoryError under a cgroup limit",
        {"exit_code": 1, "error": ERR_MEMORY_CGROUP},
        "host_oom",
        ["out of host memory", "memory limit of its cgroup 4.0 GiB", "MemoryError"],
    ),
    (
        "host memory, numpy on stderr, no worker",
        {
            "exit_code": 1,
            "log_tail": [
                "Traceback (most recent call last):",
                '  File "/job/prep.py", line 3, in <module>',
                "    x = np.zeros((1 << 20, 1 << 20))",
                "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 8.00 TiB for an "
                "array with shape (1048576, 1048576) and data type float64",
            ],
        },
        "host_oom",
        ["out of host memory at job/prep.py:3", "Unable to allocate 8.00 TiB"],
    ),
    (
        "disk full while saving a checkpoint (ENOSPC)",
        {"exit_code": 1, "error": ERR_ENOSPC},
        "disk_full",
        [
            "disk full in stage 'save' at job/train.py:286 save_checkpoint",
            "writing /ckpt/model-0004.pt",
            "/ckpt has 0 KiB free of 64.0 MiB",
        ],
    ),
    (
        "disk full, the filesystem did not answer statvfs in time (a hung mount)",
        {
            "exit_code": 1,
            "error": {
                **ERR_ENOSPC,
                "resources": {
                    "disk": {
                        "unknown": "the filesystem did not answer statvfs in 2 s (a hung mount?)"
                    }
                },
            },
        },
        "disk_full",
        ["disk full in stage 'save'", "(the filesystem did not answer statvfs in 2 s"],
    ),
    (
        "disk full under torch.save's generic error",
        {"exit_code": 1, "error": ERR_TORCH_SAVE},
        "disk_full",
        [
            "disk full at torch/serialization.py:651 save (from job/train.py:286 <module>)",
            "/ has 12 KiB free of 16.0 GiB",
            "unexpected pos",
        ],
    ),
    (
        "disk full on stderr, no worker",
        {
            "exit_code": 1,
            "log_tail": [
                "Traceback (most recent call last):",
                '  File "/job/dump.py", line 8, in <module>',
                "    f.write(blob)",
                "OSError: [Errno 28] No space left on device",
            ],
        },
        "disk_full",
        ["disk full at job/dump.py:8", "No space left on device"],
    ),
    ("sigterm from outside", {"signal": "SIGTERM"}, "killed", ["SIGTERM"]),
    (
        "sys.exit(3) with no error",
        {"exit_code": 3, "saw_bye": True, "log_tail": ["done?"]},
        "exit_nonzero",
        ["status 3", "done?"],
    ),
    (
        "sys.exit('message')",
        {"exit_code": 1, "error": ERR_EXIT},
        "exit_nonzero",
        ["status 1", "sys.exit('config file missing') at job/train.py:5 load_config"],
    ),
    (
        "sys.exit(3) known from the bye",
        {"exit_code": 3, "saw_bye": True, "bye": {"reason": "sys_exit", "exit_code": 3}},
        "exit_nonzero",
        ["from sys.exit(3)"],
    ),
    (
        "os._exit(7)",
        {"exit_code": 7, "saw_bye": False, "log_tail": ["about to leave"]},
        "exit_nonzero",
        ["status 7", "no last words", "about to leave"],
    ),
]


# Cases first written for the Node client's parity test, from when it had rules of its own.
NODE_FACTS = json.loads(
    r'''{"END_CASES": [{"outcome": "succeeded", "exit_code": 0, "log_tail": ["done"]}, {"outcome": "cancelled", "exit_code": null, "signal": "SIGINT"}, {"outcome": "failed", "exit_code": 1, "error": {"type": "ValueError", "message": "bad layer size: 0", "traceback": "", "frames": [{"file": "/home/u/train.py", "line": 12, "function": "<module>"}, {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1160, "function": "to"}], "chain": [], "stage": "model", "fatal": true, "thread": "MainThread", "kind": "exception"}, "saw_bye": true, "log_tail": ["x", "ValueError: bad layer size: 0"], "stage": "main"}, {"outcome": "failed", "exit_code": 1, "error": {"type": "ValueError", "message": "bad layer size: 0", "traceback": "", "frames": [{"file": "/home/u/train.py", "line": 12, "function": "<module>"}, {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1160, "function": "to"}], "chain": [], "stage": null, "fatal": true, "thread": "loader-3", "kind": "exception"}, "stage": "train"}, {"outcome": "failed", "exit_code": 1, "error": {"type": "torch.cuda.OutOfMemoryError", "message": "CUDA out of memory.", "traceback": "", "frames": [{"file": "/home/u/train.py", "line": 12, "function": "<module>"}, {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1160, "function": "to"}], "chain": [], "stage": "model", "fatal": true, "thread": "MainThread", "kind": "cuda_oom"}}, {"outcome": "failed", "exit_code": 1, "log_tail": ["Traceback (most recent call last):", "  File \"/home/u/train.py\", line 12, in <module>", "    main()", "  File \"/home/u/train.py\", line 8, in main", "    model.to(\"cuda\")", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", ""]}, {"outcome": "failed", "exit_code": 2, "log_tail": ["Traceback (most recent call last):", "  File \"a.py\", line 1, in <module>", "KeyError: 'lr'"]}, {"outcome": "crashed", "exit_code": null, "signal": "SIGSEGV", "crash_text": "Fatal Python error: Segmentation fault\n\nThread 0x1 (most recent call first):\n  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n\nCurrent thread 0x2 (most recent call first):\n  File \"/usr/lib/python3.11/ctypes/__init__.py\", line 519 in string_at\n  File \"/home/u/train.py\", line 34 in <module>\n", "log_tail": ["calling native code"], "stage": "forward"}, {"outcome": "crashed", "exit_code": null, "signal": "SIGABRT", "log_tail": ["Fatal Python error: Segmentation fault", "", "Thread 0x1 (most recent call first):", "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait", "", "Current thread 0x2 (most recent call first):", "  File \"/usr/lib/python3.11/ctypes/__init__.py\", line 519 in string_at", "  File \"/home/u/train.py\", line 34 in <module>", ""]}, {"outcome": "crashed", "exit_code": null, "signal": "SIGKILL", "log_tail": ["step 5"], "oom_killed": true}, {"outcome": "crashed", "exit_code": null, "signal": "SIGKILL", "log_tail": ["step 5"]}, {"outcome": "crashed", "exit_code": null, "signal": "SIGTERM", "log_tail": []}, {"outcome": "failed", "exit_code": 3, "error": {"type": "SystemExit", "message": "3", "traceback": "", "frames": [{"file": "/home/u/train.py", "line": 12, "function": "<module>"}, {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1160, "function": "to"}], "chain": [], "stage": "model", "fatal": true, "thread": "MainThread", "kind": "system_exit", "exit_code": 3}, "saw_bye": true}, {"outcome": "crashed", "exit_code": 7, "saw_bye": false, "log_tail": ["about to leave"]}, {"outcome": "failed", "exit_code": 0, "error": {"type": "ValueError", "message": "bad layer size: 0", "traceback": "", "frames": [{"file": "/home/u/train.py", "line": 12, "function": "<module>"}, {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1160, "function": "to"}], "chain": [], "stage": "model", "fatal": true, "thread": "MainThread", "kind": "exception"}, "saw_bye": true}, {"outcome": "succeeded", "exit_code": 0, "error": {"type": "ValueError", "message": "bad layer size: 0", "traceback": "", "frames": [{"file": "/home/u/train.py", "line": 12, "function": "<module>"}, {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1160, "function": "to"}], "chain": [], "stage": "model", "fatal": false, "thread": "MainThread", "kind": "exception"}}, {"outcome": "failed", "exit_code": 4, "saw_bye": true, "bye": {"reason": "sys_exit", "exit_code": 4}, "log_tail": ["bye"]}, {"outcome": "failed", "exit_code": 1, "error": {"type": "SystemExit", "message": "it's \"bad\"\\", "traceback": "", "frames": [], "chain": [], "stage": "model", "fatal": true, "thread": "MainThread", "kind": "system_exit", "exit_code": 1}, "saw_bye": true}], "HANG_CASES": [{"reason": "stall", "stage": "train", "stages": ["main", "train"], "idle_s": 31.2, "stack": "  File \"/home/u/train.py\", line 40, in <module>\n    time.sleep(1)\n", "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "clock_nanosleep", "wchan": "hrtimer_nanosleep", "state": "S"}, "cpu_fraction": 0}}, {"reason": "heartbeat", "stage": "tokenize", "idle_s": 0.4, "stacks": "Fatal Python error: Segmentation fault\n\nThread 0x1 (most recent call first):\n  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n\nCurrent thread 0x2 (most recent call first):\n  File \"/usr/lib/python3.11/ctypes/__init__.py\", line 519 in string_at\n  File \"/home/u/train.py\", line 34 in <module>\n", "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "clock_nanosleep", "wchan": "hrtimer_nanosleep", "state": "S"}, "cpu_fraction": 0.97}}, {"reason": "startup", "saw_hello": false, "idle_s": null, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "read", "fd": 3, "fd_target": "socket:[123]", "wchan": "sk_wait_data", "state": "S"}, "cpu_fraction": 0}}, {"reason": "stage_budget", "stage": "download", "idle_s": 12, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "read", "fd": 5, "wchan": "wait_woken", "state": "S"}, "cpu_fraction": 0, "sockets": [{"fd": 5, "raddr": ["10.0.0.1", 443], "status": "ESTABLISHED", "pid": 42}]}}, {"reason": "stall", "stage": "data", "idle_s": 40, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "futex", "wchan": "futex_wait_queue", "state": "S"}, "cpu_fraction": 0, "children": [{"pid": 77, "name": "python", "status": "stopped"}]}, "stack": "  File \"/usr/lib/python3.11/multiprocessing/queues.py\", line 113, in get\n"}, {"reason": "stall", "idle_s": 5, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "running", "main_thread": {"syscall": "running", "state": "R"}, "cpu_fraction": 0.99}}, {"reason": "stall", "idle_s": 5, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "disk-sleep", "main_thread": {"syscall": "read", "fd": 7, "fd_target": "/mnt/nfs/data.bin", "wchan": "nfs_wait", "state": "D"}, "cpu_fraction": 0}}, {"reason": "stall", "idle_s": 5, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "stopped", "main_thread": {"syscall": "clock_nanosleep", "wchan": "hrtimer_nanosleep", "state": "S"}, "cpu_fraction": 0}}, {"reason": "startup", "saw_hello": false, "evidence": {}, "stacks": "Thread 0x1 (most recent call first):\n  File \"<frozen importlib._bootstrap>\", line 1176 in _find_and_load\n  File \"/site-packages/torch/__init__.py\", line 9 in <module>\n  File \"<frozen importlib._bootstrap>\", line 1147 in _find_and_load_unlocked\n  File \"/home/u/train.py\", line 1 in <module>\n"}, {"reason": "after_bye", "idle_s": 3, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "futex", "state": "S"}, "cpu_fraction": 0}, "stack": "  File \"/usr/lib/python3.11/threading.py\", line 1119, in _wait_for_tstate_lock\n"}, {"reason": "stall", "idle_s": 2, "saw_hello": true, "evidence": {"alive": true}}, {"reason": "stall", "stage": "train", "idle_s": 3, "saw_hello": true, "stack": "  File \"scenarios/cpu_loop.py\", line 9, in spin\n", "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "futex", "wchan": "futex_do_wait", "state": "S", "runnable_fraction": 1}, "cpu_fraction": 1.008}}, {"reason": "stall", "idle_s": 3, "saw_hello": true, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "futex", "state": "S", "runnable_fraction": 0.4}, "cpu_fraction": 0.16}}, {"reason": "startup", "saw_hello": false, "idle_s": 130, "evidence": {"pid": 42, "alive": true, "status": "sleeping", "main_thread": {"syscall": "clock_nanosleep", "wchan": "hrtimer_nanosleep", "state": "S"}, "cpu_fraction": 0}}, {"reason": "stage_budget", "stage": "import torch", "saw_hello": true, "idle_s": 12, "evidence": {}, "stacks": "Thread 0x1 (most recent call first):\n  File \"<frozen importlib._bootstrap>\", line 1176 in _find_and_load\n  File \"/site-packages/torch/__init__.py\", line 9 in <module>\n  File \"<frozen importlib._bootstrap>\", line 1147 in _find_and_load_unlocked\n  File \"/home/u/train.py\", line 1 in <module>\n"}]}'''
)
NODE_END_KINDS = [
    None,
    None,
    'python_exception',
    'python_exception',
    'cuda_oom',
    'cuda_oom',
    'python_exception',
    'native_crash',
    'native_crash',
    'oom_killed',
    'killed',
    'killed',
    'exit_nonzero',
    'exit_nonzero',
    'python_exception',
    None,
    'exit_nonzero',
    'exit_nonzero',
]
NODE_HANG_KINDS = [
    'sleeping',
    'gil_held',
    'startup',
    'network_wait',
    'child_wait',
    'cpu_bound',
    'io_wait',
    'stopped',
    'import_hang',
    'lock_wait',
    'unknown',
    'cpu_bound',
    'cpu_bound',
    'startup',
    'import_hang',
]

# Further cases, added with later rules (see docs/DIAGNOSIS.md): (name, verdict,
# facts, kind, summary_has, hint_has).
NEW = [
    # The clients had drifted (Node's own rules, since gone, said unknown
    # for both).
    (
        "8 MiB of I/O in the window, no other sign",
        "hang",
        {
            "reason": "stall",
            "idle_s": 9,
            "evidence": proc("none", None, io={"read_bytes": 8 << 20, "write_bytes": 0}),
        },
        "io_wait",
        ["waiting for I/O for 9 s"],
        ["mount"],
    ),
    # makemore --num-workers 4, one worker SIGSTOPped; the main thread
    # reads an AF_UNIX socket (torch's fd sharing) in multiprocessing/connection.py.
    (
        "read on a unix socket whose peer is a stopped DataLoader worker",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stage": "train",
            "stack": FH_UNIX_RECV,
            "evidence": {
                **proc(
                    "read",
                    "unix_stream_read_generic",
                    fd=9,
                    fd_target="socket:[4711]",
                    children=DL_WORKERS,
                ),
                "main_thread": {
                    "tid": 100,
                    "state": "S",
                    "syscall": "read",
                    "wchan": "unix_stream_read_generic",
                    "fd": 9,
                    "fd_target": "socket:[4711]",
                    "fd_family": "unix",
                },
                "unix_peer": {"inode": 4711, "peer_inode": 4712, "pid": 203, "fd": 14},
            },
        },
        "child_wait",
        ["DataLoader worker 2 (pid 203, stopped)", "stage 'train'", "connection.py:395 _recv"],
        ["kill -CONT 203"],
    ),
    # The stopped child's own stack: its dump_stacks answer when it runs a worker,
    # else py-spy's dump of it, else its kernel stack (/proc/PID/stack, root) or its wchan.
    (
        "stopped DataLoader worker: its kernel stack is named",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stage": "train",
            "stack": FH_UNIX_RECV,
            "evidence": {
                **proc(
                    "read",
                    "unix_stream_read_generic",
                    fd=9,
                    fd_target="socket:[4711]",
                    children=[
                        dict(
                            c,
                            wchan="do_signal_stop",
                            kernel_stack=[
                                "do_signal_stop",
                                "get_signal",
                                "arch_do_signal_or_restart",
                                "exit_to_user_mode_loop",
                            ],
                        )
                        if c["pid"] == 203
                        else c
                        for c in DL_WORKERS
                    ],
                ),
                "unix_peer": {"inode": 4711, "peer_inode": 4712, "pid": 203, "fd": 14},
            },
        },
        "child_wait",
        [
            "DataLoader worker 2 (pid 203, stopped), itself in the kernel at do_signal_stop "
            "<- get_signal <- arch_do_signal_or_restart",
        ],
        ["kill -CONT 203"],
    ),
    (
        "stopped child, no kernel stack readable: its wchan is named",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stack": FH_UNIX_RECV,
            "evidence": proc(
                "recvmsg",
                "unix_stream_read_generic",
                children=[
                    dict(c, wchan="do_signal_stop") if c["pid"] == 203 else c for c in DL_WORKERS
                ],
            ),
        },
        "child_wait",
        ["DataLoader worker 2 (pid 203, stopped), itself in the kernel at do_signal_stop"],
        ["kill -CONT 203"],
    ),
    (
        "a sleeping child that answered dump_stacks: its own frame is named",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stack": FH_UNIX_RECV,
            "process_stacks": {
                "202": 'Thread 0x7f01 "MainThread" (most recent call last):\n'
                '  File "/job/data.py", line 40, in <module>\n'
                '  File "/job/data.py", line 12, in __getitem__\n',
            },
            "evidence": {
                **proc(
                    "read",
                    "unix_stream_read_generic",
                    fd=9,
                    fd_target="socket:[4711]",
                    children=[
                        dict(c, wchan="hrtimer_nanosleep") if c["pid"] == 202 else c
                        for c in DL_WORKERS
                    ],
                ),
                "unix_peer": {"inode": 4711, "peer_inode": 4712, "pid": 202, "fd": 14},
            },
        },
        "child_wait",
        ["DataLoader worker 1 (pid 202, sleeping), itself at job/data.py:12 __getitem__"],
        [],
    ),
    (
        "a child with py-spy's dump in the evidence: its frame is named",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stack": FH_UNIX_RECV,
            "evidence": proc(
                "recvmsg",
                "unix_stream_read_generic",
                children=[
                    dict(c, py_stack=PYSPY_LOCK, kernel_stack=["futex_wait"])
                    if c["pid"] == 203
                    else c
                    for c in DL_WORKERS
                ],
            ),
        },
        "child_wait",
        ["DataLoader worker 2 (pid 203, stopped), itself at train.py:8 acquire_both"],
        [],
    ),
    (
        "unix socket, wchan only, peer unknown: the stopped worker is named",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stack": FH_UNIX_RECV,
            "evidence": proc("recvmsg", "unix_stream_read_generic", children=DL_WORKERS),
        },
        "child_wait",
        ["DataLoader worker 2 (pid 203, stopped)"],
        ["kill -CONT 203"],
    ),
    (
        "unix socket to a spinning DataLoader worker",
        "hang",
        {
            "reason": "stall",
            "idle_s": 25,
            "stack": FH_UNIX_RECV,
            "evidence": {
                **proc(
                    "read",
                    "unix_stream_read_generic",
                    fd=9,
                    fd_target="socket:[4711]",
                    children=[
                        dict(c, status="running", cpu_fraction=0.97) if c["pid"] == 203 else c
                        for c in DL_WORKERS
                    ],
                ),
                "unix_peer": {"inode": 4711, "peer_inode": 4712, "pid": 203, "fd": 14},
            },
        },
        "child_wait",
        ["DataLoader worker 2 (pid 203, spinning)"],
        ["__getitem__", "num_workers=0"],
    ),
    (
        "a DataLoader waiting in select for a stopped worker (no socket of its own)",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "stage": "train",
            "stack": TB_DATALOADER_SELECT,
            "evidence": proc("poll", "poll_schedule_timeout.constprop.0", children=DL_WORKERS),
        },
        "child_wait",
        [
            "DataLoader worker 2 (pid 203, stopped)",
            "selectors.py:415 select",
            "dataloader_worker_stopped.py:28 train",
        ],
        ["kill -CONT 203"],
    ),
    # Four forked DataLoader workers deadlocked on a lock a thread of the main process
    # held at fork time: each answered SIGUSR1 (the handler came with the fork) from the
    # same frame; the first named alone hid that all four wait on the same thing.
    (
        "all DataLoader workers wait on the same lock: grouped, with their Python frame",
        "hang",
        {
            "reason": "stall",
            "idle_s": 7,
            "stage": "train",
            "stack": TB_DATALOADER_SELECT,
            "process_stacks": {
                str(pid): "Current thread 0x00007f0000000001 (most recent call first):\n"
                '  File "/job/data.py", line 29 in __getitem__\n'
                '  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/fetch.py", '
                "line 54 in fetch\n"
                for pid in (201, 202, 203, 204)
            },
            "evidence": proc(
                "poll",
                "poll_schedule_timeout.constprop.0",
                children=[dict(c, status="sleeping", wchan="futex_do_wait") for c in DL_WORKERS],
            ),
        },
        "child_wait",
        [
            "all 4 DataLoader workers (pids 201, 202, 203, 204, sleeping), all blocked on the "
            "same wait, each at job/data.py:29 __getitem__",
        ],
        ["wait for a lock at job/data.py:29 __getitem__", "multiprocessing_context='spawn'"],
    ),
    (
        "three DataLoader workers in the same kernel wait, no Python stacks: grouped",
        "hang",
        {
            "reason": "stall",
            "idle_s": 7,
            "stage": "train",
            "stack": TB_DATALOADER_SELECT,
            "evidence": proc(
                "poll",
                "poll_schedule_timeout.constprop.0",
                children=[
                    dict(c, wchan="futex_do_wait")
                    if c["pid"] != 203
                    else dict(c, wchan="pipe_read", status="sleeping")
                    for c in DL_WORKERS
                ],
            ),
        },
        "child_wait",
        [
            "3 DataLoader workers (pids 201, 202, 204, sleeping), all blocked on the same "
            "wait, each in the kernel at futex_do_wait",
        ],
        ["py-spy dump --pid 201"],
    ),
    # makemore, a DataLoader worker SIGKILLed; torch raises in the main
    # process and the hint said "fix the error raised at makemore.py:684".
    (
        "a DataLoader worker killed, the OOM killer counted",
        "end",
        {
            "outcome": "failed",
            "exit_code": 1,
            "stage": "train",
            "oom_kills": 1,
            "error": ERR_WORKER_KILLED,
        },
        "child_killed",
        [
            "a DataLoader worker (pid 17660) died of SIGKILL in stage 'train'",
            "makemore.py:684 <module>",
        ],
        ["OOM killer killed it", "num_workers"],
    ),
    (
        "a DataLoader worker killed, no OOM kill in the cgroup",
        "end",
        {"outcome": "failed", "exit_code": 1, "oom_kills": 0, "error": ERR_WORKER_KILLED},
        "child_killed",
        ["died of SIGKILL"],
        ["logged no OOM kill", "dmesg"],
    ),
    (
        "a DataLoader worker killed, printed by a script without the worker",
        "end",
        {
            "outcome": "failed",
            "exit_code": 1,
            "log_tail": [
                "RuntimeError: DataLoader worker (pid 17660) is killed by signal: Killed. ",
                "",
                "The above exception was the direct cause of the following exception:",
                "",
                "Traceback (most recent call last):",
                '  File "/job/makemore.py", line 684, in <module>',
                "    loss.backward()",
                "RuntimeError: DataLoader worker (pid(s) 17660) exited unexpectedly",
            ],
        },
        "child_killed",
        ["died of SIGKILL", "makemore.py:684 <module>"],
        ["OOM killer"],
    ),
    (
        "a DataLoader worker out of shared memory",
        "end",
        {
            "outcome": "failed",
            "exit_code": 1,
            "error": {
                **ERR_WORKER_KILLED,
                "message": "DataLoader worker (pid 300) is killed by signal: Bus "
                "error. It is possible that dataloader's workers are out of shared memory.",
                "chain": [],
            },
        },
        "child_killed",
        ["died of SIGBUS"],
        ["/dev/shm"],
    ),
    # Margins against sampling jitter. The parity fixture (a time.sleep(0.05) loop) got `sleeping`
    # from one client and not from the other: one read at the end decided.
    (
        "a sleep loop caught between two sleeps is sleeping, not a CPU loop",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "stack": FH_SLEEP,
            "evidence": {
                **proc("running", None, status="running", cpu=0.06),
                "main_thread": {
                    "tid": 100,
                    "state": "R",
                    "syscall": "running",
                    "runnable_fraction": 0.08,
                    "wait_samples": {"hrtimer_nanosleep": 23, "running": 2},
                },
            },
        },
        "sleeping",
        ["sleeping for 3 s"],
        [],
    ),
    (
        "a sleep loop whose last read caught the GIL's futex is sleeping",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "evidence": {
                **proc("futex", "futex_wait_queue", cpu=0.06),
                "main_thread": {
                    "tid": 100,
                    "state": "S",
                    "syscall": "futex",
                    "wchan": "futex_wait_queue",
                    "runnable_fraction": 0.08,
                    "wait_samples": {"hrtimer_nanosleep": 20, "futex_wait_queue": 3, "running": 2},
                },
            },
        },
        "sleeping",
        [],
        [],
    ),
    (
        "one runnable sample is not a loop",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "evidence": {
                **proc("running", None, status="running", cpu=0.06),
                "main_thread": {
                    "tid": 100,
                    "state": "R",
                    "syscall": "running",
                    "runnable_fraction": 0.04,
                },
            },
        },
        "unknown",
        [],
        [],
    ),
    (
        "at the runnable edge a blocking wait seen in most samples decides",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "stack": TB_JOIN,
            "evidence": {
                **proc("running", None, status="running", cpu=0.3),
                "main_thread": {
                    "tid": 100,
                    "state": "R",
                    "syscall": "running",
                    "runnable_fraction": 0.2,
                    "wait_samples": {"futex_wait_queue": 20, "running": 5},
                },
            },
        },
        "lock_wait",
        [],
        [],
    ),
    (
        "at the runnable edge with no dominant wait, a loop in user code spins",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "stacks": FH_LOOP,
            "evidence": {
                **proc("running", None, status="running", cpu=0.3),
                "main_thread": {
                    "tid": 100,
                    "state": "R",
                    "syscall": "running",
                    "runnable_fraction": 0.2,
                    "wait_samples": {"futex_wait_queue": 12, "running": 5, "hrtimer_nanosleep": 8},
                },
            },
        },
        "cpu_bound",
        ["spin.py:4 busy"],
        [],
    ),
    (
        "a DataLoader poll seen in the samples",
        "hang",
        {
            "reason": "stall",
            "idle_s": 3,
            "evidence": {
                **proc("running", None, status="running", cpu=0.01, children=DL_WORKERS),
                "main_thread": {
                    "tid": 100,
                    "state": "R",
                    "syscall": "running",
                    "runnable_fraction": 0.04,
                    "wait_samples": {"poll_schedule_timeout.constprop.0": 24, "running": 1},
                },
            },
        },
        "child_wait",
        ["DataLoader worker 2 (pid 203, stopped)"],
        [],
    ),
    # Escapes out of every text meant for people; the advice kept.
    (
        "an error with terminal escapes and its advice after 300 characters",
        "end",
        {
            "outcome": "failed",
            "exit_code": 1,
            "error": {
                "type": "_pickle.UnpicklingError",
                "kind": "exception",
                "fatal": True,
                "message": "Weights only load failed. This file can still be loaded, to do so you "
                "have two options, \x1b[1mdo those steps only if you trust the source of "
                "the checkpoint\x1b[0m. \n\t(1) In PyTorch 2.6, we changed the default "
                "value of the `weights_only` argument in `torch.load` from `False` to "
                "`True`. Re-running `torch.load` with `weights_only` set to `False` will "
                "likely succeed, but it can result in arbitrary code execution.",
                "frames": [{"file": "/job/train.py", "line": 7, "function": "main"}],
            },
        },
        "python_exception",
        [
            "trust the source of the checkpoint. (1) In PyTorch 2.6",
            "set to `False` will likely succeed",
        ],
        [],
    ),
    # The worker loaded (stage box) but never said hello; SIGUSR1 gave the
    # stack; heartbeat deadline.
    (
        "GIL held right after import worker, before hello",
        "hang",
        {
            "reason": "heartbeat",
            "saw_hello": False,
            "worker_loaded": True,
            "stacks": FH_GIL,
            "evidence": proc("clock_nanosleep", "hrtimer_nanosleep"),
        },
        "gil_held",
        ["never said hello", "gil.py:5 hold"],
        ["GIL"],
    ),
    (
        "unix socket with no process of the job behind it stays what it was",
        "hang",
        {
            "reason": "stall",
            "stack": TB_SOCKET,
            "evidence": proc("read", "unix_stream_read_generic", fd=9, fd_target="socket:[4711]"),
        },
        "network_wait",
        [],
        [],
    ),
]


# The job's stage at its end (stage_at_end): (name, stages, error, stage).
# began / closed: the order in which the client received the stage's begin and end.
def ST(name, status, began, closed, depth=0):
    return {"name": name, "status": status, "began": began, "closed": closed, "depth": depth}


STAGES = [
    (
        "an import that finished is not where a later error was raised",
        [ST("startup", "ok", 1, 2), ST("main", "error", 3, 6), ST("import numpy", "ok", 4, 5, 1)],
        None,
        "main",
    ),
    (
        "the error names its stage",
        [ST("main", "error", 1, 4), ST("import torch", "ok", 2, 3, 1)],
        {"type": "ModuleNotFoundError", "stage": "main", "fatal": True},
        "main",
    ),
    (
        "the innermost open stage",
        [
            ST("main", "running", 1, None),
            ST("train", "running", 2, None, 1),
            ST("import PIL", "ok", 3, 4, 2),
        ],
        None,
        "train",
    ),
    (
        "the innermost stage the end unwound through",
        [
            ST("main", "error", 1, 12),
            ST("train", "error", 2, 11, 1),
            ST("step", "ok", 3, 4, 2),
            ST("eval", "error", 5, 10, 2),
            ST("import PIL", "ok", 6, 7, 3),
        ],
        None,
        "eval",
    ),
    (
        "an error caught long ago does not count",
        [ST("main", "ok", 1, 8), ST("download", "error", 2, 3, 1), ST("train", "ok", 4, 7, 1)],
        None,
        "main",
    ),
    (
        "a clean end: the last stage to close (zero-code's main, closed at exit)",
        [
            ST("startup", "ok", 1, 2),
            ST("main", "ok", 3, 8),
            ST("train", "ok", 4, 6, 1),
            ST("save", "ok", 5, 7, 1),
        ],
        None,
        "main",
    ),
    ("no stages", [], None, None),
]


def rows():
    out = []
    for name, facts, kind, summary_has, hint_has in HANGS:
        out.append((name, "hang", facts, kind, summary_has, hint_has))
    for name, facts, kind, summary_has in ENDS:
        out.append((name, "end", facts, kind, summary_has, []))
    for i, (facts, kind) in enumerate(zip(NODE_FACTS["END_CASES"], NODE_END_KINDS)):
        label = facts.get("signal") or facts.get("exit_code")
        out.append((f"node end {i}: {facts.get('outcome')} {label}", "end", facts, kind, [], []))
    for i, (facts, kind) in enumerate(zip(NODE_FACTS["HANG_CASES"], NODE_HANG_KINDS)):
        out.append((f"node hang {i}: {facts.get('reason')}", "hang", facts, kind, [], []))
    out.extend(NEW)
    for name, stages, error, stage in STAGES:
        out.append((name, "stage", {"stages": stages, "error": error}, stage, [], []))
    return out


def build():
    sys.path.insert(0, ROOT)
    from trainbridge.bridge import diagnosis

    cases, names = [], set()
    for name, verdict, facts, kind, summary_has, hint_has in rows():
        assert name not in names, f"two rows named {name!r}"
        names.add(name)
        facts = json.loads(json.dumps(facts))  # tuples -> lists, as the JSON will hold them
        if verdict == "stage":
            got = diagnosis.stage_at_end(facts["stages"], facts["error"])
            assert got == kind, (name, kind, got)
            cases.append(
                {
                    "name": name,
                    "verdict": verdict,
                    "facts": facts,
                    "kind": None,
                    "summary_has": [],
                    "hint_has": [],
                    "expect": {"stage": got},
                }
            )
            continue
        got = (diagnosis.diagnose_end if verdict == "end" else diagnosis.diagnose_hang)(facts)
        if kind is None:
            assert got is None, (name, got)
            expect = None
        else:
            assert got is not None and got["kind"] == kind, (name, kind, got and got["kind"])
            for part in summary_has:
                assert part in got["summary"], (name, part, got["summary"])
            for part in hint_has:
                assert part in got["hint"], (name, part, got["hint"])
            expect = {
                "kind": got["kind"],
                "frame": got["evidence"].get("frame"),
                "summary": got["summary"],
                "hint": got["hint"],
            }
        cases.append(
            {
                "name": name,
                "verdict": verdict,
                "facts": facts,
                "kind": kind,
                "summary_has": summary_has,
                "hint_has": hint_has,
                "expect": expect,
            }
        )
    return {
        "about": "Shared diagnosis cases (written by tests/diagnosis/make_diagnosis_vectors.py; "
        "see its docstring). A case: verdict ('end': diagnose_end, 'hang': "
        "diagnose_hang, 'stage': stage_at_end(facts.stages, facts.error) -> "
        "expect.stage), facts (the function's input), kind (null: no diagnosis), "
        "summary_has / hint_has (hand-written substrings), expect (kind, frame = "
        "evidence.frame, summary, hint; null when there is no diagnosis). Both "
        "clients must give expect exactly.",
        "kinds": list(diagnosis.kinds()),
        "cases": cases,
    }


if __name__ == "__main__":
    data = build()
    with open(os.path.join(ROOT, "vectors", "diagnosis.json"), "w", encoding="ascii") as f:
        json.dump(data, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(data['cases'])} cases")
