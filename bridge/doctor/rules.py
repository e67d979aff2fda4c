"""Verdict rules of `trainbridge doctor`: raw facts in, (verdict, detail, fix) out.

Pure: no processes, no sockets, no environment reads. Each rule takes the facts a check
gathered (see bridge/doctor/probe.py and bridge/doctor/net.py) and says what they mean for a
training job. docs/DOCTOR.md lists the verdicts; tests/doctor/test_doctor_rules.py holds the
tables.

Its length (about 680 lines): one small pure rule per check (about twenty), each with its
own sentence of advice, and tests/doctor/test_doctor_rules.py mirrors it table by table;
they share the verdict type and the few helpers at the top.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

OK, WARN, FAIL, HUNG, SKIP = "ok", "warn", "fail", "hung", "skip"
VERDICTS = (OK, WARN, FAIL, HUNG, SKIP)
# A job cannot be expected to train when one of these is present: doctor exits 1.
BLOCKING = frozenset((FAIL, HUNG))

GIB = 1024**3
DISK_FAIL_BYTES = 1 * GIB  # a checkpoint or a shard download will not fit
DISK_WARN_BYTES = 10 * GIB  # one large model's weights


@dataclass(frozen=True)
class Verdict:
    verdict: str
    detail: str
    fix: Optional[str] = None


def exit_code(verdicts: Iterable[str]) -> int:
    """0 when nothing would stop a training job, 1 otherwise."""
    return 1 if any(v in BLOCKING for v in verdicts) else 0


# ---------------------------------------------------------------- versions and tables


def version_tuple(text: Optional[str]) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); '2.4.0+cu121' -> (2, 4, 0); junk parts stop the parse."""
    out = []
    for part in (text or "").split("+")[0].split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(out)


# Minimum driver per CUDA toolkit major.minor (the GA driver of that toolkit), from NVIDIA's
# CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions".
MIN_DRIVER_LINUX = {
    "9.0": "384.81",
    "9.1": "390.46",
    "9.2": "396.26",
    "10.0": "410.48",
    "10.1": "418.39",
    "10.2": "440.33",
    "11.0": "450.36.06",
    "11.1": "455.23",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}
MIN_DRIVER_WINDOWS = {
    "11.0": "451.22",
    "11.1": "456.38",
    "11.2": "461.09",
    "11.3": "465.89",
    "11.4": "471.11",
    "11.5": "496.13",
    "11.6": "511.23",
    "11.7": "516.01",
    "11.8": "522.06",
    "12.0": "527.41",
    "12.1": "531.14",
    "12.2": "536.25",
    "12.3": "545.84",
    "12.4": "551.61",
    "12.5": "555.85",
    "12.6": "560.76",
    "12.8": "570.65",
    "12.9": "576.02",
    "13.0": "580.88",
}
# Since CUDA 11 a build for X.y runs on any driver of the X.0 family ("minor version
# compatibility"), without PTX JIT for newer GPUs: below this floor it cannot run at all.
MINOR_COMPAT_FLOOR_LINUX = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
MINOR_COMPAT_FLOOR_WINDOWS = {11: "452.39", 12: "528.33", 13: "580.88"}


def _major_minor(cuda: str) -> str:
    parts = version_tuple(cuda)
    return "%d.%d" % (parts[0], parts[1] if len(parts) > 1 else 0)


def min_driver_for_cuda(cuda: str, system: str = "Linux") -> Optional[str]:
    table = MIN_DRIVER_WINDOWS if system == "Windows" else MIN_DRIVER_LINUX
    return table.get(_major_minor(cuda))


