"""Without a client (no TRAINBRIDGE_* variables) a script runs exactly as without
trainbridge, and `import worker` stays light."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.worker.receiver import REPO

# A stand-in with the same API that does nothing: "the script without trainbridge".
STUB = textwrap.dedent("""
    import contextlib
    def enabled(): return False
    def progress(step, total=None, **metrics): pass
    def log(message, level="info", **fields): pass
    def error(exc_or_message, **fields): pass
    class stage(contextlib.ContextDecorator):
        def __init__(self, name, budget=None): pass
        def __enter__(self): return self
        def __exit__(self, *exc): return None
    import logging
    class LogHandler(logging.Handler):
        def emit(self, record): pass
""")

BODY = textwrap.dedent("""
    import logging, sys, threading; from trainbridge import worker
    print("start", end="")          # block-buffered without PYTHONUNBUFFERED
    sys.stderr.write("to stderr\\n")
    logging.getLogger().addHandler(worker.LogHandler())
    with worker.stage("train", budget=5):
        for step in range(3):
            worker.progress(step, 3, loss=0.1)
    worker.log("hello")
    worker.error("not fatal")
    print("enabled", worker.enabled(), "threads", threading.active_count())
    print("hooks untouched", sys.excepthook is sys.__excepthook__,
          threading.excepthook is threading.__excepthook__, sys.exit.__module__)
    ending = sys.argv[1]
    if ending == "exception":
        try:
            {}["x"]
        except KeyError as exc:
            raise ValueError("bad value") from exc
    elif ending == "exit-code":
        sys.exit(3)
    elif ending == "exit-message":
        sys.exit("fatal: message")
    elif ending == "interrupt":
        raise KeyboardInterrupt
    elif ending == "raise-system-exit":
        raise SystemExit(4)
""")


def plain_env():
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TRAINBRIDGE_") and k != "PYTHONUNBUFFERED"
    }
    return env


@pytest.mark.parametrize(
    "ending", ["normal", "exception", "exit-code", "exit-message", "interrupt", "raise-system-exit"]
)
def test_script_without_client_behaves_as_without_trainbridge(tmp_path, ending):
    stub_dir = tmp_path / "stub"
    (stub_dir / "worker").mkdir(parents=True)
    (stub_dir / "worker" / "__init__.py").write_text(STUB)
    script = tmp_path / "script.py"
    script.write_text(BODY)

    def run(path):
        env = dict(plain_env(), PYTHONPATH=str(path))
        return subprocess.run(
            [sys.executable, str(script), ending],
            env=env,
            cwd=str(tmp_path),
            capture_output=True,
            timeout=30,
        )

    real, stub = run(REPO), run(stub_dir)
    assert real.stdout.startswith(b"start") and b"threads 1" in real.stdout
    assert (real.returncode, real.stdout, real.stderr) == (
        stub.returncode,
        stub.stdout,
        stub.stderr,
    )


def test_import_worker_without_client_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys, threading; from trainbridge import worker
        heavy = [m for m in ("zmq", "msgpack", "psutil", "pynvml", "torch", "numpy",
                             "logging", "trainbridge.protocol.codec", "trainbridge.worker.beacon")
                 if m in sys.modules]
        print(heavy, threading.active_count(), worker.enabled())
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(plain_env(), PYTHONPATH=str(REPO)),
        capture_output=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"[] 1 False\n"


def test_supervised_import_leaves_heavy_imports_to_the_beacon(tmp_path):
    """With a client, the importing thread still gets back before zmq is imported by it:
    the beacon thread does that (the receiver is absent here, so nothing is delivered)."""
    code = textwrap.dedent("""
        import sys; from trainbridge import worker
        print(worker.enabled(), "torch" in sys.modules, "psutil" in sys.modules, flush=True)
        import os
        os._exit(0)
    """)
    env = dict(
        plain_env(),
        PYTHONPATH=str(REPO),
        TRAINBRIDGE_ENDPOINT=f"ipc://{tmp_path}/nobody.sock",
        TRAINBRIDGE_JOB_ID="j",
        TRAINBRIDGE_KEY="ab" * 32,
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30)
    assert out.stdout == b"True False False\n", out.stderr


def test_incomplete_settings_disable_the_worker_with_one_line(tmp_path):
    env = dict(
        plain_env(),
        PYTHONPATH=str(REPO),
        TRAINBRIDGE_ENDPOINT="ipc:///nowhere",
        TRAINBRIDGE_JOB_ID="j",
        TRAINBRIDGE_KEY="not-hex",
    )
    out = subprocess.run(
        [sys.executable, "-c", "from trainbridge import worker; print(worker.enabled())"],
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert out.returncode == 0 and out.stdout == b"False\n"
    assert out.stderr == (
        b"[trainbridge] worker disabled: TRAINBRIDGE_KEY is missing or not "
        b"64 lowercase hex digits\n"
    )


def test_a_beacon_that_cannot_start_does_not_break_the_script(tmp_path):
    env = dict(
        plain_env(),
        PYTHONPATH=str(REPO),
        TRAINBRIDGE_ENDPOINT="bogus://nowhere",
        TRAINBRIDGE_JOB_ID="j",
        TRAINBRIDGE_KEY="ab" * 32,
    )
    code = (
        "from trainbridge import worker\nworker.progress(1)\nworker.log('x')\n"
        "print('done')\nraise SystemExit(5)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30)
    assert out.returncode == 5 and out.stdout == b"done\n"
    lines = out.stderr.decode("ascii").splitlines()
    assert len(lines) == 1 and lines[0].startswith("[trainbridge] worker internal error: beacon:")
