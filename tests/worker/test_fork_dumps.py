"""worker/fork_dumps.py with real processes: a process with no crash file (a rank of another
host) signals its forked DataLoader workers itself when asked for its stacks, and each one's
Python stack comes back in its own `children` entry; a child without the handler is never
signalled (SIGUSR1 would kill it); one that gives no dump, or whose stacks no longer fit in
the answer, says so; the file has no name on disk, even while in use, so nothing of it is left
however the process ends. The whole
path (two hosts, the verdict naming the workers' shared wait) is
tests/distributed/test_two_hosts.py's."""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, tempfile, threading, time
    from trainbridge.worker import facts, fork_dumps, hooks
    from trainbridge.worker.runtime import STATE

    STATE.fork_dumps = fork_dumps.open_file()
    signal.signal(signal.SIGUSR1, hooks._dump_stacks_on_signal)
    LOCK = threading.Lock()

    def fetch_batch():
        with LOCK:  # held by the parent's uploader at fork: never free here
            pass

    def worker(name, handler, masked):
        with open("/proc/self/comm", "w") as f:
            f.write(name)
        if not handler:
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        if masked:  # the handler is there, but the signal never gets to it
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        os.write(ready_w, b"x")
        fetch_batch()

    ready_r, ready_w = os.pipe()
    LOCK.acquire()  # the uploader thread's hold, at fork time
    pids = []
    for handler, masked in ((True, False), (True, False), (False, False), (True, True)):
        pid = os.fork()
        if pid == 0:
            worker("pt_data_worker", handler, masked)
            os._exit(0)
        pids.append(pid)
    for _ in pids:
        os.read(ready_r, 1)
    deadline = time.monotonic() + 30
    for pid in pids:  # each one in its lock's wait, not only on its way there
        while "futex" not in open(f"/proc/{pid}/wchan").read():
            assert time.monotonic() < deadline, f"worker {pid} never waited on the lock"
            time.sleep(0.01)
    children = facts.children()
    fork_dumps.add_stacks(children, wait_s=5.0)  # the masked one's dump never comes
    # Asked again, with room for the first one's stacks only.
    answered = [{k: v for k, v in c.items() if k != "stack"} for c in children
                if c["pid"] in pids[:2]]
    fork_dumps.STACKS_MAX = len(next(c for c in children if c["pid"] == pids[0])["stack"])
    fork_dumps.add_stacks(answered, wait_s=30.0)
    print(json.dumps({"pids": pids, "children": children, "again": answered,
                      "named": os.listdir(tempfile.gettempdir())}), flush=True)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    """
)


def test_a_process_without_a_crash_file_brings_its_forked_workers_stacks(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))  # where the dump file would have a name
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    by_pid = {c["pid"]: c for c in said["children"]}
    with_handler, _, without, masked = said["pids"]
    entry = by_pid[with_handler]
    assert entry["name"] == "pt_data_worker" and entry["state"] == "S", entry
    assert "in fetch_batch" in entry["stack"] and "in worker" in entry["stack"], entry["stack"]
    assert entry["stack"].startswith("Current thread 0x"), entry["stack"]  # faulthandler's form
    assert "in fetch_batch" in by_pid[said["pids"][1]]["stack"]
    # No handler: never signalled (it would have died of it), no stack.
    assert "stack" not in by_pid[without] and by_pid[without]["state"] == "S"
    assert "stack_missing" not in by_pid[without]  # not asked: nothing to say
    # Asked, no dump in time (its signal blocked): said, not dropped.
    assert "stack" not in by_pid[masked], by_pid[masked]
    assert by_pid[masked]["stack_missing"] == "no dump within 5 s", by_pid[masked]
    # The second one's stacks past the answer's room: said too.
    got, left = sorted(said["again"], key=lambda c: "stack" not in c)  # which one: pid order
    assert "in fetch_batch" in got["stack"] and "stack_missing" not in got, got
    assert "stack" not in left and left["stack_missing"].startswith("left out: "), left
    assert said["named"] == [], "the dump file has a name on disk: a SIGKILL would leave it"
