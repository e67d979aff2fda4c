"""Protocol v1 codec: the one pure module that turns messages into frames and back.

No sockets, no threads, no clocks unless a timestamp is not given. The worker and the
Python client both use it, the one implementation of the wire (the Node client does not
speak it: its jobs are supervised through bridge/jobserve.py); the golden vectors in
vectors/ pin it. docs/PROTOCOL.md is the specification; this module
and that document change together.

A message on the wire is two ZeroMQ frames: the packed envelope and its HMAC-SHA256. The
rules it applies have rooms of their own: the ASCII escapes (ascii.py), the kinds
and their fields (schema.py), the limits (limits.py), the version (constants.py) and the
error (errors.py). The rest stays one module, about 450 lines: encode and decode are mirror
walks over the same format (limits, escapes, integer ranges) and are read side by side.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

import msgpack

from trainbridge.protocol.ascii import escape, escape_within, unescape, unescape_many
from trainbridge.protocol.constants import (
    MAC_SIZE,
    PROTOCOL_MAJOR,
    PROTOCOL_VERSION,
    SUPPORTED_MAJORS,
)
from trainbridge.protocol.errors import ProtocolError
from trainbridge.protocol.limits import (
    INT64_MIN,
    MAX_ARRAY_ITEMS,
    MAX_DEPTH,
    MAX_FIELD_CHARS,
    MAX_MAP_ITEMS,
    MAX_MESSAGE_BYTES,
    MAX_TEXT_CHARS,
    SAFE_INT,
    TEXT_FIELDS,
    UINT64_MAX,
)
from trainbridge.protocol.schema import (
    CLIENT_KINDS,
    FINAL_KINDS,
    KINDS,
    UNCUT_KINDS,
    WORKER_KINDS,
    check_fields,
)

# The codec's public names, the constants and limits included, so a caller needs one import.
__all__ = [
    "CLIENT_KINDS",
    "FINAL_KINDS",
    "INT64_MIN",
    "KINDS",
    "MAC_SIZE",
    "MAX_ARRAY_ITEMS",
    "MAX_DEPTH",
    "MAX_FIELD_CHARS",
    "MAX_MAP_ITEMS",
    "MAX_MESSAGE_BYTES",
    "MAX_TEXT_CHARS",
    "Message",
    "PROTOCOL_MAJOR",
    "PROTOCOL_VERSION",
    "ProtocolError",
    "SAFE_INT",
    "SUPPORTED_MAJORS",
    "TEXT_FIELDS",
    "UINT64_MAX",
    "UNCUT_KINDS",
    "WORKER_KINDS",
    "check_seq",
    "decode",
    "encode",
    "escape",
    "escape_within",
    "sign",
    "unescape",
]


# --- encode ---------------------------------------------------------------------------
def _prepare(value: Any, path: str, trunc: list[str], depth: int, key: str = "") -> Any:
    """Escape strings, cut long ones, canonicalise numbers; keys sorted for stable bytes."""
    t = type(value)
    if t is str:
        limit = MAX_TEXT_CHARS if key in TEXT_FIELDS else MAX_FIELD_CHARS
        out, cut = escape_within(value, limit)
        if cut:
            trunc.append(path)
        return out
    if t is bool or value is None:
        return value
    if t is int:
        if not INT64_MIN <= value <= UINT64_MAX:
            raise ProtocolError("int_range", f"{path} = {value}")
        return value
    if t is float:
        # Integral floats travel as integers, as every JavaScript encoder sends them.
        if value.is_integer() and -SAFE_INT <= value <= SAFE_INT:
            return int(value)
        return value
    if depth >= MAX_DEPTH:
        raise ProtocolError("too_deep", path)
    if t is dict and len(value) <= MAX_MAP_ITEMS:
        plain = _prepare_plain_map(value, path, trunc, depth)
        if plain is not None:
            return plain
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: escape(str(kv[0])))
        if len(items) > MAX_MAP_ITEMS:
            trunc.append(path)
            items = items[:MAX_MAP_ITEMS]
        # Paths in "trunc" are wire strings too: built from escaped keys, so they are ASCII.
        return {
            escape(str(k)): _prepare(v, f"{path}.{escape(str(k))}", trunc, depth + 1, str(k))
            for k, v in items
        }
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ARRAY_ITEMS:
            trunc.append(path)
            value = value[:MAX_ARRAY_ITEMS]
        return [_prepare(v, f"{path}[{i}]", trunc, depth + 1, key) for i, v in enumerate(value)]
    if isinstance(value, (bytes, bytearray)):
        return _prepare(bytes(value).decode("utf-8", "surrogateescape"), path, trunc, depth, key)
    if isinstance(value, (int, float)):  # bool is handled above; numpy scalars and the like
        return _prepare(
            float(value) if isinstance(value, float) else int(value), path, trunc, depth, key
        )
    return _prepare(str(value), path, trunc, depth, key)


def _prepare_plain_map(
    value: dict[Any, Any], path: str, trunc: list[str], depth: int
) -> Optional[dict[str, Any]]:
    """_prepare() of a dict whose keys are all ASCII strings without a backslash (a log
    record, a body): the same result, without escaping keys or building a path per value.
    None when a key needs the general walk."""
    for k in value:
        if type(k) is not str or not k.isascii() or "\\" in k:
            return None
    out = {}
    for k in sorted(value):  # escape(k) is k: the same order as the general walk
        v = value[k]
        t = type(v)
        if t is str:
            if len(v) <= MAX_FIELD_CHARS and v.isascii() and "\\" not in v:
                out[k] = v  # escape(v) is v and fits any limit: nothing to do
                continue
        elif t is float:
            if not v.is_integer():
                out[k] = v
                continue
        elif t is bool or v is None:
            out[k] = v
            continue
        out[k] = _prepare(v, f"{path}.{k}", trunc, depth + 1, k)
    return out


# The record worker.log() makes: these keys, a float time, a level name, a text.
_PLAIN_LOG_KEYS = frozenset({"created", "level", "message"})


def _prepare_records(records: Any, trunc: list[str]) -> Any:
    """_prepare() of a `logs` body's records (body.records, depth 2), the same result: the
    record shape worker.log() makes is rebuilt in key order directly, and the messages that
    need escaping are escaped together (_escape_all); any other record takes the general
    walk."""
    if type(records) is not list or len(records) > MAX_ARRAY_ITEMS:
        return _prepare(records, "body.records", trunc, 2, "records")
    out: list[Any] = []
    append = out.append
    plain = _PLAIN_LOG_KEYS
    marked = len(trunc)
    escaped = []  # the records in `out` whose message needs escaping
    for record in records:
        if type(record) is dict and record.keys() == plain:
            created, level, message = record["created"], record["level"], record["message"]
            if (
                type(created) is float
                and not created.is_integer()
                and type(level) is str
                and level.isascii()
                and "\\" not in level
                and len(level) <= MAX_FIELD_CHARS
                and type(message) is str
            ):
                record = {"created": created, "level": level, "message": message}
                if not message.isascii() or "\\" in message or len(message) > MAX_FIELD_CHARS:
                    escaped.append(record)
                append(record)
                continue
        append(_prepare(record, f"body.records[{len(out)}]", trunc, 3, "records"))
    if escaped:
        texts = _escape_all([record["message"] for record in escaped])
        if max(map(len, texts)) > MAX_FIELD_CHARS:
            # A message to cut (rare): the general walk, for the marks in walk order.
            del trunc[marked:]
            return _prepare(records, "body.records", trunc, 2, "records")
        for record, text in zip(escaped, texts):
            record["message"] = text
    return out


def _escape_all(texts: list[str]) -> list[str]:
    """[escape(t) for t in texts], in one C-level pass: escaping maps each code point on
    its own, and NUL (ASCII, kept as is) joins them when none of them holds one."""
    if len(texts) > 1:
        joined = "\0".join(texts)
        if joined.count("\0") == len(texts) - 1:
            return escape(joined).split("\0")
    return [escape(text) for text in texts]


def sign(key: bytes, packed: bytes) -> bytes:
    return hmac.new(key, packed, hashlib.sha256).digest()


def encode(
    kind: str,
    seq: int,
    body: dict[str, Any],
    key: bytes,
    job: str,
    ts: Optional[float] = None,
    sender: Optional[str] = None,
    mt: Optional[float] = None,
) -> list[bytes]:
    """Build the two frames [envelope, mac] of one message. Raises ProtocolError.
    `sender`: the sending socket's routing id (a worker's "<job>/<rank>/<pid>"), signed into
    the envelope as "from" so a message replayed through another routing id is refused.
    `ts`: the wall clock's seconds, now unless given; `mt`: the monotonic clock's (the
    sender's CLOCK_MONOTONIC, which a wall-clock step does not move), now when `ts` is not
    given, and left out when `ts` is given without it (a fixed envelope, as the vectors')."""
    if kind not in KINDS:
        raise ProtocolError("unknown_kind", kind)
    trunc: list[str] = []
    if kind == "logs" and type(body) is dict and body.keys() == {"records"}:
        prepared = {"records": _prepare_records(body["records"], trunc)}
    else:
        prepared = _prepare(body, "body", trunc, 1)
    if trunc and kind in UNCUT_KINDS:
        raise ProtocolError("too_long", f"{kind} would be cut at {', '.join(trunc)[:200]}")
    envelope: dict[str, Any] = {
        "body": prepared,
        "job": escape(job),
        "kind": kind,
        "seq": seq,
        "ts": time.time() if ts is None else ts,
        "v": PROTOCOL_MAJOR,
    }
    if mt is None and ts is None:
        mt = time.monotonic()
    if mt is not None:
        envelope["mt"] = mt
    if sender is not None:
        envelope["from"] = escape(sender)
    if trunc:
        envelope["trunc"] = trunc
    envelope = {k: envelope[k] for k in sorted(envelope)}
    if envelope["ts"] is not None and float(envelope["ts"]).is_integer():
        envelope["ts"] = int(envelope["ts"])
    packed = msgpack.packb(envelope, use_bin_type=True)
    if len(packed) > MAX_MESSAGE_BYTES:
        raise ProtocolError("oversize", f"{kind} message is {len(packed)} bytes")
    return [packed, sign(key, packed)]


# --- decode ---------------------------------------------------------------------------
class Message(NamedTuple):
    kind: str
    seq: int
    ts: float
    job: str
    body: dict[str, Any]
    truncated: tuple[str, ...] = ()
    sender: Optional[str] = None  # the signed "from": the sender's routing id, if it said
    mt: Optional[float] = None  # the sender's monotonic clock when it sent (protocol 1.2)


_SCALARS = (int, float, bool, type(None))


def _restore(value: Any, depth: int) -> Any:
    """Reject non-ASCII and bin/ext values; unescape every string (keys too).

    Hot on the client (every message passes here), so it works in place and touches only
    the strings that need it: most are ASCII without a backslash and stay as they are."""
    t = type(value)
    if t is str:
        return unescape(value)
    if t is dict:
        if depth >= MAX_DEPTH:
            raise ProtocolError("too_deep")
        renamed = None
        for k, v in value.items():
            if type(k) is not str:
                raise ProtocolError("bad_type", "map keys must be strings")
            if not k.isascii() or "\\" in k:
                renamed = renamed or {}
                renamed[k] = unescape(k)  # the key first, as a fresh walk would judge it
            tv = type(v)
            if tv is str:
                if not v.isascii() or "\\" in v:
                    value[k] = unescape(v)  # same key: no resize while iterating
            elif tv is dict or tv is list:
                value[k] = _restore(v, depth + 1)
            elif tv not in _SCALARS:
                raise ProtocolError("bad_type", tv.__name__)
        if renamed:
            return {renamed.get(k, k): v for k, v in value.items()}
        return value
    if t is list:
        if depth >= MAX_DEPTH:
            raise ProtocolError("too_deep")
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str:
                if not v.isascii() or "\\" in v:
                    value[i] = unescape(v)
            elif tv is dict or tv is list:
                value[i] = _restore(v, depth + 1)
            elif tv not in _SCALARS:
                raise ProtocolError("bad_type", tv.__name__)
        return value
    if t in _SCALARS:
        return value
    raise ProtocolError("bad_type", t.__name__)


def _logs_records(raw: dict[Any, Any]) -> Optional[list[Any]]:
    """The records list of a `logs` envelope, taken out of it so that _restore_records()
    can do the walk for them; None (and the envelope untouched) for any other message."""
    body = raw.get("body")
    if (
        raw.get("kind") != "logs"
        or type(body) is not dict
        or body.keys() != {"records"}
        or next(iter(raw)) != "body"
    ):
        return None
    records = body.get("records")
    if type(records) is not list or len(records) > MAX_ARRAY_ITEMS:
        return None
    body["records"] = []
    return records


def _restore_records(records: list[Any]) -> list[int]:
    """_restore() of a `logs` body's records (at their depth), in place: a record of
    worker.log()'s own shape is checked directly (its fields too), and the messages that need
    unescaping are unescaped together (_unescape_all); any other record takes the general
    walk, and its index is returned for check_fields(). Errors are the walk's, in order."""
    plain = _PLAIN_LOG_KEYS
    escaped = []  # records whose message still needs unescaping
    walked = []  # indexes of the records that took the general walk
    for i, record in enumerate(records):
        if type(record) is dict and record.keys() == plain:
            level, message = record["level"], record["message"]
            if (
                type(level) is str
                and level.isascii()
                and "\\" not in level
                and type(message) is str
                and type(record["created"]) in (int, float)
            ):
                if not message.isascii() or "\\" in message:
                    escaped.append(record)
                continue
        _unescape_all(escaped)  # earlier records first, as the walk would judge them
        escaped = []
        records[i] = _restore(record, 3)
        walked.append(i)
    _unescape_all(escaped)
    return walked


def _unescape_all(records: list[dict[str, Any]]) -> None:
    texts = unescape_many([record["message"] for record in records])
    for record, text in zip(records, texts):
        record["message"] = text


def decode(frames: Sequence[bytes], key: bytes, expect: str = "any") -> Message:
    """Check and unpack one message. `expect` is "worker" (client side), "client" (worker
    side) or "any". Raises ProtocolError with a stable reason; never anything else."""
    if len(frames) != 2:
        raise ProtocolError("bad_frames", f"{len(frames)} frames, want 2")
    packed, mac = bytes(frames[0]), bytes(frames[1])
    if len(packed) > MAX_MESSAGE_BYTES:
        raise ProtocolError("oversize", f"{len(packed)} bytes")
    if len(mac) != MAC_SIZE or not hmac.compare_digest(sign(key, packed), mac):
        raise ProtocolError("bad_signature")
    try:
        raw = msgpack.unpackb(
            packed,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=MAX_MESSAGE_BYTES,
            max_bin_len=MAX_MESSAGE_BYTES,
            max_ext_len=MAX_MESSAGE_BYTES,
            max_array_len=MAX_ARRAY_ITEMS,
            max_map_len=MAX_MAP_ITEMS,
        )
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types for bad input
        raise ProtocolError("malformed", type(exc).__name__) from None
    if type(raw) is not dict:
        raise ProtocolError("malformed", "envelope is not a map")
    version = raw.get("v")
    if type(version) is not int:
        raise ProtocolError("malformed", "envelope.v must be an int")
    if version not in SUPPORTED_MAJORS:
        raise ProtocolError(
            "unsupported_version", f"v{version}; this side speaks v{PROTOCOL_MAJOR}"
        )
    records = _logs_records(raw)
    if records is not None:  # body comes first: its records are walked first, as in _restore
        walked = _restore_records(records)
    envelope = _restore(raw, 0)
    if records is not None:
        envelope["body"]["records"] = records
    kind, seq, ts, job, body = (envelope.get(k) for k in ("kind", "seq", "ts", "job", "body"))
    if (
        type(kind) is not str
        or type(seq) is not int
        or seq < 1
        or type(job) is not str
        or type(body) is not dict
        or type(ts) not in (int, float)
    ):
        raise ProtocolError("malformed", "envelope needs kind, seq >= 1, ts, job, body")
    allowed = {"worker": WORKER_KINDS, "client": CLIENT_KINDS}.get(expect, KINDS)
    if kind not in allowed:
        raise ProtocolError("unknown_kind", kind)
    check_fields(kind, body, walked if records is not None else None)
    trunc = envelope.get("trunc") or []
    if type(trunc) is not list:
        raise ProtocolError("malformed", "envelope.trunc must be a list")
    sender = envelope.get("from")
    if sender is not None and type(sender) is not str:
        raise ProtocolError("malformed", "envelope.from must be a string")
    mt = envelope.get("mt")
    if mt is not None and type(mt) not in (int, float):
        raise ProtocolError("malformed", "envelope.mt must be a number")
    return Message(
        kind,
        seq,
        float(ts),
        job,
        body,
        tuple(str(p) for p in trunc),
        sender,
        None if mt is None else float(mt),
    )


# --- sequence numbers -----------------------------------------------------------------
def check_seq(last: int, seq: int) -> tuple[str, int]:
    """Judge a sender's next seq against the last one accepted (0 before any).

    "ok": the next one; "gap": newer, with seq - last - 1 messages lost; "replay": not newer
    (a duplicate or reordered message) and must not be processed. Returns (verdict, last)."""
    if seq <= last:
        return "replay", last
    return ("ok" if seq == last + 1 else "gap"), seq
