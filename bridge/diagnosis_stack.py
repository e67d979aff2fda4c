"""Diagnosis, part 1: reading Python stacks and text (pure).

Parses the three stack formats that reach a client (traceback, faulthandler, py-spy) into
frames, finds the user's frame and the module being imported, reads the last traceback
printed in output lines, and holds the small text helpers every verdict uses (one ASCII-safe
line, the diagnosis dict). The verdicts are in diagnosis_end.py and diagnosis_hang.py;
diagnosis.py is the one name the rest of the client imports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

Frame = dict[str, Any]  # {"file": str, "line": int, "function": str}

# --- Python stack text ------------------------------------------------------------------
# Three formats reach us: traceback ('File "x.py", line 3, in f', innermost last),
# faulthandler ('File "x.py", line 3 in f', innermost first) and py-spy ('f (x.py:3)',
# innermost first). Every parser below returns frames innermost LAST, like the protocol's
# error.frames.
TB_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_FH_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>.+?)\s*$')
_PYSPY_FRAME = re.compile(r'^\s+(?P<func>\S[^()]*?) \((?P<file>[^()]+?):(?P<line>\d+)\)\s*$')
_FH_THREAD_HEADER = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+")
_FH_CURRENT = re.compile(r"^Current thread (0x[0-9a-fA-F]+)")
_HEADER = re.compile(r"^(?:Current thread|Thread|Traceback|Stack|Process|#|---|===)|:\s*$")


def _split_blocks(text: str) -> list[tuple[str, list[str]]]:
    """Split a dump into (header, lines) per thread. A header is an unindented line."""
    blocks: list[tuple[str, list[str]]] = []
    header = ""
    lines: list[str] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if (
            not raw[0].isspace()
            and _HEADER.search(raw)
            and not TB_FRAME.match(raw)
            and not _FH_FRAME.match(raw)
        ):
            if lines or header:
                blocks.append((header, lines))
            header, lines = raw.strip(), []
        else:
            lines.append(raw)
    if lines or header:
        blocks.append((header, lines))
    return blocks


def _frames_of_block(header: str, lines: Sequence[str]) -> list[Frame]:
    frames: list[Frame] = []
    innermost_first = None
    for line in lines:
        for pattern, first in ((TB_FRAME, False), (_FH_FRAME, True), (_PYSPY_FRAME, True)):
            m = pattern.match(line)
            if m:
                frames.append({"file": m["file"], "line": int(m["line"]), "function": m["func"]})
                if innermost_first is None:
                    innermost_first = first
                break
    if "most recent call first" in header:
        innermost_first = True
    elif "most recent call last" in header:
        innermost_first = False
    if innermost_first:
        frames.reverse()
    return frames


def parse_stack(text: Optional[str], prefer: str = "main") -> list[Frame]:
    """Frames (innermost last) of one thread in a stack dump.

    prefer="main": the thread named MainThread, else the last thread in the dump
    (faulthandler and threading list the oldest thread, the main one, last).
    prefer="current": the faulthandler "Current thread" (the one that crashed)."""
    if not text:
        return []
    blocks = [(h, _frames_of_block(h, ls)) for h, ls in _split_blocks(text)]
    blocks = [(h, f) for h, f in blocks if f]
    if not blocks:
        return []
    if prefer == "current":
        for header, frames in blocks:
            if header.startswith("Current thread"):
                return frames
    for header, frames in blocks:
        if "MainThread" in header:
            return frames
    return blocks[-1][1]


def thread_stacks(text: Optional[str]) -> list[tuple[str, list[Frame]]]:
    """(header, frames innermost last) of every thread of a stack dump that has frames."""
    if not text:
        return []
    blocks = [(h, _frames_of_block(h, ls)) for h, ls in _split_blocks(text)]
    return [(h, f) for h, f in blocks if f]


def crash_dump_thread(crash_text: Optional[str]) -> Optional[tuple[str, bool]]:
    """(ident, main) of the thread a native crash happened on: faulthandler's last "Current
    thread" (the last dump in the text is the crash's), its ident as written ("0x00007f3a..."),
    and whether it is the main thread: the dump's last block (faulthandler lists the newest
    thread first, the main one last). None when the text has no such dump."""
    blocks = [h for h, _ in _split_blocks(crash_text or "") if _FH_THREAD_HEADER.match(h)]
    for i in range(len(blocks) - 1, -1, -1):
        current = _FH_CURRENT.match(blocks[i])
        if current is not None:
            return current.group(1), i == len(blocks) - 1
    return None


def crashed_thread(crash_text: Optional[str]) -> Optional[str]:
    """The crash's thread by name where it has one ("MainThread"), else its ident."""
    found = crash_dump_thread(crash_text)
    if found is None:
        return None
    ident, main = found
    return "MainThread" if main else ident


