"""The GPU facts of the evidence: utilisation and memory per NVIDIA device through NVML
(pynvml, from nvidia-ml-py), and whether the job's processes use it; or a note saying why
there are none. pynvml is imported on first use, so a machine without a driver pays nothing
until a snapshot asks.

The one implementation: a Node job's evidence is read here too (bridge/jobserve.py), with the
nvidia-ml-py of the supervisor's Python.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

_gpu_unavailable: Optional[str] = None  # cached: pynvml's answer does not change in a run


def facts(pids: Optional[list[int]] = None) -> dict[str, Any]:
    """GPU utilisation and memory per device via pynvml, or a clear note why there is none."""
    global _gpu_unavailable
    if _gpu_unavailable is not None:
        return {"gpu": None, "gpu_note": _gpu_unavailable}
    try:
        import pynvml  # nvidia-ml-py; imported lazily so a missing driver costs nothing
    except ImportError:
        # nvidia-ml-py is optional: a GPU may be there all the same; say what would read it.
        _gpu_unavailable = (
            f"GPU not read: nvidia-ml-py is not installed for {sys.executable} (run "
            f"`{sys.executable} -m pip install nvidia-ml-py` to see utilisation and memory)"
        )
        return {"gpu": None, "gpu_note": _gpu_unavailable}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ImportError...
        _gpu_unavailable = f"no NVIDIA GPU (pynvml: {type(exc).__name__}: {exc})"
        return {"gpu": None, "gpu_note": _gpu_unavailable}
    devices = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            entry = {
                "index": i,
                "util_percent": util.gpu,
                "mem_used": mem.used,
                "mem_total": mem.total,
            }
            try:
                name = pynvml.nvmlDeviceGetName(h)
                entry["name"] = name.decode() if isinstance(name, bytes) else name
            except Exception:  # noqa: BLE001 - the name is optional in the snapshot
                pass
            if pids is not None:
                try:
                    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                    entry["used_by_job"] = any(p.pid in pids for p in procs)
                except Exception:  # noqa: BLE001 - not supported on every GPU: used_by_job stays unknown
                    pass
            devices.append(entry)
    except Exception as exc:  # noqa: BLE001 - NVML failed mid-read: keep what was read, say why
        return {"gpu": devices or None, "gpu_note": f"pynvml failed: {type(exc).__name__}: {exc}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - best effort: the readings are taken
            pass
    if not devices:
        return {"gpu": None, "gpu_note": "no NVIDIA GPU (pynvml: 0 devices)"}
    return {"gpu": devices, "gpu_note": None}
