"""The Slurm test cluster works as a user of a training cluster sees it: a batch job spans
both nodes (each in its own network), two tasks fit on a node, a job over its time limit ends
TIMEOUT after its SIGTERM grace, and a node that dies fails its job (NODE_FAIL) and comes
back when its slurmd is restarted. The jobs' states come from `scontrol show job`, polled
with a deadline: there is no accounting daemon here (no sacct)."""

import os
import time

from tests.slurm.cluster import Cluster


def _script(tmp_path, name: str, body: str) -> str:
    path = os.path.join(tmp_path, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


def _sbatch(c: Cluster, *args: str) -> str:
    """Submit; the job id."""
    done = c.run("sbatch", "--parsable", *args)
    assert done.returncode == 0, f"sbatch failed: {done.stderr}"
    return done.stdout.strip().split(";")[0]


def test_two_node_job(slurm_cluster: Cluster, tmp_path) -> None:
    """srun -N2 with two tasks per node: tasks 0-1 on tbh1 (10.232.K.1 in slot K), 2-3 on
    tbh2 (10.232.K.2), each resolving tbh1 to its own cluster's head (the slot's /etc/hosts,
    as a job script finds MASTER_ADDR), and the job COMPLETED with exit code 0."""
    c = slurm_cluster
    out = os.path.join(tmp_path, "job.out")
    subnet = c.head_addr.rsplit(".", 1)[0] + ".0/24"  # other slots' heads are here too
    where = _script(
        tmp_path, "where.sh",
        f"addr=$(ip -4 -o addr show to {subnet} | awk '{{print $4}}' | cut -d/ -f1)\n"
        'echo "$SLURMD_NODENAME $addr $(getent hosts tbh1 | cut -d" " -f1)"\n',
    )  # fmt: skip
    script = _script(tmp_path, "job.sh", f"exec srun -l {where}\n")
    jobid = _sbatch(c, "-N2", "--ntasks-per-node=2", "-o", out, script)
    fields = c.wait_job(jobid, timeout_s=120)
    with open(out) as f:
        text = f.read()
    assert fields["JobState"] == "COMPLETED", (fields, text)
    assert fields["ExitCode"] == "0:0", (fields, text)
    tasks = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    on_head = f"{c.nodes[0]} {c.head_addr} {c.head_addr}"
    on_node2 = f"{c.nodes[1]} {c.node2_addr} {c.head_addr}"
    assert tasks == {"0": on_head, "1": on_head, "2": on_node2, "3": on_node2}, text


def test_node_failure_fails_job_and_node_comes_back(slurm_cluster: Cluster, tmp_path) -> None:
    """kill_node("tbh2") kills its slurmd and every process in its network namespace: the
    controller marks tbh2 DOWN and the two-node job NODE_FAIL (SlurmdTimeout/MessageTimeout
    6/5: about 15 s); restart_node brings tbh2 back idle and a two-node job runs again."""
    c = slurm_cluster
    out = os.path.join(tmp_path, "job.out")
    started = os.path.join(tmp_path, "started")
    task = f"touch {started}.$SLURM_PROCID; exec sleep 600"
    jobid = _sbatch(c, "-N2", "-o", out, "--wrap", f"srun sh -c '{task}'")
    # Until both tasks run (the step is listed before its tasks start).
    deadline = time.monotonic() + 60
    while not (os.path.exists(f"{started}.0") and os.path.exists(f"{started}.1")):
        assert time.monotonic() < deadline, ("the tasks never started", c.job(jobid))
        time.sleep(0.25)
    try:
        killed = c.kill_node(c.nodes[1])
        assert c.slurmd_pid(c.nodes[1]) is None
        assert len(killed) >= 3, killed  # slurmd, slurmstepd, the task
        fields = c.wait_job(jobid, timeout_s=90)
        assert fields["JobState"] == "NODE_FAIL", fields
        assert c.node_states()[c.nodes[1]].startswith("down"), c.node_states()
    finally:
        c.restart_node(c.nodes[1])
    assert c.node_states() == {c.nodes[0]: "idle", c.nodes[1]: "idle"}
    again = _sbatch(c, "-N2", "-o", os.path.join(tmp_path, "again.out"), "--wrap", "srun true")
    assert c.wait_job(again, timeout_s=120)["JobState"] == "COMPLETED"


def test_time_limit_ends_job_timeout(slurm_cluster: Cluster, tmp_path) -> None:
    """--time=1 (Slurm's limits are whole minutes): the job gets SIGTERM, then SIGKILL after
    KillWait, and ends TIMEOUT. slurmctld checks the limits every 30 s from its start (fixed
    in Slurm, no setting), so this takes 60-91 s after the job starts, depending on where the
    job's minute ends between two checks: 85-87 s when it is a module's second test, 65-75 s
    when it follows the other two (its place here, in file order)."""
    c = slurm_cluster
    out = os.path.join(tmp_path, "job.out")
    # Slurm signals a step's processes children first (proctrack/linuxproc's process list):
    # `sleep` can die before the shell gets its own SIGTERM, and a shell whose `wait` had
    # returned would end the script there without ever running its trap. It waits again.
    script = _script(
        tmp_path, "long.sh",
        "trap 'echo got SIGTERM; exit 143' TERM\necho started\n"
        "while :; do sleep 600 & wait; done\n",
    )  # fmt: skip
    jobid = _sbatch(c, "--time=1", "-N1", "-o", out, script)
    c.wait_job(jobid, timeout_s=60, states=frozenset({"RUNNING"}))
    started = time.monotonic()
    fields = c.wait_job(jobid, timeout_s=150)
    took = time.monotonic() - started
    with open(out) as f:
        text = f.read()
    assert fields["JobState"] == "TIMEOUT", (fields, text)
    assert fields["Reason"] == "TimeLimit", fields
    assert 55 <= took <= 150, took
    assert "started" in text and "got SIGTERM" in text, text
