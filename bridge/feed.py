"""The feed file: a scheduled job's events, numbered, as its keeper judged them.

One ASCII JSON object per line, each beginning `{"seq": N, ` where N is the event's position
in the feed: 1 for the first line, one more for each next line, never reused (a write that
failed leaves a gap, which the report counts as events_failed). The keeper is the only writer
while it lives; reconciliation appends the end of a job whose keeper was lost. Readers need
no lock: a line is written whole, and a reader takes only lines that end in a newline.

Pure file reads with bounded memory, shared by attach() in Python and its Node twin
(node-client/src/feed.js), pinned by vectors/feed.json:

- `last_seq(path)`: the number of the last whole line (0 for an empty or missing file);
- `last_status(path)`: the offset after the last whole line and the last `status` event,
  reading backwards (CATCH_UP_BYTES at most): how a face joins "now";
- `offset_of(path, seq)`: where the first line numbered `seq` or more begins, by bisection
  over byte offsets: how a face joins "from event N" (200,000 lines, 42 MB: about 0.2 ms
  and 0.15 MB read).

docs/PROTOCOL.md section 11, "The feed", is the contract; docs/STORE.md "Events file"
says where it lives.
"""

from __future__ import annotations

import re
from typing import IO, Any, Optional

from trainbridge.bridge import jsonform

CATCH_UP_BYTES = 8 * 1024 * 1024  # last_status reads at most this much of the file's end
BLOCK = 256 * 1024  # backward reads, this much at a time
PROBE = 4096  # forward reads while looking for a line start (most lines are shorter)
SEQ = re.compile(rb'\{"seq": ?(\d+)[,}]')
# The end event's line, as encode() writes it: the number first, then the event's name.
END = re.compile(rb'\{"seq": ?\d+, ?"event": ?"end"')


class FeedError(ValueError):
    """The file is not a numbered feed (written before events were numbered)."""


def encode(seq: int, event: dict[str, Any]) -> str:
    """One feed line: `seq` first, so a reader finds it in the line's first bytes."""
    body = {k: v for k, v in event.items() if k != "seq"}
    return jsonform.dumps({"seq": seq, **body}, default=str) + "\n"


def seq_of(line: bytes) -> Optional[int]:
    """The number at the start of a feed line, or None for a line without one."""
    match = SEQ.match(line)
    return int(match.group(1)) if match else None


def _boundary(f: IO[bytes]) -> int:
    """The offset just after the file's last newline (a line still being written is not yet
    in the feed), or 0."""
    pos = f.seek(0, 2)
    size = PROBE  # a line is usually short: a small read first, larger ones after
    while pos > 0:
        step = min(size, pos)
        pos -= step
        f.seek(pos)
        cut = f.read(step).rfind(b"\n")
        if cut >= 0:
            return pos + cut + 1
        size = min(size * 2, BLOCK)
    return 0


def _line_at(f: IO[bytes], pos: int) -> bytes:
    """The first bytes of the line that starts at pos (enough for its number and name)."""
    f.seek(pos)
    return f.read(64)


def _next_start(f: IO[bytes], pos: int, end: int) -> int:
    """The first line start at or after pos (pos itself when a newline precedes it), or end."""
    if pos <= 0:
        return 0
    f.seek(pos - 1)
    while pos - 1 < end:
        block = f.read(PROBE)
        if not block:
            return end
        cut = block.find(b"\n")
        if cut >= 0:
            return min(pos + cut, end)
        pos += len(block)
    return end


def torn(path: str) -> bool:
    """Whether the file ends in half a line (its writer was killed mid-write)."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) == 0:
                return False
            f.seek(-1, 2)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


def last_seq(path: str, torn: bool = False) -> int:
    """The number of the feed's last whole line (with torn=True: of its half last line, whose
    number was used); 0 when it has none. FeedError when that line has no number."""
    line = _last_line(path, torn)
    if line is None:
        return 0
    seq = seq_of(line)
    if seq is None:
        raise FeedError(f"{path}: its lines carry no event number (an older keeper wrote it)")
    return seq


def ends(path: str) -> bool:
    """Whether the feed's last whole line is its end event (nobody writes after it)."""
    line = _last_line(path)
    return line is not None and END.match(line) is not None


def _last_line(path: str, torn: bool = False) -> Optional[bytes]:
    """The first bytes of the feed's last whole line (with torn=True: of its half last
    line), or None when it has none."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    with f:
        end = f.seek(0, 2) + 1 if torn else _boundary(f)
        if end == 0:
            return None
        pos = end - 1
        while pos > 0:  # back to the start of the last line
            step = min(BLOCK, pos)
            f.seek(pos - step)
            cut = f.read(step).rfind(b"\n")
            if cut >= 0:
                pos = pos - step + cut + 1
                break
            pos -= step
        return _line_at(f, pos)


def offset_of(path: str, seq: int) -> int:
    """Where the first whole line numbered `seq` or more begins; the offset after the last
    whole line when there is none yet. FeedError when the file's lines carry no number."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"an event number is an integer from 1, not {seq!r}")
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return 0
    with f:
        end = _boundary(f)

        def number(pos: int) -> int:
            got = seq_of(_line_at(f, pos))
            if got is None:
                raise FeedError(
                    f"{path}: the line at byte {pos} carries no event number (an older keeper "
                    f"wrote this job's events): attach from the start or from now instead"
                )
            return got

        # lo is a line start; every line before lo is numbered below seq. The answer is the
        # first line start in [lo, hi] whose number is seq or more, or end.
        lo, hi = 0, end
        while lo < hi:
            mid = _next_start(f, (lo + hi) // 2, end)
            if mid >= hi:  # no line starts in the upper half: step forward from lo
                if number(lo) >= seq:
                    return lo
                lo = _next_start(f, lo + 1, end)
                continue
            if number(mid) >= seq:
                hi = mid
            else:
                lo = _next_start(f, mid + 1, end)
        return lo


def last_status(path: str) -> tuple[int, Optional[dict[str, Any]]]:
    """(the offset after the last whole line, the last `status` event or None), reading the
    file backwards block by block, CATCH_UP_BYTES at most."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return 0, None
    with f:
        boundary = _boundary(f)
        pos, tail = boundary, b""
        while pos > 0 and boundary - pos < CATCH_UP_BYTES:
            step = min(BLOCK, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            lines = tail.split(b"\n")
            tail = lines[0] if pos > 0 else b""  # maybe the end of an earlier line
            for line in reversed(lines[1:] if pos > 0 else lines):
                if b'"status"' not in line:
                    continue
                try:
                    event = jsonform.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "status":
                    return boundary, event
        return boundary, None
