"""Which process speaks for a job: the job's structure decides, not a
hello's claim. vectors/lead.json pins the rule; these run real jobs."""

import os

from tests.zerocode.test_zero_code import PY, names, run, user_env


def test_a_torchrun_eval_subprocess_does_not_take_over_the_job():
    report, events = run(
        [PY, "with_torchrun_eval.py"],
        timeout=120,
        heartbeat_timeout=5,
        env=user_env(OMP_NUM_THREADS="1"),
    )
    assert report["outcome"] == "succeeded", (report["outcome"], report["diagnosis"])
    assert [n for n in names(report) if not n.startswith("import ")][-3:] == [
        "train",
        "eval",
        "train more",
    ], names(report)
    assert report["progress"]["step"] == 6 and report["progress"]["total"] == 6
    eval_hellos = [
        e["body"]
        for e in events
        if e.get("event") == "message"
        and e.get("kind") == "hello"
        and e["body"].get("world_size") == 1
    ]
    assert eval_hellos, "the eval rank never said hello: the test did not test anything"
    assert report["worker"]["leads"] == [report["pid"]], report["worker"]  # the script only
    assert "eval: world 1 sum 1" in report["log_tail"]


def test_a_two_rank_torchrun_job_is_led_by_rank_0():
    torchrun = os.path.join(os.path.dirname(PY), "torchrun")
    report, events = run(
        [torchrun, "--standalone", "--nproc_per_node=2", "ddp.py"],
        timeout=120,
        env=user_env(OMP_NUM_THREADS="1"),
    )
    assert report["outcome"] == "succeeded", report
    hellos = [e["body"] for e in events if e.get("event") == "message" and e.get("kind") == "hello"]
    rank0 = next(h for h in hellos if h.get("rank") == 0 and h.get("world_size") == 2)
    torchrun_pid = report["pid"]
    # rank 0 spoke for the job; when it said bye, the launcher it belongs to took over
    assert report["worker"]["leads"][-2:] == [rank0["pid"], torchrun_pid], (
        report["worker"]["leads"],
        rank0["pid"],
        torchrun_pid,
    )


def test_when_the_lead_rank_dies_the_lead_passes_back_to_the_launcher(tmp_path):
    """Rank 0 leads the launched launcher's job, then is SIGKILLed (no bye). Its silence must
    not hang the job: the client notices it is gone and the launcher leads again (event
    "lead"), whose later progress counts; the job succeeds."""
    import threading

    from trainbridge import bridge

    gate, rank_gate = str(tmp_path / "back"), str(tmp_path / "rank0")
    launcher = os.path.join(os.path.dirname(__file__), "scripts", "launcher", "torchrun")
    leads = []
    handed_back = threading.Event()
    bound = threading.Event()  # set once `job` below exists
    box = {}

    def on_event(event):
        if event["event"] == "lead":
            assert bound.wait(10)  # launch() returns right after the spawn
            leads.append(event["pid"])
            if event["pid"] != box["job"].pid:
                open(rank_gate, "w").close()  # rank 0 leads: now it may die
            elif os.path.exists(rank_gate):  # the launcher leads again, after rank 0
                open(gate, "w").close()
                handed_back.set()

    job = bridge.launch(
        [PY, launcher],
        env=user_env(TB_GATE=gate, TB_GATE_RANK=rank_gate),
        heartbeat_timeout=5,
        startup_timeout=60,
        on_event=on_event,
    )
    box["job"] = job
    bound.set()
    report = job.wait(90)
    assert report is not None
    assert handed_back.is_set(), (leads, report["outcome"], report["hang"])
    assert report["outcome"] == "succeeded", (report["summary"], report["hang"])
    # The launcher leads first when its hello is read first; when its rank's is, nobody leads
    # until the launcher's is read, and then rank 0 does (vectors/lead.json).
    in_turn = report["worker"]["leads"]
    assert in_turn[-1] == job.pid and in_turn[-2] != job.pid, in_turn
    assert in_turn in ([job.pid, in_turn[1], job.pid], [in_turn[0], job.pid]), in_turn
    assert report["progress"]["step"] == 3
    assert "rank 0 ended with -9" in report["log_tail"]
