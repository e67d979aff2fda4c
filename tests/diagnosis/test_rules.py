"""Table tests of the pure diagnosis rules (bridge/diagnosis.py): facts in, diagnosis out.

Each row is a situation a user meets; the stacks and /proc values are the real formats
(faulthandler, traceback, py-spy; Linux x86_64 wchan and syscall names)."""

import pytest

from trainbridge.bridge import diagnosis as d

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


def proc(syscall=None, wchan=None, status="sleeping", cpu=0.0, fd=None, fd_target=None,
         sockets=(), children=(), gpu=None, alive=True, io=None):
    main = {"tid": 100, "state": {"sleeping": "S", "running": "R", "disk-sleep": "D",
                                  "stopped": "T"}.get(status, "S")}
    if syscall:
        main["syscall"] = syscall
    if wchan:
        main["wchan"] = wchan
    if fd is not None:
        main["fd"] = fd
    if fd_target:
        main["fd_target"] = fd_target
    return {"pid": 100, "alive": alive, "status": status, "cpu_fraction": cpu,
            "main_thread": main, "sockets": list(sockets), "children": list(children),
            "io_delta": io or {"read_bytes": 0, "write_bytes": 0}, "gpu": gpu,
            "gpu_note": None if gpu else "no NVIDIA GPU (pynvml: test)"}


HTTPS = {"pid": 100, "fd": 5, "type": "tcp", "laddr": ["10.0.0.2", 50000],
         "raddr": ["1.2.3.4", 443], "status": "ESTABLISHED"}
ZOMBIE_OR_STOPPED = {"pid": 101, "name": "python", "status": "stopped", "ppid": 100}

