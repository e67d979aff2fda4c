"""The Python codec against the golden vectors: the one codec of the wire, which they pin."""

import hashlib

import pytest

from trainbridge.protocol import codec

from .vectors import frames_of, load, same, untag

V = load()
KEY = bytes.fromhex(V["key_hex"])


@pytest.mark.parametrize("case", V["encode"], ids=lambda c: c["name"])
def test_encode_gives_the_golden_bytes(case):
    frames = codec.encode(
        case["kind"],
        case["seq"],
        untag(case["body"]),
        KEY,
        case["job"],
        ts=case["ts"],
        sender=case.get("sender"),
    )
    if "frames_hex" in case:
        assert [f.hex() for f in frames] == case["frames_hex"]
    else:
        assert [hashlib.sha256(f).hexdigest() for f in frames] == case["frames_sha256"]
    assert all(len(f) <= codec.MAX_MESSAGE_BYTES for f in frames)


@pytest.mark.parametrize("case", V["encode"], ids=lambda c: c["name"])
def test_encoded_vectors_decode_to_the_expected_value(case):
    frames = codec.encode(
        case["kind"],
        case["seq"],
        untag(case["body"]),
        KEY,
        case["job"],
        ts=case["ts"],
        sender=case.get("sender"),
    )
    msg = codec.decode(frames, KEY)
    want = untag(case["decoded"])
    assert (msg.kind, msg.seq, msg.ts, msg.job) == (
        want["kind"],
        want["seq"],
        want["ts"],
        want["job"],
    )
    assert msg.sender == want["sender"]
    assert same(msg.body, want["body"])
    assert list(msg.truncated) == want["truncated"]
    assert codec.decode(frames, KEY).body is not msg.body  # no shared mutable state between calls


@pytest.mark.parametrize("case", V["decode"], ids=lambda c: c["name"])
def test_decode_vectors(case):
    key = bytes.fromhex(case["key_hex"])
    frames = frames_of(case)
    if "error" in case:
        with pytest.raises(codec.ProtocolError) as info:
            codec.decode(frames, key, expect=case["expect"])
        assert info.value.reason == case["error"]
    else:
        msg = codec.decode(frames, key, expect=case["expect"])
        want = untag(case["decoded"])
        assert (msg.kind, msg.seq, msg.ts, msg.job) == (
            want["kind"],
            want["seq"],
            want["ts"],
            want["job"],
        )
        assert msg.sender == want["sender"]
        assert msg.mt == want.get("mt")
        assert same(msg.body, want["body"])


@pytest.mark.parametrize("case", V["escape"], ids=lambda c: c["name"])
def test_escape_vectors(case):
    assert codec.escape(case["text"]) == case["escaped"]
    assert case["escaped"].isascii()
    assert codec.unescape(case["escaped"]) == case["text"]


@pytest.mark.parametrize("case", V["unescape_errors"], ids=lambda c: c["name"])
def test_unescape_rejects(case):
    with pytest.raises(codec.ProtocolError) as info:
        codec.unescape(case["escaped"])
    assert info.value.reason == case["error"]


@pytest.mark.parametrize("case", V["seq"], ids=lambda c: f'{c["last"]}->{c["seq"]}')
def test_sequence_verdicts(case):
    assert codec.check_seq(case["last"], case["seq"]) == (case["verdict"], case["new_last"])


def test_vectors_cover_every_kind():
    kinds = {c["kind"] for c in V["encode"]}
    assert kinds == set(codec.KINDS)
    reasons = {c["error"] for c in V["decode"] if "error" in c}
    assert {
        "bad_signature",
        "non_ascii",
        "bad_escape",
        "unknown_kind",
        "unsupported_version",
        "bad_field",
        "malformed",
        "oversize",
        "bad_type",
        "too_deep",
        "bad_frames",
    } <= reasons
