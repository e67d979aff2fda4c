"""Writes vectors/codec.json, the golden vectors of the wire's one codec (protocol/codec.py).

Run it only when the protocol changes on purpose, then review the diff: the committed file
is the contract, and tests/codec/test_vectors.py checks the codec against it, not against
this script.

JSON cannot say everything the wire can, so values use tags the test suite understands:
  {"$int": "9007199254740993"}  an integer beyond 2^53 (JavaScript gets a BigInt)
  {"$float": "nan" | "inf" | "-inf"}
  {"$bytes": "<hex>"}            raw bytes decoded as UTF-8 with PEP 383 surrogates,
                                 the way the client turns undecodable output into text
  {"$runs": [[text, count], ...]} a long string, run-length encoded
Frames longer than 4 KiB are given as their SHA-256 ("frames_sha256") instead of hex.
Lone surrogates are written as JSON \\udXXX escapes, which both JSON parsers keep.
"""

import hashlib
import itertools
import json
import math
import os
import sys

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from trainbridge.protocol import codec

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
JOB = "job-7f3a"
TS = 1764460800.25


def tag(value):
    """Python value -> JSON with tags."""
    if isinstance(value, str) and len(value) > 1024:
        return {"$runs": [[ch, len(list(group))] for ch, group in itertools.groupby(value)]}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if abs(value) <= codec.SAFE_INT else {"$int": str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            return {"$float": "nan"}
        if math.isinf(value):
            return {"$float": "inf" if value > 0 else "-inf"}
        return value
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, dict):
        return {k: tag(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [tag(v) for v in value]
    raise TypeError(type(value))


def restored(value):
    """What the decoder hands back for an input value (bytes become text)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, dict):
        return {k: restored(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [restored(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) <= codec.SAFE_INT:
        return int(value)
    return value


def wire(body):
    """A body as the encoder puts it on the wire (escaped), for hand-built envelopes."""
    return codec._prepare(body, "body", [], 1)


def sign_raw(envelope, key=KEY):
    packed = msgpack.packb(envelope, use_bin_type=True)
    return [packed, codec.sign(key, packed)]


def envelope(kind, body, seq=1, **extra):
    env = {"body": body, "job": JOB, "kind": kind, "seq": seq, "ts": TS, "v": 1}
    env.update(extra)
    return env


HELLO = {
    "pid": 4242,
    "ppid": 1,
    "argv": ["train.py", "--lr", "3e-4", "--name", "\u4e2d\u6587\u6d4b\u8bd5"],
    "cwd": "/home/\u7528\u6237/lora",
    "python": {"version": "3.11.7", "executable": "/usr/bin/python3", "implementation": "cpython"},
    "host": "gpu-box",
    "rank": 0,
    "local_rank": 0,
    "world_size": 1,
    "env": {"CUDA_VISIBLE_DEVICES": "0", "HTTPS_PROXY": None},
    "packages": {"torch": "2.13.0", "numpy": None},
    "proto": "1.0",
    "worker": "0.1.0",
    "heartbeat_s": 1.0,
}
ERROR = {
    "type": "RuntimeError",
    "message": "CUDA out of memory. \u5206\u914d\u5931\u8d25",
    "traceback": "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n",
    "frames": [{"file": "train.py", "line": 9, "function": "<module>"}],
    "chain": [{"type": "OSError", "message": "disk full", "relation": "cause"}],
    "stage": "model",
    "fatal": True,
    "thread": "MainThread",
    "kind": "cuda_oom",
}

ENCODE_CASES = [
    ("hello with Chinese argv and cwd", "hello", HELLO),
    (
        "stage begin with budget",
        "stage",
        {"event": "begin", "name": "dataloader", "depth": 0, "budget_s": 300.0},
    ),
    (
        "stage end",
        "stage",
        {"event": "end", "name": "dataloader", "depth": 0, "status": "ok", "duration_s": 12.5},
    ),
    (
        "progress: integral float 3.0 travels as int 3",
        "progress",
        {"step": 3.0, "total": 100, "metrics": {"loss": 0.25, "lr": 3.0}},
    ),
    (
        "progress: nan and inf metrics",
        "progress",
        {
            "step": 1,
            "total": None,
            "metrics": {"loss": float("nan"), "grad": float("inf"), "neg": float("-inf")},
        },
    ),
    (
        "progress: 64-bit integers",
        "progress",
        {"step": 2**53 + 1, "total": 2**64 - 1, "metrics": {"min": -(2**63)}},
    ),
    (
        "heartbeat with a stalled main thread stack",
        "heartbeat",
        {
            "beat": 12,
            "stage": "model",
            "stages": ["main", "model"],
            "idle_s": 31.5,
            "progress_age_s": None,
            "stack": "  File \"hub.py\", line 1, in download\n",
            "dropped": {"log": 0},
        },
    ),
    (
        "log with emoji and backslashes",
        "log",
        {"level": "warning", "message": "saved C:\\out\\\u6a21\u578b \U0001f600 done"},
    ),
    ("log with a lone surrogate", "log", {"level": "info", "message": "half \ud800 pair"}),
    (
        "log with GBK bytes that are not UTF-8",
        "log",
        {"level": "error", "message": "\u9519\u8bef".encode("gbk")},
    ),
    ("error: CUDA OOM with a cause chain", "error", ERROR),
    (
        "error: SystemExit with a message",
        "error",
        dict(
            ERROR,
            type="SystemExit",
            message="bad config",
            kind="system_exit",
            exit_code=1,
            chain=[],
            frames=[],
            traceback="",
        ),
    ),
    ("bye", "bye", {"exit_code": 0, "reason": "normal"}),
    (
        "reply to dump_stacks",
        "reply",
        {"to": 5, "ok": True, "stacks": "Thread 0x1 (most recent call first):\n"},
    ),
    ("ping", "ping", {}),
    ("dump_stacks", "dump_stacks", {}),
    ("cancel", "cancel", {"reason": "user pressed stop"}),
    ("ack", "ack", {"to": 41}),
    ("refuse", "refuse", {"reason": "unsupported protocol version 2", "supported": [1]}),
    (
        "oversize field is cut at an escape boundary and flagged",
        "log",
        {"level": "info", "message": "a" * (codec.MAX_FIELD_CHARS - 3) + "\u4e2d" + "tail"},
    ),
    (
        "oversize text field (stack) has its own larger limit",
        "heartbeat",
        {
            "beat": 1,
            "stage": None,
            "stages": [],
            "idle_s": 0,
            "progress_age_s": 0.5,
            "stack": "x" * (codec.MAX_TEXT_CHARS + 5),
            "dropped": {},
        },
    ),
    (
        "logs: consecutive records batched, non-ASCII and fields kept per record",
        "logs",
        {
            "records": [
                {"level": "info", "message": "epoch 1 \u5b8c\u6210", "created": 1764460800.5},
                {
                    "level": "warning",
                    "message": "C:\\ckpt",
                    "logger": "train",
                    "created": 1764460801,
                    "fields": {"loss": 0.25, "note": "\u00e9"},
                },
            ]
        },
    ),
    (
        "user message (worker.send): any JSON value, non-ASCII escaped",
        "user",
        {
            "data": {
                "path": "/ckpt/\u6a21\u578b-3.pt",
                "step": 3,
                "ok": True,
                "list": [1, 2.5, None, "C:\\out"],
            }
        },
    ),
    ("user message (job.send): a bare string", "user", {"data": "save a checkpoint now"}),
    ("user message: null data", "user", {"data": None}),
    (
        "progress signed with its sender's routing id (1.1)",
        "progress",
        {"step": 7, "total": 10, "metrics": {}},
        "job-7f3a/0/4242",
    ),
    (
        "user message (worker.send) signed with its sender's routing id (1.1)",
        "user",
        {"data": {"step": 3}},
        "job-7f3a/0/4242",
    ),
    (
        "artifact: a file the job made, its non-ASCII path escaped",
        "artifact",
        {
            "path": "/runs/\u6a21\u578b/ckpt-100.pt",
            "name": "ckpt-100.pt",
            "kind": "checkpoint",
            "bytes": 1536,
            "step": 100,
            "by": "torch.save",
        },
    ),
    (
        "progress with every call's points since the last send",
        "progress",
        {
            "step": 3,
            "total": 10,
            "metrics": {"loss": 0.5},
            "points": {"steps": [1, 2, 3], "metrics": {"loss": [2.0, None, 0.5]}},
        },
    ),
]


def frames_field(frames):
    if sum(len(f) for f in frames) > 4096:
        return {"frames_sha256": [hashlib.sha256(f).hexdigest() for f in frames]}
    return {"frames_hex": [f.hex() for f in frames]}


def encode_cases():
    out = []
    for i, (name, kind, body, *sender) in enumerate(ENCODE_CASES):
        seq = i + 1
        sender = sender[0] if sender else None
        frames = codec.encode(kind, seq, body, KEY, JOB, ts=TS, sender=sender)
        msg = codec.decode(frames, KEY)
        case = {
            "name": name,
            "op": "encode",
            "kind": kind,
            "seq": seq,
            "job": JOB,
            "ts": TS,
            "sender": sender,
            "body": tag(body),
            **frames_field(frames),
            "decoded": decoded(msg),
        }
        if not msg.truncated:
            assert msg.body == restored(body) or name.startswith("progress: nan"), name
        out.append(case)
    return out


def decode_case(name, frames, reason=None, expect="any", key=KEY):
    case = {"name": name, "op": "decode", "expect": expect, "key_hex": key.hex()}
    if sum(len(f) for f in frames) > 4096:  # only the oversize case: rebuild it from its tag
        assert all(f == frames[0][:1] * len(f) for f in frames[:1])
        case["frames_runs"] = [[bytes(f[:1]).hex(), len(f)] for f in frames]
    else:
        case["frames_hex"] = [bytes(f).hex() for f in frames]
    try:
        msg = codec.decode(frames, key, expect=expect)
    except codec.ProtocolError as exc:
        assert exc.reason == reason, (name, exc.reason, reason)
        case["error"] = exc.reason
    else:
        assert reason is None, (name, "decoded but expected", reason)
        case["decoded"] = decoded(msg)
    return case


def decoded(msg):
    """A decoded message as the vectors hold it."""
    return {
        "kind": msg.kind,
        "seq": msg.seq,
        "ts": msg.ts,
        "job": msg.job,
        "body": tag(msg.body),
        "truncated": list(msg.truncated),
        "sender": msg.sender,
        **({"mt": msg.mt} if msg.mt is not None else {}),  # 1.2: absent in older cases
    }


def decode_cases():
    good = codec.encode("ack", 3, {"to": 2}, KEY, JOB, ts=TS)
    flipped = bytearray(good[0])
    flipped[-1] ^= 1
    ok_progress = {"step": 1, "total": None, "metrics": {}}
    deep = {"a": 1}
    for _ in range(20):
        deep = {"d": deep}
    return [
        decode_case("valid ack", good),
        decode_case(
            "a signed sender (1.1) is returned",
            sign_raw(
                envelope("bye", {"exit_code": 0, "reason": "normal"}, **{"from": "job-7f3a/0/4242"})
            ),
        ),
        decode_case(
            "a sender that is not a string is malformed",
            sign_raw(envelope("bye", {"exit_code": 0, "reason": "normal"}, **{"from": 4242})),
            "malformed",
        ),
        decode_case(
            "the sender's monotonic stamp (1.2) is returned",
            sign_raw(envelope("bye", {"exit_code": 0, "reason": "normal"}, mt=8123.25)),
        ),
        decode_case(
            "a monotonic stamp that is not a number is malformed",
            sign_raw(envelope("bye", {"exit_code": 0, "reason": "normal"}, mt="8123")),
            "malformed",
        ),
        decode_case(
            "JavaScript float 3.0 arrives as int 3 (decoder accepts int for num)",
            sign_raw(envelope("progress", {"step": 3, "total": 3, "metrics": {"x": 3}})),
        ),
        decode_case(
            "float timestamp and float step accepted",
            sign_raw(envelope("progress", {"step": 2.5, "total": None, "metrics": {}})),
        ),
        decode_case(
            "unknown extra fields are kept (minor versions add fields)",
            sign_raw(envelope("bye", {"exit_code": 0, "reason": "normal", "extra": "x"})),
        ),
        decode_case(
            "wrong key", codec.encode("ack", 3, {"to": 2}, OTHER_KEY, JOB, ts=TS), "bad_signature"
        ),
        decode_case("body byte flipped", [bytes(flipped), good[1]], "bad_signature"),
        decode_case("short mac", [good[0], good[1][:16]], "bad_signature"),
        decode_case("one frame", [good[0]], "bad_frames"),
        decode_case("three frames", [good[0], good[1], b""], "bad_frames"),
        decode_case(
            "non-ASCII string value",
            sign_raw(envelope("log", {"level": "info", "message": "\u4e2d"})),
            "non_ascii",
        ),
        decode_case(
            "non-ASCII map key",
            sign_raw(envelope("progress", dict(ok_progress, metrics={"\u00e9": 1}))),
            "non_ascii",
        ),
        decode_case(
            "malformed escape",
            sign_raw(envelope("log", {"level": "info", "message": "a\\qb"})),
            "bad_escape",
        ),
        decode_case(
            "non-canonical escape of ASCII",
            sign_raw(envelope("log", {"level": "info", "message": "\\u0041"})),
            "bad_escape",
        ),
        decode_case(
            "trailing lone backslash",
            sign_raw(envelope("log", {"level": "info", "message": "end\\"})),
            "bad_escape",
        ),
        decode_case(
            "bin value", sign_raw(envelope("log", {"level": "info", "message": b"raw"})), "bad_type"
        ),
        decode_case(
            "ext value (msgpack timestamp)",
            [
                *(lambda p: [p, codec.sign(KEY, p)])(
                    msgpack.packb(
                        envelope("log", {"level": "info", "message": msgpack.Timestamp(1, 0)})
                    )
                )
            ],
            "bad_type",
        ),
        decode_case(
            "invalid UTF-8 in a str",
            [
                *(lambda p: [p, codec.sign(KEY, p)])(
                    msgpack.packb(envelope("log", {"level": "info", "message": "X"})).replace(
                        b"\xa1X", b"\xa1\xff"
                    )
                )
            ],
            "malformed",
        ),
        decode_case("unknown kind", sign_raw(envelope("launch_missiles", {})), "unknown_kind"),
        decode_case(
            "client kind sent by a worker",
            sign_raw(envelope("cancel", {})),
            "unknown_kind",
            expect="worker",
        ),
        decode_case(
            "worker kind sent by a client",
            sign_raw(envelope("hello", wire(HELLO))),
            "unknown_kind",
            expect="client",
        ),
        decode_case(
            "unknown major version",
            sign_raw(envelope("hello", wire(HELLO), v=2)),
            "unsupported_version",
        ),
        decode_case(
            "version missing",
            [
                *(lambda p: [p, codec.sign(KEY, p)])(
                    msgpack.packb({"body": {}, "job": JOB, "kind": "ping", "seq": 1, "ts": TS})
                )
            ],
            "malformed",
        ),
        decode_case("missing required field", sign_raw(envelope("ack", {})), "bad_field"),
        decode_case("wrong field type", sign_raw(envelope("ack", {"to": "2"})), "bad_field"),
        decode_case(
            "logs record without a message",
            sign_raw(
                envelope(
                    "logs", {"records": [{"level": "info", "message": "ok"}, {"level": "info"}]}
                )
            ),
            "bad_field",
        ),
        decode_case("seq zero", sign_raw(envelope("ack", {"to": 2}, seq=0)), "malformed"),
        decode_case(
            "envelope is not a map",
            [*(lambda p: [p, codec.sign(KEY, p)])(msgpack.packb([1, 2]))],
            "malformed",
        ),
        decode_case(
            "truncated msgpack", [*(lambda p: [p, codec.sign(KEY, p)])(good[0][:-3])], "malformed"
        ),
        decode_case(
            "trailing bytes after the envelope",
            [*(lambda p: [p, codec.sign(KEY, p)])(good[0] + b"\xc0")],
            "malformed",
        ),
        decode_case(
            "nesting deeper than the limit",
            sign_raw(envelope("progress", dict(ok_progress, metrics=deep))),
            "too_deep",
        ),
        decode_case(
            "oversize message", [b"\x80" * (codec.MAX_MESSAGE_BYTES + 1), b"\0" * 32], "oversize"
        ),
        decode_case(
            "user message accepted from a worker",
            sign_raw(envelope("user", {"data": [1, "two"]})),
            expect="worker",
        ),
        decode_case(
            "user message accepted from the client",
            sign_raw(envelope("user", {"data": {"cmd": "save"}})),
            expect="client",
        ),
    ]


ESCAPE_CASES = [
    ("plain ASCII", "hello world"),
    ("backslash", "C:\\x\\u1234"),
    ("Latin-1", "caf\u00e9"),
    ("Chinese", "\u4e2d\u6587"),
    ("emoji", "\U0001f600"),
    ("lone high surrogate", "\ud83d"),
    ("lone low surrogate", "\ude00"),
    ("PEP 383 byte", "\udcff"),
    ("BOM and NUL", "\ufeff\x00"),
    ("U+0100 boundary", "\u00ff\u0100"),
    ("max code point", "\U0010ffff"),
]
UNESCAPE_ERRORS = [
    ("unknown escape letter", "\\n"),
    ("uppercase hex", "\\u4E2D"),
    ("\\x below 0x80", "\\x7f"),
    ("\\u for a Latin-1 char", "\\u00e9"),
    ("\\U for a BMP char", "\\U00004e2d"),
    ("\\U beyond U+10FFFF", "\\U00110000"),
    ("short \\u", "\\u4e2"),
    ("lone backslash", "a\\"),
    ("odd backslash run", "\\\\\\"),
    ("non-ASCII", "\u00e9"),
]
SEQ_CASES = [
    (0, 1, "ok", 1),
    (1, 2, "ok", 2),
    (5, 9, "gap", 9),
    (5, 5, "replay", 5),
    (9, 6, "replay", 9),
    (0, 3, "gap", 3),
]


def main():
    vectors = {
        "about": "Golden vectors for protocol v1. "
        "See docs/PROTOCOL.md and scripts/make_vectors.py.",
        "key_hex": KEY.hex(),
        "encode": encode_cases(),
        "decode": decode_cases(),
        "escape": [{"name": n, "text": t, "escaped": codec.escape(t)} for n, t in ESCAPE_CASES],
        "unescape_errors": [
            {"name": n, "escaped": e, "error": (lambda: _err(e))()} for n, e in UNESCAPE_ERRORS
        ],
        "seq": [{"last": a, "seq": b, "verdict": v, "new_last": n} for a, b, v, n in SEQ_CASES],
    }
    for case in vectors["seq"]:
        assert codec.check_seq(case["last"], case["seq"]) == (case["verdict"], case["new_last"])
    path = os.path.join(os.path.dirname(__file__), "..", "vectors", "codec.json")
    with open(path, "w", encoding="ascii") as f:
        json.dump(vectors, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {os.path.normpath(path)}")


def _err(escaped):
    try:
        codec.unescape(escaped)
    except codec.ProtocolError as exc:
        return exc.reason
    raise AssertionError(f"{escaped!r} should not unescape")


if __name__ == "__main__":
    main()
