"""bridge/job_dumps.py on its own, over a real crash file: which processes' SIGUSR1 dumps
answered since it went, which still need SIGUSR2, and the per-rank fallback, with a real
process whose faulthandler writes its C dump on SIGUSR2. The whole path (a hung torchrun job's
report) is test_rank_dumps.py's."""

import subprocess
import sys

from trainbridge.bridge import ranks
from trainbridge.bridge.job_dumps import SignalDumps

BANNER = "[trainbridge] crash file of job-1\n"


def dump(pid, stack):
    return f"[trainbridge] pid {pid}: stacks on SIGUSR1\n{stack}\n"


def test_only_dumps_written_after_sigusr1_went_answer_it(tmp_path):
    crash = tmp_path / "crash.txt"
    crash.write_text(BANNER + dump(12, "an old dump"))
    dumps = SignalDumps(str(crash))
    dumps.sigusr1_sent()
    with open(crash, "a") as f:
        f.write(dump(11, 'File "train.py", line 9 in step'))
    assert dumps.answered() == {11}
    assert dumps.sigusr2_due([11, 12]) == [12]


def test_a_job_with_no_crash_file_has_no_dumps():
    dumps = SignalDumps("")
    dumps.sigusr1_sent()
    assert dumps.answered() == set() and dumps.sigusr2_due([5]) == [5]
    state = ranks.initial()
    dumps.fallback(state, set(), [5])
    assert dumps.fallback_pids is None  # nothing read, nothing sent


def hello(state, key, pid, rank, **more):
    body = {"pid": pid, "rank": rank, "local_rank": rank, "world_size": 3, **more}
    ranks.observe(state, key, "hello", body, 1.0)


CHILD = """
import faulthandler, signal, sys, time
f = open(sys.argv[1], "a")
faulthandler.register(signal.SIGUSR2, file=f, all_threads=False)
def stuck_in_a_collective():
    print("ready", flush=True)
    time.sleep(120)
stuck_in_a_collective()
"""


def test_the_fallback_fills_each_silent_local_rank_once(tmp_path):
    crash = tmp_path / "crash.txt"
    crash.write_text(BANNER)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(crash)], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"
        state = ranks.initial()
        hello(state, "r0", 101, 0)  # answered the hang's dump_stacks in band
        hello(state, "r1", 102, 1)  # its SIGUSR1 dump is in the crash file
        hello(state, "r2", child.pid, 2)  # Python silent: only SIGUSR2 answers
        hello(state, "r3", 104, 3, addr="10.0.0.2")  # another host's: no signal goes there
        dumps = SignalDumps(str(crash))
        dumps.sigusr1_sent()
        with open(crash, "a") as f:
            f.write(dump(102, 'File "train.py", line 30 in all_reduce'))
        dumps.fallback(state, {b"r0"}, [child.pid, 104])
        procs = state["procs"]
        assert "stacks" not in procs["r0"] and "stacks" not in procs["r3"]
        assert "line 30 in all_reduce" in procs["r1"]["stacks"]
        assert "stuck_in_a_collective" in procs["r2"]["stacks"], procs["r2"].get("stacks")
        assert dumps.fallback_pids == {child.pid}
        assert dumps.sigusr2_due([child.pid]) == []  # sent already
        procs["r2"]["stacks"] = "kept"
        dumps.fallback(state, set(), [child.pid])  # once: a second call changes nothing
        assert procs["r2"]["stacks"] == "kept" and "stacks" not in procs["r0"]
    finally:
        child.kill()
        child.wait(10)
        child.stdout.close()
