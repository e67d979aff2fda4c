"""The Slurm backend's pure rules (bridge/slurm.py): options a user gives, what Slurm says,
and the verdict of Slurm's own ends. The cluster itself: tests/slurm."""

from __future__ import annotations

import pytest

from trainbridge.bridge import machine, slurm, slurm_runner
from trainbridge.bridge.scheduler import Scheduler


def test_options_are_checked_in_words():
    ok = slurm.check_options({"listen": "10.0.0.1", "nodes": 2, "time": 30, "gres": "gpu:1"})
    assert ok == {"listen": "10.0.0.1", "nodes": 2, "time": "30", "gres": "gpu:1"}
    with pytest.raises(ValueError, match="listen is missing: give the address"):
        slurm.check_options({"nodes": 1})
    with pytest.raises(ValueError, match="loopback"):
        slurm.check_options({"listen": "127.0.0.1"})
    with pytest.raises(ValueError, match=r"unknown slurm options \['node'\]"):
        slurm.check_options({"listen": "10.0.0.1", "node": 2})
    with pytest.raises(ValueError, match="nodes must be an int >= 1"):
        slurm.check_options({"listen": "10.0.0.1", "nodes": 0})
    with pytest.raises(ValueError, match="sbatch must be a list"):
        slurm.check_options({"listen": "10.0.0.1", "sbatch": "--mem=1G"})


def test_sbatch_gets_the_resources_and_the_command_as_arguments():
    argv = slurm.sbatch_argv(
        {"nodes": 2, "ntasks_per_node": 1, "partition": "gpu", "sbatch": ["--mem=4G"]},
        "/jobs/j-1",
        "j-1",
    )
    assert argv[:2] == ["sbatch", "--parsable"]
    assert "--nodes=2" in argv and "--ntasks-per-node=1" in argv and "--partition=gpu" in argv
    assert argv[-1] == "--mem=4G"
    assert "--output=/jobs/j-1/slurm-%j.out" in argv
    assert not any("KEY" in a for a in argv)  # the keys go in the environment only


def test_scontrol_show_job_is_read():
    line = (
        "JobId=12 JobName=j-1 UserId=root(0) JobState=PENDING Reason=Resources Dependency=(null) "
        "TimeLimit=00:01:00 RunTime=00:00:00 NodeList=(null) BatchHost=tbh1 ExitCode=0:0"
    )
    facts = slurm.facts_of(slurm.parse_show_job(line))
    assert facts["state"] == "PENDING" and facts["reason"] == "Resources"
    assert facts["nodes"] is None and facts["time_limit"] == "00:01:00"
    done = slurm.facts_of(
        slurm.parse_show_job(
            "JobId=3 JobState=FAILED Reason=NonZeroExitCode NodeList=tbh[1-2] ExitCode=3:0"
        )
    )
    assert (done["state"], done["exit_code"], done["exit_signal"], done["nodes"]) == (
        "FAILED",
        3,
        None,
        "tbh[1-2]",
    )
    assert slurm.ended("FAILED") and not slurm.ended("PENDING") and not slurm.ended("RUNNING")


def test_slurm_ends_name_the_state_the_nodes_and_where_the_job_was():
    report = {
        "outcome": "cancelled",
        "stage": "train",
        "progress": {"step": 40, "total": 100},
        "exit_code": None,
        "signal": "SIGTERM",
        "error": None,
        "diagnosis": None,
    }
    timeout = slurm.end_verdict(
        report, {"job_id": "7", "state": "TIMEOUT", "time_limit": "00:01:00", "nodes": "tbh1"}
    )
    assert timeout["outcome"] == "failed"
    assert timeout["diagnosis"]["kind"] == "slurm_timeout"
    assert "Slurm job 7 TIMEOUT" in timeout["summary"]
    assert "in stage 'train' at step 40 of 100" in timeout["summary"]
    assert timeout["slurm"]["state"] == "TIMEOUT"
    lost = slurm.end_verdict(
        report, {"job_id": "8", "state": "NODE_FAIL", "nodes": "tbh[1-2]", "failed_nodes": ["tbh2"]}
    )
    assert lost["outcome"] == "lost" and "tbh2 stopped answering" in lost["summary"]
    # The job's own end is judged by its processes, as on one host; the facts ride along.
    failed = dict(report, outcome="failed")
    same = slurm.end_verdict(failed, {"job_id": "9", "state": "FAILED", "exit_code": 1})
    assert same["outcome"] == "failed" and same["slurm"]["job_id"] == "9"


