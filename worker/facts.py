"""What the worker tells the client about its process: hello facts and resource samples.

Package versions come from installed metadata, never from importing the package (importing
torch takes seconds and may itself hang in CUDA init, which is what we want to observe).
Resources come from /proc/self/stat (one read); psutil is not needed for them.
"""

from __future__ import annotations

import os
import re
import sys
import threading

from trainbridge.protocol.constants import TRAINING_PACKAGES
from trainbridge.worker.config import optional_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Optional

PACKAGES = (*TRAINING_PACKAGES, "tqdm")  # the hello's `packages`
ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
)
_USERINFO = re.compile(r"(?<=//)[^/@\s]*@")


def redact(value: str) -> str:
    """Hide credentials in proxy URLs (http://user:secret@proxy:3128): the hello ends up
    in reports and logs."""
    return _USERINFO.sub("***@", value)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def package_versions(paths: Iterable[str] = ()) -> dict[str, Optional[str]]:
    """Versions from the `<name>-<version>.dist-info` / `.egg-info` folder names on
    sys.path (first one wins, as for imports): one listing per folder instead of a full
    importlib.metadata search per package (20 ms here, mostly for packages that are absent)."""
    wanted = {_normalise(p): p for p in PACKAGES}
    out: dict[str, Optional[str]] = dict.fromkeys(PACKAGES)
    found = set()
    for entry in paths or sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # not a folder (a zip, say) or gone
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            parts = name.rsplit(".", 1)[0].split("-")
            key = _normalise(parts[0])
            if key in wanted and key not in found and len(parts) >= 2:
                found.add(key)
                out[wanted[key]] = parts[1]
    return out


def hello(heartbeat_s: float, version: str, protocol: str) -> dict[str, Any]:
    env = os.environ
    uname = os.uname()
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": list(getattr(sys, "orig_argv", None) or sys.argv),
        "cwd": _cwd(),
        "python": {
            "version": sys.version.split()[0],
            "executable": sys.executable,
            "implementation": sys.implementation.name,
            "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        },
        "platform": f"{uname.sysname}-{uname.release}-{uname.machine}",
        "host": uname.nodename,
        # This boot's id: a client with the same one shares this process's monotonic clock,
        # so an envelope's `mt` says how long a message waited, whatever the wall clock did.
        "boot": _or_none(boot_id),
        "rank": optional_int(env, "RANK"),
        "local_rank": optional_int(env, "LOCAL_RANK"),
        "world_size": optional_int(env, "WORLD_SIZE"),
        # Where torchrun reads this rank's error (worker/elastic.py), or nil.
        "error_file": env.get("TORCHELASTIC_ERROR_FILE") or None,
        "slurm": slurm_facts(env),
        "env": {name: (redact(env[name]) if name in env else None) for name in ENV_VARS},
        "packages": package_versions(),
        "cpu_count": os.cpu_count(),
        # Nice to know, never worth a hello: a failure here leaves the fact out (nil).
        "encoding": _or_none(encodings),
        "stdout": _or_none(lambda: stdout_facts(env)),
        "nvidia": _or_none(nvidia_driver),
        "proto": protocol,
        "worker": version,
        "heartbeat_s": heartbeat_s,
    }


def boot_id() -> Optional[str]:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
        return f.read().strip() or None


def slurm_facts(env: Any) -> Optional[dict[str, Any]]:
    """Where Slurm runs this process (a job's node by Slurm's name, since hostnames can be
    alike; its task number in its step), or None outside Slurm. Facts only: the client
    decides what they mean (bridge/slurm.py hello_facts)."""
    if not env.get("SLURM_JOB_ID"):
        return None
    return {
        "job_id": env.get("SLURM_JOB_ID"),
        "node": env.get("SLURMD_NODENAME") or None,
        "step": env.get("SLURM_STEP_ID") or None,
        "procid": optional_int(env, "SLURM_PROCID"),
        "ntasks": optional_int(env, "SLURM_NTASKS"),
        # Started by Slurm itself (a task of a step, or the batch script's command): its
        # children inherit the variables but are not tasks.
        "task": _parent_comm() == "slurmstepd",
    }


