"""The argument check of launch(), Job, aio.launch, the scheduler and the CLI: bad arguments are
refused with a LaunchError that says which and why, before anything is registered or spawned.
The Node twin is node-client/src/job_arguments.js (checkOptions)."""

from __future__ import annotations

import collections.abc
import os
from typing import Any

from trainbridge.bridge import machine
from trainbridge.bridge.launcher import LaunchError

TAIL_LINES = 40  # output lines kept for the report's tail, unless the caller says otherwise


def check_arguments(
    cmd: Any,
    cwd: Any = None,
    env: Any = None,
    config: Any = None,
    log_path: Any = None,
    on_event: Any = None,
    tail_lines: Any = TAIL_LINES,
    stop_on_nan: Any = None,
) -> None:
    """Refuse bad arguments with a LaunchError that says which and why, before anything is
    registered or spawned (launch, Job, aio.launch and the CLI all come through here)."""
    if isinstance(cmd, (str, bytes)):
        raise LaunchError(
            f"the command must be a list of arguments, not a string: got {cmd!r}; "
            f"write [{', '.join(repr(a) for a in str(cmd).split()[:3])}"
            f"{', ...' if len(str(cmd).split()) > 3 else ''}] (there is no shell)"
        )
    if not isinstance(cmd, (list, tuple)) or not cmd:
        raise LaunchError(f"the command must be a non-empty list of strings, got {cmd!r}")
    for i, arg in enumerate(cmd):
        if not isinstance(arg, (str, os.PathLike)):
            raise LaunchError(
                f"command argument {i} must be a string, got {arg!r} "
                f"({type(arg).__name__}) in {list(cmd)!r}"
            )
    for name, value in (("cwd", cwd), ("log_path", log_path)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise LaunchError(f"{name} must be a path (a string) or None, got {value!r}")
    if env is not None:
        if not isinstance(env, collections.abc.Mapping):
            raise LaunchError(f"env must be a dict of strings or None, got {type(env).__name__}")
        for key, value in env.items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                raise LaunchError(f"env keys must be non-empty strings without '=', got {key!r}")
            if not isinstance(value, str) or "\0" in value:
                raise LaunchError(
                    f"env[{key!r}] must be a string, got {value!r}; to leave a "
                    f"variable out, do not put it in env"
                )
    if on_event is not None and not callable(on_event):
        raise LaunchError(f"on_event must be a function or None, got {on_event!r}")
    if type(tail_lines) is not int or tail_lines < 0:
        raise LaunchError(f"tail_lines must be a whole number >= 0, got {tail_lines!r}")
    metric_names(stop_on_nan)
    if config is not None:
        if not isinstance(config, dict):
            raise LaunchError(f"config must be a dict, got {type(config).__name__}")
        problem = machine.config_problem(config)
        if problem is not None:
            raise LaunchError(config_message(problem[0], problem[1], config.get(problem[0])))


def metric_names(stop_on_nan: Any) -> list[str]:
    """stop_on_nan as a list of metric names ("*": every metric); None or [] is off. A LaunchError
    says what is wrong with anything else."""
    if stop_on_nan is None:
        return []
    names = [stop_on_nan] if isinstance(stop_on_nan, str) else stop_on_nan
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise LaunchError(
            "stop_on_nan must be a metric name, a list of them, or '*' for every metric "
            f"(the job is cancelled when one becomes NaN or infinite), got {stop_on_nan!r}"
        )
    return list(names)


def config_message(key: str, problem: str, value: Any) -> str:
    """The words for one machine.config_problem answer."""
    if problem == "unknown":
        return f"unknown setting {key!r}; the settings are {', '.join(sorted(machine.DEFAULTS))}"
    if problem == "type":
        allowed = " or None (off)" if key in machine.OPTIONAL else ""
        return f"{key} must be a number of seconds{allowed}, got {value!r}"
    if problem == "not_finite":
        return f"{key} must be a finite number of seconds, got {value!r}"
    return f"{key} must be >= 0 seconds, got {value!r}"


def with_stalled_after(config: dict[str, Any]) -> dict[str, Any]:
    """launch()'s rule for a machine config: unless stalled_after is given, a job with a
    stall_timeout is called stalled after at most half of it. Also bridge/jobserve.py's,
    which launches the Node client's jobs. A config with a problem (machine.config_problem)
    comes back as it is: the check that follows (Job's, check_arguments) refuses it in words."""
    stall_timeout = config.get("stall_timeout")
    if (
        stall_timeout is None
        or "stalled_after" in config
        or machine.config_problem(config) is not None
    ):
        return config
    return {**config, "stalled_after": min(machine.DEFAULTS["stalled_after"], stall_timeout / 2)}
