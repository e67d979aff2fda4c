"""Zero-code mode: unmodified scripts (none imports worker) get stages, progress and
diagnosis through the Python client. node-client/test/zerocode.test.js runs the same
scripts through the Node client."""

import os
import sys
import time

import psutil

from trainbridge import bridge

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")
PY = sys.executable


def user_env(**extra):
    """A real user's environment: this machine's PYTHONUNBUFFERED removed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(extra)
    return env


def run(cmd, timeout=90, **kwargs):
    kwargs.setdefault("startup_timeout", 60)
    kwargs.setdefault("heartbeat_timeout", 30)
    events = []
    job = bridge.launch(
        cmd,
        env=kwargs.pop("env", user_env()),
        cwd=kwargs.pop("cwd", SCRIPTS),
        on_event=events.append,
        **kwargs,
    )
    report = job.wait(timeout)
    assert report is not None, f"no report within {timeout} s"
    assert not psutil.Process().children(recursive=True), "a process of the job was left over"
    return report, events


def names(report):
    return [s["name"] for s in report["stages"]]


def test_plain_torch_loop_gets_stages_and_counts_optimizer_steps():
    report, events = run([PY, "torch_loop.py"])
    assert report["outcome"] == "succeeded", report
    stages = names(report)
    for expected in ("startup", "main", "import torch", "first batch", "train"):
        assert expected in stages, stages
    assert (
        stages.index("startup")
        < stages.index("main")
        < stages.index("import torch")
        < stages.index("first batch")
        < stages.index("train")
    )
    assert report["progress"]["step"] == 24  # 96 samples / 8 per batch x 2 epochs
    assert report["progress"]["metrics"].get("source") == "optimizer"
    assert any(line.startswith("trained 24 steps") for line in report["log_tail"])


def test_dataloader_workers_stay_silent():
    report, events = run([PY, "torch_loop.py", "2"])
    assert report["outcome"] == "succeeded", report
    hellos = [e for e in events if e.get("event") == "message" and e.get("kind") == "hello"]
    assert len(hellos) == 1, [h["body"]["pid"] for h in hellos]  # forked workers never say hello
    assert report["progress"]["step"] == 24


def test_tqdm_bar_becomes_progress_with_its_description():
    report, events = run([PY, "tqdm_loop.py", "150"])
    assert report["outcome"] == "succeeded", report
    progress = [
        e["body"] for e in events if e.get("event") == "message" and e.get("kind") == "progress"
    ]
    assert progress, "no progress from the tqdm bar"
    last = progress[-1]
    assert (last["step"], last["total"]) == (150, 150)
    assert last["metrics"]["bar"] == "shard-00042.tar" and last["metrics"]["unit"] == "B"
    steps = [p["step"] for p in progress]
    assert steps == sorted(steps) and len(set(steps)) > 1, steps  # live, not only at the end


def test_hang_while_importing_a_heavy_module_is_named():
    env = user_env(PYTHONPATH=os.path.join(SCRIPTS, "slowpkgs"))
    t0 = time.monotonic()
    report, _ = run([PY, "import_hang.py"], env=env, stall_timeout=2.0, kill_grace=1.0)
    known = time.monotonic() - t0
    assert report["outcome"] == "hung", report
    assert report["stage"] == "import transformers", report["stage"]
    assert report["diagnosis"]["kind"] == "import_hang", report["diagnosis"]
    assert "transformers" in report["diagnosis"]["summary"]
    assert "importing transformers..." in report["log_tail"]
    assert known < 2.0 + 1.0 + 5.0, known  # stall deadline + grace + start-up slack


def test_python_dash_m_runs_as_main():
    report, events = run([PY, "-m", "trainpkg"])
    assert report["outcome"] == "succeeded", report
    assert "main" in names(report)
    assert report["progress"]["metrics"]["bar"] == "pkg"
    assert "module done" in report["log_tail"]  # stdout and stderr interleave freely


def test_no_variables_no_effect():
    """The hook is inert in a process without the trainbridge variables."""
    import subprocess

    env = user_env(
        PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(HERE)), "bridge", "inject")
    )
    code = "import sys; print(sorted(m for m in ('worker', 'zmq', 'msgpack') if m in sys.modules))"
    out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr)


def test_torchrun_ranks_each_say_hello_with_their_rank():
    torchrun = os.path.join(os.path.dirname(PY), "torchrun")  # installed with torch
    report, events = run(
        [torchrun, "--standalone", "--nproc_per_node=2", "ddp.py"],
        timeout=120,
        env=user_env(OMP_NUM_THREADS="1"),
    )
    assert report["outcome"] == "succeeded", report
    hellos = [e["body"] for e in events if e.get("event") == "message" and e.get("kind") == "hello"]
    ranks = sorted(h.get("rank") for h in hellos if h.get("world_size") == 2)
    assert ranks == [0, 1], [(h.get("rank"), h.get("world_size"), h["argv"][:2]) for h in hellos]


def test_a_script_with_its_own_stages_and_progress_keeps_them():
    demo = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "demo_train.py")
    report, _ = run([PY, demo, "--steps", "20"])
    assert report["outcome"] == "succeeded", report
    assert [n for n in names(report) if not n.startswith("import ")] == [
        "startup",
        "main",
        "config",
        "data",
        "model",
        "optimizer",
        "train",
        "save",
    ]
    assert "import torch" in names(report)
    assert all(s["status"] == "ok" for s in report["stages"])  # "main" closes at exit
    # The innermost stage still open at the end (zero-code's "main", closed at exit), not
    # the last one that began.
    assert report["stage"] == "main"
    assert report["progress"]["metrics"].keys() == {
        "loss"
    }  # the script's, not the optimizer hook's


def test_the_cli_shows_an_unmodified_scripts_stages_and_steps_live():
    """`trainbridge run --json` (what a GUI reads): stage and step events arrive while the
    script runs, before the end event."""
    import json
    import subprocess

    trainbridge = os.path.join(os.path.dirname(PY), "trainbridge")
    out = subprocess.run(
        [trainbridge, "run", "--json", "--", PY, "torch_loop.py"],
        cwd=SCRIPTS,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(line.isascii() for line in out.stdout.splitlines())
    end = next(i for i, e in enumerate(events) if e["event"] == "end")
    live = events[:end]
    began = [
        e["body"]["name"]
        for e in live
        if e.get("kind") == "stage" and e["body"]["event"] == "begin"
    ]
    assert {"startup", "main", "import torch", "first batch", "train"} <= set(began), began
    steps = [e["body"]["step"] for e in live if e.get("kind") == "progress"]
    assert steps and steps[-1] == 24, steps
    assert events[end]["report"]["outcome"] == "succeeded"


def test_a_download_stuck_at_zero_bytes_per_second_is_a_stall_that_names_the_file():
    report, _ = run([PY, "stuck_download.py"], stall_timeout=2.0, kill_grace=1.0)
    assert report["outcome"] == "hung", report
    assert report["progress"]["metrics"]["bar"] == "model.safetensors"
    summary = report["diagnosis"]["summary"]
    assert "'model.safetensors' stopped at 1048576/4000000 B" in summary, summary
    assert "downloading model.safetensors" in report["log_tail"]


def test_the_scripts_own_worker_and_bridge_modules_are_never_shadowed():
    # Zero-code mode puts only the name `trainbridge` into a process's modules: a script's
    # own worker.py / bridge.py (and a Python subprocess's) are the ones it imports.
    here = os.path.join(SCRIPTS, "own_modules")
    report, events = run([PY, "train_own_modules.py"], cwd=here)
    assert report["outcome"] == "succeeded", report["summary"]
    assert report["log_tail"][-3:] == ["fetch -> 1", "bridge -> user bridge", "sub fetch -> 2"]
    hellos = [e for e in events if e.get("event") == "message" and e.get("kind") == "hello"]
    assert len(hellos) == 2  # the script and its subprocess are both supervised
    assert "main" in names(report)


def test_a_tqdm_only_script_has_its_bars_as_stages_and_its_postfix_as_metrics():
    """set_postfix(loss=..., lr=...) was once dropped (metrics were bar, rate and
    unit only) and a tqdm-only script had only startup/main stages."""
    report, events = run([PY, "tqdm_phases.py"])
    assert report["outcome"] == "succeeded", report["summary"]
    stages = [(s["name"], s["depth"], s["status"]) for s in report["stages"]]
    assert ("Downloading weights.bin", 1, "ok") in stages, stages
    assert ("Fitting", 1, "ok") in stages, stages  # the trailing ':' of a desc is not the name
    assert not any(name == "batches" for name, _, _ in stages), stages  # an inner bar: progress
    progress = [
        e["body"] for e in events if e.get("event") == "message" and e.get("kind") == "progress"
    ]
    fitting = [p["metrics"] for p in progress if p["metrics"].get("lr") == 3e-4]
    assert fitting, "the bar's postfix never reached the metrics"
    assert all(isinstance(m["loss"], float) for m in fitting) and "note" not in fitting[-1]
    assert [h["metric"] for h in report["health"]] == ["loss"], report["health"]
    # "became NaN at/by step N", or "was NaN from its first report" when the beacon's few
    # sends a second all fell on the inner bar until then: both say the loss is NaN
    assert "Training health: loss " in report["summary"] and "NaN" in report["summary"]


def test_a_loop_that_updates_its_weights_by_hand_trains_past_the_stall_deadline():
    # No optimizer (word_language_model's manual SGD), no output for 14 s, a
    # 10 s stall deadline (one that `import torch` meets beside two CPU loops). Each heartbeat
    # counts more backward() calls: that is activity.
    report, events = run([PY, "manual_sgd.py", "14"], stall_timeout=10.0)
    assert report["outcome"] == "succeeded", report["diagnosis"]
    assert any(line.startswith("trained ") for line in report["log_tail"]), report["log_tail"]
    assert not [e for e in events if e["event"] in ("hang", "computing")], events
    beats = [e["body"] for e in events if e.get("kind") == "heartbeat"]
    # the heartbeats that counted more work name the script's loop (the last may come from
    # the interpreter's shutdown, where only the worker's atexit frames are left)
    training = [b for a, b in zip(beats, beats[1:]) if b.get("work", 0) > a.get("work", 0)]
    assert len(training) > 1, beats[-3:]
    assert {b.get("where") for b in training[:-1]} == {"manual_sgd.py:<module>"}, training


def test_a_busy_main_thread_moving_through_the_scripts_functions_is_computing_not_hung():
    # No progress, no backward(), no output for 12 s, a 5 s stall deadline: the stall look
    # sees a busy lead whose heartbeats name load_batch, forward and score in turn.
    report, events = run(
        [PY, "busy_phases.py", "12", "1.5"], stall_timeout=5.0, heartbeat_timeout=2.0
    )
    assert report["outcome"] == "succeeded", report["diagnosis"]
    computing = [e for e in events if e["event"] == "computing"]
    assert computing, [e["event"] for e in events]
    assert "busy_phases.py:" in computing[0]["why"], computing[0]
    assert computing[0]["for_s"] == 5.0
    assert not [e for e in events if e["event"] == "hang"]
