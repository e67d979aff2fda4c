"""The pure verdict rules of `trainbridge doctor`, as tables: facts in, verdict out."""

import pytest

from trainbridge.bridge.doctor import rules as R
from trainbridge.bridge.doctor.probe import redact_url

GB = 1024**3


@pytest.mark.parametrize(
    "text, want",
    [
        ("535.104.05", (535, 104, 5)),
        ("2.4.0+cu121", (2, 4, 0)),
        ("12.1", (12, 1)),
        ("2.13.0a0", (2, 13, 0)),
        ("", ()),
        (None, ()),
    ],
)
def test_version_tuple(text, want):
    assert R.version_tuple(text) == want


@pytest.mark.parametrize(
    "torch_cuda, driver, driver_cuda, system, verdict, needle",
    [
        # the driver's own CUDA version decides when NVML gives it
        ("12.4", "550.54.14", "12.4", "Linux", R.OK, "supports CUDA 12.4"),
        ("12.1", "560.28.03", "12.6", "Linux", R.OK, "torch needs CUDA 12.1"),
        ("12.8", "535.104.05", "12.2", "Linux", R.WARN, "minor-version"),
        ("12.1", "470.82.01", "11.4", "Linux", R.FAIL, "too old"),  # the classic
        ("13.0", "575.57.08", "12.9", "Linux", R.FAIL, "too old"),
        # only the driver version: the release-notes table
        ("12.1", "535.104.05", None, "Linux", R.OK, ">= 530.30.02"),
        ("12.4", "535.104.05", None, "Linux", R.WARN, "minor-version"),
        ("11.8", "450.80.02", None, "Linux", R.WARN, "minor-version"),
        ("11.8", "440.33", None, "Linux", R.FAIL, "needs >= 520.61.05"),
        ("12.1", "470.82.01", None, "Linux", R.FAIL, "needs >= 530.30.02"),
        ("10.2", "418.39", None, "Linux", R.FAIL, "needs >= 440.33"),
        ("12.1", "531.14", None, "Windows", R.OK, ">= 531.14"),
        ("12.1", "527.41", None, "Windows", R.FAIL, "too old"),
        (
            "12.7",
            "565.57.01",
            None,
            "Linux",
            R.WARN,
            ">= 525.60.13",
        ),  # not in the table: major floor
        ("99.0", "999.1", None, "Linux", R.WARN, "not in doctor's driver table"),
        (None, "550.54.14", "12.4", "Linux", R.SKIP, "not a CUDA build"),
        ("12.1", None, None, "Linux", R.SKIP, "no NVIDIA driver"),
    ],
)
def test_cuda_driver_compat(torch_cuda, driver, driver_cuda, system, verdict, needle):
    v = R.cuda_driver_compat(torch_cuda, driver, driver_cuda, system)
    assert (v.verdict, needle in v.detail) == (verdict, True), v
    if verdict in (R.WARN, R.FAIL) and "table" not in needle:
        assert "upgrade the NVIDIA driver" in v.fix


def test_driver_table_is_monotonic():
    # A newer CUDA never needs an older driver: guards against typos in the table.
    for table in (R.MIN_DRIVER_LINUX, R.MIN_DRIVER_WINDOWS):
        keys = sorted(table, key=R.version_tuple)
        drivers = [R.version_tuple(table[k]) for k in keys]
        assert drivers == sorted(drivers)


@pytest.mark.parametrize(
    "facts, verdict, needle",
    [
        ({"stdout": "utf-8", "preferred": "UTF-8", "locale_ctype": "C.UTF-8"}, R.OK, "UTF-8"),
        ({"stdout": "cp65001", "preferred": "cp65001", "locale_ctype": "x"}, R.OK, "UTF-8"),
        (
            {"stdout": "gbk", "preferred": "cp936", "locale_ctype": "Chinese"},
            R.WARN,
            "stdout encoding is gbk",
        ),
        (
            {"stdout": "utf-8", "preferred": "ANSI_X3.4-1968", "locale_ctype": "C"},
            R.WARN,
            "open() without",
        ),
        (
            {"stdout": None, "preferred": "UTF-8", "locale_ctype": "C"},
            R.WARN,
            "stdout encoding is None",
        ),
    ],
)
def test_encoding_verdict(facts, verdict, needle):
    v = R.encoding_verdict(facts)
    assert v.verdict == verdict and needle in v.detail, v
    if verdict == R.WARN:
        assert "PYTHONUTF8=1" in v.fix and "PYTHONIOENCODING=utf-8" in v.fix