def cuda_driver_compat(
    torch_cuda: Optional[str],
    driver: Optional[str],
    driver_cuda: Optional[str] = None,
    system: str = "Linux",
) -> Verdict:
    """Can the installed NVIDIA driver run a torch built for CUDA `torch_cuda`?

    driver_cuda is the newest CUDA version the driver says it supports (NVML); when known it
    decides, else the driver version is compared with the release-notes table."""
    if not torch_cuda:
        return Verdict(SKIP, "torch is not a CUDA build: nothing to match against the driver")
    if not driver:
        return Verdict(
            SKIP, "no NVIDIA driver found: torch (CUDA %s) cannot use a GPU here" % torch_cuda
        )
    need = min_driver_for_cuda(torch_cuda, system)
    want = _major_minor(torch_cuda)
    major = version_tuple(torch_cuda)[0]
    floors = MINOR_COMPAT_FLOOR_WINDOWS if system == "Windows" else MINOR_COMPAT_FLOOR_LINUX
    floor = floors.get(major)
    upgrade = (
        "upgrade the NVIDIA driver to >= %s, or install a torch build for an older CUDA "
        "(e.g. the cu118 or cu121 wheels)" % (need or floor or "the one for CUDA " + want)
    )
    if driver_cuda:
        if version_tuple(driver_cuda) >= version_tuple(want):
            return Verdict(
                OK, "driver %s supports CUDA %s; torch needs CUDA %s" % (driver, driver_cuda, want)
            )
        if floor and version_tuple(driver_cuda)[:1] == (major,):
            return Verdict(
                WARN,
                "driver %s supports CUDA %s only; torch CUDA %s runs through minor-version "
                "compatibility (no PTX JIT: a GPU newer than the build fails)"
                % (driver, driver_cuda, want),
                upgrade,
            )
        return Verdict(
            FAIL,
            "driver %s supports CUDA up to %s, too old for torch built with CUDA %s"
            % (driver, driver_cuda, want),
            upgrade,
        )
    have = version_tuple(driver)
    if need and have >= version_tuple(need):
        return Verdict(OK, "driver %s >= %s, the minimum for CUDA %s" % (driver, need, want))
    if floor and have >= version_tuple(floor):
        return Verdict(
            WARN,
            "driver %s is older than %s (CUDA %s) but >= %s: runs through minor-version "
            "compatibility (no PTX JIT)" % (driver, need or "?", want, floor),
            upgrade,
        )
    if need or floor:
        return Verdict(
            FAIL,
            "driver %s is too old for torch built with CUDA %s (needs >= %s)"
            % (driver, want, need or floor),
            upgrade,
        )
    return Verdict(
        WARN, "CUDA %s is not in doctor's driver table; driver %s not verified" % (want, driver)
    )


# ---------------------------------------------------------------- interpreter and console


def python_verdict(facts: Mapping[str, Any]) -> Verdict:
    info = tuple(facts.get("version_info") or ())
    where = "%s %s (%s-bit) at %s%s" % (
        facts.get("implementation", "Python"),
        facts.get("version"),
        facts.get("bits"),
        facts.get("executable"),
        ", venv" if facts.get("in_venv") else "",
    )
    if facts.get("bits") == 32:
        return Verdict(FAIL, where + ": torch has no 32-bit builds", "install a 64-bit Python")
    if info < (3, 8):
        return Verdict(
            FAIL,
            where + ": too old for current torch and trainbridge",
            "use Python 3.9 or newer for the training venv",
        )
    if info < (3, 9):
        return Verdict(
            WARN,
            where + ": end of life; torch >= 2.5 and trainbridge need 3.9+",
            "create the training venv with Python 3.10 or newer",
        )
    return Verdict(OK, where)


def platform_verdict(facts: Mapping[str, Any]) -> Verdict:
    extra = [
        x
        for x in (
            facts.get("libc"),
            "WSL" if facts.get("wsl") else None,
            "container" if facts.get("container") else None,
        )
        if x
    ]
    detail = "%s %s %s, %s CPUs" % (
        facts.get("system"),
        facts.get("release"),
        facts.get("machine"),
        facts.get("cpu_count"),
    )
    return Verdict(OK, detail + (" (%s)" % ", ".join(extra) if extra else ""))


def is_utf8(encoding: Optional[str]) -> bool:
    if not encoding:
        return False
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


ENCODING_FIX = (
    "set PYTHONUTF8=1 (or at least PYTHONIOENCODING=utf-8) in the environment that launches "
    "training; on a Windows console also run `chcp 65001`"
)


def encoding_verdict(facts: Mapping[str, Any]) -> Verdict:
    stdout, preferred = facts.get("stdout"), facts.get("preferred")
    problems = []
    if not is_utf8(stdout):
        problems.append(
            "stdout encoding is %s: non-ASCII log text (paths, captions, Chinese messages) is "
            "garbled or raises UnicodeEncodeError" % stdout
        )
    if not is_utf8(preferred):
        problems.append(
            "open() without encoding= uses %s: UTF-8 json/caption files fail to read" % preferred
        )
    locale_ctype = facts.get("locale_ctype")
    if problems:
        return Verdict(WARN, "; ".join(problems) + " (locale %s)" % locale_ctype, ENCODING_FIX)
    return Verdict(
        OK,
        "UTF-8 (stdout %s, files %s, locale %s%s)"
        % (stdout, preferred, locale_ctype, ", UTF-8 mode" if facts.get("utf8_mode") else ""),
    )


