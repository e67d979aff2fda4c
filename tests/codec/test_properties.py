"""Property tests of the codec: what round-trips is ASCII on the wire; bad bytes never raise
anything but ProtocolError."""

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from trainbridge.protocol import codec, schema

KEY = b"k" * 32

# Any code point, lone surrogates included (categories Cs), as Python strings can hold them.
texts = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=codec.INT64_MIN, max_value=codec.UINT64_MAX),
    st.floats(allow_nan=False),
    texts,
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(texts, inner, max_size=5)),
    max_leaves=20,
)


def wire_strings(obj):
    """Every string (keys too) in the raw unpacked envelope."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from wire_strings(k)
            yield from wire_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from wire_strings(v)


def canonical(value):
    if isinstance(value, float) and value.is_integer() and abs(value) <= codec.SAFE_INT:
        return int(value)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(texts)
def test_escape_round_trips_and_is_ascii(text):
    escaped = codec.escape(text)
    assert escaped.isascii()
    assert codec.unescape(escaped) == text


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(texts, values, max_size=6), st.integers(min_value=1, max_value=2**63))
def test_whatever_round_trips_is_ascii_on_the_wire(metrics, seq):
    body = {"step": 1, "total": None, "metrics": metrics}
    frames = codec.encode("progress", seq, body, KEY, "job")
    raw = msgpack.unpackb(frames[0], raw=False)
    assert all(s.isascii() for s in wire_strings(raw))
    msg = codec.decode(frames, KEY)
    assert msg.seq == seq
    if not msg.truncated:
        assert msg.body == canonical(body)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=40))
def test_arbitrary_frames_raise_only_protocol_errors(packed, mac):
    for frames in ([packed, mac], [packed, codec.sign(KEY, packed)]):
        try:
            codec.decode(frames, KEY)
        except codec.ProtocolError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_valid_frames_raise_only_protocol_errors(data):
    frames = codec.encode("log", 1, {"level": "info", "message": "\u4e2d\u6587 ok"}, KEY, "job")
    packed = bytearray(frames[0])
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        i = data.draw(st.integers(min_value=0, max_value=len(packed) - 1))
        packed[i] = data.draw(st.integers(min_value=0, max_value=255))
    resigned = [bytes(packed), codec.sign(KEY, bytes(packed))]  # authentic but malformed
    try:
        codec.decode(resigned, KEY)
    except codec.ProtocolError:
        pass


def test_truncation_never_splits_an_escape_and_keeps_the_longest_prefix():
    for limit in range(1, 40):
        text = "a\\\u4e2d\U0001f600b" * 5
        out, cut = codec.escape_within(text, limit)
        assert len(out) <= limit and cut
        prefix = codec.unescape(out)  # would raise on a split escape
        assert text.startswith(prefix)
        assert (
            len(codec.escape(text[: len(prefix) + 1])) > limit
        )  # one more code point would not fit


def test_encoder_rejects_integers_beyond_64_bits():
    for bad in (codec.UINT64_MAX + 1, codec.INT64_MIN - 1):
        try:
            codec.encode("progress", 1, {"step": bad, "total": None, "metrics": {}}, KEY, "job")
        except codec.ProtocolError as exc:
            assert exc.reason == "int_range"
        else:
            raise AssertionError("encoded an integer beyond 64 bits")


def test_a_cut_value_under_a_non_ascii_key_is_flagged_by_its_escaped_path():
    """trunc paths are wire strings: built from escaped keys, and read back as the original."""
    body = {
        "step": 1,
        "total": None,
        "metrics": {"\u635f\u5931": "x" * (codec.MAX_FIELD_CHARS + 1)},
    }
    frames = codec.encode("progress", 1, body, KEY, "job")
    raw = msgpack.unpackb(frames[0], raw=False)
    assert raw["trunc"] == ["body.metrics.\\u635f\\u5931"]
    assert codec.decode(frames, KEY).truncated == ("body.metrics.\u635f\u5931",)


class _Walked(dict):
    """A dict subclass: the encoder's shortcuts for plain dicts and worker.log() records
    (exact type checks) pass it by, so it takes the general walk: the reference."""


def _walked(value):
    if isinstance(value, dict):
        return _Walked({k: _walked(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_walked(v) for v in value]
    return value


long_texts = st.one_of(texts, st.builds(lambda t, n: t * n, texts, st.integers(0, 2000)))
log_records = st.one_of(
    st.fixed_dictionaries(
        {
            "created": st.one_of(st.floats(allow_nan=False), st.integers(0, 2**40)),
            "level": st.one_of(st.sampled_from(["info", "warning"]), texts),
            "message": long_texts,
        }
    ),
    st.dictionaries(
        st.one_of(st.sampled_from(["created", "level", "message", "fields"]), texts),
        values,
        max_size=5,
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(log_records, min_size=1, max_size=8), st.sampled_from(["logs", "log"]))
def test_the_encoders_shortcuts_give_the_general_walks_bytes_and_decode_alike(records, kind):
    """The fast paths for worker.log()'s records (encode and decode) are only shortcuts: the
    bytes, the truncation marks and the decoded message are those of the general walk."""
    body = {"records": records} if kind == "logs" else records[0]
    try:
        reference = codec.encode(kind, 3, _walked(body), KEY, "job", ts=1.5)
    except codec.ProtocolError as exc:
        try:
            codec.encode(kind, 3, body, KEY, "job", ts=1.5)
        except codec.ProtocolError as exc2:
            assert exc2.reason == exc.reason
            return
        raise AssertionError(f"the shortcut encoded what the general walk refuses: {exc}") from exc
    frames = codec.encode(kind, 3, body, KEY, "job", ts=1.5)
    assert frames == reference
    try:
        msg = codec.decode(frames, KEY)
    except codec.ProtocolError as exc:  # e.g. a record without a message: refused as a log
        raw = msgpack.unpackb(frames[0], raw=False)
        assert exc.reason == "bad_field", exc
        return
    raw = msgpack.unpackb(frames[0], raw=False)
    assert msg.body == _unescaped(raw["body"])


def _unescaped(value):
    if isinstance(value, str):
        return codec.unescape(value)
    if isinstance(value, dict):
        return {codec.unescape(k): _unescaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unescaped(v) for v in value]
    return value


wire_texts = st.text(alphabet=st.sampled_from(list("ab\\xuU089f\x00\u00e9")), max_size=14)
wire_records = st.one_of(
    st.fixed_dictionaries(
        {
            "created": st.one_of(st.floats(allow_nan=False), st.integers(0, 9)),
            "level": st.one_of(st.just("info"), wire_texts),
            "message": wire_texts,
        }
    ),
    st.dictionaries(
        st.sampled_from(["created", "level", "message", "x\\u00e9"]),
        st.one_of(wire_texts, st.integers(0, 9)),
        max_size=4,
    ),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(wire_records, min_size=1, max_size=6), wire_texts, st.booleans())
def test_a_logs_message_decodes_as_the_record_by_record_walk_would_even_when_malformed(
    records, job, body_last
):
    """The decoder's shortcut for `logs` records (messages unescaped together) accepts,
    returns and refuses (with the same reason) exactly what the general walk does."""
    raw = {"body": {"records": records}, "job": job, "kind": "logs", "seq": 1, "ts": 1.5, "v": 1}
    if body_last:
        raw["body"] = raw.pop("body")
    packed = msgpack.packb(raw, use_bin_type=True)
    try:
        envelope = codec._restore(msgpack.unpackb(packed, raw=False), 0)
        schema.check_fields("logs", envelope["body"])
        expected = ("ok", envelope["body"])
    except codec.ProtocolError as exc:
        expected = ("error", exc.reason)
    try:
        got = ("ok", codec.decode([packed, codec.sign(KEY, packed)], KEY).body)
    except codec.ProtocolError as exc:
        got = ("error", exc.reason)
    assert got == expected


def test_a_live_message_carries_both_clocks_and_a_fixed_one_only_what_it_was_given():
    """A message sent now carries the sender's wall clock (ts) and its monotonic clock (mt,
    protocol 1.2: a receiver on the same boot reads how long it waited from it, whatever a
    wall-clock step did); an envelope given a ts and no mt (the vectors') has none."""
    import time

    before = time.monotonic()
    msg = codec.decode(codec.encode("log", 1, {"level": "info", "message": "x"}, KEY, "job"), KEY)
    assert msg.mt is not None and before <= msg.mt <= time.monotonic()
    fixed = codec.encode("log", 1, {"level": "info", "message": "x"}, KEY, "job", ts=1.5)
    assert codec.decode(fixed, KEY).mt is None
    given = codec.encode("log", 1, {"level": "info", "message": "x"}, KEY, "job", ts=1.5, mt=7.0)
    assert codec.decode(given, KEY).mt == 7.0
