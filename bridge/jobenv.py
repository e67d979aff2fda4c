"""The TRAINBRIDGE_* variables a job's process gets (PROTOCOL.md section 2). Pure and
light (no third-party import): `trainbridge run --transparent` computes them before it
spawns, so the child starts before the client's heavy imports."""

from __future__ import annotations

from typing import Any, Optional


def heartbeat_interval(config: dict[str, Any]) -> float:
    """A beat often enough that heartbeat_timeout spans several of them."""
    timeout = config.get("heartbeat_timeout")
    return 1.0 if timeout is None else max(0.05, min(1.0, timeout / 4))


def num(value: float) -> str:
    return repr(float(value))


def variables(
    endpoint: str,
    job_id: str,
    key: bytes,
    crash_file: str,
    config: dict[str, Any],
    client_pid: Optional[int],
) -> dict[str, str]:
    """The variables for one job; `config` is the machine's full config. With a
    `client_pid` the job's workers end its process group when that process is gone
    (PROTOCOL.md section 2); None leaves the job running when its client dies (only
    `run --transparent` in the caller's own process group, where that group is not the
    job's to end)."""
    heartbeat_s = heartbeat_interval(config)
    out = {
        "TRAINBRIDGE_ENDPOINT": endpoint,
        "TRAINBRIDGE_JOB_ID": job_id,
        "TRAINBRIDGE_KEY": key.hex(),
        "TRAINBRIDGE_CRASH_FILE": crash_file,
        "TRAINBRIDGE_HEARTBEAT_S": num(heartbeat_s),
        "TRAINBRIDGE_KILL_GRACE_S": num(config["kill_grace"]),
    }
    if client_pid is not None:
        out["TRAINBRIDGE_CLIENT_PID"] = str(client_pid)
    stalled_after = config["stalled_after"]
    if stalled_after is not None:
        out["TRAINBRIDGE_STALL_S"] = num(stalled_after)
    hb_timeout = config["heartbeat_timeout"]
    if hb_timeout is not None:
        # The GIL-freeze watchdog must write the main stack before we declare silence.
        out["TRAINBRIDGE_FREEZE_S"] = num(max(2 * heartbeat_s, hb_timeout / 2))
    return out
