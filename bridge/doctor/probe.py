"""Environment probe run by `trainbridge doctor` inside the TARGET interpreter.

Run as a script by path (`python probe.py --checks a,b --stack-file F`), never imported
by it. It must stay standalone: stdlib only, Python 3.8+ syntax, and it never imports
trainbridge (the target venv usually does not have it). It gathers raw facts only; the
verdicts are decided on the doctor's side (bridge/doctor/rules.py).

Wire, one ASCII JSON object per line on the ORIGINAL stdout fd:
  {"event": "ready", "pid": N}
  {"event": "begin", "check": NAME}
  {"event": "end", "check": NAME, "facts": {...}, "error": null | "traceback", "duration_s": x}
  {"event": "done"}
fd 1 is then pointed at stderr, so whatever a check prints (torch warnings, C libraries
writing to fd 1) cannot corrupt that channel. SIGUSR1 dumps every thread's Python stack to
the stack file: the doctor sends it when a check passes its deadline, then kills us. If that
dump does not come (the main thread runs no Python: native code holds the GIL), the doctor
sends SIGUSR2, faulthandler's C dump of the main thread alone.

Its length (about 500 lines): it is run by path in an interpreter that does not have
trainbridge, so it cannot import a sibling; every check's fact gathering is here.
"""

import os
import sys

# Our own directory (bridge/) is sys.path[0] when run by path: drop it so nothing in it can
# shadow a module the checks look at. The user's cwd is not on the path, as for `python x.py`.
_HERE = os.path.dirname(os.path.realpath(__file__))
if sys.path and os.path.realpath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]

import json  # noqa: E402 - after the sys.path fix above, so bridge/ cannot shadow it
import time  # noqa: E402 - as json
import traceback  # noqa: E402 - as json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (milliseconds)
if TYPE_CHECKING:  # never runs: annotations are strings or unevaluated locals (Python 3.8)
    from types import FrameType
    from typing import Any, Callable, Optional, TextIO, TypeVar, Union

    _T = TypeVar("_T")
    Facts = dict[str, Any]  # one check's JSON facts


def _stream_facts(stream: "Optional[TextIO]") -> "Facts":
    """What a stream looked like when the interpreter started, before we touch fds."""
    if stream is None:
        return {"present": False}
    facts: Facts = {"present": True}
    for attr in ("encoding", "errors", "line_buffering", "write_through"):
        facts[attr] = getattr(stream, attr, None)
    try:
        facts["isatty"] = stream.isatty()
    except Exception:  # noqa: BLE001 - a replaced stream without a real fd
        facts["isatty"] = None
    return facts


# Captured first: the buffering and encoding checks report what a training script launched
# the same way (stdout a pipe, as from a GUI) would get.
_STDOUT_AT_START = _stream_facts(sys.stdout)
_STDERR_AT_START = _stream_facts(sys.stderr)

# The packages whose versions the "packages" check reports: given by the doctor
# (bridge/doctor/run.py PROBE_PACKAGES, --packages), as this file runs by path in the
# training interpreter, where trainbridge may not be importable.
PACKAGES: "list[str]" = []
NETWORK_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
)
ENCODING_VARS = (
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONLEGACYWINDOWSSTDIO",
)

_STATE: "dict[str, Any]" = {}  # shared between checks of one child: the imported torch module


def redact_url(value: str) -> str:
    """Hide user:password in a proxy URL: the report is shown and logged."""
    if not value or "@" not in value:
        return value
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "", value
    cred, _, hostpart = rest.rpartition("@")
    user = cred.split(":", 1)[0]
    return (scheme + "://" if sep else "") + (user + ":***@" if user else "***@") + hostpart


def _version_of(dist: str) -> "Optional[str]":
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8: no metadata API
        return None
    try:
        return metadata.version(dist)
    except Exception:  # noqa: BLE001 - a broken dist-info reads as unknown
        return None


def check_python() -> "Facts":
    import platform
    import struct

    return {
        "version": platform.python_version(),
        "version_info": list(sys.version_info[:3]),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "bits": struct.calcsize("P") * 8,
    }


def check_platform() -> "Facts":
    import platform

    release = platform.release()
    facts: Facts = {
        "system": platform.system(),
        "release": release,
        "machine": platform.machine(),
        "platform": platform.platform(),
        "node": platform.node(),
        "cpu_count": os.cpu_count(),
        "wsl": "microsoft" in release.lower(),
        "container": os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"),
    }
    if facts["system"] == "Linux":
        facts["libc"] = "-".join(x for x in platform.libc_ver() if x) or None
    return facts


