"""Writes vectors/report.json, two tables that pin the report (one implementation, Python's).

"cases": a job's facts record and what its files said in, the report out (bridge/report.py
build): {name, facts, files, report}. `facts` is the record the job keeps
(bridge/job_facts.py) as it stands when the job ends, `files` what read_files() got from the
crash file and the stage box.

"apply": worker messages folded into a new record (job_facts apply): {name, messages,
facts}, the record after them but its `ranks` (vectors/ranks.json pins those).

Numbers that are not finite are written in their strict form ("NaN", "Infinity":
bridge/jsonform.py); the runners read the messages' metrics back with jsonform.revive and
compare the strict forms of what they build.

The expectations are written by the Python client and then reviewed by hand: the committed
JSON is the contract; tests/client/test_report_vectors.py runs it."""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from trainbridge.bridge import health, job_facts, ranks, report  # noqa: E402 - after the path
from trainbridge.bridge.jsonform import finite_form  # noqa: E402 - after the path

NAN, INF = float("nan"), float("inf")  # written "NaN", "Infinity" (bridge/jsonform.py)

STARTED = 1000.0  # the shell's monotonic clock at the start
WALL = 1764460800.0  # 2025-11-30T00:00:00Z
HELLO = {
    "pid": 4242,
    "ppid": 4241,
    "rank": 0,
    "local_rank": 0,
    "world_size": 1,
    "host": "gpu-box",
    "platform": "Linux-6.8-x86_64",
    "python": {"version": "3.11.7", "executable": "/usr/bin/python3", "venv": None},
    "cpu_count": 16,
    "packages": {"torch": "2.13.0"},
    "nvidia": {"driver": "550.54"},
    "env": {"CUDA_VISIBLE_DEVICES": "0"},
    "encoding": {"stdout": "utf-8", "locale": "UTF-8", "utf8_mode": 0},
    "stdout": {"buffered": False},
    "dump_signal": "SIGUSR1",
}


def stage(name, status="ok", duration_s=1.5, depth=0, started=0.1, began=1, closed=2):
    entry = {
        "name": name,
        "status": status,
        "duration_s": duration_s if status != "running" else None,
        "depth": depth,
        "budget_s": None,
        "started": started,
        "began": began,
    }
    if status != "running":
        entry["closed"] = closed
    return entry


def facts(ended=12.5, outcome="succeeded", hang=None, **changes):
    f = job_facts.initial(
        "job-0123456789ab", ["python", "train.py"], "/tmp/train.log", STARTED, WALL, 40
    )
    f["tail"] = []
    f["pid"] = 4242
    f["ended"] = STARTED + ended
    f["ranks"] = ranks.initial()
    f["machine"] = {
        "outcome": outcome,
        "hang": hang,
        "refused": None,
        "no_worker": None,
        "loaded_t": STARTED + 0.05,
        "last_activity_t": None,
    }
    for key, value in changes.items():
        if key in f["machine"] and key != "hang":
            f["machine"][key] = value
        else:
            f[key] = value
    return f


def stalled_in_train(idle_s, **changes):
    """A job stopped 90 s in as stalled in stage 'train' at step 12, after SIGUSR1 and SIGTERM;
    its heartbeat's idle_s as given."""
    return facts(
        outcome="hung",
        ended=95.25,
        hang={"reason": "stall", "stage": "train", "t": STARTED + 90.0},
        last_activity_t=STARTED + 60.0,
        **hello_facts(),
        stages=[stage("startup"), stage("train", status="running", began=3)],
        progress={"step": 12, "total": None, "metrics": {}},
        heartbeat={"beat": 80, "idle_s": idle_s, "stack": HEARTBEAT_STACK, "stage": "train"},
        signals_sent=["SIGUSR1", "SIGTERM"],
        exit_signal="SIGTERM",
        snapshot={"notes": []},
        **changes,
    )


def out(stream, *texts):
    return [{"stream": stream, "text": t, "end": "lf"} for t in texts]


