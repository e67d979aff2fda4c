"""The scheduler on Slurm (bridge/slurm.py, bridge/slurm_runner.py, docs/SCALE.md), on a
two-node cluster made by the test itself (tests/slurm/cluster.py): jobs submitted with
bridge.Scheduler(backend="slurm") run through sbatch on nodes tbh1 and tbh2 (a network
namespace), and the store on this host gets the same truth as for a job of this host, each
fault named by its node and its rank."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from trainbridge import bridge
from trainbridge.bridge import slurm_runner

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.join(HERE, "scenarios", "task.py")
WAIT_S = 180.0  # a job's whole life here: sbatch, two nodes, torch imports on 2 busy cores


def job_env(cluster, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(cluster.env)
    env.pop("PYTHONUNBUFFERED", None)  # as users run
    env.update(extra)
    return env


def scheduler(store, cluster):
    return bridge.Scheduler(
        store=str(store), backend="slurm", slurm={"listen": cluster.head_addr}, tick=0.2
    )


def srun(*argv: str, tasks: int = 2) -> list[str]:
    return ["srun", f"--nodes={tasks}", "--ntasks-per-node=1", sys.executable, *argv]


def ended(sched, job_id: str, timeout: float = WAIT_S) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = sched.get(job_id)
        if row["state"] == "ended":
            print(f"{job_id}: {row['report']['summary']}")  # shown with -rP, and on failure
            return row
        time.sleep(0.2)
    row = sched.get(job_id)
    raise AssertionError(f"job {job_id} did not end within {timeout:g} s: {row['state']}, "
                         f"stage {row['stage']!r}, log: {_tail(row)}")  # fmt: skip


def training(sched, job_id: str) -> None:
    """Wait until the job's lead reported its first step (its tasks run on both nodes)."""
    deadline = time.monotonic() + WAIT_S
    while (sched.get(job_id)["progress"] or {}).get("step") is None:
        assert time.monotonic() < deadline, sched.get(job_id)
        time.sleep(0.2)


def _tail(row) -> str:
    try:
        with open(row["log_path"], encoding="utf-8", errors="replace") as f:
            return f.read()[-2000:]
    except OSError as exc:
        return str(exc)


def ranks_by_rank(report) -> dict:
    return {r["rank"]: r for r in report.get("ranks") or [] if r.get("rank") is not None}


@pytest.fixture
def env_for(slurm_cluster, monkeypatch):
    # The keeper and reconcile call scontrol and scancel: they need the cluster's config too.
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    return lambda **extra: job_env(slurm_cluster, **extra)


def test_a_two_node_job_succeeds_and_its_tasks_are_named_by_their_nodes(
    slurm_cluster, env_for, tmp_path
):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(srun(TASK), env=env_for(), slurm={"nodes": 2})
        row = ended(sched, job_id)
    report = row["report"]
    assert row["outcome"] == "succeeded", report["summary"] + _tail(row)
    assert report["slurm"]["state"] == "COMPLETED"
    assert report["slurm"]["nodes"] == "tbh[1-2]"
    by_rank = ranks_by_rank(report)
    assert (by_rank[0]["host"], by_rank[1]["host"]) == ("tbh1", "tbh2"), report["ranks"]
    assert row["progress"]["step"] == 5, row["progress"]  # rank 0 led: its progress
    log = _tail(row)
    assert "task 1 of 2 on tbh2" in log and "task 0 of 2 on tbh1" in log


def test_a_python_exception_on_node_2_is_the_root_cause_named_by_rank_and_node(
    slurm_cluster, env_for, tmp_path
):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        env = env_for(SLURM_FAULT="raise", SLURM_FAULT_RANK="1", TASK_STEPS="20")
        job_id = sched.submit(srun(TASK), env=env, slurm={"nodes": 2})
        row = ended(sched, job_id)
    report = row["report"]
    assert row["outcome"] == "failed", report["summary"] + _tail(row)
    cause = report["root_cause"]
    assert (cause["rank"], cause["host"]) == (1, "tbh2"), cause
    assert "ValueError: bad batch at step 2 on task 1" in json.dumps(cause)
    assert "rank 1" in report["summary"] and "tbh2" in report["summary"], report["summary"]
    assert report["slurm"]["state"] == "FAILED"