def check_encoding() -> "Facts":
    import locale

    facts: Facts = {
        "stdout": _STDOUT_AT_START.get("encoding"),
        "stderr": _STDERR_AT_START.get("encoding"),
        "stdout_errors": _STDOUT_AT_START.get("errors"),
        "preferred": locale.getpreferredencoding(False),
        "filesystem": sys.getfilesystemencoding(),
        "utf8_mode": bool(getattr(sys.flags, "utf8_mode", 0)),
        "locale_ctype": locale.setlocale(locale.LC_CTYPE),
        "env": {k: os.environ.get(k) for k in ENCODING_VARS if k in os.environ},
    }
    if sys.platform == "win32":
        try:
            import ctypes

            facts["console_cp"] = ctypes.windll.kernel32.GetConsoleOutputCP()
        except Exception:  # noqa: BLE001 - Windows API via ctypes: unknown, not a crash
            facts["console_cp"] = None
    return facts


def check_stdout_buffering() -> "Facts":
    facts = dict(_STDOUT_AT_START)
    facts["PYTHONUNBUFFERED"] = os.environ.get("PYTHONUNBUFFERED")
    return facts


def check_network_config() -> "Facts":
    return {"env": {k: redact_url(os.environ[k]) for k in NETWORK_VARS if k in os.environ}}


def check_packages() -> "Facts":
    return {"versions": {name: _version_of(name) for name in PACKAGES}}


def _cache_dirs() -> "list[tuple[str, str]]":
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    hf = (
        os.environ.get("HF_HUB_CACHE")
        or os.environ.get("HF_HOME")
        or os.path.join(xdg, "huggingface")
    )
    torch_home = os.environ.get("TORCH_HOME") or os.path.join(xdg, "torch")
    import tempfile

    return [
        ("cwd", os.getcwd()),
        ("hf_cache", hf),
        ("torch_home", torch_home),
        ("tmp", tempfile.gettempdir()),
    ]


def check_disk() -> "Facts":
    import shutil

    dirs: list[Facts] = []
    for role, path in _cache_dirs():
        measured = os.path.abspath(path)
        while not os.path.exists(measured) and os.path.dirname(measured) != measured:
            measured = os.path.dirname(measured)  # a cache dir not created yet: its filesystem
        entry: Facts = {"role": role, "path": path, "measured": measured}
        try:
            usage = shutil.disk_usage(measured)
            entry.update(
                free_bytes=usage.free,
                total_bytes=usage.total,
                writable=os.access(measured, os.W_OK),
            )
        except OSError as exc:
            entry["error"] = "%s: %s" % (type(exc).__name__, exc)
        dirs.append(entry)
    return {"dirs": dirs}


def check_nvidia_driver() -> "Facts":
    facts: Facts = {"proc_version": None}
    try:
        with open("/proc/driver/nvidia/version") as f:
            facts["proc_version"] = f.readline().strip()
    except OSError:
        pass
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001 - a broken pynvml install is itself the finding
        facts["pynvml"] = "missing: %s" % (exc,)
        return facts
    facts["pynvml"] = "ok"

    def text(value: "Union[bytes, str]") -> str:
        return value.decode("ascii", "replace") if isinstance(value, bytes) else value

    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError and its kin: the reason is the finding
        facts["nvml_error"] = str(exc) or type(exc).__name__
        return facts
    try:
        facts["driver"] = text(pynvml.nvmlSystemGetDriverVersion())
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            facts["driver_cuda"] = "%d.%d" % (cuda // 1000, (cuda % 1000) // 10)
        except Exception:  # noqa: BLE001 - older drivers lack the call: unknown
            facts["driver_cuda"] = None
        gpus: list[Facts] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpu: Facts = {
                "index": i,
                "name": text(pynvml.nvmlDeviceGetName(handle)),
                "uuid": text(pynvml.nvmlDeviceGetUUID(handle)),
            }
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                gpu.update(memory_total=int(mem.total), memory_used=int(mem.used))
            except Exception as exc:  # noqa: BLE001 - NVMLError: recorded for this GPU
                gpu["memory_error"] = str(exc)
            gpus.append(gpu)
        facts["gpus"] = gpus
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - best effort: the facts are read
            pass
    return facts


def _capture_warnings(fn: "Callable[[], _T]") -> "tuple[_T, list[str]]":
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message)[:300] for w in caught]


