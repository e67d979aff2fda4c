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
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "HF_ENDPOINT")
        and not k.lower().endswith("_proxy")
    }
    env["HF_HUB_OFFLINE"] = "1"  # no hub probe unless a test wants one
    env.update(extra)
    return env


def make_venv(base_python, where):
    """A venv without pip or torch: what a fresh training venv looks like before installs."""
    subprocess.run(
        [base_python, "-m", "venv", "--without-pip", str(where)],
        check=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
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
        (site / "sitecustomize.py").write_text(
            textwrap.dedent(body).replace("MARKS", repr(str(marks)))
        )
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
    left = [
        p
        for p in me.children(recursive=True)
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert not left, "doctor left processes behind: %s" % [(p.pid, p.cmdline()) for p in left]


def by_name(report):
    return {row["name"]: row for row in report["checks"]}


FAKE_PYNVML = '''
"""A stand-in for nvidia-ml-py: the driver and GPUs described in fake_gpu.json."""
import json, os
_CFG = json.load(open(os.path.join(os.path.dirname(__file__), "fake_gpu.json")))
class NVMLError(Exception):
    pass
class _Mem:
    def __init__(self, total):
        self.total, self.used, self.free = total, 0, total
def nvmlInit():
    if _CFG.get("nvml_error"):
        raise NVMLError(_CFG["nvml_error"])
def nvmlShutdown():
    pass
def nvmlSystemGetDriverVersion():
    return _CFG["driver"]
def nvmlSystemGetCudaDriverVersion():
    return _CFG["driver_cuda"]
def nvmlDeviceGetCount():
    return len(_CFG["gpus"])
def nvmlDeviceGetHandleByIndex(i):
    return _CFG["gpus"][i]
def nvmlDeviceGetName(h):
    return h["name"].encode()
def nvmlDeviceGetUUID(h):
    return h["uuid"]
def nvmlDeviceGetMemoryInfo(h):
    return _Mem(h["memory"])
'''

FAKE_TORCH = '''
"""A stand-in for a CUDA build of torch, as described in fake_gpu.json."""
import json, os, warnings
_CFG = json.load(open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "fake_gpu.json")))
__version__ = _CFG["torch"]
class version:
    cuda = _CFG["torch_cuda"]
    hip = None
class _T:
    def __init__(self, values, device):
        self.values, self.device = values, device
    def __mul__(self, k):
        return _T([v * k for v in self.values], self.device)
    def sum(self):
        return _T([sum(self.values)], self.device)
    def item(self):
        if self.device in _CFG.get("broken_devices", []):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.values[0]
def ones(n, device="cpu"):
    return _T([1.0] * n, device)
class _Props:
    def __init__(self, g):
        self.name, self.total_memory = g["name"], g["memory"]
        self.major, self.minor = map(int, g["capability"].split("."))
class cuda:
    @staticmethod
    def is_available():
        if not _CFG["cuda_available"]:
            warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old")
        return _CFG["cuda_available"]
    @staticmethod
    def device_count():
        return len(_CFG["gpus"]) if _CFG["cuda_available"] else 0
    @staticmethod
    def get_arch_list():
        return _CFG["arch_list"]
    @staticmethod
    def get_device_properties(i):
        return _Props(_CFG["gpus"][i])
    @staticmethod
    def mem_get_info(i):
        return (_CFG["gpus"][i]["memory"] - 2**30, _CFG["gpus"][i]["memory"])
class backends:
    class cudnn:
        @staticmethod
        def version():
            return 90100
'''


@pytest.fixture
def fake_gpu_env(tmp_path):
    """A PYTHONPATH dir with a fake pynvml and a fake CUDA torch (with pip metadata), driven by
    a config: what a GPU box looks like to the probe, on a machine without one."""
    import json

    def make(**config):
        site = tmp_path / "fakegpu"
        (site / "torch").mkdir(parents=True)
        (site / "fake_gpu.json").write_text(json.dumps(config))
        (site / "pynvml.py").write_text(FAKE_PYNVML)
        (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
        meta = site / ("torch-%s.dist-info" % config["torch"])
        meta.mkdir()
        (meta / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: torch\nVersion: %s\n" % config["torch"]
        )
        return str(site)

    return make