def test_a_job_held_in_slurms_queue_says_why_and_is_no_hang_however_long(
    slurm_cluster, env_for, tmp_path
):
    # Deadlines far shorter than the time held: a queue is not a hang.
    timeouts = {"startup_timeout": 4, "stall_timeout": 4}
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(
            srun(TASK, tasks=1), env=env_for(), slurm={"sbatch": ["--hold"]}, timeouts=timeouts
        )
        deadline = time.monotonic() + 60
        while sched.get(job_id)["note"] != "queued in Slurm: JobHeldUser":
            assert time.monotonic() < deadline, sched.get(job_id)
            time.sleep(0.2)
        held_at = time.monotonic()
        while time.monotonic() - held_at < 3 * timeouts["startup_timeout"]:  # held that long
            row = sched.get(job_id)
            assert row["state"] in ("starting", "running"), row["report"]
            assert row["stage"] in (None, "main") or row["stage"].startswith("queued in Slurm"), row
            time.sleep(0.5)
        facts = slurm_runner.read_facts(sched.get(job_id)["dir"])
        released = slurm_cluster.run("scontrol", "release", facts["job_id"])
        assert released.returncode == 0, released.stderr
        row = ended(sched, job_id)
    assert row["outcome"] == "succeeded", row["report"]["summary"] + _tail(row)
    assert row["note"] is None  # the queue's note went with the queue
    stages = [s["name"] for s in row["report"]["stages"]]
    assert "train" in stages and "queued in Slurm: JobHeldUser" in stages, stages


def test_a_time_limit_is_slurms_timeout_with_the_stage_and_step_reached(
    slurm_cluster, env_for, tmp_path
):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        env = env_for(TASK_STEPS="100000", TASK_STEP_S="0.2")
        job_id = sched.submit(srun(TASK, tasks=1), env=env, slurm={"time": "1"})
        row = ended(sched, job_id, timeout=WAIT_S + 60)
    report = row["report"]
    assert row["outcome"] == "failed", report["summary"] + _tail(row)
    assert report["diagnosis"]["kind"] == "slurm_timeout"
    assert report["slurm"]["state"] == "TIMEOUT"
    assert "TIMEOUT" in report["summary"] and "in stage 'train' at step" in report["summary"]


def test_cancel_signals_the_job_then_scancels_and_leaves_nothing(slurm_cluster, env_for, tmp_path):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        env = env_for(TASK_STEPS="100000")
        job_id = sched.submit(srun(TASK), env=env, slurm={"nodes": 2})
        training(sched, job_id)
        _assert_key_is_private(slurm_cluster, sched.get(job_id)["dir"])
        sched.cancel(job_id)
        row = ended(sched, job_id, timeout=60)
    assert row["outcome"] == "cancelled", row["report"]["summary"]
    # The signal first (Slurm's to every task), then scancel; the runner ends within the
    # keeper's grace, so nothing is killed.
    log = _tail(row)
    assert "scancel --signal=TERM" in log, log
    assert row["report"]["signal"] is None, row["report"]["summary"]
    slurm_id = row["report"]["slurm"]["job_id"]
    assert slurm_cluster.job(slurm_id)["JobState"] in ("CANCELLED", "COMPLETED", "FAILED")
    assert _our_tasks(slurm_cluster) == []


def test_an_scancel_from_outside_is_a_cancel_by_slurm(slurm_cluster, env_for, tmp_path):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(srun(TASK), env=env_for(TASK_STEPS="100000"), slurm={"nodes": 2})
        training(sched, job_id)
        slurm_id = slurm_runner.read_facts(sched.get(job_id)["dir"])["job_id"]
        assert slurm_cluster.run("scancel", slurm_id).returncode == 0
        row = ended(sched, job_id, timeout=60)
    report = row["report"]
    assert row["outcome"] == "cancelled", report["summary"] + _tail(row)
    assert report["slurm"]["state"] == "CANCELLED"
    assert "scancel" in report["summary"], report["summary"]
    assert _our_tasks(slurm_cluster) == []


def test_reattach_after_the_submitting_process_was_sigkilled(slurm_cluster, env_for, tmp_path):
    store = str(tmp_path / "jobs.db")
    code = (
        "import json, sys, time\n"
        "from trainbridge import bridge\n"
        f"s = bridge.Scheduler(store={store!r}, backend='slurm', "
        f"slurm={{'listen': {slurm_cluster.head_addr!r}}})\n"
        f"print(s.submit({srun(TASK)!r}, env=json.loads(sys.stdin.read()), "
        "slurm={'nodes': 2}), flush=True)\n"
        "time.sleep(600)\n"
    )
    submitter = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    submitter.stdin.write(json.dumps(env_for(TASK_STEPS="15")))
    submitter.stdin.close()
    job_id = submitter.stdout.readline().strip()
    submitter.send_signal(signal.SIGKILL)
    submitter.wait()
    with bridge.Scheduler(store=store, tick=None) as sched:
        job = sched.attach(job_id)
        report = job.wait(timeout=WAIT_S)
        kinds = {e["event"] for e in job.events(timeout=1)} if False else None  # noqa: F841
    assert report["outcome"] == "succeeded", report["summary"]
    assert report["progress"]["step"] == 15