# (name, facts, kind, substrings the summary must contain, substrings the hint must contain)
HANGS = [
    ("sleep from kernel and stack", {"reason": "stall", "idle_s": 12, "stack": FH_SLEEP,
                                     "evidence": proc("clock_nanosleep", "hrtimer_nanosleep")},
     "sleeping", ["train.py:12 wait_for_data", "12 s"], []),
    ("socket read names the remote", {"reason": "stall", "idle_s": 300, "stack": TB_SOCKET,
                                      "evidence": proc("recvfrom", "wait_woken", fd=5,
                                                       fd_target="socket:[123]",
                                                       sockets=[HTTPS])},
     "network_wait", ["1.2.3.4:443", "socket.py:706 readinto", "train.py:21 download"],
     ["1.2.3.4:443 for 300 s", "HTTPS_PROXY"]),
    ("socket in poll, found by its connection", {"reason": "stage_budget", "stage": "data",
                                                 "stack": TB_SOCKET,
                                                 "evidence": proc("poll", "do_sys_poll",
                                                                  sockets=[HTTPS])},
     "network_wait", ["1.2.3.4:443", "stage 'data'"], []),
    ("socket known from the stack only", {"reason": "stall", "stack": TB_SOCKET},
     "network_wait", ["socket.py:706 readinto"], []),
    ("connect in progress", {"reason": "stall", "stack": TB_SOCKET,
                             "evidence": proc("connect", "inet_wait_for_connect", fd=5,
                                              sockets=[{**HTTPS, "status": "SYN_SENT"}])},
     "network_wait", ["connecting to 1.2.3.4:443"], []),
    ("lock from py-spy", {"reason": "stall", "evidence": {**proc("futex", "futex_wait_queue"),
                                                          "py_spy": PYSPY_LOCK}},
     "lock_wait", ["train.py:8 acquire_both"], ["deadlock"]),
    ("join on a thread", {"reason": "stall", "stack": TB_JOIN, "evidence": proc("futex")},
     "lock_wait", ["threading.py:1132 _wait_for_tstate_lock", "train.py:9 <module>"], []),
    ("cpu loop", {"reason": "stall", "stacks": FH_LOOP,
                  "evidence": proc("running", None, status="running", cpu=0.98)},
     "cpu_bound", ["spin.py:4 busy", "98%"], ["infinite loop"]),
    ("cpu loop on a loaded machine: little CPU, always runnable", {
        "reason": "stall", "stacks": FH_LOOP,
        "evidence": {**proc("running", None, status="running", cpu=0.2),
                     "main_thread": {"state": "R", "syscall": "running",
                                     "runnable_fraction": 1.0}}},
     "cpu_bound", ["spin.py:4 busy"], []),
    ("cpu loop sharing the GIL on a loaded machine", {
        "reason": "stall", "stacks": FH_LOOP,
        "evidence": {**proc("running", None, status="running", cpu=0.16),
                     "main_thread": {"state": "R", "syscall": "running",
                                     "runnable_fraction": 0.4}}},
     "cpu_bound", ["spin.py:4 busy"], []),
    ("cpu loop caught waiting for the GIL at the last read", {
        "reason": "stall", "stacks": FH_LOOP,
        "evidence": {**proc("futex", "futex_do_wait", status="sleeping", cpu=0.54),
                     "main_thread": {"state": "S", "syscall": "futex",
                                     "wchan": "futex_do_wait", "runnable_fraction": 0.96}}},
     "cpu_bound", ["spin.py:4 busy"], []),
    ("main thread waits while another thread computes", {
        "reason": "stall", "stack": TB_JOIN,
        "evidence": {**proc("futex", status="sleeping", cpu=1.0),
                     "main_thread": {"state": "S", "syscall": "futex",
                                     "runnable_fraction": 0.0}}},
     "lock_wait", [], []),
    ("a lock waiter that was R once is not a CPU loop", {
        "reason": "stall", "stack": TB_JOIN,
        "evidence": {**proc("futex", status="sleeping", cpu=0.06),
                     "main_thread": {"state": "S", "syscall": "futex",
                                     "runnable_fraction": 0.04}}},
     "lock_wait", [], []),
    ("a short wake-up is not a CPU loop", {
        "reason": "stall", "stacks": FH_SLEEP,
        "evidence": {**proc("clock_nanosleep", status="sleeping", cpu=0.01),
                     "main_thread": {"state": "S", "syscall": "clock_nanosleep",
                                     "runnable_fraction": 0.1}}},
     "sleeping", [], []),
    ("gil held in native code", {"reason": "heartbeat", "stacks": FH_GIL,
                                 "evidence": proc("clock_nanosleep", "hrtimer_nanosleep")},
     "gil_held", ["gil.py:5 hold", "blocked in native code"], ["GIL"]),
    ("stall where no Python answered a dump (SIGUSR2 sent)",
     {"reason": "stall", "stacks": FH_GIL, "python_silent": True,
      "evidence": proc("futex", "futex_wait_queue")},
     "gil_held", ["gil.py:5 hold", "blocked in native code"], ["GIL"]),
    ("the same stall when Python answered: a lock",
     {"reason": "stall", "stacks": FH_GIL, "python_silent": False,
      "evidence": proc("futex", "futex_wait_queue")},
     "lock_wait", [], []),
    ("gil held, spinning", {"reason": "heartbeat_silence", "stacks": FH_GIL,
                            "evidence": proc("running", status="running", cpu=1.0)},
     "gil_held", ["spinning"], []),
    ("child stopped while parent reads its queue", {
        "reason": "stall", "stack": FH_QUEUE,
        "evidence": proc("read", "pipe_read", fd=7, fd_target="pipe:[999]",
                         children=[ZOMBIE_OR_STOPPED])},
     "child_wait", ["child pid 101 (python, stopped)", "loader.py:20 next_batch"],
     ["kill -CONT 101"]),
    ("parent in wait4 on a child", {"reason": "stall",
                                    "evidence": proc("wait4", "do_wait", children=[
                                        {"pid": 102, "name": "tar", "status": "sleeping"}])},
     "child_wait", ["child pid 102 (tar, sleeping)"], []),
    ("import hang", {"reason": "stall", "stacks": FH_IMPORT, "saw_hello": True,
                     "evidence": proc("clock_nanosleep")},
     "import_hang", ["stuck importing slowmod", "slowmod.py:3 <module>"], ["import slowmod"]),
    ("import hang of a package before hello", {"reason": "startup", "stacks": FH_PKG_IMPORT,
                                               "saw_hello": False},
     "import_hang", ["stuck importing bigpkg", "never said hello"], []),
    ("no hello, no stack", {"reason": "startup", "saw_hello": False, "idle_s": 5,
                            "evidence": proc("clock_nanosleep", "hrtimer_nanosleep")},
     "startup", ["never said hello", "sleeping"], ["import worker"]),
    ("no hello, faulthandler stack", {"reason": "startup", "saw_hello": False,
                                      "stacks": FH_SLEEP},
     "startup", ["train.py:12 wait_for_data"], []),
    ("disk sleep", {"reason": "stall", "evidence": proc("read", "folio_wait_bit", "disk-sleep",
                                                        fd=3, fd_target="/mnt/nfs/data.bin")},
     "io_wait", ["/mnt/nfs/data.bin"], ["mount"]),
    ("reading a FIFO with no children", {"reason": "stall",
                                         "evidence": proc("read", "pipe_read", fd=0,
                                                          fd_target="pipe:[5]")},
     "io_wait", [], []),
    ("gpu busy", {"reason": "stall", "evidence": proc("running", status="running", cpu=1.0,
                                                      gpu=[{"index": 0, "util_percent": 99,
                                                            "used_by_job": True}])},
     "gpu_busy", ["GPU is busy"], ["nvidia-smi"]),
    ("gpu busy with another job is not ours", {
        "reason": "stall", "evidence": proc("clock_nanosleep", gpu=[
            {"index": 0, "util_percent": 99, "used_by_job": False}])},
     "sleeping", [], []),
    ("process stopped", {"reason": "heartbeat_silence",
                         "evidence": proc(None, "do_signal_stop", status="stopped")},
     "stopped", ["stopped"], ["kill -CONT 100"]),
    ("after bye, stuck joining a thread", {"reason": "after_bye", "stack": TB_JOIN,
                                           "evidence": proc("futex")},
     "lock_wait", ["after the script said bye", "train.py:9 <module>"], []),
    ("nothing known", {"reason": "stall"}, "unknown", ["no progress"], []),
]