def thread_of(
    kind: Optional[str],
    evidence: Optional[dict[str, Any]],
    error: Optional[dict[str, Any]],
    crash_text: Optional[str],
    hung: bool,
) -> Optional[str]:
    """The thread a verdict is about, for a face to show first: the thread a hang's main
    thread waits for (evidence.waits_for), else a hang's main thread; the thread a native
    crash happened on; the thread a fatal error was raised in. None when none is known."""
    waits_for = (evidence or {}).get("waits_for") or {}
    if isinstance(waits_for, dict) and waits_for.get("thread"):
        return str(waits_for["thread"])
    if hung:
        return "MainThread"
    if kind == "native_crash":
        return crashed_thread(crash_text)
    thread = (error or {}).get("thread")
    return str(thread) if thread else None


def format_frame(frame: Optional[Frame]) -> str:
    """'file:line function' with the file shortened to its last two path parts."""
    if not frame:
        return "an unknown frame"
    where = f"{short_path(frame.get('file', '?'))}:{frame.get('line', '?')}"
    return f"{where} {frame.get('function', '?')}"


def short_path(path: str) -> str:
    parts = str(path).replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] else parts[-1]


_LIBRARY_MARKERS = (
    "/lib/python",
    "site-packages",
    "dist-packages",
    "<frozen",
    "/worker/",
    "/bridge/",
    "<string>",
)


def is_library_frame(frame: Frame) -> bool:
    path = str(frame.get("file", "")).replace("\\", "/")
    return any(m in path for m in _LIBRARY_MARKERS)


def user_frame(frames: Sequence[Frame]) -> Optional[Frame]:
    """The innermost frame in the user's own code (not the stdlib, site-packages, us)."""
    for frame in reversed(frames):
        if not is_library_frame(frame):
            return frame
    return None


def where(frames: Sequence[Frame]) -> str:
    """'train.py:12 load' or 'socket.py:706 readinto (from train.py:12 load)'."""
    if not frames:
        return "an unknown frame (no Python stack)"
    inner, mine = frames[-1], user_frame(frames)
    if mine is None or mine is inner:
        return format_frame(inner)
    return f"{format_frame(inner)} (from {format_frame(mine)})"


def frame_fields(frames: Sequence[Frame]) -> dict[str, Any]:
    inner, mine = (frames[-1] if frames else None), user_frame(frames)
    return {
        "frame": format_frame(inner) if inner else None,
        "user_frame": format_frame(mine) if mine else None,
    }


# --- imports ----------------------------------------------------------------------------
def importing_module(frames: Sequence[Frame]) -> Optional[str]:
    """The module being imported when the stack is inside importlib, else None.

    Names the innermost module whose top level (a "<module>" frame) runs under an
    importlib._bootstrap frame: that is the import that has not finished."""
    in_import = False
    name = None
    for frame in frames:  # outermost first
        fname = str(frame.get("file", ""))
        if "importlib._bootstrap" in fname or "importlib/_bootstrap" in fname:
            in_import = True
            continue
        if in_import and frame.get("function") == "<module>":
            name = module_name(fname)
    if in_import and name is None:
        return "an unknown module"
    return name


def module_name(path: str) -> str:
    parts = str(path).replace("\\", "/").split("/")
    stem = parts[-1]
    if stem in ("__init__.py", "__init__.pyc") and len(parts) > 1:
        return parts[-2]
    return re.sub(r"\.(py|pyc|so|pyd)$", "", stem)


# --- text -------------------------------------------------------------------------------
TB_LAST_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)"
    r"|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(?P<msg>.*))?$"
)