def test_an_srun_task_is_a_rank_and_is_named_by_its_node():
    task = {
        "pid": 5,
        "argv": ["python", "train.py"],
        "rank": None,
        "world_size": None,
        "host": "vm",
        "slurm": {
            "job_id": "4",
            "node": "tbh2",
            "step": "0",
            "procid": 1,
            "ntasks": 2,
            "task": True,
        },
    }
    seen = slurm.hello_facts(task)
    assert (seen["host"], seen["rank"], seen["world_size"]) == ("tbh2", 1, 2)
    # torchrun under srun stays a launcher; its ranks have RANK of their own
    agent = dict(task, argv=["python", "/venv/bin/torchrun", "--nnodes=2", "train.py"])
    seen = slurm.hello_facts(agent)
    assert seen["rank"] is None and machine.is_launcher(seen)
    # a task's own subprocess inherits the variables but is no task
    child = dict(task, slurm=dict(task["slurm"], task=False))
    assert slurm.hello_facts(child)["rank"] is None
    # the batch script's command (sbatch python train.py) is rank 0 of the allocation's tasks
    batch = dict(task, slurm=dict(task["slurm"], step="batch", procid=0, ntasks=1))
    assert (slurm.hello_facts(batch)["rank"], slurm.hello_facts(batch)["world_size"]) == (0, 1)


def test_the_scheduler_checks_a_jobs_slurm_options_in_words(tmp_path):
    with Scheduler(store=str(tmp_path / "jobs.db"), tick=None) as sched:
        # slurm= sends one job to Slurm whatever the backend: its options are checked
        with pytest.raises(ValueError, match="listen is missing"):
            sched.submit(["true"], slurm={"nodes": 1})
        with pytest.raises(ValueError, match="must be a dict"):
            sched.submit(["true"], slurm=["--nodes=1"])
    with pytest.raises(ValueError, match="backend must be 'local' or 'slurm'"):
        Scheduler(store=str(tmp_path / "jobs.db"), tick=None, backend="k8s")
    with Scheduler(store=str(tmp_path / "jobs.db"), tick=None, backend="slurm") as sched:
        with pytest.raises(ValueError, match="listen is missing"):
            sched.submit(["true"], slurm={"nodes": 1})
        with pytest.raises(ValueError, match="gres"):
            sched.submit(["true"], resources={"gpus": 1}, slurm={"listen": "10.0.0.1"})


def test_an_scancel_from_outside_is_slurms_cancel_but_our_own_cancel_stays_ours():
    running = {"outcome": "failed", "stage": "train", "progress": None, "exit_code": 143}
    theirs = slurm.end_verdict(running, {"job_id": "5", "state": "CANCELLED", "nodes": "n1"})
    assert theirs["outcome"] == "cancelled" and "scancel" in theirs["summary"]
    ours = {"outcome": "cancelled", "summary": "Job cancelled after 3 s.", "stage": None}
    kept = slurm.end_verdict(ours, {"job_id": "5", "state": "CANCELLED"})
    assert kept["summary"] == "Job cancelled after 3 s." and kept["slurm"]["job_id"] == "5"


def never_started(stuck):
    """A hung report whose diagnosis is rank_never_started, with its hung_rank evidence."""
    diagnosis = {"kind": "rank_never_started", "summary": "x", "evidence": {"hung_rank": stuck}}
    return {"outcome": "hung", "diagnosis": diagnosis}


