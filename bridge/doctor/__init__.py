"""`trainbridge doctor`: a hang-proof environment preflight for a training venv.

    python -m trainbridge.bridge.doctor [--python PATH] [--json] [--timeout S] [--host HOST ...]
    trainbridge doctor ...                  (bridge/cli.py wires cli.add_arguments/run_cli)
    bridge.doctor.doctor(python=None, timeout=20.0, hosts=None) -> dict[str, Any]

This module is the package's API and report assembly; the command line and its table are in
cli.py. The checks run in a child of
the TARGET interpreter (probe.py, stdlib only), each under its own deadline (run.py); hosts are
probed from here in parallel with a short timeout (net.py); the verdicts come from pure rules
(rules.py).
Exit status: 0 when nothing would stop a training job (only ok/warn/skip), 1 when a check
failed or hung. The report schema is in docs/DOCTOR.md.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from . import rules
from .net import Target, plan_targets, probe_all
from .rules import FAIL, HUNG, SKIP, WARN, Verdict
from .run import CRASHED, DONE, NOT_RUN, CheckRun, run_checks
from .run import HUNG as RUN_HUNG

SCHEMA = "trainbridge.doctor/1"
DEFAULT_TIMEOUT = 20.0  # per check; a cold `import torch` on a slow disk can take 10+ s
DEFAULT_CONNECT_TIMEOUT = 3.0  # per host, DNS + connect + first reply together

# A check is not run in a fresh child when the one it needs hung or crashed.
REQUIRES = {"torch_cuda": "torch", "torch_tensor": "torch_cuda"}
REPORT_ORDER = (
    "python",
    "platform",
    "encoding",
    "stdout_buffering",
    "network_config",
    "packages",
    "disk",
    "nvidia_driver",
    "cuda_visible_devices",
    "torch",
    "torch_cuda",
    "cuda_driver_compat",
    "torch_tensor",
)
# Read here, from what the probe found, not in the probe's child (bridge/doctor/rules.py).
PARENT_CHECKS = ("cuda_visible_devices", "cuda_driver_compat")
# Each run in the probe's child (bridge/doctor/probe.py), in the report's order.
PROBE_CHECKS = tuple(name for name in REPORT_ORDER if name not in PARENT_CHECKS)

HANG_FIX = {
    "python": "the interpreter hangs at startup: a sitecustomize/usercustomize "
    "or .pth file blocks (see the "
    "stack); `python -S -c pass` tells",
    "torch": "`import torch` hangs (see the stack): an import hook in a "
    "sitecustomize/.pth, torch on a slow or "
    "dead network filesystem, or CUDA libraries probing a broken driver; compare with "
    "`CUDA_VISIBLE_DEVICES= python -c 'import torch'`",
    "torch_cuda": "CUDA initialisation hangs: check `nvidia-smi` and dmesg for "
    "Xid errors; reset the GPU or "
    "reboot",
    "torch_tensor": "a GPU kernel hangs: the GPU may be wedged; check `nvidia-smi`, "
    "then reset or reboot",
    "nvidia_driver": "NVML hangs: the driver is wedged (dmesg shows Xid errors); reboot",
    "disk": "a directory's filesystem hangs (a dead network mount?): "
    "check `df` on the working directory, "
    "HF_HOME and TORCH_HOME",
}
# What each probe check was doing, for the hung/crashed row's detail.
DOING = {
    "python": "starting the interpreter",
    "torch": "`import torch`",
    "torch_cuda": "CUDA initialisation (torch.cuda.is_available, device properties)",
    "torch_tensor": "a tiny tensor operation",
    "nvidia_driver": "asking the driver through NVML (pynvml)",
    "disk": "measuring free disk space",
}
# An exception inside these checks means the GPU stack is broken, not that doctor is.
FAIL_ON_ERROR = ("torch", "torch_cuda", "torch_tensor")


def _known_gpus(nvidia: Mapping[str, Any], system: str) -> Optional[list[dict[str, Any]]]:
    """The GPUs the driver lists: [] when there is certainly no driver, None when unknown."""
    if "gpus" in nvidia:
        return list(nvidia["gpus"])
    error = (nvidia.get("nvml_error") or "").lower()
    if "not found" in error and not nvidia.get("proc_version"):
        return []  # no NVML library: no NVIDIA driver is installed
    if "pynvml" in nvidia and not error and system == "Linux" and not nvidia.get("proc_version"):
        return []  # pynvml missing, but Linux shows no loaded driver either
    return None


def _entry(
    name: str,
    verdict: Verdict,
    facts: Optional[dict[str, Any]] = None,
    duration_s: float = 0.0,
    stack: Optional[str] = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "verdict": verdict.verdict,
        "detail": verdict.detail,
        "fix": verdict.fix,
        "facts": facts or {},
        "duration_s": duration_s,
        "stack": stack,
    }


def _run_verdict(run: CheckRun, decide: Callable[[dict[str, Any]], Verdict]) -> Verdict:
    """A check's verdict, whatever became of its child: hung/crashed/not run come first."""
    if run.status == RUN_HUNG:
        return Verdict(
            HUNG,
            "%s %s" % (DOING.get(run.name, run.name), run.error),
            HANG_FIX.get(run.name, "see the stack to find what blocks"),
        )
    if run.status == CRASHED:
        return Verdict(
            FAIL,
            "%s: %s" % (DOING.get(run.name, run.name), run.error),
            "see the stack/stderr: a native crash in this check would crash training too",
        )
    if run.status == NOT_RUN:
        if (run.error or "").startswith("cannot start"):
            return Verdict(
                FAIL, str(run.error), "pass --python the path of the training venv's interpreter"
            )
        return Verdict(SKIP, "not run: %s" % run.error)
    if run.error:
        last = run.error.strip().splitlines()[-1]
        return Verdict(
            FAIL if run.name in FAIL_ON_ERROR else WARN,
            "the check raised %s" % last,
            "see facts.error in --json for the traceback",
        )
    return decide(run.facts)