def buffering_verdict(facts: Mapping[str, Any]) -> Verdict:
    if not facts.get("present", True):
        return Verdict(
            WARN,
            "the interpreter has no stdout (pythonw?): print() output is lost",
            "run training with python, not pythonw",
        )
    if facts.get("write_through") or facts.get("line_buffering"):
        how = "unbuffered" if facts.get("write_through") else "line-buffered"
        why = (
            " (PYTHONUNBUFFERED=%s)" % facts["PYTHONUNBUFFERED"]
            if facts.get("PYTHONUNBUFFERED")
            else ""
        )
        return Verdict(OK, "stdout to a pipe is %s%s" % (how, why))
    if facts.get("isatty"):
        return Verdict(OK, "stdout is a terminal (line-buffered)")
    return Verdict(
        WARN,
        "stdout to a pipe (as under a GUI or scheduler) is block-buffered: log lines arrive "
        "in 8 KiB bursts and the last ones are lost if the job crashes",
        "set PYTHONUNBUFFERED=1 in the job's environment (or run python -u)",
    )


# ---------------------------------------------------------------- packages and disk


def packages_verdict(facts: Mapping[str, Any]) -> Verdict:
    versions = facts.get("versions") or {}
    have = ", ".join("%s %s" % (k, v) for k, v in versions.items() if v)
    missing = ", ".join(k for k, v in versions.items() if not v)
    shown = (have or "none of the ML packages") + ("; not installed: " + missing if missing else "")
    torch, numpy = versions.get("torch"), versions.get("numpy")
    worker_missing = [
        name for name in ("pyzmq", "msgpack") if name in versions and not versions[name]
    ]
    if worker_missing:
        return Verdict(
            WARN,
            shown + ": the trainbridge worker needs %s here; without %s a job still runs "
            "supervised, but with no hello, stages or progress (only the exit and the output)"
            % (" and ".join(worker_missing), "them" if len(worker_missing) > 1 else "it"),
            "pip install %s in this environment (the training venv)" % " ".join(worker_missing),
        )
    if torch and not numpy:
        return Verdict(
            WARN,
            shown + ": numpy is missing (torch.from_numpy, .numpy() and most data pipelines fail)",
            "pip install numpy in this environment",
        )
    if torch and numpy and version_tuple(numpy) >= (2,) and version_tuple(torch) < (2, 3):
        return Verdict(
            WARN,
            shown + ": numpy 2 with torch < 2.3 (built against numpy 1) breaks the numpy bridge",
            "pip install 'numpy<2' or upgrade torch",
        )
    return Verdict(OK, shown)


def _gib(n: float) -> str:
    return "%.1f GiB" % (n / GIB)


def disk_verdict(facts: Mapping[str, Any]) -> Verdict:
    dirs = facts.get("dirs") or []
    parts, worst, fix = [], OK, None
    for d in dirs:
        if "error" in d:
            parts.append("%s %s: %s" % (d["role"], d["path"], d["error"]))
            worst = FAIL if worst == FAIL else WARN
            continue
        parts.append("%s %s free" % (d["role"], _gib(d["free_bytes"])))
        if d["free_bytes"] < DISK_FAIL_BYTES:
            worst, fix = (
                FAIL,
                "free space on %s (%s), or point the cache elsewhere (HF_HOME, TORCH_HOME)"
                % (d["measured"], d["role"]),
            )
        elif d["free_bytes"] < DISK_WARN_BYTES and worst != FAIL:
            worst, fix = (
                WARN,
                "free space on %s (%s): a large model or checkpoints may not fit"
                % (d["measured"], d["role"]),
            )
    return Verdict(worst, ", ".join(parts) or "no directory measured", fix)


# ---------------------------------------------------------------- proxies and HF settings

PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
TRUTHY = ("1", "true", "yes", "on")


