"""Writes vectors/ranks.json: per-process rows and the root cause of distributed jobs
(bridge/ranks.py, the one implementation). Each case is the messages a job's worker
processes sent, in arrival order: [key (routing id), kind, body, ts (the sender's clock)].
The expectations are written by hand from docs/CLIENT.md ("Ranks and the root cause");
tests/client/test_ranks.py runs the committed JSON."""

import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def hello(pid, ppid, rank=None, local_rank=None, world=None, host="a"):
    return {
        "pid": pid,
        "ppid": ppid,
        "rank": rank,
        "local_rank": local_rank,
        "world_size": world,
        "host": host,
    }


def error(type_, message, frames, stage=None, **extra):
    return dict(
        {
            "type": type_,
            "message": message,
            "stage": stage,
            "fatal": True,
            "frames": [{"file": f, "line": n, "function": fn} for f, n, fn in frames],
        },
        **extra,
    )


TRAIN = ("/w/train.py", 15, "<module>")
REDUCE = (
    "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
    3252,
    "all_reduce",
)
PEER = "[pair.cc:553] Connection closed by peer [127.0.0.1]:1234."

CASES = [
    {
        "name": "a rank killed from outside (no error, no clock) is the cause; the peer that "
        "lost it is a consequence, though its error came first",
        "messages": [
            ["j/100", "hello", hello(100, 9), 1.0],
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 2.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 2.1],
            ["j/1", "stage", {"event": "begin", "name": "train"}, 3.0],
            [
                "j/0",
                "error",
                error("RuntimeError", PEER, [("/w/train.py", 16, "<module>"), REDUCE], "train"),
                10.5,
            ],
            [
                "j/100",
                "error",
                error(
                    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                    "failed",
                    [("/v/bin/torchrun", 8, "<module>")],
                    None,
                    failures=[
                        {
                            "rank": 1,
                            "local_rank": 1,
                            "pid": 102,
                            "exit_code": -9,
                            "time": 11,
                            "error_file": "<N/A>",
                            "message": "Signal 9 (SIGKILL) received by PID 102",
                            "traceback": None,
                        },
                    ],
                ),
                12.0,
            ],
        ],
        "root_cause": {
            "rank": 1,
            "why": {"0": "peer_gone"},
            "error_type": None,
            "summary": "rank 1 (host a, pid 102) failed first: killed by SIGKILL, with no error "
            "of its own (a kill from outside the job, or the kernel's OOM killer) in stage "
            "'train'; then rank 0 lost its peer (RuntimeError at w/train.py:16 <module>) "
            "(consequences, not the cause)",
        },
        "rows": [
            {
                "rank": 0,
                "role": "rank",
                "pid": 101,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
            {
                "rank": 1,
                "role": "rank",
                "pid": 102,
                "state": "failed",
                "stage": "train",
                "progress": None,
            },
            {
                "rank": None,
                "role": "launcher",
                "pid": 100,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
        ],
    },
    {
        "name": "the rank that failed first is the cause; a peer that lost it is a consequence",
        "messages": [
            ["j/100", "hello", hello(100, 9), 1.0],
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 2.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 2.1],
            ["j/1", "stage", {"event": "begin", "name": "data"}, 3.0],
            ["j/0", "progress", {"step": 4, "total": 10}, 3.5],
            # rank 0's error arrives first, but rank 1's clock says it failed first
            [
                "j/0",
                "error",
                error("RuntimeError", PEER, [("/w/train.py", 16, "<module>"), REDUCE], "train"),
                10.5,
            ],
            ["j/1", "error", error("ValueError", "shard 3 is corrupt", [TRAIN], "data"), 10.0],
            ["j/1", "bye", {"exit_code": 1, "reason": "after_error"}, 10.1],
        ],
        "root_cause": {
            "rank": 1,
            "why": {"0": "peer_gone"},
            "error_type": "ValueError",
            "summary": "rank 1 (host a, pid 102) failed first: ValueError: shard 3 is "
            "corrupt in stage 'data' at w/train.py:15 <module>; then rank 0 "
            "lost its peer (RuntimeError at w/train.py:16 <module>) "
            "(consequences, not the cause)",
        },
        "rows": [
            {
                "rank": 0,
                "role": "rank",
                "pid": 101,
                "state": "failed",
                "stage": None,
                "progress": {"step": 4, "total": 10},
            },
            {
                "rank": 1,
                "role": "rank",
                "pid": 102,
                "state": "failed",
                "stage": "data",
                "progress": None,
            },
            {
                "rank": None,
                "role": "launcher",
                "pid": 100,
                "state": "running",
                "stage": None,
                "progress": None,
            },
        ],
    },
    {
        "name": "a rank without a worker: torchrun's failure (its error file) names the cause",
        "messages": [
            ["j/100", "hello", hello(100, 9), 1.0],
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 2.0],
            [
                "j/100",
                "error",
                error(
                    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                    "failed",
                    [("/v/bin/torchrun", 8, "<module>")],
                    None,
                    failures=[
                        {
                            "rank": 0,
                            "local_rank": 0,
                            "pid": 101,
                            "exit_code": -15,
                            "time": 21,
                            "error_file": "/t/attempt_0/0/error.json",
                            "message": "",
                            "traceback": None,
                        },
                        {
                            "rank": 1,
                            "local_rank": 1,
                            "pid": 102,
                            "exit_code": 1,
                            "time": 20,
                            "error_file": "/t/attempt_0/1/error.json",
                            "message": "KeyError: 'img'",
                            "traceback": "Traceback (most recent call last):\n"
                            "  File \"/w/train.py\", "
                            "line 9, in load\nKeyError: 'img'\n",
                        },
                    ],
                ),
                22.0,
            ],
        ],
        "root_cause": {
            "rank": 1,
            "why": {"0": "stopped"},
            "error_type": "KeyError",
            "summary": "rank 1 (host a, pid 102) failed first: KeyError: 'img' at "
            "w/train.py:9 load; then rank 0 stopped by the launcher "
            "(consequences, not the cause)",
        },
        "rows": [
            {
                "rank": 0,
                "role": "rank",
                "pid": 101,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
            {
                "rank": 1,
                "role": "rank",
                "pid": 102,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
            {
                "rank": None,
                "role": "launcher",
                "pid": 100,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
        ],
    },
    {
        "name": "ties by clock go to the lower rank; ranks on two hosts",
        "messages": [
            ["j/0", "hello", hello(50, 40, 0, 0, 4, host="a"), 1.0],
            ["j/3", "hello", hello(50, 41, 3, 1, 4, host="b"), 1.0],
            ["j/3", "error", error("OSError", "disk full", [TRAIN]), 5.0],
            ["j/0", "error", error("OSError", "disk full", [TRAIN]), 5.0],
        ],
        "root_cause": {
            "rank": 0,
            "why": {"3": "later"},
            "error_type": "OSError",
            "summary": "rank 0 (host a, pid 50) failed first: OSError: disk full at "
            "w/train.py:15 <module>; then rank 3 failed later (OSError at "
            "w/train.py:15 <module>) (consequences, not the cause)",
        },
        "rows": [
            {
                "rank": 0,
                "role": "rank",
                "pid": 50,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
            {
                "rank": 3,
                "role": "rank",
                "pid": 50,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
        ],
    },
    {
        "name": "a rank of another host (its hello says the address it connects from) is "
        "named by it: hostnames can be alike",
        "messages": [
            ["j/60", "hello", hello(60, 1, host="a"), 1.0],
            ["j/0", "hello", hello(61, 60, 0, 0, 2, host="a"), 1.0],
            ["j/1", "hello", dict(hello(70, 69, 1, 0, 2, host="a"), addr="10.0.0.2"), 1.0],
            ["j/1", "error", error("ValueError", "bad shard", [TRAIN], "data"), 5.0],
            ["j/0", "error", error("RuntimeError", PEER, [TRAIN, REDUCE]), 5.5],
        ],
        "root_cause": {
            "rank": 1,
            "why": {"0": "peer_gone"},
            "error_type": "ValueError",
            "summary": "rank 1 (host a at 10.0.0.2, pid 70) failed first: ValueError: bad "
            "shard in stage 'data' at w/train.py:15 <module>; then rank 0 lost its peer "
            "(RuntimeError at w/train.py:15 <module>) (consequences, not the cause)",
        },
        "rows": [
            {
                "rank": 0,
                "role": "rank",
                "pid": 61,
                "state": "failed",
                "stage": None,
                "progress": None,
            },
            {
                "rank": 1,
                "role": "rank",
                "pid": 70,
                "state": "failed",
                "stage": None,
                "progress": None,
                "addr": "10.0.0.2",
            },
            {
                "rank": None,
                "role": "launcher",
                "pid": 60,
                "state": "running",
                "stage": None,
                "progress": None,
            },
        ],
    },
    {
        "name": "one plain process: a row of role other, no root cause",
        "messages": [
            ["j/0", "hello", hello(7, 1), 1.0],
            ["j/0", "stage", {"event": "begin", "name": "train"}, 1.5],
            ["j/0", "stage", {"event": "begin", "name": "eval"}, 1.6],
            ["j/0", "stage", {"event": "end", "name": "eval"}, 1.7],
            ["j/0", "bye", {"exit_code": 0, "reason": "normal"}, 2.0],
        ],
        "root_cause": None,
        "rows": [
            {
                "rank": None,
                "role": "other",
                "pid": 7,
                "state": "exited",
                "stage": "train",
                "progress": None,
            }
        ],
    },
]


# Which hellos are a distributed launcher's (the job starts at a rank's hello, not theirs).
LAUNCHERS = [
    [["/v/bin/torchrun", "--nnodes=2", "train.py"], None, True],
    [["/v/bin/python", "-m", "torch.distributed.run", "train.py"], None, True],
    [["/v/bin/python", "-u", "/v/lib/torch/distributed/launch.py", "x.py"], None, True],
    [["/v/bin/python", "train.py", "--via", "torchrun"], None, False],
    [["/v/bin/python", "-m", "torch.distributed.run", "train.py"], 2, False],  # a rank
    [["/v/bin/python", "-c", "import torch"], None, False],
    # an interpreter option with a value before -m: the one argv reading (machine.is_launcher)
    [["/v/bin/python", "-W", "ignore", "-m", "torch.distributed.run", "train.py"], None, True],
]

RDZV_ARGV = [
    "/v/bin/torchrun",
    "--nnodes=2:4",
    "--nproc_per_node=2",
    "--rdzv-backend",
    "c10d",
    "--rdzv_endpoint=10.0.0.1:29400",
    "train.py",
]
RENDEZVOUS = [
    {
        "name": "a launcher in its rendezvous, no rank: rendezvous_wait",
        "launcher": {"argv": RDZV_ARGV, "host": "a"},
        "ranks_said_hello": False,
        "waited_s": 20.04,
        "stacks": "File \"/v/torch/distributed/elastic/rendezvous/utils.py\", line 9, in _delay",
        "summary": "torchrun on host a waited 20 s for nodes "
        "that never came: its c10d rendezvous at 10.0.0.1:29400 "
        "needs 2 node(s) (--nnodes=2:4) and only this "
        "one is known to have joined; no rank started",
        "evidence": {
            "endpoint": "10.0.0.1:29400",
            "backend": "c10d",
            "nnodes": "2:4",
            "nnodes_expected": 2,
            "nnodes_joined": 1,
            "waited_s": 20.0,
            "host": "a",
        },
    },
    {
        "name": "static rendezvous: the master address and port are the endpoint",
        "launcher": {
            "argv": [
                "/v/bin/torchrun",
                "--nnodes",
                "3",
                "--master_addr",
                "h1",
                "--master-port=1234",
                "t.py",
            ],
            "host": "b",
        },
        "ranks_said_hello": False,
        "waited_s": 6.24,
        "stacks": "rendezvous",
        "summary": "torchrun on host b waited 6.2 s for nodes "
        "that never came: its "
        "static rendezvous at h1:1234 needs 3 node(s) (--nnodes=3) and only this one is "
        "known to have joined; no rank started",
        "evidence": {
            "endpoint": "h1:1234",
            "backend": "static",
            "nnodes": "3",
            "nnodes_expected": 3,
            "nnodes_joined": 1,
            "waited_s": 6.2,
            "host": "b",
        },
    },
    {
        "name": "still importing torch: not a rendezvous wait",
        "launcher": {"argv": RDZV_ARGV, "host": "a"},
        "ranks_said_hello": False,
        "waited_s": 20,
        "stacks": "File \"<frozen importlib._bootstrap>\", in _find_and_load",
        "summary": None,
    },
    {
        "name": "a rank said hello: not a rendezvous wait",
        "launcher": {"argv": RDZV_ARGV, "host": "a"},
        "ranks_said_hello": True,
        "waited_s": 20,
        "stacks": "rendezvous",
        "summary": None,
    },
]


def stacks(*frames, thread="MainThread"):
    """A dump_stacks reply's text (worker/errors.py all_stacks), one thread."""
    lines = [
        'Thread 0x7f01 "trainbridge-beacon" (most recent call last):',
        '  File "/v/lib/python3.11/threading.py", line 1002, in _bootstrap',
        "",
        f'Thread 0x7f00 "{thread}" (most recent call last):',
    ]
    lines += [f'  File "{f}", line {n}, in {fn}\n    code' for f, n, fn in frames]
    return "\n".join(lines) + "\n"


HUNG = [
    {
        "name": "rank 0 waits in all_reduce; rank 1 is elsewhere: rank 1 is the hung rank",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
            [
                "j/0",
                "reply",
                {
                    "to": 9,
                    "ok": True,
                    "stacks": stacks(
                        ("/w/train.py", 22, "<module>"),
                        (
                            "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py",
                            83,
                            "wrapper",
                        ),
                        REDUCE,
                    ),
                },
                30.0,
            ],
            [
                "j/1",
                "reply",
                {
                    "to": 9,
                    "ok": True,
                    "stacks": stacks(
                        ("/w/train.py", 20, "<module>"), ("/w/train.py", 14, "read_shard")
                    ),
                },
                30.0,
            ],
        ],
        "summary": "rank 1 (host a, pid 102) is not in the collective: it is at w/train.py:14 "
        "read_shard; rank(s) 0 wait in all_reduce for it",
    },
    {
        "name": "rank 1 did not answer dump_stacks (native code holds its GIL): its "
        "faulthandler dump from the crash file (SIGUSR2: the main thread, innermost first) "
        "names where it is",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
            [
                "j/0",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/train.py", 22, "<module>"), REDUCE)},
                30.0,
            ],
            [
                "j/1",
                "signal_dump",
                {
                    "stacks": "Stack (most recent call first):\n"
                    '  File "/w/train.py", line 14 in read_shard\n'
                    '  File "/w/train.py", line 20 in <module>\n\n'
                    "Current thread 0x00007f0a1c3fd640 (most recent call first):\n"
                    '  File "/usr/lib/python3.11/threading.py", line 324 in wait\n'
                },
                31.0,
            ],
        ],
        "summary": "rank 1 (host a, pid 102) is not in the collective: it is at w/train.py:14 "
        "read_shard; rank(s) 0 wait in all_reduce for it",
    },
    {
        "name": "a rank whose dump shows no frame (read before faulthandler wrote it out) is "
        "not named: the rank whose stack shows it elsewhere is",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 3), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 3), 1.0],
            ["j/2", "hello", hello(103, 100, 2, 2, 3), 1.0],
            [
                "j/0",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/train.py", 22, "<module>"), REDUCE)},
                30.0,
            ],
            [
                "j/1",
                "signal_dump",
                {"stacks": "Stack (most recent call first):\n"},
                31.0,
            ],
            [
                "j/2",
                "reply",
                {
                    "to": 9,
                    "ok": True,
                    "stacks": stacks(
                        ("/w/train.py", 20, "<module>"), ("/w/train.py", 14, "read_shard")
                    ),
                },
                30.0,
            ],
        ],
        "summary": "rank 2 (host a, pid 103) is not in the collective: it is at w/train.py:14 "
        "read_shard; rank(s) 0 wait in all_reduce for it",
    },
    {
        "name": "every rank waits in the collective: no hung rank named",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
            [
                "j/0",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/t.py", 22, "<module>"), REDUCE)},
                30.0,
            ],
            [
                "j/1",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/t.py", 22, "<module>"), REDUCE)},
                30.0,
            ],
        ],
        "summary": None,
    },
    {
        "name": "one rank did not answer the dump: no verdict from one stack",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
            [
                "j/0",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/t.py", 22, "<module>"), REDUCE)},
                30.0,
            ],
        ],
        "summary": None,
    },
]

