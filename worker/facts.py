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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, Optional

from worker.config import optional_int

PACKAGES = ("torch", "numpy", "transformers", "datasets", "accelerate", "peft",
            "safetensors", "diffusers", "huggingface_hub", "tqdm")
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
            "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HF_ENDPOINT",
            "HF_HUB_OFFLINE")
_USERINFO = re.compile(r"(?<=//)[^/@\s]*@")


def redact(value: str) -> str:
    """Hide credentials in proxy URLs (http://user:secret@proxy:3128): the hello ends up
    in reports and logs."""
    return _USERINFO.sub("***@", value)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def package_versions(paths: Iterable[str] = ()) -> Dict[str, Optional[str]]:
    """Versions from the `<name>-<version>.dist-info` / `.egg-info` folder names on
    sys.path (first one wins, as for imports): one listing per folder instead of a full
    importlib.metadata search per package (20 ms here, mostly for packages that are absent)."""
    wanted = {_normalise(p): p for p in PACKAGES}
    out: Dict[str, Optional[str]] = dict.fromkeys(PACKAGES)
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


def hello(heartbeat_s: float, version: str, protocol: str) -> Dict[str, Any]:
    env = os.environ
    uname = os.uname()
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": list(getattr(sys, "orig_argv", None) or sys.argv),
        "cwd": _cwd(),
        "python": {"version": sys.version.split()[0], "executable": sys.executable,
                   "implementation": sys.implementation.name},
        "platform": f"{uname.sysname}-{uname.release}-{uname.machine}",
        "host": uname.nodename,
        "rank": optional_int(env, "RANK"),
        "local_rank": optional_int(env, "LOCAL_RANK"),
        "world_size": optional_int(env, "WORLD_SIZE"),
        "env": {name: (redact(env[name]) if name in env else None) for name in ENV_VARS},
        "packages": package_versions(),
        "proto": protocol,
        "worker": version,
        "heartbeat_s": heartbeat_s,
    }


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the directory was removed under us
        return ""


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def resources() -> Dict[str, Any]:
    """rss_bytes, cpu_s (user + system) and threads (native, all of them)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # After the command name: field 3 is fields[0]; utime=14, stime=15, threads=20, rss=24.
        return {"rss_bytes": int(fields[21]) * _PAGE,
                "cpu_s": (int(fields[11]) + int(fields[12])) / _TICKS,
                "threads": int(fields[17])}
    except (OSError, IndexError, ValueError):
        times = os.times()
        return {"cpu_s": times.user + times.system, "threads": threading.active_count()}