@pytest.mark.parametrize(
    "facts, verdict",
    [
        (
            {"present": True, "isatty": False, "line_buffering": False, "write_through": False},
            R.WARN,
        ),
        (
            {
                "present": True,
                "isatty": False,
                "line_buffering": False,
                "write_through": True,
                "PYTHONUNBUFFERED": "1",
            },
            R.OK,
        ),
        ({"present": True, "isatty": False, "line_buffering": True, "write_through": False}, R.OK),
        ({"present": True, "isatty": True, "line_buffering": True, "write_through": False}, R.OK),
        ({"present": False}, R.WARN),
    ],
)
def test_buffering_verdict(facts, verdict):
    v = R.buffering_verdict(facts)
    assert v.verdict == verdict, v
    if verdict == R.WARN and facts["present"]:
        assert "PYTHONUNBUFFERED=1" in v.fix


TWO = [{"index": 0, "uuid": "GPU-aaaa-1111"}, {"index": 1, "uuid": "GPU-bbbb-2222"}]


@pytest.mark.parametrize(
    "value, gpus, verdict, needle",
    [
        (None, TWO, R.OK, "all 2 GPU(s)"),
        (None, [], R.OK, "no NVIDIA GPU"),
        (None, None, R.SKIP, "unknown"),
        ("0,1", TWO, R.OK, "[0, 1]"),
        ("1", TWO, R.OK, "[1]"),
        ("GPU-bbbb", TWO, R.OK, "[1]"),
        ("5", TWO, R.FAIL, "no GPU is visible"),
        ("0,5,1", TWO, R.FAIL, "only [0] stay visible"),
        ("3", [], R.FAIL, "no NVIDIA GPU"),
        ("GPU-zzzz", TWO, R.FAIL, "does not exist"),
        ("0,0", TWO, R.FAIL, "only [0]"),
        ("", TWO, R.WARN, "hides all 2"),
        ("-1", TWO, R.WARN, "hides all 2"),
        ("-1", [], R.OK, "hides all"),
        ("0", None, R.WARN, "cannot be checked"),
    ],
)
def test_visible_devices_verdict(value, gpus, verdict, needle):
    v = R.visible_devices_verdict(value, gpus)
    assert v.verdict == verdict and needle in v.detail, v


@pytest.mark.parametrize(
    "capability, arch_list, want",
    [
        ("8.6", ["sm_80", "sm_86", "sm_90"], True),
        ("8.9", ["sm_80", "sm_86"], True),  # same-major cubin runs on a later minor
        ("12.0", ["sm_50", "sm_80", "sm_90"], False),  # an RTX 50 on an old build: the classic
        ("12.0", ["sm_90", "sm_120"], True),
        ("9.0", ["sm_80", "compute_80"], True),  # PTX JIT
        ("7.5", ["sm_80", "sm_90"], False),
        ("7.5", [], True),  # unknown: no accusation
    ],
)
def test_arch_supported(capability, arch_list, want):
    assert R.arch_supported(capability, arch_list) is want


@pytest.mark.parametrize(
    "facts, verdict, needle",
    [
        ({"installed": False}, R.FAIL, "not installed"),
        (
            {
                "installed": True,
                "metadata_version": "2.1.0",
                "import_error": "ImportError: libcudnn.so.8",
            },
            R.FAIL,
            "libcudnn",
        ),
        (
            {
                "installed": True,
                "metadata_version": "2.13.0+cpu",
                "version": "2.13.0+cpu",
                "cuda": None,
                "import_s": 1.2,
            },
            R.OK,
            "CPU-only build",
        ),
        (
            {
                "installed": True,
                "metadata_version": "2.4.0+cu121",
                "version": "2.4.0+cu121",
                "cuda": "12.1",
                "import_s": 3,
            },
            R.OK,
            "CUDA 12.1 build",
        ),
        (
            {
                "installed": True,
                "metadata_version": "2.4.0",
                "version": "0.0.1",
                "file": "/w/torch/__init__.py",
                "import_s": 0.1,
            },
            R.WARN,
            "shadows",
        ),
    ],
)
def test_torch_verdict(facts, verdict, needle):
    v = R.torch_verdict(facts, "/venv/bin/python")
    assert v.verdict == verdict and needle in v.detail, v