# DistributedDataParallel: the gradient all-reduce runs in autograd's engine (C++ hooks), so
# a rank waiting for its peers shows backward(), not a c10d frame.
BACKWARD = [
    ("/w/ddp.py", 61, "_run_batch"),
    ("/v/lib/python3.11/site-packages/torch/_tensor.py", 623, "backward"),
    ("/v/lib/python3.11/site-packages/torch/autograd/__init__.py", 395, "backward"),
    ("/v/lib/python3.11/site-packages/torch/autograd/graph.py", 979, "_engine_run_backward"),
]
DDP_HELLOS = [
    ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
    ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
]
RANK0_IN_BACKWARD = ["j/0", "reply", {"to": 9, "ok": True, "stacks": stacks(*BACKWARD)}, 30.0]
NEXT_BATCH = [
    ("/v/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 733, "__next__"),
    ("/v/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 1480, "_next_data"),
]
RANK1_NEXT_BATCH = [
    "j/1",
    "reply",
    {"to": 9, "ok": True, "stacks": stacks(("/w/ddp.py", 90, "train"), *NEXT_BATCH)},
    30.0,
]
# Rank 1's DataLoader workers, forked from it, on this host: a lock's futex each. A worker on
# another host with the same pids (the third case) is not these.
DATALOADER_102 = [
    {"pid": 201, "name": "pt_data_worker", "ppid": 102, "status": "sleeping",
     "wchan": "futex_do_wait", "started": 5.0},
    {"pid": 202, "name": "pt_data_worker", "ppid": 102, "status": "sleeping",
     "wchan": "futex_do_wait", "started": 5.1},
]  # fmt: skip
# Their SIGUSR1 dumps in the crash file (faulthandler's format, most recent call first).
WORKER_AT_GETITEM = (
    'Current thread 0x7f02 (most recent call first):\n'
    '  File "/w/ddp.py", line 51 in __getitem__\n'
    '  File "/v/torch/utils/data/_utils/fetch.py", line 52 in fetch\n'
    '  File "/v/torch/utils/data/_utils/worker.py", line 349 in _worker_loop\n'
)


def remote_rank1_with_workers(**worker):
    """Rank 1 on host b, away at its next batch, whose answer lists two DataLoader workers on
    one futex wait (with `worker`'s fields too: the stacks they dumped for it)."""
    children = [
        dict(pid=pid, state="S", wchan="futex_do_wait", name="pt_data_worker", **worker)
        for pid in (60, 61)
    ]
    reply = {
        "to": 9,
        "ok": True,
        "stacks": stacks(("/w/ddp.py", 90, "train"), *NEXT_BATCH),
        "children": children,
    }
    return [
        ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
        ["b/1", "hello", dict(hello(52, 50, 1, 0, 2, host="b"), addr="10.0.0.2"), 1.0],
        RANK0_IN_BACKWARD,
        ["b/1", "reply", reply, 30.0],
    ]


STOPPED_102 = {
    "pid": 102,
    "status": "stopped",
    "wchan": "do_signal_stop",
    "kernel_stack": ["do_signal_stop", "get_signal", "arch_do_signal_or_restart"],
}
INIT = (
    "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
    1700,
    "init_process_group",
)
RENDEZVOUS_STORE = (
    "/v/lib/python3.11/site-packages/torch/distributed/rendezvous.py",
    199,
    "_create_c10d_store",
)
HUNG += [
    {
        "name": "rank 0 waits in init_process_group; rank 1 of 2 never said hello: rank 1, "
        "never started (its host is the launcher's to say)",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            [
                "j/0",
                "reply",
                {
                    "to": 9,
                    "ok": True,
                    "stacks": stacks(("/w/train.py", 22, "main"), INIT, RENDEZVOUS_STORE),
                },
                30.0,
            ],
        ],
        "kind": "rank_never_started",
        "summary": "rank 1 never said hello; rank(s) 0 (a) wait in init_process_group for it",
    },
    {
        "name": "rank 1 of 2 never said hello but rank 0 is in its own code: no verdict of "
        "ranks (the lead's own diagnosis stands)",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            [
                "j/0",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/train.py", 14, "read_shard"))},
                30.0,
            ],
        ],
        "summary": None,
    },
]
HUNG += [
    {
        "name": "DDP: rank 0 waits in backward(); rank 1 spins in its own loop: rank 1, there",
        "messages": DDP_HELLOS
        + [
            RANK0_IN_BACKWARD,
            [
                "j/1",
                "reply",
                {
                    "to": 9,
                    "ok": True,
                    "stacks": stacks(("/w/ddp.py", 80, "train"), ("/w/ddp.py", 47, "compute")),
                },
                30.0,
            ],
        ],
        "kind": "collective_wait",
        "summary": "rank 1 (host a, pid 102) is not in the collective: it is at w/ddp.py:47 "
        "compute; rank(s) 0 wait in backward() (DDP's gradient all-reduce) for it",
    },
    {
        "name": "DDP: rank 1 did not answer and the OS has it stopped: rank 1, stopped",
        "messages": DDP_HELLOS + [RANK0_IN_BACKWARD],
        "processes": [
            {"pid": 100, "status": "sleeping", "wchan": "hrtimer_nanosleep"},
            {"pid": 101, "status": "sleeping", "wchan": "futex_do_wait"},
            STOPPED_102,
        ],
        "kind": "stopped",
        "summary": "rank 1 (host a, pid 102) is stopped (SIGSTOP, a debugger or a frozen "
        "container: in the kernel at do_signal_stop); rank(s) 0 wait in backward() (DDP's "
        "gradient all-reduce) for it",
    },
    {
        "name": "a stopped rank comes before a rank that is elsewhere: it is the cause",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 3), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 3), 1.0],
            ["j/2", "hello", hello(103, 100, 2, 2, 3), 1.0],
            RANK0_IN_BACKWARD,
            [
                "j/2",
                "reply",
                {"to": 9, "ok": True, "stacks": stacks(("/w/ddp.py", 80, "train"))},
                30.0,
            ],
        ],
        "processes": [STOPPED_102],
        "kind": "stopped",
        "summary": "rank 1 (host a, pid 102) is stopped (SIGSTOP, a debugger or a frozen "
        "container: in the kernel at do_signal_stop); nor are rank(s) 2; rank(s) 0 wait in "
        "backward() (DDP's gradient all-reduce) for it",
    },
    {
        "name": "another host's rank 1 did not answer; its launcher's answer lists it stopped",
        "messages": [
            ["b/50", "hello", dict(hello(50, 1, None, None, None, host="b"), addr="10.0.0.2"), 1.0],
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["b/1", "hello", dict(hello(52, 50, 1, 0, 2, host="b"), addr="10.0.0.2"), 1.0],
            RANK0_IN_BACKWARD,
            [
                "b/50",
                "reply",
                {
                    "to": 9,
                    "ok": True,
                    "stacks": stacks(("/v/bin/torchrun", 8, "<module>")),
                    "children": [{"pid": 52, "state": "T", "wchan": "do_signal_stop"}],
                },
                30.0,
            ],
        ],
        "kind": "stopped",
        "summary": "rank 1 (host b at 10.0.0.2, pid 52) is stopped (SIGSTOP, a debugger or a "
        "frozen container: in the kernel at do_signal_stop); rank(s) 0 wait in backward() "
        "(DDP's gradient all-reduce) for it",
    },
    {
        "name": "another host's pid is not this host's: a local stopped process with the same "
        "pid says nothing about it",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["b/1", "hello", dict(hello(102, 50, 1, 0, 2, host="b"), addr="10.0.0.2"), 1.0],
            RANK0_IN_BACKWARD,
        ],
        "processes": [STOPPED_102],
        "kind": None,
        "summary": None,
    },
    {
        "name": "rank 1 did not answer but runs (not stopped): nobody is named from one stack",
        "messages": DDP_HELLOS + [RANK0_IN_BACKWARD],
        "processes": [{"pid": 102, "status": "running", "wchan": None}],
        "kind": None,
        "summary": None,
    },
    {
        "name": "DDP: rank 1 waits for its DataLoader workers, all on one lock: their wait, "
        "said of rank 1",
        "messages": DDP_HELLOS + [RANK0_IN_BACKWARD, RANK1_NEXT_BATCH],
        "processes": DATALOADER_102,
        "process_stacks": {"201": WORKER_AT_GETITEM, "202": WORKER_AT_GETITEM},
        "kind": "child_wait",
        "summary": "rank 1 (host a, pid 102) is not in the collective: at w/ddp.py:90 train it "
        "waits for both DataLoader workers (pids 201, 202, sleeping), all blocked on the same "
        "wait, each at w/ddp.py:51 __getitem__; rank(s) 0 wait in backward() (DDP's gradient "
        "all-reduce) for it",
    },
    {
        "name": "DDP: the snapshot listed none of rank 1's processes (a slow snapshot on a "
        "loaded machine met the SIGTERM that followed it); rank 1's answer lists its DataLoader "
        "workers, whose SIGUSR1 dumps are in this host's crash file: said with their frame",
        "messages": DDP_HELLOS
        + [
            RANK0_IN_BACKWARD,
            [
                "j/1",
                "reply",
                dict(
                    RANK1_NEXT_BATCH[2],
                    children=[
                        dict(pid=pid, state="S", wchan="futex_do_wait", name="pt_data_worker")
                        for pid in (201, 202)
                    ],
                ),
                30.0,
            ],
        ],
        "processes": [],
        "process_stacks": {"201": WORKER_AT_GETITEM, "202": WORKER_AT_GETITEM},
        "kind": "child_wait",
        "summary": "rank 1 (host a, pid 102) is not in the collective: at w/ddp.py:90 train it "
        "waits for both DataLoader workers (pids 201, 202, sleeping), all blocked on the same "
        "wait, each at w/ddp.py:51 __getitem__; rank(s) 0 wait in backward() (DDP's gradient "
        "all-reduce) for it",
    },
    {
        "name": "DDP: rank 1's DataLoader workers wait on different things: rank 1 and its "
        "frame only",
        "messages": DDP_HELLOS + [RANK0_IN_BACKWARD, RANK1_NEXT_BATCH],
        "processes": [DATALOADER_102[0], dict(DATALOADER_102[1], wchan="pipe_read")],
        "kind": "collective_wait",
        "summary": "rank 1 (host a, pid 102) is not in the collective: it is at w/ddp.py:90 "
        "train; rank(s) 0 wait in backward() (DDP's gradient all-reduce) for it",
    },
    {
        "name": "DDP: another host's rank 1 lists its DataLoader workers on one kernel wait in "
        "its answer: said of it, by their kernel wait",
        "messages": remote_rank1_with_workers(),
        "processes": [dict(DATALOADER_102[0], ppid=52), dict(DATALOADER_102[1], ppid=52)],
        "kind": "child_wait",
        # (this host's workers 201, 202 have the same ppid and wait: they are not those)
        "summary": "rank 1 (host b at 10.0.0.2, pid 52) is not in the collective: at "
        "w/ddp.py:90 train it waits for both DataLoader workers (pids 60, 61, sleeping), all "
        "blocked on the same wait, each in the kernel at futex_do_wait; rank(s) 0 wait in "
        "backward() (DDP's gradient all-reduce) for it",
    },
    {
        "name": "DDP: another host's rank 1 lists its DataLoader workers with the stacks they "
        "dumped for it: said of it, with their Python frame",
        "messages": remote_rank1_with_workers(stack=WORKER_AT_GETITEM),
        "kind": "child_wait",
        "summary": "rank 1 (host b at 10.0.0.2, pid 52) is not in the collective: at "
        "w/ddp.py:90 train it waits for both DataLoader workers (pids 60, 61, sleeping), all "
        "blocked on the same wait, each at w/ddp.py:51 __getitem__; rank(s) 0 wait in "
        "backward() (DDP's gradient all-reduce) for it",
    },
    {
        "name": "DDP: another host's rank 1 lists its DataLoader workers, whose dumps did not "
        "come in time: their kernel wait, and why no Python frame is said",
        "messages": remote_rank1_with_workers(stack_missing="no dump within 0.5 s"),
        "kind": "child_wait",
        "summary": "rank 1 (host b at 10.0.0.2, pid 52) is not in the collective: at "
        "w/ddp.py:90 train it waits for both DataLoader workers (pids 60, 61, sleeping), all "
        "blocked on the same wait, each in the kernel at futex_do_wait (no Python stack from "
        "2 of them: no dump within 0.5 s); rank(s) 0 wait in backward() (DDP's gradient "
        "all-reduce) for it",
    },
    {
        "name": "DDP: both ranks in backward(): no hung rank named",
        "messages": DDP_HELLOS
        + [
            RANK0_IN_BACKWARD,
            ["j/1", "reply", {"to": 9, "ok": True, "stacks": stacks(*BACKWARD)}, 30.0],
        ],
        "kind": None,
        "summary": None,
    },
]


