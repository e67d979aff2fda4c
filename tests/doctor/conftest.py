"""Fake environments for `trainbridge doctor`: a venv without torch, hanging sitecustomize
files, odd locales, hosts that never answer. Every server a test starts is on 127.0.0.1."""
import os
import socket
import subprocess
import sys
import textwrap

import psutil
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Base interpreters to build torch-less venvs from: ours (without the venv) and, where the
# machine has it, the oldest the probe promises to support.
BASE_PYTHONS = [getattr(sys, "_base_executable", None) or sys.executable]
for candidate in ("/root/.pyenv/versions/3.8.18/bin/python3",):
    if os.path.exists(candidate):
        BASE_PYTHONS.append(candidate)


def base_env(**extra):
    """Our environment, minus what would make the fake environments less fake."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "HF_ENDPOINT") and not k.lower().endswith("_proxy")}
    env["HF_HUB_OFFLINE"] = "1"  # no hub probe unless a test wants one
    env.update(extra)
    return env


def make_venv(base_python, where):
    """A venv without pip or torch: what a fresh training venv looks like before installs."""
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(where)], check=True, timeout=60,
                   stdin=subprocess.DEVNULL)
    return str(where / "bin" / "python")


@pytest.fixture(scope="session", params=BASE_PYTHONS, ids=lambda p: os.path.basename(p))
def bare_venv_python(request, tmp_path_factory):
    return make_venv(request.param, tmp_path_factory.mktemp("bare-venv"))


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory):
    """One torch-less venv on our own Python version, for tests that only need a fast target."""
    return make_venv(BASE_PYTHONS[0], tmp_path_factory.mktemp("fast-venv"))


@pytest.fixture
def write_sitecustomize(tmp_path):
    """Writes sitecustomize.py into a fresh dir; returns (dir for PYTHONPATH, marker dir)."""
    def write(body):
        site = tmp_path / "site"
        site.mkdir()
        marks = tmp_path / "marks"
        marks.mkdir()
        (site / "sitecustomize.py").write_text(textwrap.dedent(body).replace("MARKS", repr(str(marks))))
        return str(site), marks
    return write


@pytest.fixture
def silent_server():
    """A loopback TCP port that completes the handshake (listen backlog) and never replies."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    yield srv.getsockname()[1]
    srv.close()


@pytest.fixture
def closed_port():
    """A loopback port nobody listens on (connect is refused at once)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Every doctor run must leave no process behind: its probe children are killed as a tree."""
    yield
    me = psutil.Process()
    left = [p for p in me.children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, "doctor left processes behind: %s" % [(p.pid, p.cmdline()) for p in left]


def by_name(report):
    return {row["name"]: row for row in report["checks"]}