@pytest.mark.parametrize("name,facts,kind,summary_has,hint_has", HANGS,
                         ids=[row[0] for row in HANGS])
def test_hang_table(name, facts, kind, summary_has, hint_has):
    got = d.diagnose_hang(facts)
    assert got["kind"] == kind, got
    for part in summary_has:
        assert part in got["summary"], (part, got["summary"])
    for part in hint_has:
        assert part in got["hint"], (part, got["hint"])
    assert "\n" not in got["summary"] and "\n" not in got["hint"]
    assert got["kind"] in d.kinds()


ERR_VALUE = {"type": "ValueError", "message": "bad batch", "kind": "exception", "fatal": True,
             "thread": "MainThread", "stage": "train",
             "frames": [{"file": "/job/train.py", "line": 30, "function": "<module>"},
                        {"file": "/job/train.py", "line": 12, "function": "step"}]}
ERR_OOM = {"type": "torch.OutOfMemoryError", "kind": "cuda_oom", "fatal": True,
           "message": "CUDA out of memory. Tried to allocate 2.00 GiB",
           "frames": [{"file": "/job/train.py", "line": 50, "function": "forward"}]}
ERR_OOM_TEXT = {"type": "RuntimeError", "kind": "exception", "fatal": True,
                "message": "CUDA out of memory. Tried to allocate 20.00 MiB", "frames": []}
ERR_EXIT = {"type": "SystemExit", "kind": "system_exit", "fatal": True,
            "message": "config file missing", "exit_code": 1,
            "frames": [{"file": "/job/train.py", "line": 5, "function": "load_config"}]}
ERR_THREAD = {**ERR_VALUE, "fatal": False, "thread": "Thread-1"}
ERR_ZH = {**ERR_VALUE, "message": "\u6570\u636e\u96c6\u4e0d\u5b58\u5728"}
PRINTED_TB = ["step 1", "Traceback (most recent call last):",
              '  File "/job/plain.py", line 9, in <module>', "    load()",
              '  File "/job/plain.py", line 4, in load', "    raise KeyError('x')",
              "KeyError: 'x'"]