def beat(*frames):
    """A heartbeat body whose main-thread stack (worker/errors.py format_stack) is frames."""
    text = "".join(f'  File "{f}", line {n}, in {fn}\n    code\n' for f, n, fn in frames)
    return {"beat": 7, "idle_s": 9.0, "stack": text or None}


RANK0_IN_REDUCE = beat(
    ("/w/train.py", 22, "<module>"),
    ("/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 83, "wrapper"),
    REDUCE,
)
# The live diagnosis while stalled: from the ranks' heartbeat stacks.
LIVE = [
    {
        "name": "rank 0's heartbeat is in all_reduce, rank 1's in read_shard: waiting for rank 1",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
            ["j/0", "heartbeat", RANK0_IN_REDUCE, 20.0],
            [
                "j/1",
                "heartbeat",
                beat(("/w/train.py", 20, "<module>"), ("/w/train.py", 14, "read_shard")),
                20.0,
            ],
        ],
        "diagnosis": {
            "kind": "collective_wait",
            "frame": "w/train.py:14 read_shard",
            "summary": "rank(s) 0 waiting in all_reduce for rank 1 (host a, pid 102), which "
            "is at w/train.py:14 read_shard",
        },
    },
    {
        "name": "rank 1 moved again (its heartbeat has no stack): no live verdict",
        "messages": [
            ["j/0", "hello", hello(101, 100, 0, 0, 2), 1.0],
            ["j/1", "hello", hello(102, 100, 1, 1, 2), 1.0],
            ["j/0", "heartbeat", RANK0_IN_REDUCE, 20.0],
            [
                "j/1",
                "heartbeat",
                beat(("/w/train.py", 20, "<module>"), ("/w/train.py", 14, "read_shard")),
                20.0,
            ],
            ["j/1", "heartbeat", beat(), 21.0],
        ],
        "diagnosis": None,
    },
    {
        "name": "DDP: rank 0's heartbeat is in backward(), rank 1's in its own loop",
        "messages": DDP_HELLOS
        + [
            ["j/0", "heartbeat", beat(*BACKWARD), 20.0],
            [
                "j/1",
                "heartbeat",
                beat(("/w/ddp.py", 80, "train"), ("/w/ddp.py", 47, "compute")),
                20.0,
            ],
        ],
        "diagnosis": {
            "kind": "collective_wait",
            "frame": "w/ddp.py:47 compute",
            "summary": "rank(s) 0 waiting in backward() (DDP's gradient all-reduce) for rank 1 "
            "(host a, pid 102), which is at w/ddp.py:47 compute",
        },
    },
    {
        "name": "only dump replies, no idle heartbeats: no live verdict",
        "messages": HUNG[0]["messages"],
        "diagnosis": None,
    },
]


