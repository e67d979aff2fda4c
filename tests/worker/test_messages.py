"""The worker end to end: real child scripts report to a receiver playing the client."""

from __future__ import annotations

import sys
import textwrap

from tests.worker.receiver import release, run_python, start_python


# A deadline for a script that may import torch: 30 s ran out once at load 9-16 on 2 vCPUs.
def run(receiver, tmp_path, script, timeout=120.0, args=None, **settings):
    settings.setdefault("heartbeat_s", "0.2")
    return run_python(
        textwrap.dedent(script), receiver.env(**settings), str(tmp_path), timeout=timeout, args=args
    )


def bodies(receiver, kind):
    return [r.body for r in receiver.of_kind(kind)]


def test_hello_comes_first_with_process_facts(receiver, tmp_path):
    env_extra = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "HTTPS_PROXY": "http://user:secret@proxy.local:3128",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    env = receiver.env(heartbeat_s="0.2", crash_file=str(tmp_path / "crash.txt"))
    env.update(env_extra)
    script = tmp_path / "script.py"
    script.write_text("from trainbridge import worker\nassert worker.enabled()\n")
    proc = __import__("subprocess").run(
        [sys.executable, str(script), "--lr", "0.1"],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    first = receiver.messages[0]
    assert first.kind == "hello" and first.msg.seq == 1
    # The job and rank parts of the routing id (PROTOCOL.md section 1).
    assert first.routing_id.split(b"/")[:2] == [b"job-1", b"3"]
    hello = first.body
    assert hello["argv"][-3:] == [str(script), "--lr", "0.1"]
    assert hello["cwd"] == str(tmp_path)
    assert hello["python"]["executable"] == sys.executable
    assert hello["python"]["version"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert (hello["rank"], hello["local_rank"], hello["world_size"]) == (3, 1, 4)
    assert hello["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert hello["env"]["HTTPS_PROXY"] == "http://***@proxy.local:3128"  # no credentials
    assert hello["env"]["HF_ENDPOINT"] is None
    from importlib import metadata

    assert hello["packages"]["torch"] == metadata.version("torch")
    assert "transformers" in hello["packages"]
    assert hello["proto"] == "1.2" and hello["heartbeat_s"] == 0.2
    assert hello["dump_signal"] == "SIGUSR1"
    assert hello["crash_file"] == str(tmp_path / "crash.txt")
    assert hello["pid"] > 0 and hello["host"]
    bye = receiver.wait_for(lambda r: r.kind == "bye")
    assert bye.body["reason"] == "normal"


def test_no_crash_file_means_no_dump_signal(receiver, tmp_path):
    proc = run(receiver, tmp_path, "from trainbridge import worker\n")
    assert proc.returncode == 0, proc.stderr
    hello = receiver.wait_for(lambda r: r.kind == "hello").body
    assert hello["dump_signal"] is None and hello["crash_file"] is None


def test_stages_nest_as_context_managers_and_decorators(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        from trainbridge import worker

        @worker.stage("evaluate")
        def evaluate():
            return 42

        with worker.stage("train", budget=60):
            with worker.stage("epoch 1"):
                assert evaluate() == 42
        try:
            with worker.stage("flaky"):
                raise ValueError("caught below")
        except ValueError:
            pass
    """,
    )
    assert proc.returncode == 0, proc.stderr
    receiver.wait_for(lambda r: r.kind == "bye")
    stages = [(b["event"], b["name"], b["depth"]) for b in bodies(receiver, "stage")]
    assert stages == [
        ("begin", "train", 0),
        ("begin", "epoch 1", 1),
        ("begin", "evaluate", 2),
        ("end", "evaluate", 2),
        ("end", "epoch 1", 1),
        ("end", "train", 0),
        ("begin", "flaky", 0),
        ("end", "flaky", 0),
    ]
    by_name = {(b["event"], b["name"]): b for b in bodies(receiver, "stage")}
    assert by_name[("begin", "train")]["budget_s"] == 60
    assert by_name[("begin", "epoch 1")]["budget_s"] is None
    assert by_name[("end", "train")]["status"] == "ok"
    assert by_name[("end", "flaky")]["status"] == "error"
    assert by_name[("end", "train")]["duration_s"] >= by_name[("end", "evaluate")]["duration_s"]


def test_progress_is_coalesced_latest_wins(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        from trainbridge import worker
        with worker.stage("train"):
            for step in range(1, 200001):
                worker.progress(step, 200000, loss=1.0 / step, phase="warmup")
    """,
    )
    assert proc.returncode == 0, proc.stderr
    receiver.wait_for(lambda r: r.kind == "bye")
    progress = bodies(receiver, "progress")
    steps = [p["step"] for p in progress]
    assert steps[-1] == 200000, "the latest value is always delivered"
    assert len(steps) < 1000, "200,000 calls were coalesced into few messages"
    assert steps == sorted(steps)
    assert progress[-1]["total"] == 200000
    assert progress[-1]["metrics"] == {"loss": 1.0 / 200000, "phase": "warmup"}
    kinds = [k for k in receiver.kinds() if k in ("stage", "progress")]
    assert kinds[0] == "stage" and kinds[-1] == "stage", "progress stays inside its stage"


def test_heartbeats_carry_stage_idle_time_resources_and_stalled_stack(receiver, tmp_path):
    child = start_python(
        textwrap.dedent("""
        import sys; from trainbridge import worker
        with worker.stage("outer"):
            with worker.stage("wait here"):
                worker.progress(1, 10)
                sys.stdin.read(1)  # the test releases it after a stalled heartbeat
    """),
        receiver.env(heartbeat_s="0.1", stall_s="0.5"),
        str(tmp_path),
    )
    try:
        stalled = receiver.wait_for(
            lambda r: r.kind == "heartbeat" and r.body["stack"] is not None
        ).body
        assert release(child) == 0
    finally:
        child.kill()
        child.wait()
    assert stalled["stage"] == "wait here" and stalled["stages"] == ["outer", "wait here"]
    assert stalled["idle_s"] >= 0.5 and stalled["progress_age_s"] >= 0.5
    assert "sys.stdin.read(1)" in stalled["stack"]
    assert stalled["rss_bytes"] > 1_000_000 and stalled["threads"] >= 2
    assert stalled["cpu_s"] >= 0 and stalled["dropped"] == {"log": 0}
    beats = [b["beat"] for b in bodies(receiver, "heartbeat")]
    assert beats == list(range(1, len(beats) + 1))
    early = bodies(receiver, "heartbeat")[0]
    assert early["stack"] is None


def test_uncaught_exception_reports_frames_chain_and_stage(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        from trainbridge import worker

        def parse(text):
            return int(text)

        def load_config():
            try:
                parse("not a number")
            except ValueError as exc:
                raise RuntimeError("config is broken") from exc

        with worker.stage("setup"):
            with worker.stage("load config"):
                load_config()
    """,
    )
    assert proc.returncode == 1
    assert b"RuntimeError: config is broken" in proc.stderr, "the traceback still prints"
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["type"] == "RuntimeError" and error["message"] == "config is broken"
    assert error["fatal"] is True and error["kind"] == "exception"
    assert error["thread"] == "MainThread"
    assert error["stage"] == "load config"
    assert [f["function"] for f in error["frames"]] == ["<module>", "load_config"]
    assert error["frames"][-1]["file"].endswith("script.py")
    assert error["chain"] == [
        {
            "type": "ValueError",
            "relation": "cause",
            "message": "invalid literal for int() with base 10: 'not a number'",
        }
    ]
    assert "The above exception was the direct cause" in error["traceback"]
    assert "in parse" in error["traceback"]
    bye = receiver.wait_for(lambda r: r.kind == "bye").body
    assert bye == {"exit_code": 1, "reason": "after_error"}
    assert [k for k in receiver.kinds() if k != "heartbeat"][-2:] == ["error", "bye"]


def test_context_chain_and_custom_exception_names(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        class DataError(Exception):
            pass
        from trainbridge import worker
        try:
            {}["missing"]
        except KeyError:
            raise DataError("während des Ladens")
    """,
    )
    assert proc.returncode == 1
    error = receiver.wait_for(lambda r: r.kind == "error").body
    # It failed right after import, before the beacon had connected: hello still went first.
    assert [k for k in receiver.kinds() if k != "heartbeat"] == ["hello", "error", "bye"]
    assert error["type"] == "__main__.DataError"
    assert error["message"] == "während des Ladens"  # escaped on the wire, restored here
    assert error["chain"][0]["relation"] == "context"
    assert error["chain"][0]["type"] == "KeyError"
    assert error["stage"] is None


def test_uncaught_exception_is_reported_when_the_script_replaced_excepthook(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        import sys; from trainbridge import worker
        sys.excepthook = lambda *exc: print("custom hook:", exc[1], file=sys.stderr)
        raise LookupError("no such tokenizer")
    """,
    )
    assert proc.returncode == 1
    assert proc.stderr == b"custom hook: no such tokenizer\n"
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["type"] == "LookupError" and error["fatal"] is True
    assert error["frames"][-1]["line"] == 4
    assert receiver.wait_for(lambda r: r.kind == "bye").body == {
        "exit_code": 1,
        "reason": "after_error",
    }


def test_cuda_oom_is_recognised_by_type(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        import torch; from trainbridge import worker
        with worker.stage("forward"):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    """,
    )
    assert proc.returncode == 1
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["kind"] == "cuda_oom" and error["type"].endswith("OutOfMemoryError")
    assert error["stage"] == "forward"


def test_cuda_oom_wrapped_by_another_exception_keeps_its_kind(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        from trainbridge import worker
        try:
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")
        except RuntimeError as exc:
            raise ValueError("training step failed") from exc
    """,
    )
    assert proc.returncode == 1
    assert receiver.wait_for(lambda r: r.kind == "error").body["kind"] == "cuda_oom"


def test_sys_exit_with_a_code(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        import sys; from trainbridge import worker
        sys.exit(3)
    """,
    )
    assert proc.returncode == 3
    bye = receiver.wait_for(lambda r: r.kind == "bye").body
    assert bye == {"exit_code": 3, "reason": "sys_exit"}
    assert not receiver.of_kind("error"), "a plain exit code is not an error"


def test_raise_system_exit_is_not_reported_as_an_error(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        from trainbridge import worker
        raise SystemExit(3)
    """,
    )
    assert proc.returncode == 3
    bye = receiver.wait_for(lambda r: r.kind == "bye").body
    # No hook sees a bare SystemExit: the worker says it does not know the code.
    assert bye == {"exit_code": None, "reason": "normal"}
    assert not receiver.of_kind("error")


def test_sys_exit_with_a_message_is_an_error(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        import sys; from trainbridge import worker
        def main():
            sys.exit("dataset not found: /data/train")
        with worker.stage("prepare"):
            main()
    """,
    )
    assert proc.returncode == 1
    assert b"dataset not found" in proc.stderr
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["kind"] == "system_exit" and error["type"] == "SystemExit"
    assert error["message"] == "dataset not found: /data/train"
    assert error["exit_code"] == 1 and error["fatal"] is True
    assert error["stage"] == "prepare"
    assert error["frames"][-1]["function"] == "main"
    bye = receiver.wait_for(lambda r: r.kind == "bye").body
    assert bye == {"exit_code": 1, "reason": "sys_exit"}


def test_keyboard_interrupt_is_reported_as_such(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        from trainbridge import worker
        raise KeyboardInterrupt
    """,
    )
    assert proc.returncode == -2  # Python re-raises SIGINT on an uncaught KeyboardInterrupt
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["kind"] == "keyboard_interrupt" and error["fatal"] is True
    bye = receiver.wait_for(lambda r: r.kind == "bye").body
    assert bye == {"exit_code": None, "reason": "after_error"}


def test_normal_end_says_bye_after_everything_else(receiver, tmp_path):
    proc = run(
        receiver,
        tmp_path,
        """
        import logging; from trainbridge import worker
        logging.basicConfig(level=logging.INFO)
        logging.getLogger().addHandler(worker.LogHandler())
        logging.getLogger("trainer").warning("lr is high: %s", 0.5)
        worker.log("checkpoint saved", path="/ckpt/1", size=123)
        worker.progress(5, 5)
    """,
    )
    assert proc.returncode == 0, proc.stderr
    bye = receiver.wait_for(lambda r: r.kind == "bye")
    assert bye.body == {"exit_code": None, "reason": "normal"}
    assert receiver.kinds()[-1] == "bye"
    logs = bodies(receiver, "log")
    assert logs[0]["level"] == "warning" and logs[0]["logger"] == "trainer"
    assert logs[0]["message"] == "lr is high: 0.5"
    assert logs[1]["message"] == "checkpoint saved"
    assert logs[1]["fields"] == {"path": "/ckpt/1", "size": 123}
    assert bodies(receiver, "progress")[-1]["step"] == 5
    seqs = list(dict.fromkeys(r.msg.seq for r in receiver.messages))  # a batch's records share one
    assert seqs == list(range(1, len(seqs) + 1)), "no gaps, no reordering"
    assert not receiver.rejected
