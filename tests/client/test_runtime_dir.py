"""A SIGKILLed client leaves its runtime directory (socket, job files) behind; the next
client of the same user sweeps it. Real client processes. The Node client
has no runtime directory of its own: its job server is a Python client (bridge/jobserve.py),
and a SIGKILLed Node process ends it through its stdin (node-client/test/parentdeath.test.js)."""

import os
import select
import signal
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY_CLIENT = (
    "from trainbridge.bridge.hub import Hub\n"
    "print(Hub.get().runtime_dir, flush=True)\n"
    "import sys; sys.stdin.read()\n"
)


def start_client(kind, base):
    env = {**os.environ, "XDG_RUNTIME_DIR": str(base)}
    cmd, cwd = [sys.executable, "-c", PY_CLIENT], ROOT
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, f"the {kind} client never said where its runtime directory is"
    path = proc.stdout.readline().strip()
    assert os.path.isdir(path) and os.path.dirname(path) == str(base), path
    return proc, path


def end_client(proc):
    proc.stdin.close()
    assert proc.wait(30) == 0


@pytest.mark.parametrize("killed, sweeper", [("python", "python")])
def test_the_next_client_sweeps_a_killed_clients_runtime_dir(tmp_path, killed, sweeper):
    victim, victim_dir = start_client(killed, tmp_path)
    alive, alive_dir = start_client("python", tmp_path)
    foreign = tmp_path / "trainbridge-without-owner"  # being made, or an older version's
    foreign.mkdir()
    os.kill(victim.pid, signal.SIGKILL)
    assert victim.wait(30) == -signal.SIGKILL
    assert os.path.isdir(victim_dir), "the killed client's directory was not left: no test"

    nxt, next_dir = start_client(sweeper, tmp_path)
    assert not os.path.exists(victim_dir), os.listdir(tmp_path)
    assert os.path.isdir(alive_dir) and foreign.is_dir()  # a live client's stays, and so does
    end_client(nxt)  # one that names no owner
    end_client(alive)
    assert not os.path.exists(next_dir) and not os.path.exists(alive_dir)
    assert sorted(os.listdir(tmp_path)) == ["trainbridge-without-owner"]