def hello_facts(**more):
    state = ranks.initial()
    ranks.observe(state, "job-0123456789ab/0/4242", "hello", HELLO, WALL + 0.2)
    base = {
        "hellos": {"0": HELLO},
        "ranks": state,
        "lead_pid": 4242,
        "leads": [4242],
        "dump_pids": [4242],
    }
    base.update(more)
    return base


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 9, in <module>\n'
    "    main()\n"
    "RuntimeError: CUDA error: device-side assert triggered"
)
ERROR = {
    "type": "RuntimeError",
    "message": "CUDA error: device-side assert triggered",
    "traceback": TRACEBACK,
    "kind": "exception",
    "stage": "train",
    "fatal": True,
    "frames": [{"file": "train.py", "line": 9, "function": "<module>"}],
}
HEARTBEAT_STACK = (
    'File "train.py", line 30, in <module>\n'
    '  File "/usr/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1, in '
    "__next__\n"
)


def distributed():
    state = ranks.initial()
    for rank in (0, 1):
        key = f"job-0123456789ab/{rank}/{5000 + rank}"
        hello = dict(HELLO, pid=5000 + rank, rank=rank, local_rank=rank, world_size=2)
        ranks.observe(state, key, "hello", hello, WALL + 0.2)
    err = dict(ERROR, message="shape mismatch", stage="step", type="ValueError")
    ranks.observe(state, "job-0123456789ab/1/5001", "error", err, WALL + 5.0)
    ranks.observe(
        state,
        "job-0123456789ab/0/5000",
        "error",
        dict(ERROR, type="DistBackendError", message="NCCL communicator was aborted"),
        WALL + 6.0,
    )
    hellos = {
        "0": dict(HELLO, pid=5000, world_size=2),
        "1": dict(HELLO, pid=5001, rank=1, local_rank=1, world_size=2),
    }
    return {"hellos": hellos, "ranks": state, "lead_pid": 5000, "leads": [5000]}


def killed_rank():
    """Two ranks under a launcher: rank 1 SIGKILLed from outside (no error, no clock: only
    torchrun's record), rank 0 failing on the lost peer."""
    state = ranks.initial()
    launcher = dict(HELLO, pid=4999, rank=None, local_rank=None, world_size=None)
    ranks.observe(state, "job-0123456789ab/4999/4999", "hello", launcher, WALL + 0.1)
    for rank in (0, 1):
        key = f"job-0123456789ab/{rank}/{5000 + rank}"
        hello = dict(HELLO, pid=5000 + rank, ppid=4999, rank=rank, local_rank=rank, world_size=2)
        ranks.observe(state, key, "hello", hello, WALL + 0.2)
    peer = "[pair.cc:553] Connection closed by peer [127.0.0.1]:1234."
    ranks.observe(
        state,
        "job-0123456789ab/0/5000",
        "error",
        dict(ERROR, type="RuntimeError", message=peer),
        WALL + 6.0,
    )
    failure = {
        "rank": 1,
        "local_rank": 1,
        "pid": 5001,
        "exit_code": -9,
        "time": int(WALL) + 6,
        "error_file": "<N/A>",
        "message": "Signal 9 (SIGKILL) received by PID 5001",
        "traceback": None,
    }
    child_failed = dict(
        ERROR,
        type="torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
        message="train.py FAILED",
        failures=[failure],
    )
    ranks.observe(state, "job-0123456789ab/4999/4999", "error", child_failed, WALL + 7.0)
    return {
        "hellos": {"0": dict(HELLO, pid=4999)},
        "ranks": state,
        "lead_pid": 4999,
        "leads": [4999],
        "error": child_failed,
    }


