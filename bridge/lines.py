"""Output lines: split a child's byte stream into lines and decode each one. Pure.

The one implementation (a Node job's output is split and decoded here too, through
bridge/jobserve.py); vectors/lines.json pins it.

Splitting rules (docs/CLIENT.md, "Output lines"):
- A line ends at "\\n", at "\\r" (progress bars such as tqdm redraw with "\\r") or at "\\r\\n",
  which counts once. Its `end` says which: "lf", "cr", "crlf".
- An empty line ended by a lone "\r" is dropped (tqdm starts every redraw with "\r").
- A chunk that ends in "\\r" keeps that line back until the next byte shows whether "\\n"
  follows, so the lines never depend on where the pipe happened to cut the stream.
- A line longer than `max_line` bytes is cut into pieces of at most `max_line` bytes; every
  piece but the last has end "max". A cut never splits a UTF-8 sequence that fits.
- At EOF, flush() returns what is left with end "eof" (no trailing newline).

Decoding rules: UTF-8 (strict); else GBK (strict, when the whole line decodes); else UTF-8
with PEP 383 surrogates (each undecodable byte 0xhh becomes U+DChh). A bad byte never raises,
and `line_bytes(text, encoding)` gives back the original bytes.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Union

DEFAULT_MAX_LINE = 64 * 1024
_TERMINATOR = re.compile(rb"[\r\n]")


class RawLine(NamedTuple):
    data: bytes
    end: str  # "lf" | "cr" | "crlf" | "max" | "eof"


class LineSplitter:
    """Incremental splitter: feed(chunk) -> complete lines; flush() at EOF."""

    def __init__(self, max_line: int = DEFAULT_MAX_LINE):
        if max_line < 4:
            raise ValueError("max_line must be at least 4 bytes (one UTF-8 sequence)")
        self.max_line = max_line
        self._buf = bytearray()
        self._cr_pending = False  # the last chunk ended in "\r"; "\n" may follow

    def feed(self, chunk: bytes) -> list[RawLine]:
        raw = bytes(chunk)
        if not self._cr_pending and b"\r" not in raw:
            lines = self._feed_lf(raw)  # the common case, in bulk: a flood's 8 KiB writes
            if lines is not None:
                return lines
        out: list[RawLine] = []
        n = len(raw)
        pos = 0
        if self._cr_pending and n:
            self._cr_pending = False
            crlf = raw[0] == 0x0A
            self._emit(out, "crlf" if crlf else "cr")
            pos = 1 if crlf else 0
        while pos < n:
            m = _TERMINATOR.search(raw, pos)
            if m is None:
                self._buf += raw[pos:]
                out.extend(self._cut_long())
                break
            i = m.start()
            self._buf += raw[pos:i]
            out.extend(self._cut_long())
            if raw[i] == 0x0A:
                end, pos = "lf", i + 1
            elif i + 1 == n:  # "\r" at the end of the chunk: wait for the next byte
                self._cr_pending = True
                break
            elif raw[i + 1] == 0x0A:
                end, pos = "crlf", i + 2
            else:
                end, pos = "cr", i + 1
            self._emit(out, end)
        return out

    def _feed_lf(self, raw: bytes) -> Optional[list[RawLine]]:
        """feed() for a chunk with no "\r" (none pending either), split in one call: the
        same lines, or None when one is longer than max_line (feed's loop cuts it)."""
        parts = raw.split(b"\n")
        rest = parts.pop()
        if parts:
            parts[0] = bytes(self._buf) + parts[0]
            if len(rest) > self.max_line or max(map(len, parts)) > self.max_line:
                return None
            self._buf = bytearray(rest)
            new = tuple.__new__  # RawLine(part, "lf") without its Python-level __new__
            return [new(RawLine, (part, "lf")) for part in parts]
        if len(self._buf) + len(rest) > self.max_line:
            return None
        self._buf += rest
        return []

    def flush(self) -> list[RawLine]:
        """EOF: the line held back by a trailing "\\r", then any unterminated rest."""
        out: list[RawLine] = []
        if self._cr_pending:
            self._cr_pending = False
            self._emit(out, "cr")
        elif self._buf:
            out.append(RawLine(bytes(self._buf), "eof"))
            self._buf.clear()
        return out

    def _emit(self, out: list[RawLine], end: str) -> None:
        # An empty line ended by a lone "\r" is no line: tqdm starts every redraw with "\r".
        if self._buf or end != "cr":
            out.append(RawLine(bytes(self._buf), end))
        self._buf.clear()

    def _cut_long(self) -> list[RawLine]:
        """Cut pieces off the buffer while it holds more than max_line bytes."""
        out: list[RawLine] = []
        while len(self._buf) > self.max_line:
            cut = utf8_safe_cut(self._buf, self.max_line)
            out.append(RawLine(bytes(self._buf[:cut]), "max"))
            del self._buf[:cut]
        return out


def utf8_safe_cut(buf: Union[bytes, bytearray], limit: int) -> int:
    """A cut position <= limit that does not split a UTF-8 sequence.

    If the byte at `limit` continues a sequence whose lead byte (at most 3 bytes back)
    says it runs past `limit`, cut before that lead byte; otherwise cut at `limit`."""
    for lead in range(limit - 1, max(limit - 4, 0), -1):
        b = buf[lead]
        if b & 0xC0 == 0x80:
            continue  # a continuation byte: keep looking for the lead
        if b >= 0xC0 and (buf[limit] & 0xC0) == 0x80:
            size = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            if lead + size > limit:
                return lead
        break
    return limit


def decode_line(data: bytes) -> tuple[str, str]:
    """Bytes of one line -> (text, encoding): "utf-8", "gbk" or "escaped" (PEP 383)."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("gbk"), "gbk"
    except UnicodeDecodeError:
        pass
    return data.decode("utf-8", "surrogateescape"), "escaped"


def line_bytes(text: str, encoding: str) -> bytes:
    """Inverse of decode_line: the original bytes of a decoded line."""
    if encoding == "gbk":
        return text.encode("gbk")
    return text.encode("utf-8", "surrogateescape")


def log_text(text: str) -> str:
    """A decoded line as it is written to a UTF-8 log file: undecodable bytes (lone
    surrogates) become visible \\udcXX escapes instead of failing the write."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class RedrawThrottle:
    """Which output lines go to the log file (a pure rule; vectors/redraws.json).

    Every line does, except a progress bar's redraws (lines ended by a bare CR): of those a
    stream's log keeps at most one per `interval` seconds. A redraw held back is dropped when
    a full line follows on its stream (tqdm ends a bar with its final state and a newline),
    and written by flush() when the output ends on it (a bar that never finished).
    """

    def __init__(self, interval: float = 1.0):
        self.interval = interval
        self._written: dict[str, float] = {}  # stream -> time of the last redraw written
        self._held: dict[str, str] = {}  # stream -> the latest redraw not written

    def feed(self, stream: str, text: str, end: str, t: float) -> list[str]:
        """The texts to write now for one line (its time `t`, seconds)."""
        if end != "cr":
            self._held.pop(stream, None)
            return [text]
        last = self._written.get(stream)
        if last is not None and t - last < self.interval:
            self._held[stream] = text
            return []
        self._written[stream] = t
        self._held.pop(stream, None)
        return [text]

    def flush(self) -> list[str]:
        """At the end of the output: the redraws still held back, stdout's first."""
        held = [self._held[s] for s in sorted(self._held, key=lambda s: s != "stdout")]
        self._held.clear()
        return held
