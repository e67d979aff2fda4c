"""Writes vectors/lead.json: which process speaks for a job (bridge/machine.py choose_lead,
the one implementation), and which argv is a distributed launcher.

The expectations are written by hand from docs/CLIENT.md ("The lead process"); this script
only expands them into JSON. tests/client/test_machine.py runs the committed file.
"""

import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PY = "/venv/bin/python"
TORCHRUN = [PY, "/venv/bin/torchrun", "--standalone", "--nproc_per_node=2", "train.py"]
SCRIPT = [PY, "train.py"]


def hello(pid, ppid, argv=SCRIPT, rank=None, world_size=None, remote=False):
    out = {"pid": pid, "ppid": ppid, "argv": argv, "rank": rank, "world_size": world_size}
    if remote:  # joined over the network: its pid and ppid are another host's
        out["remote"] = True
    return out


RANK = [PY, "-u", "train.py"]
SLURM_RUNNER = [PY, "-m", "trainbridge.bridge.slurm_runner", "/jobs/j-1", "{}", "--", "srun", *RANK]
LEAD_CASES = [
    ("a launched script leads", 10, [hello(10, 1)], 10),
    (
        "a script's torchrun step and its rank 0 never lead",
        10,
        [hello(10, 1), hello(20, 10, TORCHRUN), hello(21, 20, RANK, 0, 1)],
        10,
    ),
    (
        "a rank 0 that is the script's own child (mp.spawn) does not lead",
        10,
        [hello(10, 1), hello(21, 10, RANK, 0, 2), hello(22, 10, RANK, 1, 2)],
        10,
    ),
    (
        "a rank 0 of no relation to the job does not lead",
        10,
        [hello(10, 1), hello(99, 7, RANK, 0, 1)],
        10,
    ),
    (
        "launched torchrun: its rank 0 leads",
        10,
        [hello(10, 1, TORCHRUN), hello(22, 10, RANK, 1, 2), hello(21, 10, RANK, 0, 2)],
        21,
    ),
    (
        "launched torchrun before rank 0 said hello: torchrun leads",
        10,
        [hello(10, 1, TORCHRUN), hello(22, 10, RANK, 1, 2)],
        10,
    ),
    (
        "launched torchrun: a grandchild's rank 0 is not its rank",
        10,
        [hello(10, 1, TORCHRUN), hello(30, 31, RANK, 0, 2)],
        10,
    ),
    (
        "python -m torch.distributed.run is a launcher",
        10,
        [
            hello(10, 1, [PY, "-m", "torch.distributed.run", "--nproc_per_node=2", "t.py"]),
            hello(21, 10, RANK, 0, 2),
        ],
        21,
    ),
    (
        "the launched process without a worker: the first top worker leads",
        10,
        [hello(20, 10), hello(21, 20)],
        20,
    ),
    (
        "a shell script started torchrun: torchrun's rank 0 leads",
        10,
        [hello(20, 10, TORCHRUN), hello(22, 20, RANK, 1, 2), hello(21, 20, RANK, 0, 2)],
        21,
    ),
    (
        "ranks of a launcher without a worker: rank 0 leads, whatever the order",
        10,
        [hello(22, 10, RANK, 1, 2), hello(21, 10, RANK, 0, 2)],
        21,
    ),
    (
        "RANK=0 without WORLD_SIZE is not distributed",
        10,
        [hello(10, 1, TORCHRUN), hello(21, 10, RANK, 0, None)],
        10,
    ),
    ("nobody left", 10, [], None),
    ("no launched pid known: the first top worker", None, [hello(20, 1), hello(21, 20)], 20),
    (
        "a Slurm job's runner: the rank 0 that joined from another host leads",
        10,
        [
            hello(10, 1, SLURM_RUNNER),
            hello(10, 9, RANK, 1, 2, remote=True),  # another host's pid 10: not the runner
            hello(11, 9, RANK, 0, 2, remote=True),
        ],
        11,
    ),
    (
        "a rank 0 of another host does not lead a launched script",
        10,
        [hello(10, 1), hello(11, 9, RANK, 0, 2, remote=True)],
        10,
    ),
]

# The launched process has loaded the worker (its stage box exists) but its hello is not read
# yet: its children's hellos can be read first (the ROUTER takes its peers in turn), and none
# of them stands in for it. Cases: (name, launched pid, present, lead), launched_loaded true.
LOADED_CASES = [
    (
        "a script's torchrun step read before the script's own hello: nobody leads yet",
        10,
        [hello(20, 10, TORCHRUN), hello(21, 20, RANK, 0, 1)],
        None,
    ),
    (
        "a launcher's rank 0 read before the launcher's hello: nobody leads yet",
        10,
        [hello(21, 10, RANK, 0, 2), hello(22, 10, RANK, 1, 2)],
        None,
    ),
    (
        "once the launched process's hello is read, the rules above apply",
        10,
        [hello(20, 10, TORCHRUN), hello(10, 1)],
        10,
    ),
]

LAUNCHER_CASES = [
    (TORCHRUN, True),
    (SLURM_RUNNER, True),  # bridge/slurm_runner.py: Slurm starts its ranks on the nodes
    (["/venv/bin/torchrun", "--nproc_per_node=2", "train.py"], True),
    ([PY, "-m", "torch.distributed.run", "train.py"], True),
    ([PY, "-m", "torch.distributed.launch", "train.py"], True),
    (
        [
            PY,
            "-X",
            "faulthandler",
            "/venv/lib/python3.12/site-packages/torch/distributed/run.py",
            "train.py",
        ],
        True,
    ),
    ([PY, "train.py", "--launcher", "torchrun"], False),
    ([PY, "-m", "trainpkg", "torchrun"], False),
    ([PY, "-c", "import torchrun"], False),
    ([PY, "-W", "torchrun", "train.py"], False),
    ([PY], False),
    ([], False),
]


def main():
    out = {
        "about": "Which worker process speaks for a job: choose_lead(present, launched_pid, "
        "launched_loaded) returns the lead's pid (null: none), given the hellos of the "
        "processes that said hello and have not left, in arrival order, and whether the "
        "launched process has loaded the worker (launched_loaded, false when absent); "
        "is_launcher(hello) judges a hello's argv. See docs/CLIENT.md 'The lead process'.",
        "lead": [
            {"name": n, "launched_pid": pid, "present": present, "lead": lead}
            for n, pid, present, lead in LEAD_CASES
        ]
        + [
            {
                "name": n,
                "launched_pid": pid,
                "present": present,
                "launched_loaded": True,
                "lead": lead,
            }
            for n, pid, present, lead in LOADED_CASES
        ],
        "launcher": [{"argv": argv, "launcher": flag} for argv, flag in LAUNCHER_CASES],
    }
    with open(os.path.join(ROOT, "vectors", "lead.json"), "w", encoding="ascii") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
