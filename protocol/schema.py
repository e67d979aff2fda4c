"""The message kinds of protocol v1 and their fields (docs/PROTOCOL.md section 5), and the
check that a body has them. Pure; the one implementation (vectors/codec.json pins it).
"""

from __future__ import annotations

from typing import Any, Optional

from trainbridge.protocol.errors import ProtocolError

# Field types: int, num (int or float: JavaScript's 3.0 arrives as 3), str, bool, list,
# map; a trailing "?" allows nil. Unknown extra fields are kept (minor versions add them).
WORKER_KINDS: dict[str, dict[str, str]] = {
    "hello": {
        "pid": "int",
        "argv": "list",
        "cwd": "str",
        "python": "map",
        "host": "str",
        "rank": "int?",
        "local_rank": "int?",
        "world_size": "int?",
        "env": "map",
        "packages": "map",
        "proto": "str",
        "worker": "str",
        "heartbeat_s": "num",
    },
    "stage": {
        "event": "str",
        "name": "str",
        "depth": "int",
        "budget_s": "num?",
        "duration_s": "num?",
        "status": "str?",
    },
    "progress": {"step": "num", "total": "num?", "metrics": "map"},
    # A file the job made (worker.artifact; zero-code: torch.save, Image.save; PROTOCOL.md).
    "artifact": {
        "path": "str",
        "name": "str",
        "kind": "str",
        "bytes": "int?",
        "step": "num?",
        "by": "str",
    },
    "heartbeat": {
        "beat": "int",
        "stage": "str?",
        "stages": "list",
        "idle_s": "num",
        "progress_age_s": "num?",
        "stack": "str?",
        "dropped": "map",
        "where": "str?",
        "work": "int?",
    },
    "log": {"level": "str", "message": "str"},
    # Consecutive log records in one message (PROTOCOL.md "logs"): each is a `log` body.
    "logs": {"records": "list"},
    "error": {
        "type": "str",
        "message": "str",
        "traceback": "str",
        "frames": "list",
        "chain": "list",
        "stage": "str?",
        "fatal": "bool",
        "thread": "str",
        "kind": "str",
    },
    "bye": {"exit_code": "int?", "reason": "str"},
    "reply": {"to": "int", "ok": "bool"},
    # An application message (PROTOCOL.md "user"): body {"data": any value}, both ways.
    "user": {},
}
CLIENT_KINDS: dict[str, dict[str, str]] = {
    "ping": {},
    "dump_stacks": {},
    "cancel": {"reason": "str?"},
    "ack": {"to": "int"},
    "refuse": {"reason": "str", "supported": "list"},
    "user": {},
}
KINDS = {**WORKER_KINDS, **CLIENT_KINDS}
# Messages the sender keeps until the client acks them (never dropped, never coalesced).
FINAL_KINDS = frozenset({"error", "bye"})
# Application data is sent whole or not at all: a value over a limit is an error, not a cut.
UNCUT_KINDS = frozenset({"user"})

_TYPES = {
    "int": (int,),
    "num": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": (list,),
    "map": (dict,),
}
# kind -> ((field, accepted types, nullable, type name), ...): compiled once, checked per message.
_SCHEMA = {
    kind: tuple(
        (field, _TYPES[spec.rstrip("?")], spec.endswith("?"), spec.rstrip("?"))
        for field, spec in fields.items()
    )
    for kind, fields in KINDS.items()
}


def check_fields(kind: str, body: dict[str, Any], walked: Optional[list[int]] = None) -> None:
    """Raise ProtocolError unless `body` has the fields of `kind`. `walked`: for a `logs`
    body whose records _restore_records() checked, the records it left to check here."""
    for field, types, nullable, name in _SCHEMA[kind]:
        value = body.get(field)
        if value is None:
            if nullable:
                continue
            raise ProtocolError("bad_field", f"{kind}.{field} is missing")
        if type(value) not in types:  # exact types: bool is not an int here
            raise ProtocolError("bad_field", f"{kind}.{field} must be {name}")
    if kind == "logs":  # clients expand the records into log events: each must be one
        records = body["records"]
        for i in range(len(records)) if walked is None else walked:
            record = records[i]
            if type(record) is not dict:
                raise ProtocolError("bad_field", f"logs.records[{i}] must be map")
            check_fields("log", record)
