"""The worker's configuration, read from the environment (docs/PROTOCOL.md section 2).

Pure: `from_env(mapping)` takes a mapping and returns a Config, or None with a reason.
An absent TRAINBRIDGE_ENDPOINT is the normal "not supervised" case and has no reason.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing and re cost milliseconds: this runs at `import worker`
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

_JOB_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX_CHARS = frozenset("0123456789abcdef")


class Config:
    __slots__ = (
        "endpoint",
        "job",
        "key",
        "rank",
        "crash_file",
        "heartbeat_s",
        "stall_s",
        "freeze_s",
        "ack_timeout_s",
        "client_pid",
        "detached",
        "kill_grace_s",
        "log_wait_s",
        "server_key",
    )

    def __init__(
        self,
        endpoint: str,
        job: str,
        key: bytes,
        rank: int,
        crash_file: Optional[str],
        heartbeat_s: float,
        stall_s: float,
        freeze_s: float,
        ack_timeout_s: float,
        client_pid: Optional[int] = None,
        detached: bool = False,
        kill_grace_s: float = 5.0,
        log_wait_s: float = 5.0,
        server_key: Optional[bytes] = None,
    ):
        self.endpoint = endpoint
        self.job = job
        self.key = key
        self.rank = rank
        self.crash_file = crash_file
        self.heartbeat_s = heartbeat_s
        self.stall_s = stall_s
        self.freeze_s = freeze_s  # 0 disables the GIL-freeze watchdog
        self.ack_timeout_s = ack_timeout_s
        # The supervising client's pid: when it is gone, the job ends (beacon.ParentWatch).
        # None when launched detached or by a client that does not say.
        self.client_pid = client_pid
        self.detached = detached
        self.kill_grace_s = kill_grace_s  # SIGTERM -> SIGKILL when the client is gone
        # The longest one log() call waits for room in the full log queue (backpressure);
        # past it the record is dropped and counted (0: never wait).
        self.log_wait_s = log_wait_s
        # The client's CurveZMQ public key (z85) on a tcp endpoint: connect as a CURVE client.
        self.server_key = server_key

    @property
    def routing_id(self) -> bytes:
        # The pid keeps apart two processes of one rank: torchrun's own launcher process
        # (no RANK) and rank 0 would otherwise share an id, and ROUTER drops the second.
        return f"{self.job}/{self.rank}/{os.getpid()}".encode("ascii")


def valid_job_id(job: str) -> bool:
    return 1 <= len(job) <= 64 and _JOB_CHARS.issuperset(job)


def valid_key_hex(key_hex: str) -> bool:
    return len(key_hex) == 64 and _HEX_CHARS.issuperset(key_hex)


def _number(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = float(raw)  # ValueError is reported by the caller as a bad setting
    if not value >= minimum:  # also rejects NaN
        raise ValueError(f"{name}={raw!r} must be >= {minimum}")
    return value


def optional_int(env: Mapping[str, str], name: str) -> Optional[int]:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def from_env(env: Mapping[str, str]) -> tuple[Optional[Config], Optional[str]]:
    """(config, None) when supervised; (None, None) when not; (None, reason) when the
    variables are present but unusable (the caller says so once on stderr)."""
    endpoint = env.get("TRAINBRIDGE_ENDPOINT")
    if not endpoint:
        return None, None
    job = env.get("TRAINBRIDGE_JOB_ID", "")
    key_hex = env.get("TRAINBRIDGE_KEY", "")
    if not valid_job_id(job):
        return None, "TRAINBRIDGE_JOB_ID is missing or not 1-64 chars of [A-Za-z0-9._-]"
    if not valid_key_hex(key_hex):
        return None, "TRAINBRIDGE_KEY is missing or not 64 lowercase hex digits"
    try:
        heartbeat_s = _number(env, "TRAINBRIDGE_HEARTBEAT_S", 1.0, 0.01)
        stall_s = _number(env, "TRAINBRIDGE_STALL_S", 10.0, 0.0)
        freeze_s = _number(env, "TRAINBRIDGE_FREEZE_S", max(5.0, 3 * heartbeat_s), 0.0)
        ack_timeout_s = _number(env, "TRAINBRIDGE_ACK_TIMEOUT_S", 5.0, 0.0)
        kill_grace_s = _number(env, "TRAINBRIDGE_KILL_GRACE_S", 5.0, 0.0)
        log_wait_s = _number(env, "TRAINBRIDGE_LOG_WAIT_S", 5.0, 0.0)
    except ValueError as exc:
        return None, f"bad setting: {exc}"
    server_key = env.get("TRAINBRIDGE_SERVER_KEY") or None
    if server_key is not None and (len(server_key) != 40 or not server_key.isascii()):
        return None, "TRAINBRIDGE_SERVER_KEY is not a 40-character z85 CurveZMQ key"
    rank = optional_int(env, "RANK")
    detached = env.get("TRAINBRIDGE_DETACHED", "") not in ("", "0")
    client_pid = None if detached else optional_int(env, "TRAINBRIDGE_CLIENT_PID")
    return Config(
        endpoint=endpoint,
        job=job,
        key=bytes.fromhex(key_hex),
        rank=rank if rank is not None and rank >= 0 else 0,
        crash_file=env.get("TRAINBRIDGE_CRASH_FILE") or None,
        heartbeat_s=heartbeat_s,
        stall_s=stall_s,
        freeze_s=freeze_s,
        ack_timeout_s=ack_timeout_s,
        client_pid=client_pid if client_pid is not None and client_pid > 0 else None,
        detached=detached,
        kill_grace_s=kill_grace_s,
        log_wait_s=log_wait_s,
        server_key=server_key.encode("ascii") if server_key else None,
    ), None
