"""Client commands: ping, dump_stacks and cancel, answered by a live worker."""

from __future__ import annotations

import os
import signal
import textwrap

from tests.worker.receiver import release, start_python

WORKING = textwrap.dedent("""
    import threading, time; from trainbridge import worker

    def loader_loop(stop):
        while not stop.wait(0.01):
            pass

    stop = threading.Event()
    threading.Thread(target=loader_loop, args=(stop,), name="loader", daemon=True).start()
    with worker.stage("train"):
        time.sleep(60)  # a blocking call: cancel must still get through
""")


def in_sleep(r):
    """A stalled heartbeat showing the main thread inside time.sleep(60)."""
    return r.kind == "heartbeat" and "time.sleep(60)" in (r.body["stack"] or "")


def test_ping_and_dump_stacks_are_answered_in_band(receiver, tmp_path):
    child = start_python(WORKING, receiver.env(heartbeat_s="0.1", stall_s="0.2"), str(tmp_path))
    try:
        receiver.wait_for(in_sleep)
        ping = receiver.command("ping")
        reply = receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == ping).body
        assert reply["ok"] is True
        dump = receiver.command("dump_stacks")
        stacks = receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == dump).body[
            "stacks"
        ]
        assert '"MainThread"' in stacks and '"loader"' in stacks
        assert '"trainbridge-beacon"' in stacks
        assert "time.sleep(60)" in stacks and "loader_loop" in stacks
    finally:
        child.kill()
        child.wait()


def test_cancel_raises_keyboard_interrupt_in_the_main_thread(receiver, tmp_path):
    child = start_python(WORKING, receiver.env(heartbeat_s="0.1", stall_s="0.2"), str(tmp_path))
    try:
        receiver.wait_for(in_sleep)
        cancel = receiver.command("cancel", {"reason": "user pressed stop"})
        reply = receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == cancel).body
        assert reply["ok"] is True
        assert child.wait(timeout=10) == -2  # as after Ctrl-C
    finally:
        child.kill()
        child.wait()
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["kind"] == "keyboard_interrupt" and error["stage"] == "train"
    assert error["frames"][-1]["line"] == 11
    end = receiver.wait_for(lambda r: r.kind == "stage" and r.body["event"] == "end").body
    assert end["status"] == "cancelled"  # the user's stop, not a failure
    assert receiver.wait_for(lambda r: r.kind == "bye").body == {
        "exit_code": None,
        "reason": "cancelled",
    }


def test_cancel_a_script_that_stops_gracefully(receiver, tmp_path):
    child = start_python(
        textwrap.dedent("""
        import sys, time; from trainbridge import worker
        try:
            with worker.stage("train"):
                while True:
                    time.sleep(0.01)
        except KeyboardInterrupt:
            print("saving checkpoint", flush=True)
            sys.exit(0)
    """),
        receiver.env(heartbeat_s="0.2"),
        str(tmp_path),
    )
    try:
        receiver.wait_for(lambda r: r.kind == "stage")
        receiver.command("cancel")
        assert child.wait(timeout=10) == 0
        assert child.stdout.read() == b"saving checkpoint\n"
    finally:
        child.kill()
        child.wait()
    assert receiver.wait_for(lambda r: r.kind == "bye").body == {
        "exit_code": 0,
        "reason": "cancelled",
    }
    assert not receiver.of_kind("error")


def test_cancel_is_refused_when_sigint_is_ignored(receiver, tmp_path):
    child = start_python(
        textwrap.dedent("""
        import signal, sys; from trainbridge import worker
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with worker.stage("train"):
            sys.stdin.read(1)
    """),
        receiver.env(heartbeat_s="0.2"),
        str(tmp_path),
    )
    try:
        receiver.wait_for(lambda r: r.kind == "stage")
        cancel = receiver.command("cancel")
        reply = receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == cancel).body
        assert reply["ok"] is False and "SIGINT" in reply["error"]
        assert release(child) == 0
    finally:
        child.kill()
        child.wait()
    assert receiver.wait_for(lambda r: r.kind == "bye").body["reason"] == "normal"


def test_a_replayed_command_is_carried_out_once(receiver, tmp_path):
    child = start_python(WORKING, receiver.env(heartbeat_s="0.2"), str(tmp_path))
    try:
        hello = receiver.wait_for(lambda r: r.kind == "hello")
        first = receiver.command("ping")
        receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == first)
        receiver._seq -= 1  # the next command reuses the last seq: a replay
        receiver.command("ping", routing_id=hello.routing_id)
        after = receiver.command("ping")
        receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == after)
        assert [r.body["to"] for r in receiver.of_kind("reply")] == [first, after]
    finally:
        child.kill()
        child.wait()


STOPS_A_CHILD = textwrap.dedent("""
    import os, signal, subprocess, sys, time; from trainbridge import worker

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(child.pid, signal.SIGSTOP)
    with worker.stage("train"):
        time.sleep(60)
""")


def test_dump_stacks_lists_the_processes_children_and_their_state(receiver, tmp_path):
    """A launcher's answer says which of its ranks is stopped: a client on another host
    cannot read this host's /proc."""
    child = start_python(
        STOPS_A_CHILD, receiver.env(heartbeat_s="0.1", stall_s="0.2"), str(tmp_path)
    )
    kids = []
    try:
        receiver.wait_for(in_sleep)
        dump = receiver.command("dump_stacks")
        body = receiver.wait_for(lambda r: r.kind == "reply" and r.body["to"] == dump).body
        kids = body["children"]
        assert [(k["state"], k["wchan"]) for k in kids] == [("T", "do_signal_stop")], kids
        with open(f"/proc/{kids[0]['pid']}/stat", encoding="ascii") as f:
            assert f.read().rsplit(")", 1)[1].split()[1] == str(child.pid)  # its ppid
    finally:
        for kid in kids:  # stopped: it would outlive its parent
            try:
                os.kill(kid["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        child.kill()
        child.wait()