DEV = {
    "index": 0,
    "name": "NVIDIA A100",
    "capability": "8.0",
    "total_memory": 80 * GB,
    "free_memory": 79 * GB,
}


@pytest.mark.parametrize(
    "facts, gpu_count, expected, verdict, needle",
    [
        ({"skipped": "torch was not imported"}, 0, 0, R.SKIP, "not imported"),
        ({"built_cuda": None}, 0, 0, R.SKIP, "CPU-only"),
        ({"built_cuda": None}, 2, 2, R.WARN, "CPU-only torch build but 2"),
        (
            {"built_cuda": "12.1", "is_available": False, "init_warnings": []},
            0,
            0,
            R.WARN,
            "runs on CPU",
        ),
        (
            {"built_cuda": "12.1", "is_available": False, "init_warnings": ["CUDA driver too old"]},
            1,
            1,
            R.FAIL,
            "CUDA driver too old",
        ),
        (
            {
                "built_cuda": "12.1",
                "is_available": True,
                "device_count": 1,
                "arch_list": ["sm_80"],
                "devices": [DEV],
            },
            1,
            1,
            R.OK,
            "A100 (sm_80, 80.0 GiB, 79.0 GiB free)",
        ),
        (
            {
                "built_cuda": "12.1",
                "is_available": True,
                "device_count": 1,
                "arch_list": ["sm_70"],
                "devices": [DEV],
            },
            1,
            1,
            R.FAIL,
            "does not support",
        ),
        (
            {
                "built_cuda": "12.1",
                "is_available": True,
                "device_count": 1,
                "arch_list": ["sm_80"],
                "devices": [DEV],
            },
            2,
            2,
            R.WARN,
            "2 are expected",
        ),
    ],
)
def test_torch_cuda_verdict(facts, gpu_count, expected, verdict, needle):
    v = R.torch_cuda_verdict(facts, gpu_count, expected)
    assert v.verdict == verdict and needle in v.detail, v


@pytest.mark.parametrize(
    "facts, verdict",
    [
        ({"devices": [{"device": "cpu", "ok": True, "seconds": 0.01}]}, R.OK),
        (
            {
                "devices": [
                    {"device": "cpu", "ok": True},
                    {"device": "cuda:0", "ok": False, "error": "CUDA error"},
                ]
            },
            R.FAIL,
        ),
        ({"skipped": "torch was not imported"}, R.SKIP),
    ],
)
def test_tensor_verdict(facts, verdict):
    assert R.tensor_verdict(facts).verdict == verdict


@pytest.mark.parametrize(
    "facts, verdict, needle",
    [
        (
            {
                "driver": "550.54.14",
                "driver_cuda": "12.4",
                "gpus": [{"index": 0, "name": "NVIDIA H100", "memory_total": 80 * GB}],
            },
            R.OK,
            "1 GPU(s): 0: NVIDIA H100",
        ),
        ({"pynvml": "ok", "nvml_error": "Driver/library version mismatch"}, R.FAIL, "mismatch"),
        (
            {"pynvml": "ok", "nvml_error": "NVML Shared Library Not Found", "proc_version": None},
            R.WARN,
            "training runs on CPU",
        ),
        (
            {"pynvml": "missing: No module named 'pynvml'", "proc_version": "NVRM version: 535.1"},
            R.WARN,
            "NVML is unavailable",
        ),
    ],
)
def test_nvidia_verdict(facts, verdict, needle):
    v = R.nvidia_verdict(facts)
    assert v.verdict == verdict and needle in v.detail, v


