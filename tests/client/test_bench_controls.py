"""The real-loop benchmark's import control (benchmarks/bench_loop.py) must import what a
zero-code child really has loaded of ours, pyzmq and msgpack by the time its loop runs:
a list that drifts from the worker's imports would measure some other process."""

import os
import subprocess
import sys
import threading

from benchmarks.bench_loop import PRELOAD
from tests.client.conftest import ROOT, WAIT_S, assert_tree_gone
from trainbridge import bridge

OURS = ("trainbridge", "zmq", "msgpack")


def test_the_import_control_loads_what_a_zero_code_child_has_loaded(script, tmp_path):
    gate = str(tmp_path / "go")
    path = script(f"""
        import sys
        wait_go()  # opened once the client has the hello: the beacon's imports are done
        print("MODS", sorted(m for m in sys.modules if m.split(".")[0] in {OURS!r}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBRIDGE_")}
    env["TB_TEST_GO"] = gate
    hello = threading.Event()

    def on_event(event):
        if event["event"] == "message" and event["kind"] == "hello":
            hello.set()

    job = bridge.launch([sys.executable, path], cwd=ROOT, env=env, on_event=on_event)
    assert hello.wait(WAIT_S), "no hello came"
    open(gate, "w").close()
    report = job.wait(WAIT_S)
    assert report is not None and report["outcome"] == "succeeded", job.state
    assert_tree_gone(job)
    zero_code = _modules(report["log_tail"])

    out = subprocess.run(  # unsupervised, the gate already open
        [sys.executable, "-c", PRELOAD, path],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert _modules(out.stdout.splitlines()) == zero_code


def _modules(lines):
    line = next(line for line in lines if line.startswith("MODS "))
    return set(line[len("MODS ") :].strip("[]").replace("'", "").split(", "))