def _assert_key_is_private(cluster, job_dir: str) -> None:
    """The job's key reached its tasks (their environment) and nowhere another user reads:
    no process's arguments, no world-readable file of the job or of the cluster."""
    tasks = [int(line.split()[0]) for line in _our_tasks(cluster)]
    assert tasks, "no task runs"
    with open(f"/proc/{tasks[0]}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    key = env[b"TRAINBRIDGE_KEY"]
    assert len(key) == 64
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert key not in f.read(), f"the key is in the arguments of pid {pid}"
        except OSError:
            continue
    for top in (job_dir, cluster.conf_dir):
        for folder, _, names in os.walk(top):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    if not os.stat(path).st_mode & 0o004:
                        continue
                    with open(path, "rb") as f:
                        assert key not in f.read(), f"the key is in {path}, readable by all"
                except OSError:
                    continue


def _our_tasks(cluster) -> list[str]:
    """This cluster's processes of the task scripts still running (another test's cluster
    may run the same scripts beside it): "PID ARGS" each."""
    left = []
    for pid in cluster.processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if "scenarios/" in args:
            left.append(f"{pid} {args}")
    return left


def free_port(address: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def test_a_task_that_hangs_before_hello_on_node_2_is_named_while_rank_0_waits_for_it(
    slurm_cluster, env_for, tmp_path
):
    # Task 1 never starts Python (stuck before the interpreter, as in a hung module load);
    # task 0 waits for it in torch.distributed's rendezvous.
    env = env_for(
        TASK_SYNC="1",
        MASTER_ADDR=slurm_cluster.head_addr,
        MASTER_PORT=str(free_port(slurm_cluster.head_addr)),
    )
    hang_1 = 'if [ "$SLURM_PROCID" = 1 ]; then exec sleep 600; fi; exec "$0" "$@"'
    cmd = ["srun", "--nodes=2", "--ntasks-per-node=1", "sh", "-c", hang_1, sys.executable, TASK]
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        # The stall deadline outlasts rank 0's `import torch` on a loaded machine (its stage
        # arms the watch, and a look cannot sample a process of another host: 15 s was
        # declared hung in 'import torch' once, beside other test runs).
        job_id = sched.submit(cmd, env=env, slurm={"nodes": 2}, timeouts={"stall_timeout": 40})
        row = ended(sched, job_id)
    report = row["report"]
    assert row["outcome"] == "hung", report["summary"] + _tail(row)
    text = report["summary"]
    assert "rank 1" in text and "tbh2" in text and "hello" in text, text
    assert _our_tasks(slurm_cluster) == []


DDP = os.path.join(os.path.dirname(HERE), "faults", "scenarios", "ddp_train.py")


def torchrun_on_two_nodes(cluster) -> list[str]:
    """srun of one torchrun agent per node, rank 0's node hosting the c10d store. Both nodes
    have this machine's hostname, so each says which it is, and its own address and
    interface (gloo's)."""
    port = free_port(cluster.head_addr)
    agent = (
        'first=$([ "$SLURM_NODEID" = 0 ] && echo 1 || echo 0); '
        f'addr=$([ "$first" = 1 ] && echo {cluster.head_addr} || echo {cluster.node2_addr}); '
        f'export GLOO_SOCKET_IFNAME=$([ "$first" = 1 ] && echo {cluster.veth} '
        f"|| echo {cluster.veth_node2}); "
        'exec "$0" -m torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d '
        f"--rdzv_endpoint={cluster.head_addr}:{port} --rdzv_id=tb "
        '--rdzv_conf "is_host=$first" --local_addr "$addr" "$@"'
    )
    return ["srun", "--nodes=2", "--ntasks-per-node=1", "sh", "-c", agent, sys.executable, DDP]


def test_a_rank_stuck_in_its_own_loop_in_a_two_node_torchrun_is_named_with_its_stack(
    slurm_cluster, env_for, tmp_path
):
    env = env_for(DDP_FAULT="loop", DDP_FAULT_RANK="1", DDP_FAULT_STEP="3", DDP_STEPS="200")
    cmd = torchrun_on_two_nodes(slurm_cluster)
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(cmd, env=env, slurm={"nodes": 2}, timeouts={"stall_timeout": 30})
        row = ended(sched, job_id)
    report = row["report"]
    assert row["outcome"] == "hung", report["summary"] + _tail(row)
    text = report["summary"]
    assert "rank 1" in text and "tbh2" in text and "compute_weights" in text, text
    assert _our_tasks(slurm_cluster) == []


def test_a_rank_killed_on_node_2_in_a_two_node_torchrun_is_the_root_cause(
    slurm_cluster, env_for, tmp_path
):
    env = env_for(DDP_FAULT="kill", DDP_FAULT_RANK="1", DDP_FAULT_STEP="3", DDP_STEPS="200")
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(torchrun_on_two_nodes(slurm_cluster), env=env, slurm={"nodes": 2})
        row = ended(sched, job_id)
    report = row["report"]
    assert row["outcome"] == "failed", report["summary"] + _tail(row)
    cause = report["root_cause"]
    assert (cause["rank"], cause["host"]) == (1, "tbh2"), cause
    assert "SIGKILL" in report["summary"], report["summary"]
    assert _our_tasks(slurm_cluster) == []


def test_a_job_preempted_for_a_higher_priority_one_is_slurms_preemption(
    slurm_cluster, env_for, tmp_path
):
    """A job of partition main (priority tier 1) on node 2, whole; another user's job of
    partition urgent (tier 2) asks for that node: Slurm cancels ours (PreemptMode=CANCEL) and
    says PREEMPTED. The verdict is Slurm's preemption with the stage and step reached, not a
    crash or a cancel of the user's."""
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        env = env_for(TASK_STEPS="100000", TASK_STEP_S="0.2")
        job_id = sched.submit(
            srun(TASK, tasks=1), env=env, slurm={"sbatch": ["--nodelist=tbh2", "--exclusive"]}
        )
        training(sched, job_id)
        urgent = slurm_cluster.run(
            "sbatch", "--partition=urgent", "--nodelist=tbh2", "--exclusive", "--parsable",
            f"--output={tmp_path}/urgent-%j.out", "--wrap", "sleep 5",
        )  # fmt: skip
        assert urgent.returncode == 0, urgent.stderr
        row = ended(sched, job_id, timeout=60)
    report = row["report"]
    assert row["outcome"] == "failed", report["summary"] + _tail(row)
    assert report["slurm"]["state"] == "PREEMPTED", report["slurm"]
    assert report["diagnosis"]["kind"] == "slurm_preempted", report["diagnosis"]
    assert "not preempted" in report["diagnosis"]["hint"], report["diagnosis"]
    assert "tbh2" in report["summary"], report["summary"]
    assert "Slurm preempted it for another job" in report["summary"], report["summary"]
    assert "in stage 'train' at step" in report["summary"], report["summary"]
    assert _our_tasks(slurm_cluster) == []


def test_node_2_dying_is_node_fail_named_by_the_node(slurm_cluster, env_for, tmp_path):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(srun(TASK), env=env_for(TASK_STEPS="100000"), slurm={"nodes": 2})
        training(sched, job_id)
        try:
            slurm_cluster.kill_node("tbh2")
            row = ended(sched, job_id, timeout=120)
        finally:
            slurm_cluster.restart_node("tbh2")
    report = row["report"]
    assert row["outcome"] == "lost", report["summary"] + _tail(row)
    assert report["slurm"]["state"] == "NODE_FAIL"
    assert "tbh2" in report["summary"], report["summary"]
    assert _our_tasks(slurm_cluster) == []


def test_the_cli_submits_to_slurm_and_attach_follows_the_job(slurm_cluster, env_for, tmp_path):
    store = str(tmp_path / "jobs.db")
    cli = [sys.executable, "-m", "trainbridge.bridge.cli"]
    env = env_for(TASK_STEPS="3")
    submitted = subprocess.run(
        [*cli, "submit", "--store", store, "--json", "--slurm", "--listen", slurm_cluster.head_addr,
         "--nodes", "2", "--", *srun(TASK)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    attached = subprocess.run(
        [*cli, "attach", "--store", store, job_id],
        env=env, capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    assert attached.returncode == 0, attached.stdout + attached.stderr
    assert "Job succeeded" in attached.stdout + attached.stderr
    with bridge.Scheduler(store=store, tick=None) as sched:
        row = sched.get(job_id)
    assert row["report"]["slurm"]["nodes"] == "tbh[1-2]"
    assert ranks_by_rank(row["report"])[1]["host"] == "tbh2"


NODE_SUBMIT = r"""
const { openStore } = require(process.argv[1]);
const [storePath, spec] = [process.argv[2], JSON.parse(process.argv[3])];
(async () => {
  const store = openStore(storePath);
  const id = await store.submit({ ...spec, env: { ...process.env } });
  for (;;) {
    const row = await store.get(id);
    if (row.state === 'ended') { console.log(JSON.stringify(row)); break; }
    await new Promise((r) => setTimeout(r, 200));
  }
  await store.close();
})().catch((err) => { console.error(err.stack); process.exit(1); });
"""


def test_the_node_client_submits_to_slurm_with_the_same_truth(slurm_cluster, env_for, tmp_path):
    node_client = os.path.join(os.path.dirname(os.path.dirname(HERE)), "node-client")
    spec = {
        "command": "srun",
        "args": srun(TASK)[1:],
        "slurm": {"listen": slurm_cluster.head_addr, "nodes": 2, "ntasksPerNode": 1},
    }
    env = env_for(SLURM_FAULT="raise", SLURM_FAULT_RANK="1", TASK_STEPS="20")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # its python
    done = subprocess.run(
        ["node", "-e", NODE_SUBMIT, node_client, str(tmp_path / "jobs.db"), json.dumps(spec)],
        env=env, capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    report = row["report"]
    assert row["outcome"] == "failed", report["summary"]
    assert (report["root_cause"]["rank"], report["root_cause"]["host"]) == (1, "tbh2")
    assert report["slurm"]["state"] == "FAILED"


def test_a_keeper_killed_makes_the_job_lost_and_its_slurm_job_is_ended(
    slurm_cluster, env_for, tmp_path
):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(srun(TASK), env=env_for(TASK_STEPS="100000"), slurm={"nodes": 2})
        training(sched, job_id)
        row = sched.get(job_id)
        slurm_id = slurm_runner.read_facts(row["dir"])["job_id"]
        os.kill(row["keeper_pid"], signal.SIGKILL)  # the login node's keeper dies
        row = ended(sched, job_id, timeout=60)  # the Scheduler's ticks reconcile
    assert row["outcome"] == "lost" and "its keeper" in row["note"], row["note"]
    assert f"Slurm job {slurm_id} cancelled (scancel)" in row["note"], row["note"]
    fields = slurm_cluster.wait_job(slurm_id, timeout_s=60)  # Slurm does not run it for nobody
    assert fields["JobState"] in ("CANCELLED", "COMPLETED", "FAILED"), fields
    deadline = time.monotonic() + 30
    while _our_tasks(slurm_cluster):
        assert time.monotonic() < deadline, _our_tasks(slurm_cluster)
        time.sleep(0.2)


def test_a_job_cancelled_while_queued_keeps_no_queue_note(slurm_cluster, env_for, tmp_path):
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(srun(TASK, tasks=1), env=env_for(), slurm={"sbatch": ["--hold"]})
        deadline = time.monotonic() + 60
        while sched.get(job_id)["note"] != "queued in Slurm: JobHeldUser":
            assert time.monotonic() < deadline, sched.get(job_id)
            time.sleep(0.2)
        sched.cancel(job_id)
        row = ended(sched, job_id, timeout=60)
    assert row["outcome"] == "cancelled", row["report"]["summary"]
    assert not (row["note"] or "").startswith("queued in Slurm"), row["note"]


def test_output_slurm_wrote_elsewhere_is_said_not_lost_silently(slurm_cluster, env_for, tmp_path):
    # The user's own --output (as without a shared filesystem): the log says where it is.
    elsewhere = str(tmp_path / "elsewhere-%j.out")
    with scheduler(tmp_path / "jobs.db", slurm_cluster) as sched:
        job_id = sched.submit(
            srun(TASK, tasks=1), env=env_for(), slurm={"sbatch": [f"--output={elsewhere}"]}
        )
        row = ended(sched, job_id)
    assert row["outcome"] == "succeeded", row["report"]["summary"]
    log = _tail(row)
    assert "is not on this host: Slurm wrote it on" in log, log
    assert row["report"]["slurm"]["output_elsewhere"].endswith(".out")