def assemble(
    python: str,
    runs: Mapping[str, CheckRun],
    net: Mapping[str, dict[str, Any]],
    targets: Sequence[Target],
    env: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Pure: probe results, host results and the environment -> the report's check rows,
    in order."""

    def facts(name: str) -> dict[str, Any]:
        run = runs.get(name)
        return run.facts if run is not None and run.status == DONE else {}

    system = facts("platform").get("system") or ("Windows" if os.name == "nt" else "Linux")
    gpus = _known_gpus(facts("nvidia_driver"), system)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    torch_facts = facts("torch")
    nvidia = facts("nvidia_driver")
    expected_visible = None
    if gpus is not None:
        expected_visible = (
            len(gpus) if cvd is None else len(rules.parse_visible_devices(cvd, gpus)[0])
        )

    decide = {
        "python": rules.python_verdict,
        "platform": rules.platform_verdict,
        "encoding": rules.encoding_verdict,
        "stdout_buffering": rules.buffering_verdict,
        "network_config": rules.network_config_verdict,
        "packages": rules.packages_verdict,
        "disk": rules.disk_verdict,
        "nvidia_driver": rules.nvidia_verdict,
        "torch": lambda f: rules.torch_verdict(f, python),
        "torch_cuda": lambda f: rules.torch_cuda_verdict(
            f, len(gpus) if gpus is not None else None, expected_visible
        ),
        "torch_tensor": rules.tensor_verdict,
    }
    rows = []
    for name in REPORT_ORDER:
        if name == "cuda_visible_devices":
            v = rules.visible_devices_verdict(cvd, gpus)
            rows.append(
                _entry(name, v, {"value": cvd, "gpu_count": None if gpus is None else len(gpus)})
            )
        elif name == "cuda_driver_compat":
            rows.append(_cuda_driver_row(runs.get("torch"), torch_facts, nvidia, system))
        elif name in runs:
            run = runs[name]
            f = dict(run.facts)
            if run.error and run.status == DONE:
                f["error"] = run.error
            rows.append(_entry(name, _run_verdict(run, decide[name]), f, run.duration_s, run.stack))
    rows.extend(_reach_row(t, net.get(t.name, {"skipped": "not probed"})) for t in targets)
    return rows


def _cuda_driver_row(
    torch_run: Optional[CheckRun],
    torch_facts: dict[str, Any],
    nvidia: dict[str, Any],
    system: str,
) -> dict[str, Any]:
    """Whether torch's CUDA build runs on this driver: skipped when torch did not load."""
    if torch_run is None or torch_run.status != DONE or not torch_facts.get("installed"):
        v = Verdict(SKIP, "torch did not load")
    else:
        v = rules.cuda_driver_compat(
            torch_facts.get("cuda"), nvidia.get("driver"), nvidia.get("driver_cuda"), system
        )
    facts = {
        "torch_cuda": torch_facts.get("cuda"),
        "driver": nvidia.get("driver"),
        "driver_cuda": nvidia.get("driver_cuda"),
    }
    return _entry("cuda_driver_compat", v, facts)


def _reach_row(target: Target, result: dict[str, Any]) -> dict[str, Any]:
    """One host the job reaches (or a proxy): reached, refused, or not probed."""
    return _entry(
        target.name,
        rules.reach_verdict(target.role, result),
        dict(result, role=target.role),
        result.get("elapsed_s", 0.0),
    )


def doctor(
    python: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    hosts: Optional[Sequence[str]] = None,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
) -> dict[str, Any]:
    """Check the environment of `python` (default: this interpreter) and return the report dict.

    timeout: deadline of each check in the target (a check past it is reported `hung`).
    hosts: extra hosts to probe (URL, host:port or host). env/cwd: the target's environment and
    working directory (default: ours). Never raises for what it finds; never blocks unbounded."""
    started = time.monotonic()
    python = python or sys.executable
    env = dict(os.environ if env is None else env)
    targets = plan_targets(env, list(hosts or ()))
    net: list[
        dict[str, dict[str, Any]]
    ] = []  # filled in one step by the thread: never read half-written
    net_thread = threading.Thread(
        target=lambda: net.append(probe_all(targets, connect_timeout)),
        daemon=True,
        name="doctor-net",
    )
    net_thread.start()  # hosts are probed while the target runs its checks

    runs = run_checks(python, PROBE_CHECKS, timeout, env, cwd, REQUIRES)
    nvidia = runs.get("nvidia_driver")
    ours = os.path.abspath(sys.executable) != os.path.abspath(python)  # venvs symlink one binary
    if (
        nvidia
        and nvidia.status == DONE
        and str(nvidia.facts.get("pynvml", "")).startswith("missing")
        and ours
    ):
        # The target has no pynvml: ask the driver through ours, still in a child with a deadline.
        again = run_checks(sys.executable, ["nvidia_driver"], timeout, env, cwd).get(
            "nvidia_driver"
        )
        if (
            again is not None and again.status != NOT_RUN
        ):  # a hang here is news about the driver too
            again.facts["source"] = "doctor's interpreter (%s has no pynvml)" % python
            runs = dict(runs, nvidia_driver=again)

    net_thread.join(connect_timeout + 1.0)
    rows = assemble(python, runs, net[0] if net else {}, targets, env)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in rules.VERDICTS}
    code = rules.exit_code(r["verdict"] for r in rows)
    return {
        "schema": SCHEMA,
        "python": python,
        "ok": code == 0,
        "exit_code": code,
        "summary": counts,
        "duration_s": round(time.monotonic() - started, 3),
        "checks": rows,
    }