def cases():
    ok_stages = [stage("startup", began=1, closed=2), stage("train", began=3, closed=4)]
    yield (
        "succeeded: hello, stages, progress, bye",
        facts(
            **hello_facts(),
            stages=ok_stages,
            progress={"step": 100, "total": 100, "metrics": {"loss": 0.25}},
            bye={"exit_code": 0, "reason": "normal"},
            exit_code=0,
            tail=out("stdout", "epoch 1", "done"),
            lines={"stdout": 2, "stderr": 0},
            bytes={"stdout": 13, "stderr": 0},
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "failed: the worker's error, the stage it failed in",
        facts(
            outcome="failed",
            **hello_facts(),
            stages=[stage("startup"), stage("train", status="failed", began=3, closed=4)],
            progress={"step": 7.5, "total": 100, "metrics": {}},
            error=ERROR,
            bye={"exit_code": 1, "reason": "exception"},
            exit_code=1,
            tail=out("stderr", *TRACEBACK.split("\n")),
            lines={"stdout": 0, "stderr": 4},
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "crashed: SIGSEGV, the crash file's stacks, the stage box's stage",
        facts(
            outcome="crashed",
            **hello_facts(),
            stages=[stage("startup"), stage("model", status="running", began=3)],
            exit_signal="SIGSEGV",
            fatal_lines=["Fatal Python error: Segmentation fault", "", "Current thread:"],
            tail=out("stderr", "Fatal Python error: Segmentation fault"),
        ),
        {
            "crash_text": 'Fatal Python error: Segmentation fault\n\n  File "model.py", line 3 in '
            "load",
            "stage_box": ["model", "load_weights"],
        },
    )
    yield (
        "crashed: no worker, stderr's faulthandler lines are the stacks",
        facts(
            outcome="crashed",
            exit_signal="SIGABRT",
            fatal_lines=["Fatal Python error: Aborted", 'File "x.py", line 1 in <module>'],
            tail=out("stderr", "Fatal Python error: Aborted"),
            oom_killed=False,
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "hung: stall; idle since the machine's last activity (a printed line), not the "
        "worker's idle_s (its last progress)",
        stalled_in_train(idle_s=235.0),
        {"crash_text": None, "stage_box": None},
    )
    teardown = [f"  File \"/v/torch/distributed/elastic/api.py\", line {n}" for n in range(40)]
    yield (
        "hung: the stop's output after the verdict (a launcher's traceback on SIGTERM) fills "
        "the tail: log_tail is the tail at the verdict, log_after_hang the rest, counted",
        stalled_in_train(
            idle_s=30.0,
            tail=out("stderr", *teardown),
            tail_at_hang={"tail": out("stdout", "epoch 1", "fault at step 3"), "lines": 2},
            lines={"stdout": 2, "stderr": 40},
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "hung: stall, heartbeat stack, signals, a dump reply",
        facts(
            outcome="hung",
            ended=95.25,
            hang={"reason": "stall", "stage": "train", "t": STARTED + 90.0},
            **hello_facts(),
            stages=[stage("startup"), stage("train", status="running", began=3)],
            progress={"step": 12, "total": None, "metrics": {}},
            heartbeat={"beat": 80, "idle_s": 61.5, "stack": HEARTBEAT_STACK, "stage": "train"},
            stacks=['Thread 0x1 (most recent call first):\n  File "train.py", line 30\n'],
            signals_sent=["SIGUSR1", "SIGTERM"],
            exit_signal="SIGTERM",
            snapshot={"notes": []},
            # the stall deadline's look found it not working: the report carries its words
            look={
                "reason": "stall",
                "why": "busy (100% of a core, running or waiting for one) but its main "
                "thread stayed in train.py:30 step over the last 61.5 s",
            },
        ),
        {"crash_text": None, "stage_box": None},
    )
    # A loop starved of CPU (always runnable, 2% of a core) answers neither dump in time and
    # gets SIGUSR2, but its SIGUSR1 dump comes late: Python ran, the GIL is not held (hunt 8).
    starved = {
        "pid": 4242,
        "alive": True,
        "status": "running",
        "cpu_fraction": 0.02,
        "main_thread": {
            "state": "R",
            "syscall": "running",
            "runnable_fraction": 1.0,
            "wait_samples": {"running": 26},
        },
        "notes": [],
    }
    spin_dump = (
        "[trainbridge] pid 4242: stacks on SIGUSR1\n"
        "Current thread 0x00007f (most recent call first):\n"
        '  File "cpu_loop.py", line 9 in spin\n'
        '  File "cpu_loop.py", line 15 in <module>\n'
    )
    native_dump = (
        "Stack (most recent call first):\n"
        '  File "cpu_loop.py", line 9 in spin\n'
        '  File "cpu_loop.py", line 15 in <module>\n'
    )
    for name, crash_text in (
        ("hung: SIGUSR2 sent, the SIGUSR1 dump came late: a starved loop, cpu_bound", spin_dump),
        ("hung: SIGUSR2 sent, no SIGUSR1 dump: nothing ran Python, gil_held", native_dump),
    ):
        yield (
            name,
            facts(
                outcome="hung",
                ended=4.2,
                hang={"reason": "stall", "stage": "train", "t": STARTED + 2.7},
                **hello_facts(native_dump_pids=[4242]),
                stages=[stage("train", status="running", began=1)],
                progress={"step": 0, "total": 10, "metrics": {}},
                heartbeat={"beat": 3, "idle_s": 3.4, "stack": None, "stage": "train"},
                signals_sent=["SIGUSR1", "SIGUSR2", "SIGTERM"],
                exit_signal="SIGTERM",
                snapshot=starved,
            ),
            {"crash_text": crash_text, "stage_box": None},
        )
    yield (
        "hung: startup deadline with only a launcher's hello (rendezvous)",
        rendezvous_facts(),
        {"crash_text": None, "stage_box": None},
    )
    # Fork workers have no beacon: their stacks come from their SIGUSR1 dumps in the crash
    # file, each headed by its pid's marker line (read_crash_file keeps those lines).
    worker_dump = "".join(
        f"[trainbridge] pid {pid}: stacks on SIGUSR1\n"
        "Current thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/job/data.py", line 29 in __getitem__\n\n'
        for pid in (4301, 4302)
    )
    workers = [
        {
            "pid": pid,
            "name": "pt_data_worker",
            "status": "sleeping",
            "ppid": 4242,
            "started": 900 + pid,
            "wchan": "futex_do_wait",
        }
        for pid in (4301, 4302)
    ]
    yield (
        "hung: both DataLoader workers deadlocked; their SIGUSR1 dumps name the frame",
        facts(
            outcome="hung",
            ended=9.5,
            hang={"reason": "stall", "stage": "train", "t": STARTED + 9.0},
            **hello_facts(),
            stages=[stage("train", status="running", began=1)],
            progress={"step": 0, "total": None, "metrics": {}},
            heartbeat={"beat": 9, "idle_s": 7.0, "stack": DATALOADER_STACK, "stage": "train"},
            signals_sent=["SIGUSR1", "SIGTERM"],
            exit_signal="SIGTERM",
            snapshot={
                "notes": [],
                "pid": 4242,
                "status": "sleeping",
                "main_thread": {"state": "S", "syscall": "poll", "wchan": "poll_schedule_timeout"},
                "children": workers,
            },
        ),
        {"crash_text": worker_dump.strip(), "stage_box": None},
    )
    yield (
        "hung: DDP, rank 1 stopped, rank 0 in backward(); the launcher leads again: the "
        "ranks' stage, rank 1 named stopped",
        ddp_stopped_facts(),
        {"crash_text": None, "stage_box": ["main"]},
    )
    yield (
        "cancelled: accepted, KeyboardInterrupt is where it stopped, not an error",
        facts(
            outcome="cancelled",
            **hello_facts(),
            stages=[stage("train", status="cancelled", began=1, closed=2)],
            error=dict(
                ERROR,
                type="KeyboardInterrupt",
                message="",
                kind="cancelled",
                traceback="Traceback (most recent call last):\nKeyboardInterrupt",
            ),
            cancel={"reason": "user pressed stop", "accepted": True, "refused": None},
            bye={"exit_code": 130, "reason": "cancelled"},
            exit_code=130,
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "failed: a plain command's traceback on stderr (no worker)",
        facts(
            outcome="failed",
            exit_code=1,
            tail=out("stdout", "loading")
            + out("stderr", *TRACEBACK.replace("\x1b", "").split("\n")),
            lines={"stdout": 1, "stderr": 4},
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "failed: a bug in trainbridge (internal), the job's tree killed",
        facts(
            outcome="failed",
            **hello_facts(),
            internal_error={
                "type": "RuntimeError",
                "message": "trainbridge failed while supervising this job: injected bug",
                "traceback": "Traceback (most recent call last):\nRuntimeError: injected bug",
                "kind": "internal",
                "fatal": True,
            },
            error={
                "type": "RuntimeError",
                "message": "trainbridge failed while supervising this job: injected bug",
                "traceback": "Traceback (most recent call last):\nRuntimeError: injected bug",
                "kind": "internal",
                "fatal": True,
            },
            signals_sent=["SIGKILL"],
            exit_signal="SIGKILL",
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "succeeded with losses: worker drops, undelivered sends, an incomplete log",
        facts(
            **hello_facts(),
            bye={"exit_code": 0, "reason": "normal", "dropped": {"log": 3}},
            exit_code=0,
            dropped={"job-0123456789ab/0/4242": {"log": 3, "user": 1}, "job-x/0/7": {"log": 2}},
            undelivered={"user": 2},
            rejected={"bad_signature": 1},
            lost=4,
            unrouted=1,
            foreign_hellos=1,
            log_lines=120,
            log_error={"path": "/tmp/train.log", "from_line": 121, "error": "No space (ENOSPC)"},
            leftovers=[4300],
        ),
        {"crash_text": None, "stage_box": None},
    )
    gave_up = out(
        "stderr",
        "[trainbridge] worker: the client took nothing for 5 s at exit; 812 queued "
        "records (logs, stages, messages) were never sent. Set "
        "TRAINBRIDGE_ACK_TIMEOUT_S to wait longer.",
    )
    yield (  # no count beside the crash file (no crash file, or an older worker)
        "succeeded, but the worker's last words never arrived (it gave up on a slow client)",
        facts(**hello_facts(), exit_code=0, tail=gave_up),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "succeeded; the worker gave up on a client that took nothing and counted what never left",
        facts(**hello_facts(), exit_code=0, tail=gave_up),
        {"crash_text": None, "stage_box": None, "unsent": 812},
    )
    yield (
        "failed: the client refused the worker (protocol version)",
        facts(outcome="failed", exit_code=1, refused="unsupported protocol version 2"),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "failed: two ranks, the root cause is the rank that failed first",
        facts(
            outcome="failed",
            **distributed(),
            error=dict(ERROR, type="DistBackendError", message="NCCL communicator was aborted"),
            exit_code=1,
        ),
        {"crash_text": None, "stage_box": None},
    )
    yield (
        "failed: a rank killed from outside is the cause, not the peer that lost it",
        facts(outcome="failed", **killed_rank(), exit_code=1),
        {"crash_text": None, "stage_box": None},
    )
    # The same job where rank 0 led when its error came (it left before the launcher's): the
    # job's error is still the launcher's, not whichever process led then.
    rank0_led = dict(killed_rank(), lead_pid=5000, leads=[4999, 5000, 4999])
    rank0_led["error"] = dict(ERROR, type="RuntimeError", message="Connection closed by peer")
    yield (
        "failed: a rank killed from outside; the job's error is the launcher's whoever led",
        facts(outcome="failed", **rank0_led, exit_code=1),
        {"crash_text": None, "stage_box": None},
    )
    record = health.initial()
    for step, loss in ((3, 2.3125), (4, 1.75), (9, NAN)):
        health.observe(record, step, {"loss": loss, "lr": 0.5})
    yield (
        "succeeded, but its loss became NaN on the way (training health)",
        facts(
            **hello_facts(),
            stages=ok_stages,
            progress={"step": 41, "total": 41, "metrics": {"loss": NAN, "lr": INF}},
            health=record,
            bye={"exit_code": 0, "reason": "normal"},
            exit_code=0,
        ),
        {"crash_text": None, "stage_box": None},
    )


def rendezvous_facts():
    launcher_hello = dict(
        HELLO,
        pid=4242,
        rank=None,
        local_rank=None,
        world_size=None,
        argv=["/usr/bin/torchrun", "--nnodes", "2", "--nproc-per-node", "2", "train.py"],
    )
    state = ranks.initial()
    ranks.observe(state, "job-0123456789ab/0/4242", "hello", launcher_hello, WALL + 0.2)
    return facts(
        outcome="hung",
        ended=125.0,
        hang={"reason": "startup", "stage": None, "t": STARTED + 120.0},
        hellos={"0": launcher_hello},
        ranks=state,
        lead_pid=4242,
        leads=[4242],
        stacks=[
            'Thread 0x1 (most recent call first):\n  File "/usr/lib/python3.11/site-packages/'
            'torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line 55 in '
            "next_rendezvous\n"
        ],
        signals_sent=["SIGTERM"],
        exit_signal="SIGTERM",
        snapshot={"notes": []},
    )


DATALOADER_STACK = "".join(
    f'  File "{f}", line {n}, in {fn}\n    code\n'
    for f, n, fn in (
        ("/job/train.py", 35, "train"),
        ("/v/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 1133, "_try_get_data"),
        ("/usr/lib/python3.11/multiprocessing/connection.py", 947, "wait"),
        ("/usr/lib/python3.11/selectors.py", 415, "select"),
    )
)


def ddp_stopped_facts():
    """A DDP job under torchrun declared hung: rank 0 waits in backward() (its dump reply),
    rank 1 is stopped (no reply; the OS's view at the deadline says so), and the launcher is
    the lead again (its ranks left when the tree was stopped) with "main" in its stage box."""
    state = ranks.initial()
    launcher = dict(HELLO, pid=4242, rank=None, local_rank=None, world_size=None)
    launcher["argv"] = ["/usr/bin/torchrun", "--nproc-per-node", "2", "ddp.py"]
    ranks.observe(state, "job-0123456789ab/4242/4242", "hello", launcher, WALL + 0.1)
    for rank in (0, 1):
        key = f"job-0123456789ab/{rank}/{5000 + rank}"
        hello = dict(HELLO, pid=5000 + rank, ppid=4242, rank=rank, local_rank=rank, world_size=2)
        ranks.observe(state, key, "hello", hello, WALL + 0.2)
        ranks.observe(state, key, "stage", {"event": "begin", "name": "train"}, WALL + 1.0)
    backward = "".join(
        f'  File "{f}", line {n}, in {fn}\n    code\n'
        for f, n, fn in (
            ("/w/ddp.py", 61, "_run_batch"),
            (
                "/v/lib/python3.11/site-packages/torch/autograd/graph.py",
                979,
                "_engine_run_backward",
            ),
        )
    )
    reply = {
        "to": 9,
        "ok": True,
        "stacks": f'Thread 0x7f00 "MainThread" (most recent call last):\n{backward}',
    }
    ranks.observe(state, "job-0123456789ab/0/5000", "reply", reply, WALL + 31.0)
    return facts(
        outcome="hung",
        ended=33.0,
        hang={"reason": "stall", "stage": "train", "t": STARTED + 30.0},
        hellos={
            "0": dict(HELLO, pid=5000, ppid=4242, world_size=2),
            "1": dict(HELLO, pid=5001, ppid=4242, rank=1, local_rank=1, world_size=2),
        },
        ranks=state,
        lead_pid=4242,
        leads=[4242, 5000, 4242],
        stages=[
            stage("main", status="running", began=1),
            stage("train", status="running", began=2),
        ],
        progress={"step": 3, "total": None, "metrics": {}},
        heartbeat={"beat": 30, "idle_s": 1.0, "stack": None, "stage": "main"},
        signals_sent=["SIGTERM", "SIGKILL"],
        exit_signal="SIGKILL",
        snapshot={
            "notes": [],
            "pid": 4242,
            "status": "sleeping",
            "children": [
                {"pid": 5000, "status": "sleeping", "wchan": "futex_do_wait"},
                {
                    "pid": 5001,
                    "status": "stopped",
                    "wchan": "do_signal_stop",
                    "kernel_stack": ["do_signal_stop", "get_signal"],
                },
            ],
        },
    )


def apply_cases():
    key, other = "job-0123456789ab/0/4242", "job-0123456789ab/1/4300"
    hello = dict(HELLO, native_dump_signal="SIGUSR2")

    def msg(kind, body, t, lead=True, sender=key, rank=0, in_tree=False):
        return {
            "kind": kind,
            "body": body,
            "key": sender,
            "rank": rank,
            "ts": WALL + t,
            "lead": lead,
            "in_tree": in_tree,
            "t": STARTED + t,
        }

    one = [
        msg("hello", hello, 0.2, in_tree=True),
        msg("stage", {"event": "begin", "name": "train", "depth": 0}, 0.5),
        msg("stage", {"event": "begin", "name": "epoch", "depth": 1, "budget_s": 60.0}, 0.75),
        msg("progress", {"step": 3, "total": 10, "metrics": {"loss": 0.5}}, 1.0),
        msg("heartbeat", {"beat": 1, "idle_s": 0.25, "stack": None, "dropped": {"log": 2}}, 1.5),
        msg("reply", {"to": 4, "ok": True, "stacks": "Thread 0x1:\n"}, 1.75),
        msg("stage", {"event": "end", "name": "epoch", "depth": 1, "status": "ok"}, 2.0),
        msg("error", dict(ERROR, fatal=False, type="UserWarning"), 2.25),
        msg("error", ERROR, 2.5),
        msg("error", dict(ERROR, fatal=False, type="Later"), 2.625),
        msg(
            "stage", {"event": "end", "name": "train", "status": "failed", "duration_s": 2.0}, 2.75
        ),
        msg("bye", {"exit_code": 1, "reason": "exception", "dropped": {"log": 3}}, 3.0),
    ]
    rank1 = dict(HELLO, pid=4300, rank=1, world_size=2, dump_signal="SIGUSR1")
    two = [
        msg("hello", dict(HELLO, rank=None, world_size=None), 0.1, in_tree=False),
        msg("hello", rank1, 0.2, lead=False, sender=other, rank=1, in_tree=True),
        msg("stage", {"event": "begin", "name": "rank1"}, 0.3, lead=False, sender=other, rank=1),
        msg("progress", {"step": 1, "total": None}, 0.4, lead=False, sender=other, rank=1),
        msg("reply", {"to": 2, "ok": True, "stacks": "r1"}, 0.5, lead=False, sender=other, rank=1),
        msg("heartbeat", {"beat": 1, "dropped": {"log": 1}}, 0.6, lead=False, sender=other, rank=1),
        msg("hello", dict(rank1, pid=4301), 0.7, lead=False, sender=other, rank=1, in_tree=True),
    ]
    diverged = [
        msg("progress", {"step": 1, "total": 40, "metrics": {"loss": 2.5, "acc": 0}}, 0.5),
        msg("progress", {"step": 2, "total": 40, "metrics": {"loss": INF, "acc": 0.125}}, 0.6),
        msg("progress", {"step": 7, "total": 40, "metrics": {"loss": NAN, "acc": NAN}}, 0.7),
        msg("progress", {"step": 8, "total": 40, "metrics": {"loss": 1.0, "acc": NAN}}, 0.8),
        msg("progress", {"step": 5, "total": 10, "metrics": {"loss": NAN}}, 0.9, lead=False),
    ]
    for name, messages in (
        ("the lead alone: hello, nested stages, progress, drops, a dump, errors, bye", one),
        ("a launcher leads; another process is listed, its dump and drops count", two),
        ("training health: said once, when first not finite; the lead's only", diverged),
    ):
        f = job_facts.initial("job-0123456789ab", ["python", "train.py"], None, STARTED, WALL, 40)
        f["tail"] = []
        f["ranks"] = ranks.initial()
        for m in messages:
            f = job_facts.apply(f, json.loads(json.dumps(m)))
        f.pop("ranks")
        f = finite_form(f)
        yield {"name": name, "messages": messages, "facts": f}


def main():
    out_cases = []
    for name, f, files in cases():
        f["tail"] = list(f["tail"])
        built = report.build(json.loads(json.dumps(f)), files)
        out_cases.append(finite_form({"name": name, "facts": f, "files": files, "report": built}))
    path = os.path.join(ROOT, "vectors", "report.json")
    with open(path, "w", encoding="ascii") as fh:
        json.dump(
            {
                "about": "facts record + files in -> report out (bridge/report.py build); "
                "tests/client/make_report_vectors.py",
                "cases": out_cases,
                "apply": [finite_form(case) for case in apply_cases()],
            },
            fh,
            indent=1,
            ensure_ascii=True,
            allow_nan=False,
        )
        fh.write("\n")
    print(f"wrote {os.path.normpath(path)}: {len(out_cases)} report cases")


if __name__ == "__main__":
    main()