def check_live():
    from trainbridge.bridge import ranks, ranks_hang

    for case in LIVE:
        state = ranks.initial()
        for key, kind, body, ts in case["messages"]:
            ranks.observe(state, key, kind, body, ts)
        got = ranks_hang.live_collective(state)
        short = got and {
            k: got["evidence"]["frame"] if k == "frame" else got[k]
            for k in ("kind", "frame", "summary")
        }
        assert short == case["diagnosis"], (case["name"], got)


# At the deadline, a rank that did not answer the hang's dump_stacks in time (another host's,
# on a loaded machine) is judged by its last heartbeat's stack, sent once it was idle.
HUNG.append(
    {
        "name": "DDP: rank 1 did not answer dump_stacks; its last heartbeat's stack is in its "
        "own loop while rank 0 waits in backward(): rank 1, there",
        "messages": DDP_HELLOS
        + [
            [
                "j/1",
                "heartbeat",
                beat(("/w/ddp.py", 80, "train"), ("/w/ddp.py", 47, "compute")),
                20.0,
            ],
            RANK0_IN_BACKWARD,
        ],
        "kind": "collective_wait",
        "summary": "rank 1 (host a, pid 102) is not in the collective: it is at w/ddp.py:47 "
        "compute; rank(s) 0 wait in backward() (DDP's gradient all-reduce) for it",
    }
)


