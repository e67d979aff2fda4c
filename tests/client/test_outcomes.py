"""Each outcome from a real child process: succeeded, failed, crashed (section 5 rules)."""

import signal

from tests.client.conftest import message, validate_report


def test_succeeded_with_stages_and_progress(run):
    job, r = run("""
        from trainbridge import worker
        with worker.stage("data"):
            pass
        with worker.stage("train"):
            for i in range(5):
                worker.progress(i + 1, 5, loss=1.0 / (i + 1))
        print("done")
    """)
    assert r["outcome"] == "succeeded" and r["exit_code"] == 0 and r["signal"] is None
    assert [(s["name"], s["status"]) for s in r["stages"]] == [("data", "ok"), ("train", "ok")]
    assert r["progress"]["step"] == 5 and r["progress"]["total"] == 5
    assert r["progress"]["metrics"]["loss"] == 0.2
    assert r["log_tail"][-1] == "done"
    assert r["error"] is None and r["diagnosis"] is None
    assert r["worker"]["hello"] and r["worker"]["bye"]["reason"] == "normal"


def test_uncaught_exception_fails_with_the_error(run):
    job, r = run("""
        from trainbridge import worker
        with worker.stage("train"):
            raise ValueError("learning rate \\u4e2d\\u6587 is negative")
    """)
    assert r["outcome"] == "failed" and r["exit_code"] == 1
    assert r["error"]["type"] == "ValueError"
    assert r["error"]["message"] == "learning rate \u4e2d\u6587 is negative"
    assert "Traceback (most recent call last)" in r["error"]["traceback"]
    assert r["stage"] == "train" and r["stages"][0]["status"] == "error"
    assert r["diagnosis"]["kind"] == "python_exception"
    assert "ValueError" in r["summary"]


def test_exit_zero_after_a_fatal_error_is_failed(run):
    # The error is reported (and acked) by the excepthook; an atexit handler then forces 0.
    job, r = run("""
        import atexit, os; from trainbridge import worker
        atexit.register(lambda: os._exit(0))
        raise RuntimeError("boom, then exit 0")
    """)
    assert r["exit_code"] == 0
    assert r["outcome"] == "failed"
    assert r["error"]["type"] == "RuntimeError" and r["error"]["fatal"] is True


def test_system_exit_zero_is_success(run):
    job, r = run("""
        import sys; from trainbridge import worker
        with worker.stage("train"):
            sys.exit(0)
    """)
    assert r["outcome"] == "succeeded" and r["exit_code"] == 0
    assert r["diagnosis"] is None


def test_sys_exit_nonzero_is_failed(run):
    job, r = run("""
        import sys; from trainbridge import worker
        sys.exit(3)
    """)
    assert r["outcome"] == "failed" and r["exit_code"] == 3
    assert r["diagnosis"]["kind"] == "exit_nonzero"


def test_segfault_is_crashed_with_signal_stack_and_tail(run):
    job, r = run(
        """
        import ctypes; from trainbridge import worker
        print("about to crash", flush=True)
        with worker.stage("forward"):
            wait_go()
            ctypes.string_at(0)
    """,
        go_when=message("stage", name="forward"),
    )
    assert r["outcome"] == "crashed"
    assert r["signal"] == "SIGSEGV" and r["exit_code"] is None
    assert r["stage"] == "forward"
    assert "about to crash" in r["log_tail"]
    assert "Segmentation fault" in r["stacks"] and "string_at" in r["stacks"]
    assert r["diagnosis"]["kind"] == "native_crash"


def test_os_exit_without_last_words_is_crashed(run):
    job, r = run(
        """
        import os; from trainbridge import worker
        worker.progress(1, 10)
        wait_go()
        os._exit(7)
    """,
        go_when=message("hello"),
    )
    assert r["outcome"] == "crashed" and r["exit_code"] == 7 and r["signal"] is None
    assert r["worker"]["bye"] is None
    assert r["diagnosis"]["kind"] == "exit_nonzero"


def test_killed_by_sigkill_is_crashed(run):
    job, r = run("""
        import os, signal; from trainbridge import worker
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert r["outcome"] == "crashed" and r["signal"] == "SIGKILL"
    assert r["diagnosis"]["kind"] in ("killed", "oom_killed")


def test_command_that_never_imports_worker_still_reports(run):
    # No worker, no zero-code hook: exit, signal, output and faulthandler's stack on stderr.
    job, r = run(
        """
        import ctypes, sys
        print("plain output")
        print("to stderr", file=sys.stderr)
        def deep():
            ctypes.string_at(0)
        deep()
    """,
        zero_code=False,
    )
    assert r["outcome"] == "crashed" and r["signal"] == "SIGSEGV"
    assert not r["worker"]["hello"]
    assert {"plain output", "to stderr"} <= set(r["log_tail"])
    assert "Fatal Python error: Segmentation fault" in r["stacks"]
    assert "in deep" in r["stacks"]
    assert r["diagnosis"]["kind"] == "native_crash"


def test_plain_command_traceback_is_parsed_into_the_error(run):
    job, r = run(
        """
        def load():
            raise FileNotFoundError("weights.bin")
        load()
    """,
        zero_code=False,
    )
    assert r["outcome"] == "failed" and r["exit_code"] == 1
    assert r["error"]["type"] == "FileNotFoundError" and r["error"]["source"] == "stderr"
    assert r["diagnosis"]["kind"] == "python_exception"


def test_a_non_python_command(tmp_path):
    from trainbridge import bridge

    job = bridge.launch(["sh", "-c", "echo from-sh; kill -TERM $$"], startup_timeout=None)
    r = job.wait(20)
    validate_report(r)
    assert r["outcome"] == "crashed" and r["signal"] == "SIGTERM"
    assert r["log_tail"] == ["from-sh"]
    assert signal.SIGTERM == 15