# (name, facts, kind or None, substrings the summary must contain)
ENDS = [
    ("clean success", {"outcome": "succeeded", "exit_code": 0, "saw_bye": True}, None, []),
    ("cancelled", {"outcome": "cancelled", "exit_code": None, "signal": "SIGTERM"}, None, []),
    ("thread error, exit 0", {"exit_code": 0, "error": ERR_THREAD, "saw_bye": True}, None, []),
    ("sys.exit(0)", {"exit_code": 0, "error": {**ERR_EXIT, "exit_code": 0, "message": "0"}},
     None, []),
    ("exception", {"exit_code": 1, "error": ERR_VALUE, "stage": "train"}, "python_exception",
     ["ValueError: bad batch", "stage 'train'", "train.py:12 step"]),
    ("exception in Chinese", {"exit_code": 1, "error": ERR_ZH}, "python_exception",
     ["\u6570\u636e\u96c6"]),
    ("exit 0 after a fatal error", {"exit_code": 0, "error": ERR_VALUE}, "python_exception",
     ["ValueError"]),
    ("exception printed, no worker", {"exit_code": 1, "log_tail": PRINTED_TB},
     "python_exception", ["KeyError: 'x'", "plain.py:4 load"]),
    ("cuda oom from the worker", {"exit_code": 1, "error": ERR_OOM}, "cuda_oom",
     ["CUDA out of memory", "train.py:50 forward"]),
    ("cuda oom as RuntimeError", {"exit_code": 1, "error": ERR_OOM_TEXT}, "cuda_oom", []),
    ("cuda oom on stderr only", {"exit_code": 1, "log_tail": [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB"]}, "cuda_oom",
     ["Tried to allocate"]),
    ("segfault names the frame", {"signal": "SIGSEGV", "crash_text": FH_CRASH,
                                  "stage": "model"},
     "native_crash", ["SIGSEGV", "ctypes/__init__.py:519 string_at", "crash.py:7 poke",
                      "stage 'model'"]),
    ("abort, faulthandler on stderr", {"signal": "SIGABRT",
                                       "log_tail": ["x"] + FH_CRASH.splitlines()},
     "native_crash", ["SIGABRT", "crash.py:7 poke"]),
    ("bus error without a stack", {"signal": "SIGBUS"}, "native_crash", ["unknown frame"]),
    ("sigkill", {"signal": "SIGKILL", "log_tail": ["epoch 3", ""]}, "killed",
     ["SIGKILL", "epoch 3"]),
    ("oom killer", {"signal": "SIGKILL", "oom_killed": True}, "oom_killed", ["out-of-memory"]),
    ("sigterm from outside", {"signal": "SIGTERM"}, "killed", ["SIGTERM"]),
    ("sys.exit(3) with no error", {"exit_code": 3, "saw_bye": True, "log_tail": ["done?"]},
     "exit_nonzero", ["status 3", "done?"]),
    ("sys.exit('message')", {"exit_code": 1, "error": ERR_EXIT}, "exit_nonzero",
     ["status 1", "sys.exit('config file missing') at job/train.py:5 load_config"]),
    ("sys.exit(3) known from the bye", {"exit_code": 3, "saw_bye": True,
                                        "bye": {"reason": "sys_exit", "exit_code": 3}},
     "exit_nonzero", ["from sys.exit(3)"]),
    ("os._exit(7)", {"exit_code": 7, "saw_bye": False, "log_tail": ["about to leave"]},
     "exit_nonzero", ["status 7", "no last words", "about to leave"]),
]


@pytest.mark.parametrize("name,facts,kind,summary_has", ENDS, ids=[row[0] for row in ENDS])
def test_end_table(name, facts, kind, summary_has):
    got = d.diagnose_end(facts)
    if kind is None:
        assert got is None
        return
    assert got is not None and got["kind"] == kind, got
    for part in summary_has:
        assert part in got["summary"], (part, got["summary"])
    assert got["hint"] and "\n" not in got["summary"]


def test_every_kind_has_a_row():
    seen = {k for _, _, k, _ in ENDS if k} | {row[2] for row in HANGS}
    assert seen == set(d.kinds())


# --- the stack parser on its own --------------------------------------------------------
@pytest.mark.parametrize("text,prefer,innermost,outermost", [
    (FH_SLEEP, "main", ("/job/train.py", 12, "wait_for_data"), ("/job/train.py", 33, "<module>")),
    (TB_SOCKET, "main", ("/usr/lib/python3.11/socket.py", 706, "readinto"),
     ("/job/train.py", 40, "<module>")),
    (PYSPY_LOCK, "main", ("train.py", 8, "acquire_both"), ("train.py", 15, "<module>")),
    (FH_CRASH, "current", ("/usr/lib/python3.11/ctypes/__init__.py", 519, "string_at"),
     ("/job/crash.py", 10, "<module>")),
    ("Traceback (most recent call last):\n" + TB_JOIN, "main",
     ("/usr/lib/python3.11/threading.py", 1132, "_wait_for_tstate_lock"),
     ("/job/train.py", 9, "<module>")),
])
def test_parse_stack(text, prefer, innermost, outermost):
    frames = d.parse_stack(text, prefer=prefer)
    as_tuple = lambda f: (f["file"], f["line"], f["function"])  # noqa: E731
    assert as_tuple(frames[-1]) == innermost
    assert as_tuple(frames[0]) == outermost


@pytest.mark.parametrize("text", [None, "", "no frames here\n  at all", "\x00\xff" * 50])
def test_parse_stack_without_frames(text):
    assert d.parse_stack(text) == []


def test_importing_module_outside_import_is_none():
    assert d.importing_module(d.parse_stack(FH_SLEEP)) is None