def check_hung():
    from trainbridge.bridge import ranks, ranks_hang

    for case in HUNG:
        state = ranks.initial()
        for key, kind, body, ts in case["messages"]:
            ranks.observe(state, key, kind, body, ts)
        got = ranks_hang.hung_rank(
            state, processes=case.get("processes"), process_stacks=case.get("process_stacks")
        )
        assert (got and got["summary"]) == case["summary"], (case["name"], got)
        if "kind" in case:
            assert (got and got["kind"]) == case["kind"], (case["name"], got)


def check_rendezvous():
    from trainbridge.bridge import ranks, ranks_hang

    for argv, world, expected in LAUNCHERS:
        assert ranks.awaits_ranks({"argv": argv, "world_size": world}) is expected, argv
    for case in RENDEZVOUS:
        got = ranks_hang.rendezvous_wait(
            case["launcher"], case["ranks_said_hello"], case["waited_s"], case["stacks"]
        )
        if case["summary"] is None:
            assert got is None, case["name"]
        else:
            assert got["kind"] == "rendezvous_wait" and got["summary"] == case["summary"], got
            assert got["evidence"] == case["evidence"], got["evidence"]


def check(case):
    """The Python module agrees with the hand-written expectations (the JSON is the
    contract; this keeps a typo in either from being committed)."""
    from trainbridge.bridge import ranks

    state = ranks.initial()
    for key, kind, body, ts in case["messages"]:
        ranks.observe(state, key, kind, body, ts)
    rows = ranks.table(state)
    keys = ("rank", "role", "pid", "state", "stage", "progress", "addr")
    got = [{k: r[k] for k in keys if k in r} for r in rows]
    assert got == case["rows"], (case["name"], got)
    cause = ranks.root_cause(rows)
    if case["root_cause"] is None:
        assert cause is None, (case["name"], cause)
        return
    body = ranks.error_body(state, cause)
    assert (body or {}).get("type") == case["root_cause"].get("error_type"), (case["name"], body)
    short = {
        "rank": cause["rank"],
        "summary": cause["summary"],
        "why": {str(c["rank"]): c["why"] for c in cause["consequences"]},
    }
    short["error_type"] = case["root_cause"].get("error_type")
    assert short == case["root_cause"], (case["name"], short)


def main():
    for case in CASES:
        check(case)
    check_rendezvous()
    check_hung()
    check_live()
    path = os.path.join(ROOT, "vectors", "ranks.json")
    with open(path, "w", encoding="ascii") as out:
        json.dump(
            {
                "cases": CASES,
                "launchers": LAUNCHERS,
                "rendezvous": RENDEZVOUS,
                "hung": HUNG,
                "live": LIVE,
            },
            out,
            indent=1,
            sort_keys=True,
        )
        out.write("\n")


if __name__ == "__main__":
    main()