# Terminal escapes (ECMA-48): CSI ("\x1b[1m", colours, cursor moves), OSC (titles, links)
# and two-byte escapes. torch puts "\x1b[1m...\x1b[0m" in some error messages; a person
# reading a report or a GUI needs the words, not the escapes (the log keeps the raw bytes).
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-_])|\x9b[0-?]*[ -/]*[@-~]"
)
SUMMARY_MAX = 900  # characters of a diagnosis summary
MESSAGE_MAX = 600  # characters of an error message quoted in a summary: long enough to keep
# the part that says what to do (torch.load's "weights_only=False ...")


def strip_ansi(text: Any) -> str:
    """The text without terminal escape sequences."""
    return _ANSI.sub("", str(text if text is not None else ""))


def one_line(text: Any, limit: int = 200) -> str:
    s = " ".join(strip_ansi(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# A line of a long message that names an error ("WeightsUnpickler error: Unsupported global",
# "RuntimeError: ..."): what a cut message must still show.
_ERROR_LINE = re.compile(r"(Error|error|Exception)\s*:")
_HEAD_SHARE = 3  # a cut message's first line keeps at least 1/_HEAD_SHARE of the room


def quote(text: Any, limit: int = MESSAGE_MAX) -> str:
    """An error message for a summary: one line, at most `limit` characters. One that is too
    long keeps its first line and the later lines that name an error, then the other lines
    that still fit, in order; " ... " marks what was left out. torch.load's message gives
    500 characters of advice before "WeightsUnpickler error: Unsupported global ...",
    and a cut from the start lost the error itself."""
    whole = one_line(text, 1 << 30)
    if len(whole) <= limit:
        return whole
    lines = [one_line(line, 1 << 30) for line in re.split(r"\r\n|\r|\n", strip_ansi(text))]
    lines = [line for line in lines if line]
    named = [i for i in range(1, len(lines)) if _ERROR_LINE.search(lines[i])]
    if not named:
        return one_line(text, limit)
    errors = " ... ".join(lines[i] for i in named)
    if len(_joined(lines, {0, *named})) > limit:  # even those do not fit: cut both
        head = one_line(lines[0], max(limit // _HEAD_SHARE, limit - 5 - len(errors)))
        return f"{head} ... {one_line(errors, limit - 5 - len(head))}"
    kept = {0, *named}
    for i in range(1, len(lines)):
        if i not in kept and len(_joined(lines, kept | {i})) <= limit:
            kept.add(i)
    return _joined(lines, kept)


def _joined(lines: list[str], kept: set[int]) -> str:
    """The kept lines in order: " " between neighbours, " ... " where lines were left out
    (after the last one too)."""
    out, last = "", -1
    for i in sorted(kept):
        out += ("" if last < 0 else " " if i == last + 1 else " ... ") + lines[i]
        last = i
    return out + (" ..." if last < len(lines) - 1 else "")


def last_line(log_tail: Optional[Sequence[str]]) -> Optional[str]:
    for line in reversed(list(log_tail or [])):
        if str(line).strip():
            return one_line(line)
    return None


def traceback_in_text(lines: Optional[Sequence[str]]) -> Optional[dict[str, Any]]:
    """The last Python traceback printed in output lines: {type, message, frames}.

    Used when the script never imported the worker, so no error message came over the
    wire; the traceback on stderr is still the best word on what happened."""
    lines = [str(x) for x in (lines or [])]
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            start = i
            break
    if start is None:
        return None
    frames: list[Frame] = []
    exc_type, message = None, ""
    for line in lines[start + 1 :]:
        m = TB_FRAME.match(line)
        if m:
            frames.append({"file": m["file"], "line": int(m["line"]), "function": m["func"]})
            continue
        if line.startswith((" ", "\t")) or not line.strip():
            continue
        t = TB_LAST_LINE.match(line.strip())
        if t:
            exc_type, message = t["type"], t["msg"] or ""
            break
    if exc_type is None:
        return None
    return {"type": exc_type, "message": message, "frames": frames}


def in_stage(stage: Optional[str]) -> str:
    return f" in stage '{stage}'" if stage else ""


def diag(kind: str, summary: str, hint: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "summary": one_line(summary, SUMMARY_MAX),
        "hint": one_line(hint, 300),
        "evidence": evidence,
    }