def check_torch() -> "Facts":
    facts: Facts = {"metadata_version": _version_of("torch")}
    if facts["metadata_version"] is None:
        facts["installed"] = False
        return facts
    facts["installed"] = True
    t0 = time.monotonic()
    try:
        import importlib

        torch, warns = _capture_warnings(lambda: importlib.import_module("torch"))
    except Exception as exc:  # noqa: BLE001 - whatever torch's import raises is the finding
        facts["import_error"] = "%s: %s" % (type(exc).__name__, exc)
        facts["import_s"] = round(time.monotonic() - t0, 3)
        return facts
    facts["import_s"] = round(time.monotonic() - t0, 3)
    facts["import_warnings"] = warns
    _STATE["torch"] = torch
    facts["version"] = getattr(torch, "__version__", None)
    facts["file"] = getattr(torch, "__file__", None)
    version = getattr(torch, "version", None)
    facts["cuda"] = getattr(version, "cuda", None)
    facts["hip"] = getattr(version, "hip", None)
    return facts


def _torch_or_skip() -> "tuple[Any, Optional[Facts]]":
    torch = _STATE.get("torch")
    if torch is None:
        return None, {"skipped": "torch was not imported in this process"}
    return torch, None


def check_torch_cuda() -> "Facts":
    torch, skipped = _torch_or_skip()
    if skipped:
        return skipped
    facts: Facts = {"built_cuda": torch.version.cuda}
    available, warns = _capture_warnings(torch.cuda.is_available)
    facts["is_available"] = bool(available)
    facts["init_warnings"] = warns  # is_available() hides the init error in a warning
    facts["device_count"] = torch.cuda.device_count() if available else 0
    try:
        facts["arch_list"] = torch.cuda.get_arch_list()
    except Exception:  # noqa: BLE001 - old or broken torch builds: unknown
        facts["arch_list"] = []
    devices: list[Facts] = []
    for i in range(facts["device_count"]):
        props = torch.cuda.get_device_properties(i)
        dev: Facts = {
            "index": i,
            "name": props.name,
            "capability": "%d.%d" % (props.major, props.minor),
            "total_memory": int(props.total_memory),
        }
        try:
            free, _total = torch.cuda.mem_get_info(i)
            dev["free_memory"] = int(free)
        except Exception as exc:  # noqa: BLE001 - CUDA errors are recorded per device
            dev["memory_error"] = "%s: %s" % (type(exc).__name__, exc)
        devices.append(dev)
    facts["devices"] = devices
    try:
        facts["cudnn"] = torch.backends.cudnn.version() if available else None
    except Exception:  # noqa: BLE001 - a broken cuDNN reads as unknown
        facts["cudnn"] = None
    return facts


def check_torch_tensor() -> "Facts":
    torch, skipped = _torch_or_skip()
    if skipped:
        return skipped
    names = ["cpu"]
    if torch.cuda.is_available():
        names += ["cuda:%d" % i for i in range(torch.cuda.device_count())]
    results: list[Facts] = []
    for name in names:
        t0 = time.monotonic()
        entry: Facts = {"device": name}
        try:
            x = torch.ones(4, device=name) * 2
            value = float(x.sum().item())  # .item() synchronises the device
            entry["ok"] = value == 8.0
            if not entry["ok"]:
                entry["error"] = "ones(4)*2 summed to %r, expected 8" % value
        except Exception as exc:  # noqa: BLE001 - any CUDA failure is the finding
            entry["ok"] = False
            entry["error"] = ("%s: %s" % (type(exc).__name__, exc))[:500]
        entry["seconds"] = round(time.monotonic() - t0, 3)
        results.append(entry)
    return {"devices": results}


CHECKS = {
    "python": check_python,
    "platform": check_platform,
    "encoding": check_encoding,
    "stdout_buffering": check_stdout_buffering,
    "network_config": check_network_config,
    "packages": check_packages,
    "disk": check_disk,
    "nvidia_driver": check_nvidia_driver,
    "torch": check_torch,
    "torch_cuda": check_torch_cuda,
    "torch_tensor": check_torch_tensor,
}