def _parent_comm() -> Optional[str]:
    try:
        with open(f"/proc/{os.getppid()}/comm", encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


# --- cheap environment facts: no import of torch or pynvml, no subprocess, no locale module
# (0.8 ms to import; _locale is 0.05 ms). Together well under a millisecond.
def _stream(stream: Any) -> Any:
    return stream if stream is not None and hasattr(stream, "encoding") else None


def encodings() -> dict[str, Any]:
    """What text becomes on the way out. `locale` is the locale's own encoding (a GBK
    console says gbk here even when UTF-8 mode, which the clients turn on, hides it)."""
    out = sys.__stdout__ if _stream(sys.__stdout__) else None
    err = sys.__stderr__ if _stream(sys.__stderr__) else None
    utf8_mode = bool(getattr(sys.flags, "utf8_mode", 0))
    locale_encoding = None
    try:
        import _locale

        getencoding = getattr(_locale, "getencoding", None)  # 3.11+
        locale_encoding = getencoding() if getencoding else _locale.nl_langinfo(_locale.CODESET)
    except Exception:  # noqa: BLE001 - no _locale (other platforms): unknown
        pass
    return {
        "stdout": out.encoding if out is not None else None,
        "stderr": err.encoding if err is not None else None,
        # locale.getpreferredencoding(False) without importing locale: what open() uses.
        "preferred": "utf-8" if utf8_mode else locale_encoding,
        "locale": locale_encoding,
        "utf8_mode": utf8_mode,
    }


def stdout_facts(env: Any) -> dict[str, Any]:
    """Whether print() output reaches a pipe reader line by line or in 8 KiB blocks. The
    interpreter's own stdout (sys.__stdout__): what the process started with."""
    stream = _stream(sys.__stdout__)
    unbuffered_env = bool(env.get("PYTHONUNBUFFERED"))
    if stream is None:
        return {
            "isatty": None,
            "line_buffering": None,
            "write_through": None,
            "pythonunbuffered": unbuffered_env,
            "buffered": None,
        }
    try:
        isatty = bool(stream.isatty())
    except Exception:  # noqa: BLE001 - a closed or replaced stream
        isatty = None
    line_buffering = getattr(stream, "line_buffering", None)
    write_through = getattr(stream, "write_through", None)
    # -u and PYTHONUNBUFFERED make the text layer write through (sys.flags has no flag for it).
    buffered = not (isatty or line_buffering or write_through)
    return {
        "isatty": isatty,
        "line_buffering": line_buffering,
        "write_through": write_through,
        "pythonunbuffered": unbuffered_env,
        "buffered": buffered,
    }


NVIDIA_VERSION_FILE = "/proc/driver/nvidia/version"
_DRIVER_VERSION = re.compile(r"Kernel Module(?: for [A-Za-z0-9_]+)?\s+([0-9][0-9.]*)")


def nvidia_driver(path: str = NVIDIA_VERSION_FILE) -> Optional[dict[str, Any]]:
    """The loaded NVIDIA kernel driver (its version file's first line), or None: no driver,
    so no usable GPU whatever torch was built for."""
    try:
        with open(path, "rb") as f:
            line = f.readline(4096).decode("ascii", "backslashreplace").strip()
    except OSError:
        return None
    match = _DRIVER_VERSION.search(line)
    return {"driver": match.group(1) if match else None, "line": line}


def _or_none(fact: Any) -> Any:
    try:
        return fact()
    except Exception:  # noqa: BLE001 - one unreadable fact is None, the hello still goes
        return None


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the directory was removed under us
        return ""


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def resources() -> dict[str, Any]:
    """rss_bytes, cpu_s (user + system) and threads (native, all of them)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # After the command name: field 3 is fields[0]; utime=14, stime=15, threads=20, rss=24.
        return {
            "rss_bytes": int(fields[21]) * _PAGE,
            "cpu_s": (int(fields[11]) + int(fields[12])) / _TICKS,
            "threads": int(fields[17]),
        }
    except (OSError, IndexError, ValueError):
        times = os.times()
        return {"cpu_s": times.user + times.system, "threads": threading.active_count()}


# Where the main thread is, said with every heartbeat: the innermost frame of
# the script's own code, as "file.py:function". A library's frames (the standard library,
# site-packages, trainbridge itself) are stepped over: a loop spinning in `event.is_set()`
# stays in the script's one function, while a training loop moves through the script's own
# functions (its model's forward, its batch function). The supervisor's stall look reads the
# places (bridge/look.py); the worker only names them.
_LIBRARY_MARKS = ("/site-packages/", "/dist-packages/")
# filename -> is a library's. Bounded: code made at run time can name a new "file" each time
# (torch.fx's "<eval_with_key>.N", templates), and a heartbeat must not grow with the run.
LIBRARY_FILES_KEPT = 2048
_library_files: dict[str, bool] = {}


def children() -> list[dict[str, Any]]:
    """This process's own children as the kernel sees them, for the reply to dump_stacks:
    [{pid, state, wchan, name}], state the one-letter /proc code (T: stopped), name its comm
    (pt_data_worker: a DataLoader worker). A client on another host cannot read this host's
    /proc (nor its pids, in another PID namespace): a launcher's answer says whether one of
    its ranks is stopped, a rank's whether its DataLoader workers all wait on the same
    thing. [] where there is no /proc (not Linux) or no child."""
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as f:
                pids += [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []
    out = []
    for pid in sorted(set(pids))[:64]:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/wchan", encoding="ascii", errors="replace") as f:
                wchan = f.read().strip()
            with open(f"/proc/{pid}/comm", encoding="ascii", errors="backslashreplace") as f:
                name = f.read().strip()
        except (OSError, IndexError):
            continue  # gone since the listing
        wchan_ = wchan if wchan not in ("", "0") else None
        out.append({"pid": pid, "state": state, "wchan": wchan_, "name": name or None})
    return out


def _library_roots() -> tuple[str, ...]:
    import sysconfig

    roots = {os.path.join(os.path.dirname(os.path.abspath(__file__)), "")}  # the worker's own
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.join(os.path.realpath(path), ""))
            roots.add(os.path.join(path, ""))
    return tuple(sorted(roots))


_ROOTS: list[tuple[str, ...]] = []


def is_library_file(filename: str) -> bool:
    known = _library_files.get(filename)
    if known is not None:
        return known
    if not _ROOTS:
        _ROOTS.append(_library_roots())
    verdict = (
        filename.startswith("<frozen")
        or any(mark in filename for mark in _LIBRARY_MARKS)
        or filename.startswith(_ROOTS[0])
    )
    if len(_library_files) >= LIBRARY_FILES_KEPT:
        _library_files.clear()  # rare; the files a stack passes through are found again
    _library_files[filename] = verdict
    return verdict


def where(frame: Any) -> Optional[str]:
    """ "file.py:function" of the innermost frame of the script's own code in `frame`'s stack
    (its innermost frame when all of it is a library's); None without a frame."""
    first = None
    while frame is not None:
        code = frame.f_code
        if first is None:
            first = code
        if not is_library_file(code.co_filename):
            break
        frame = frame.f_back
    code = frame.f_code if frame is not None else first
    if code is None:
        return None
    name = getattr(code, "co_qualname", code.co_name)
    return f"{os.path.basename(code.co_filename)}:{name}"


def main_where() -> Optional[str]:
    main = threading.main_thread().ident
    return where(sys._current_frames().get(main)) if main is not None else None