def test_a_rank_that_never_said_hello_is_placed_where_slurm_put_it():
    assert slurm.placement(["n1", "n2"], 4) == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    assert slurm.placement(["n1", "n2"], 2) == {0: "n1", 1: "n2"}
    assert slurm.placement([], 2) == {}
    stuck = {
        "missing": [{"rank": 1, "host": None, "pid": None, "frame": None, "hello": False}],
        "waiting": [{"rank": 0, "host": "n1", "pid": 7, "collective": "init_process_group"}],
    }
    report = never_started(stuck)
    out = slurm.end_verdict(report, {"job_id": "3", "state": "CANCELLED", "hosts": ["n1", "n2"]})
    assert out["outcome"] == "hung"  # the runner's scancel ended the hang: not Slurm's cancel
    assert out["diagnosis"]["summary"].startswith("rank 1 (host n2) never said hello")
    assert out["diagnosis"]["evidence"]["hung_rank"]["missing"][0]["host"] == "n2"
    assert "rank 1 (host n2) never said hello" in out["summary"]


def test_an_absent_rank_is_placed_by_the_distribution_the_present_ones_show():
    """srun -m cyclic puts task 1 on the second node, block on the first: the ranks that said
    hello tell which; a rank both fit differently, or facts neither fits, name no node."""
    hosts = ["n1", "n2"]
    assert slurm.placement(hosts, 4, {0: "n1", 2: "n1", 3: "n2"})[1] == "n2"  # cyclic
    assert slurm.placement(hosts, 4, {0: "n1", 2: "n2", 3: "n2"})[1] == "n1"  # block
    assert slurm.placement(hosts, 4, {0: "n2"}) == {}  # neither: not named wrong
    assert 1 not in slurm.placement(hosts, 4, {0: "n1"})  # both fit, and differ on rank 1
    assert slurm.placement(hosts, 4, {0: "elsewhere"})[1] == "n1"  # no fact: the default
    waiting = [
        {"rank": r, "host": h, "pid": 7 + r, "collective": "all_reduce"}
        for r, h in ((0, "n1"), (2, "n1"), (3, "n2"))
    ]
    stuck = {"missing": [{"rank": 1, "host": None, "pid": None, "frame": None}], "waiting": waiting}
    report = never_started(stuck)
    out = slurm.end_verdict(report, {"job_id": "4", "state": "CANCELLED", "hosts": hosts})
    assert out["diagnosis"]["summary"].startswith("rank 1 (host n2) never said hello")
    stuck["waiting"] = [dict(w, host="n2") for w in waiting]  # fits neither
    out = slurm.end_verdict(report, {"job_id": "4", "state": "CANCELLED", "hosts": hosts})
    assert out["diagnosis"]["summary"] == "x"  # the verdict as it was: no node guessed


def test_the_runner_ends_the_slurm_job_within_the_keepers_grace():
    cmd = slurm_runner.runner_command(
        "py", "/j", {"listen": "10.0.0.1"}, ["srun", "x"], kill_grace=5.0
    )
    options = __import__("json").loads(cmd[4])
    assert options["grace"] == 3.5 and cmd[5:] == ["--", "srun", "x"]
    assert machine.is_launcher({"argv": cmd})


def test_the_cli_says_which_flags_need_slurm(tmp_path, capsys):
    from trainbridge.bridge import cli

    store = str(tmp_path / "jobs.db")
    assert cli.main(["submit", "--store", store, "--nodes", "2", "--", "true"]) == 2
    assert "--nodes goes with --slurm" in capsys.readouterr().err
    assert cli.main(["submit", "--store", store, "--slurm", "--", "true"]) == 2
    assert "listen is missing" in capsys.readouterr().err


def test_a_controller_that_does_not_answer_is_not_a_forgotten_job(tmp_path, monkeypatch):
    fake = tmp_path / "scontrol"
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    fake.write_text(
        "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    with pytest.raises(slurm_runner.Unreachable, match="Unable to contact"):
        slurm_runner.show_job("7")
    fake.write_text(
        "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n"
    )
    assert slurm_runner.show_job("7") is None  # forgotten (MinJobAge after its end)
    fake.write_text(
        "#!/bin/sh\necho 'JobId=7 JobState=RUNNING Reason=None NodeList=n1 ExitCode=0:0'\n"
    )
    assert slurm_runner.show_job("7")["state"] == "RUNNING"