def _parse_args(argv: "list[str]") -> "tuple[list[str], Optional[str], Optional[float]]":
    stack_file: Optional[str]  # declarations only: a bare local annotation does not run
    deadline: Optional[float]
    checks, stack_file, deadline = list(CHECKS), None, None
    i = 0
    while i < len(argv):
        if argv[i] == "--checks":
            checks = [c for c in argv[i + 1].split(",") if c]
        elif argv[i] == "--stack-file":
            stack_file = argv[i + 1]
        elif argv[i] == "--deadline":
            deadline = float(argv[i + 1])
        elif argv[i] == "--packages":
            PACKAGES[:] = [p for p in argv[i + 1].split(",") if p]
        else:
            raise SystemExit("doctor_probe: unknown argument %r" % argv[i])
        i += 2
    return checks, stack_file, deadline


def _stacks_text(current: int, current_frame: "Optional[FrameType]") -> str:
    """Every thread's Python stack in faulthandler's format, the interrupted one last as
    "Current thread" (from the frame the signal interrupted, not the handler's own)."""
    frames = sys._current_frames()
    # None when the signal found no Python frame running; the walk below stops at None.
    frames[current] = current_frame  # type: ignore[assignment]  # see above
    order = [ident for ident in frames if ident != current][:99] + [current]
    parts = []
    frame: Optional[FrameType]  # a declaration only: it does not run
    for ident in order:
        lines = [
            "%s 0x%016x (most recent call first):"
            % ("Current thread" if ident == current else "Thread", ident)
        ]
        frame, depth = frames[ident], 0
        while frame is not None:
            if depth >= 100:
                lines.append("  ...")
                break
            lines.append(
                '  File "%s", line %s in %s'
                % (
                    frame.f_code.co_filename,
                    "???" if frame.f_lineno is None else frame.f_lineno,
                    frame.f_code.co_name,
                )
            )
            frame, depth = frame.f_back, depth + 1
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def _register_dumps(stack_out: "TextIO") -> None:
    """SIGUSR1: a Python-level handler, not faulthandler.register(all_threads=True), whose
    dump in a C signal handler reads the frames of threads that keep running Python and can
    die of SIGSEGV (CPython gh-116008). It runs on the main thread
    between bytecodes, with the GIL: nothing moves while it reads. SIGUSR2: faulthandler's
    C handler for the thread it lands on (the main one); the doctor sends it only when the
    SIGUSR1 dump did not come, that is when no Python runs, so nothing moves either."""
    import faulthandler
    import signal
    import threading

    fd = stack_out.fileno()

    def dump(signum: int, frame: "Optional[FrameType]") -> None:
        try:
            data = _stacks_text(threading.get_ident(), frame).encode("ascii", "backslashreplace")
            while data:
                data = data[os.write(fd, data) :]
        except BaseException:  # noqa: BLE001 - never raise into the check we interrupted
            pass

    signal.signal(signal.SIGUSR1, dump)
    faulthandler.register(signal.SIGUSR2, file=stack_out, all_threads=False)


def main(argv: "list[str]") -> int:
    checks, stack_file, deadline = _parse_args(argv)
    import faulthandler
    import signal

    stack_out = open(stack_file, "w") if stack_file else None
    # Without SIGUSR1 (Windows) a watchdog thread in C dumps the stack just before the deadline.
    self_dump = stack_out is not None and deadline and not hasattr(signal, "SIGUSR1")
    if stack_out is not None and hasattr(signal, "SIGUSR1"):
        _register_dumps(stack_out)
    out_fd = os.dup(1)
    os.dup2(2, 1)

    def emit(obj: "dict[str, object]") -> None:
        data = (json.dumps(obj, ensure_ascii=True, default=repr) + "\n").encode("ascii")
        while data:
            data = data[os.write(out_fd, data) :]

    emit({"event": "ready", "pid": os.getpid()})
    for name in checks:
        emit({"event": "begin", "check": name})
        t0 = time.monotonic()
        facts: Facts  # declarations only: a bare local annotation does not run
        error: Optional[str]
        facts, error = {}, None
        if self_dump:
            # self_dump is true only when stack_out and deadline are set (mypy cannot see that)
            faulthandler.dump_traceback_later(deadline * 0.9, file=stack_out)  # type: ignore[operator, arg-type]
        try:
            facts = CHECKS[name]()
        except BaseException:  # noqa: BLE001 - SystemExit / KeyboardInterrupt from a check are facts too
            error = traceback.format_exc()[-4000:]
        if self_dump:
            faulthandler.cancel_dump_traceback_later()
        emit(
            {
                "event": "end",
                "check": name,
                "facts": facts,
                "error": error,
                "duration_s": round(time.monotonic() - t0, 3),
            }
        )
    emit({"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