@pytest.mark.parametrize("free, verdict", [(100 * GB, R.OK), (5 * GB, R.WARN), (GB // 2, R.FAIL)])
def test_disk_verdict(free, verdict):
    dirs = [
        {"role": "cwd", "path": "/w", "measured": "/w", "free_bytes": 100 * GB},
        {"role": "hf_cache", "path": "/h", "measured": "/h", "free_bytes": free},
    ]
    v = R.disk_verdict({"dirs": dirs})
    assert v.verdict == verdict
    if verdict != R.OK:
        assert "/h (hf_cache)" in v.fix


@pytest.mark.parametrize(
    "versions, verdict, needle",
    [
        ({"torch": "2.4.0", "numpy": "1.26.4"}, R.OK, "numpy 1.26.4"),
        ({"torch": "2.4.0", "numpy": None}, R.WARN, "numpy is missing"),
        ({"torch": "2.1.0", "numpy": "2.0.1"}, R.WARN, "numpy 2 with torch < 2.3"),
        ({"torch": None, "numpy": None}, R.OK, "not installed: torch, numpy"),
        # not "ok" on a venv where the worker cannot load
        ({"pyzmq": None, "msgpack": None}, R.WARN, "worker needs pyzmq and msgpack"),
        ({"pyzmq": "26.0.0", "msgpack": None}, R.WARN, "worker needs msgpack"),
        ({"pyzmq": "26.0.0", "msgpack": "1.1.0"}, R.OK, "pyzmq 26.0.0"),
    ],
)
def test_packages_verdict(versions, verdict, needle):
    v = R.packages_verdict({"versions": versions})
    assert v.verdict == verdict and needle in v.detail, v


@pytest.mark.parametrize(
    "env, verdict, needle",
    [
        ({}, R.OK, "no proxy"),
        ({"HTTPS_PROXY": "127.0.0.1:7890"}, R.WARN, "has no scheme"),
        ({"HTTPS_PROXY": "http://a:1", "https_proxy": "http://b:2"}, R.WARN, "differ"),
        ({"HF_ENDPOINT": "hf-mirror.com"}, R.WARN, "not an http(s) URL"),
        ({"HF_ENDPOINT": "https://hf-mirror.com", "HF_HUB_OFFLINE": "1"}, R.OK, "offline mode"),
    ],
)
def test_network_config_verdict(env, verdict, needle):
    v = R.network_config_verdict({"env": env})
    assert v.verdict == verdict and needle in v.detail, v


@pytest.mark.parametrize(
    "role, facts, verdict",
    [
        (
            "hf_endpoint",
            {"ok": True, "target": "https://huggingface.co:443", "elapsed_s": 0.2},
            R.OK,
        ),
        (
            "hf_endpoint",
            {"ok": False, "stage": "dns", "error": "DNS: unknown", "target": "x"},
            R.WARN,
        ),
        ("proxy", {"ok": False, "stage": "connect", "error": "refused", "target": "x"}, R.FAIL),
        ("host", {"ok": False, "stage": "reply", "error": "timed out", "target": "x"}, R.FAIL),
        ("hf_endpoint", {"skipped": "HF_HUB_OFFLINE=1"}, R.SKIP),
    ],
)
def test_reach_verdict(role, facts, verdict):
    v = R.reach_verdict(role, facts)
    assert v.verdict == verdict
    if verdict != R.OK and verdict != R.SKIP:
        assert v.fix


@pytest.mark.parametrize(
    "facts, verdict",
    [
        ({"version": "3.11.7", "version_info": [3, 11, 7], "bits": 64}, R.OK),
        ({"version": "3.8.18", "version_info": [3, 8, 18], "bits": 64}, R.WARN),
        ({"version": "3.7.16", "version_info": [3, 7, 16], "bits": 64}, R.FAIL),
        ({"version": "3.11.7", "version_info": [3, 11, 7], "bits": 32}, R.FAIL),
    ],
)
def test_python_verdict(facts, verdict):
    assert R.python_verdict(facts).verdict == verdict


@pytest.mark.parametrize(
    "verdicts, code",
    [(["ok", "warn", "skip"], 0), (["ok", "fail"], 1), (["hung", "ok"], 1), ([], 0)],
)
def test_exit_code(verdicts, code):
    assert R.exit_code(verdicts) == code


@pytest.mark.parametrize(
    "url, want",
    [
        ("http://user:secret@proxy:8080", "http://user:***@proxy:8080"),
        ("http://proxy:8080", "http://proxy:8080"),
        ("user:p@ss@host:1", "user:***@host:1"),
        ("", ""),
    ],
)
def test_redact_url(url, want):
    assert redact_url(url) == want