def is_truthy(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in TRUTHY


def network_config_verdict(facts: Mapping[str, Any]) -> Verdict:
    env = facts.get("env") or {}
    warns, notes = [], []
    for var in PROXY_VARS:
        value = env.get(var)
        if value is None:
            continue
        notes.append("%s=%s" % (var, value))
        if value and "://" not in value:
            warns.append("%s=%s has no scheme: requests/httpx reject or misread it" % (var, value))
    for upper in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        lo, up = env.get(upper.lower()), env.get(upper)
        if lo is not None and up is not None and lo != up:
            warns.append("%s and %s differ: libraries pick different ones" % (upper, upper.lower()))
    endpoint = env.get("HF_ENDPOINT")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        warns.append("HF_ENDPOINT=%s is not an http(s) URL" % endpoint)
    notes.append("HF_ENDPOINT=%s" % (endpoint or "https://huggingface.co (default)"))
    if is_truthy(env.get("HF_HUB_OFFLINE")) or is_truthy(env.get("TRANSFORMERS_OFFLINE")):
        notes.append("hub offline mode (only cached models load)")
    if warns:
        return Verdict(
            WARN,
            "; ".join(warns),
            "write proxies as scheme://host:port (e.g. http://127.0.0.1:7890) "
            "and set the upper- and lower-case variables alike",
        )
    return Verdict(
        OK, ("no proxy; " if not any(v in env for v in PROXY_VARS) else "") + "; ".join(notes)
    )


# ---------------------------------------------------------------- GPUs


def nvidia_verdict(facts: Mapping[str, Any]) -> Verdict:
    if facts.get("gpus"):
        gpus = facts["gpus"]
        names = ", ".join(
            "%d: %s%s"
            % (
                g["index"],
                g["name"],
                " %s" % _gib(g["memory_total"]) if "memory_total" in g else "",
            )
            for g in gpus
        )
        return Verdict(
            OK,
            "driver %s (CUDA %s), %d GPU(s): %s"
            % (facts.get("driver"), facts.get("driver_cuda") or "?", len(gpus), names),
        )
    error = facts.get("nvml_error")
    if error and "not found" not in error.lower():
        fix = (
            "reboot after a driver upgrade (kernel module and user library differ)"
            if "mismatch" in error.lower()
            else "check `nvidia-smi`; reinstall the NVIDIA driver if it fails too"
        )
        return Verdict(FAIL, "NVML could not talk to the driver: %s" % error, fix)
    if facts.get("driver") is not None:
        return Verdict(WARN, "driver %s but no GPU listed" % facts["driver"], "check `nvidia-smi`")
    if facts.get("proc_version"):
        return Verdict(
            WARN,
            "driver loaded (%s) but NVML is unavailable (%s)"
            % (facts["proc_version"], facts.get("pynvml")),
            "pip install nvidia-ml-py to let doctor list GPUs",
        )
    how = error or facts.get("pynvml") or "no driver"
    return Verdict(
        WARN,
        "no NVIDIA driver or GPU found (%s): training runs on CPU" % how,
        "install the NVIDIA driver if this machine should have a GPU",
    )


def parse_visible_devices(value: str, gpus: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """CUDA's reading of CUDA_VISIBLE_DEVICES: entries up to the first invalid one are used.

    Returns (visible indices, first invalid entry or None)."""
    visible: list[int] = []
    for raw in value.split(","):
        entry = raw.strip()
        match = None
        if entry.isdigit():
            match = int(entry) if int(entry) < len(gpus) else None
        elif entry.startswith(("GPU-", "MIG-")):
            found = [g["index"] for g in gpus if str(g.get("uuid", "")).startswith(entry)]
            match = found[0] if len(found) == 1 else None
        if match is None or match in visible:
            return visible, entry
        visible.append(match)
    return visible, None


def visible_devices_verdict(
    value: Optional[str], gpus: Optional[Sequence[Mapping[str, Any]]]
) -> Verdict:
    """Is CUDA_VISIBLE_DEVICES consistent with the GPUs the driver lists? gpus None: unknown."""
    if value is None:
        if gpus is None:
            return Verdict(SKIP, "unset; GPUs unknown")
        return Verdict(
            OK, "unset: all %d GPU(s) visible" % len(gpus) if gpus else "unset (no NVIDIA GPU)"
        )
    if gpus is None:
        return Verdict(
            WARN,
            "CUDA_VISIBLE_DEVICES=%s cannot be checked: the GPUs are unknown" % value,
            "pip install nvidia-ml-py in the training venv so doctor can list them",
        )
    count = len(gpus)
    have = "this machine has %s" % (
        "no NVIDIA GPU" if count == 0 else "%d GPU(s) (0-%d)" % (count, count - 1)
    )
    visible, bad = parse_visible_devices(value, gpus)
    if bad is None:
        return Verdict(OK, "CUDA_VISIBLE_DEVICES=%s: GPU(s) %s visible" % (value, visible))
    hides_all = value.strip() in ("", "-1", "none", "NoDevFiles")
    if hides_all:
        if count == 0:
            return Verdict(OK, "CUDA_VISIBLE_DEVICES=%r hides all GPUs (%s)" % (value, have))
        return Verdict(
            WARN,
            "CUDA_VISIBLE_DEVICES=%r hides all %d GPU(s): training runs on CPU" % (value, count),
            "unset CUDA_VISIBLE_DEVICES or list the GPUs to use",
        )
    left = (
        "only %s stay visible" % visible
        if visible
        else "no GPU is visible: torch falls back to CPU or fails"
    )
    return Verdict(
        FAIL,
        "CUDA_VISIBLE_DEVICES=%s names %r, which does not exist: %s; CUDA stops at the first "
        "invalid entry, so %s" % (value, bad, have, left),
        "set CUDA_VISIBLE_DEVICES to existing indices%s, or unset it"
        % (" (0-%d)" % (count - 1) if count else ""),
    )


# ---------------------------------------------------------------- torch


def torch_verdict(facts: Mapping[str, Any], python: Optional[str] = None) -> Verdict:
    if not facts.get("installed"):
        return Verdict(
            FAIL,
            "torch is not installed in %s" % (python or "the target interpreter"),
            "pip install torch in the training venv (the CUDA build matching your driver, see "
            "pytorch.org), or point --python at the venv that has it",
        )
    if facts.get("import_error"):
        return Verdict(
            FAIL,
            "torch %s is installed but `import torch` fails: %s"
            % (facts.get("metadata_version"), facts["import_error"]),
            "reinstall torch in this venv; a missing libcudart/libcudnn means "
            "the CUDA wheels are incomplete",
        )
    build = (
        "CUDA %s build" % facts["cuda"]
        if facts.get("cuda")
        else ("ROCm %s build" % facts["hip"] if facts.get("hip") else "CPU-only build")
    )
    detail = "torch %s (%s), imported in %.1f s" % (
        facts.get("version"),
        build,
        facts.get("import_s") or 0,
    )
    if facts.get("version") != facts.get("metadata_version"):
        return Verdict(
            WARN,
            detail
            + ", but pip metadata says %s: %s shadows the installed one"
            % (facts.get("metadata_version"), facts.get("file")),
            "remove the stray torch (a torch/ folder in the working directory or a second install)",
        )
    return Verdict(OK, detail)


def arch_supported(capability: str, arch_list: Sequence[str]) -> bool:
    """Does a torch build with arch_list (['sm_80', 'compute_90'...]) run on a GPU
    of capability 'M.m'?"""
    if not arch_list:
        return True  # unknown: do not accuse
    major, minor = (version_tuple(capability) + (0, 0))[:2]
    for arch in arch_list:
        kind, _, num = arch.partition("_")
        digits = "".join(ch for ch in num if ch.isdigit())
        if not digits:
            continue
        amaj, amin = int(digits[:-1] or 0), int(digits[-1])
        if kind == "sm" and amaj == major and amin <= minor:
            return True  # same-major cubins run on later minors
        if kind == "compute" and (amaj, amin) <= (major, minor):
            return True  # PTX is JIT-compiled for newer GPUs
    return False


def torch_cuda_verdict(
    facts: Mapping[str, Any],
    gpu_count: Optional[int] = None,
    expected_visible: Optional[int] = None,
) -> Verdict:
    if facts.get("skipped"):
        return Verdict(SKIP, facts["skipped"])
    if not facts.get("built_cuda"):
        if gpu_count:
            return Verdict(
                WARN,
                "CPU-only torch build but %d NVIDIA GPU(s) are present: training runs on CPU"
                % gpu_count,
                "install a CUDA build of torch (pytorch.org: pip install torch "
                "--index-url https://download.pytorch.org/whl/cu1XX)",
            )
        return Verdict(SKIP, "CPU-only torch build: no CUDA to initialise")
    warning = "; ".join(facts.get("init_warnings") or [])
    if not facts.get("is_available"):
        if not gpu_count:
            return Verdict(
                WARN,
                "torch built with CUDA %s but no GPU is usable: training runs on CPU%s"
                % (facts["built_cuda"], " (%s)" % warning if warning else ""),
            )
        return Verdict(
            FAIL,
            "torch.cuda.is_available() is False although %d GPU(s) exist%s"
            % (gpu_count, ": " + warning if warning else ""),
            "check the driver/CUDA match and CUDA_VISIBLE_DEVICES below; `nvidia-smi` must work",
        )
    devices = facts.get("devices") or []
    unsupported = [
        d
        for d in devices
        if not arch_supported(d.get("capability", ""), facts.get("arch_list") or [])
    ]
    shown = ", ".join(
        "cuda:%d %s (sm_%s, %s%s)"
        % (
            d["index"],
            d["name"],
            d["capability"].replace(".", ""),
            _gib(d["total_memory"]),
            ", %s free" % _gib(d["free_memory"]) if "free_memory" in d else "",
        )
        for d in devices
    )
    if unsupported:
        d = unsupported[0]
        return Verdict(
            FAIL,
            "%s is sm_%s, which this torch build does not support (built for %s)"
            % (d["name"], d["capability"].replace(".", ""), " ".join(facts.get("arch_list") or [])),
            "install a torch build for a newer CUDA that supports this GPU",
        )
    if expected_visible is not None and facts.get("device_count") != expected_visible:
        return Verdict(
            WARN,
            "torch sees %s device(s) but %d are expected from the driver and "
            "CUDA_VISIBLE_DEVICES: %s" % (facts.get("device_count"), expected_visible, shown),
        )
    return Verdict(OK, "%d device(s): %s" % (facts.get("device_count", 0), shown))


def tensor_verdict(facts: Mapping[str, Any]) -> Verdict:
    if facts.get("skipped"):
        return Verdict(SKIP, facts["skipped"])
    devices = facts.get("devices") or []
    bad = [d for d in devices if not d.get("ok")]
    if bad:
        return Verdict(
            FAIL,
            "; ".join("%s: %s" % (d["device"], d.get("error")) for d in bad),
            "the device cannot run a kernel: check the driver match and free memory above",
        )
    return Verdict(
        OK, ", ".join("%s ok (%.2f s)" % (d["device"], d.get("seconds", 0)) for d in devices)
    )


# ---------------------------------------------------------------- reachability


def reach_verdict(role: str, facts: Mapping[str, Any]) -> Verdict:
    """facts from bridge.doctor.net.probe(): ok, stage, error, elapsed_s, target, via."""
    target = facts.get("target")
    via = " via proxy %s" % facts["via"] if facts.get("via") else ""
    if facts.get("skipped"):
        return Verdict(SKIP, facts["skipped"])
    if facts.get("ok"):
        return Verdict(
            OK,
            "%s%s answered in %.2f s%s"
            % (
                target,
                via,
                facts.get("elapsed_s", 0),
                " (%s)" % facts["reply"] if facts.get("reply") else "",
            ),
        )
    stage, error = facts.get("stage"), facts.get("error")
    what = {
        "dns": "cannot resolve the name",
        "connect": "no TCP connection",
        "proxy": "the proxy refused the tunnel",
        "tls": "no TLS handshake",
        "reply": "no reply",
    }.get(str(stage), stage)
    detail = "%s%s: %s (%s)" % (target, via, what, error)
    if role == "hf_endpoint":
        fix = (
            "the hub is not reachable: set HTTPS_PROXY to a working proxy, "
            "or HF_ENDPOINT to a reachable "
            "mirror, or HF_HUB_OFFLINE=1 if the models are already cached"
        )
        return Verdict(WARN, detail, fix)
    if role == "proxy":
        return Verdict(
            FAIL,
            detail,
            "start the proxy or fix/unset the proxy variable: every download through "
            "it will fail or hang",
        )
    return Verdict(
        FAIL, detail, "check the address, the firewall and the proxy settings for this host"
    )
