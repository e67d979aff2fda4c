"""The ASCII rule of the wire (docs/PROTOCOL.md section 3): every text travels as ASCII,
escaped reversibly. Pure; the one implementation (vectors/codec.json pins it).

Encoders escape: "\\" -> "\\\\"; U+0080..U+00FF -> \\xhh; up to U+FFFF (lone surrogates too)
-> \\uhhhh; beyond -> \\Uhhhhhhhh; hex lowercase. Undecodable bytes travel as the PEP 383
surrogates U+DC80..U+DCFF, so they get a reversible \\udcXX escape like any other.
"""

from __future__ import annotations

import re
from codecs import unicode_escape_decode as _unicode_escape_decode

from trainbridge.protocol.errors import ProtocolError

# Encoders escape: "\" -> "\\"; U+0080..U+00FF -> \xhh; up to U+FFFF (lone surrogates too)
# -> \uhhhh; beyond -> \Uhhhhhhhh; hex lowercase. Undecodable bytes travel as the PEP 383
# surrogates U+DC80..U+DCFF, so they get a reversible \udcXX escape like any other.
_ESCAPE = re.compile(
    r"\\(?:\\|x[89a-f][0-9a-f]|u(?!00)[0-9a-f]{4}|U0010[0-9a-f]{4}|U000[1-9a-f][0-9a-f]{4})"
)


def escape(text: str) -> str:
    """Make `text` ASCII, reversibly. ASCII text without a backslash comes back as is."""
    if text.isascii() and "\\" not in text:
        return text
    return text.replace("\\", "\\\\").encode("ascii", "backslashreplace").decode("ascii")


def _check_escapes(text: str) -> None:
    # One C-level pass for the common case: every backslash starts a valid escape, so
    # removing the escapes (tokenised left to right, as below) leaves no backslash.
    if "\\" not in _ESCAPE.sub("", text):
        return
    pos = 0
    while True:
        i = text.find("\\", pos)
        if i < 0:
            return
        m = _ESCAPE.match(text, i)
        if m is None:
            raise ProtocolError("bad_escape", repr(text[i : i + 12]))
        pos = m.end()


def unescape(text: str) -> str:
    """Inverse of escape(). Raises ProtocolError for non-ASCII or a malformed escape."""
    if not text.isascii():
        raise ProtocolError("non_ascii", repr(text[:40]))
    if "\\" not in text:
        return text
    _check_escapes(text)
    return _unicode_escape_decode(text)[0]  # the codec itself: no lookup by name


def escape_within(text: str, limit: int) -> tuple[str, bool]:
    """escape(text), or if longer than `limit`, that of the longest prefix of `text` (in
    code points) whose escape fits; the flag says whether it was cut."""
    out = escape(text)
    if len(out) <= limit:
        return out, False
    lo, hi = 0, min(len(text), limit)  # escape(text[:lo]) fits; every char escapes to >= 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(escape(text[:mid])) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return escape(text[:lo]), True


def unescape_many(texts: list[str]) -> list[str]:
    """unescape() of each text: in one C-level pass when they are all valid (joined by NUL,
    which no valid escape produces), otherwise one by one, for the first one's error."""
    if len(texts) > 1:
        joined = "\0".join(texts)
        if (
            joined.isascii()
            and joined.count("\0") == len(texts) - 1
            and "\\" not in _ESCAPE.sub("", joined)
        ):
            return _unicode_escape_decode(joined)[0].split("\0")
    return [unescape(text) for text in texts]
