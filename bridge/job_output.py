"""A Job's output: the child's stdout and stderr read from its pipes (or fed by a caller that
reads them), split into lines, kept in the tail, written to the log file and published as
"output" events; the log file's opening and its write failures. The Job holds one Output
(job.output); it owns the pipes, the line splitters, the log file and what the report says
of them (the facts record's bytes, lines, tail, fatal_lines, log_lines and log_error). The
one implementation: a Node face renders these events (their `encoding` too) from
bridge/jobserve.py's feed."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

from trainbridge.bridge import launcher, private_files
from trainbridge.bridge import report as reports
from trainbridge.bridge.lines import LineSplitter, RedrawThrottle, decode_line, log_text

READ_SIZE = 64 * 1024
OUTPUT_EVENT_S = 0.25  # output lines reach the state machine at most this often
# What bridge/inject/sitecustomize.py and the worker print when they cannot run: no hello
# will come from that process, so waiting for one (the startup deadline) would only kill it.
NO_WORKER_MARKERS = ("[trainbridge] zero-code mode is off", "[trainbridge] worker disabled")
# Keys of the pipes for streams the caller reads (start(read_pipes=False)): never real fds.
PSEUDO_FDS = {"stdout": -1, "stderr": -2}

Event = dict[str, Any]


class Output:
    """A job's output, on the hub's I/O thread. It hears of nothing by itself: the Job hands
    it the process (attach), the hub its readable pipes (read), a caller that reads the
    pipes its chunks (feed), and the end its drain (read_all, close_pipes, end_log). What it
    tells goes through the Job's `publish` (feed events) and `step` (machine events)."""

    def __init__(
        self,
        facts: dict[str, Any],
        hub: Any,
        log_fd: Optional[int],
        log_path: Optional[str],
        log_timestamps: bool,
        sink: Callable[[str], Any],
        publish: Callable[[Event], None],
        step: Callable[[Event], None],
        stalled: Callable[[], bool],
        listening: Callable[[], bool] = lambda: True,
        publish_all: Optional[Callable[[list[Event]], None]] = None,
    ):
        self.facts = facts
        self.hub = hub
        self.log_path = log_path
        self.log_timestamps = log_timestamps  # prefix each log line with its UTC time
        self._log = log_fd
        self._sink = sink  # stream -> where its raw bytes go (job.stdout / job.stderr) or None
        self._publish = publish
        self._step = step
        self._stalled = stalled
        self._listening = listening  # whether an `output` event has anyone to reach
        self._publish_all = publish_all or self._each
        self._pipes: dict[int, str] = {}  # fd -> stream, while it is open
        self._pipe_files: dict[int, Any] = {}  # close through these: Popen owns the fds
        self._splitters = {"stdout": LineSplitter(), "stderr": LineSplitter()}
        self._redraws = RedrawThrottle()  # a bar's redraws reach the log once a second
        self._fatal_capture = False
        self._event_t: Optional[float] = None  # the last `output` machine event

    def _each(self, events: list[Event]) -> None:
        for event in events:
            self._publish(event)

    @property
    def open(self) -> bool:
        """Whether a pipe has not reached its end yet."""
        return bool(self._pipes)

    def attach(self, proc: Any, read_pipes: bool, owner: Any) -> None:
        """Read proc's stdout and stderr from the hub (`owner`'s fds), or, without
        read_pipes, take what the caller reads with feed()."""
        if not read_pipes:
            self._pipes.update({fd: stream for stream, fd in PSEUDO_FDS.items()})
            return
        for stream, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            self._pipes[fd] = stream
            self._pipe_files[fd] = pipe
            self.hub.add_fd(fd, lambda fd=fd: self.read(fd), owner=owner)

    def read(self, fd: int) -> None:
        """The hub says fd is readable."""
        stream = self._pipes.get(fd)
        if stream is None:
            return
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._chunk(stream, chunk)
        else:
            self._close_pipe(fd)

    def feed(self, stream: str, chunk: bytes) -> None:
        """A chunk the caller read from the child's `stream` (b"" at EOF), handled as if
        the job had read it."""
        fd = PSEUDO_FDS[stream]
        if fd not in self._pipes:
            return  # after EOF, or after the drain gave up on the pipe
        if chunk:
            self._chunk(stream, chunk)
        else:
            self._close_pipe(fd)

    def read_all(self) -> None:
        """What the pipes hold now (the drain after the exit)."""
        for fd in list(self._pipes):
            self._read_available(fd)

    def close_pipes(self) -> None:
        """Read what is left and close every pipe (the drain is over)."""
        for fd in list(self._pipes):
            self._read_available(fd)
            self._close_pipe(fd)

    def abandon(self) -> None:
        """A bug ends the job: the hub no longer reads the pipes, and each is closed with
        what its splitter holds, or forgotten if even that fails."""
        for fd in list(self._pipes):
            self.hub.remove_fd(fd)
        for fd in list(self._pipes):
            try:
                self._close_pipe(fd)
            except Exception:  # noqa: BLE001 - failing the job anyway: forget the pipe
                self._pipes.pop(fd, None)

    def write_log(self, text: str) -> None:
        """Append lines to the log file, unbuffered (it must survive our crash). A failed
        write (a full disk) stops the log, never the supervision: the report and a
        `log_error` event say from which line on the file is incomplete, and why."""
        if self._log is None:
            return
        data = (text + "\n").encode("utf-8", "backslashreplace")
        done = 0
        try:
            while done < len(data):
                done += os.write(self._log, data[done:])
        except OSError as exc:
            self.facts["log_error"] = log_failure(
                self.log_path, self.facts["log_lines"] + data.count(b"\n", 0, done) + 1, exc
            )
            self.close_log()
            self._publish({"event": "log_error", **self.facts["log_error"]})
            return
        self.facts["log_lines"] += data.count(b"\n")

    def end_log(self, footer: str) -> None:
        """The log file ends with the bar's last state, then `footer` (the verdict and the
        stacks), and is closed."""
        held = self._redraws.flush()
        if held:
            self.write_log("\n".join(log_text(text) for text in held))
        self.write_log(log_text(footer))
        self.close_log()

    def close_log(self) -> None:
        if self._log is not None:
            try:
                os.close(self._log)
            except OSError:
                pass
            self._log = None

    # --- inside -------------------------------------------------------------------------
    def _chunk(self, stream: str, chunk: bytes) -> None:
        self.facts["bytes"][stream] += len(chunk)
        self._raw(stream, chunk)
        self._lines(stream, self._splitters[stream].feed(chunk))

    def _raw(self, stream: str, chunk: bytes) -> None:
        """The bytes as read, before any splitting; b"" at EOF."""
        sink = self._sink(stream)
        if sink is not None:
            sink.feed(chunk or None)

    def _lines(self, stream: str, raw_lines: Any) -> None:
        if not raw_lines:
            return
        if stream == "stdout" and self._log is None and not self._listening():
            self._tail_only(stream, raw_lines)
            return
        decoded = _decode_all(raw_lines)
        # The log first: when a listener hears of a line, the file already has it.
        if self._log is not None:
            now = time.monotonic()
            stamp = log_stamp(time.time()) + " " if self.log_timestamps else ""
            logged = [
                stamp + log_text(kept)
                for text, _, end in decoded
                for kept in self._redraws.feed(stream, text, end, now)
            ]
            if logged:
                self.write_log("\n".join(logged))
        listening = self._listening()
        # One publish for the chunk's lines (one clock read, one lock), in order; a no_worker
        # event goes out after the lines before it.
        batch: list[Event] = []
        t = time.time()
        tail, counts = self.facts["tail"], self.facts["lines"]
        for text, encoding, end in decoded:
            counts[stream] += 1
            # tqdm redraws replace each other in the tail instead of filling it.
            if tail and tail[-1]["end"] == "cr" and tail[-1]["stream"] == stream:
                tail.pop()
            tail.append({"stream": stream, "text": text, "end": end})
            if listening:
                batch.append(
                    {
                        "event": "output",
                        "stream": stream,
                        "text": text,
                        "encoding": encoding,  # "utf-8", "gbk" or "escaped" (bridge/lines.py)
                        "end": end,
                        "line": counts[stream],
                        "t": t,
                    }
                )
            if stream == "stderr":
                self._capture_fatal(text)
                if text.startswith(NO_WORKER_MARKERS):
                    self._publish_all(batch)
                    batch = []
                    self._publish({"event": "no_worker", "reason": text})
                    self._step({"type": "no_worker", "t": time.monotonic(), "reason": text})
        if batch:
            self._publish_all(batch)
        self._activity()

    def _tail_only(self, stream: str, raw_lines: Any) -> None:
        """No log file and nobody listening (run --transparent): a stdout line is counted,
        and decoded only if the tail keeps it. From the end back: a line ended by a bare
        CR is replaced by the next one (a bar's redraw), as _lines' tail does."""
        self.facts["lines"][stream] += len(raw_lines)
        tail = self.facts["tail"]
        kept: list[Any] = []
        last = len(raw_lines) - 1
        for i in range(last, -1, -1):
            if raw_lines[i].end == "cr" and i != last:
                continue
            kept.append(raw_lines[i])
            if len(kept) == tail.maxlen:
                break
        else:  # every line was seen: the first replaced the tail's redraw, if it ends one
            if tail and tail[-1]["end"] == "cr" and tail[-1]["stream"] == stream:
                tail.pop()
        for raw in reversed(kept):
            tail.append({"stream": stream, "text": decode_line(raw.data)[0], "end": raw.end})
        self._activity()

    def _activity(self) -> None:
        """Tell the state machine the job printed (activity while it has no progress source),
        at most every OUTPUT_EVENT_S, and at once when that may end a stall."""
        now = time.monotonic()
        if self._event_t is None or now - self._event_t >= OUTPUT_EVENT_S or self._stalled():
            self._event_t = now
            self._step({"type": "output", "t": now})

    def _capture_fatal(self, text: str) -> None:
        # PYTHONFAULTHANDLER prints a crashed process's stacks on stderr; keep them whole
        # even when they are longer than the tail.
        if text.startswith(reports.FATAL_MARKERS):
            self._fatal_capture = True
            self.facts["fatal_lines"] = []
        if self._fatal_capture and len(self.facts["fatal_lines"]) < reports.FATAL_LINES_MAX:
            self.facts["fatal_lines"].append(text)

    def _close_pipe(self, fd: int) -> None:
        stream = self._pipes.pop(fd, None)
        if stream is None:
            return
        self.hub.remove_fd(fd)
        self._raw(stream, b"")
        self._lines(stream, self._splitters[stream].flush())
        try:
            # Closing the file object (not the bare fd) keeps Popen from closing the same
            # number again later, when it may belong to another job's pipe.
            self._pipe_files.pop(fd).close()
        except (OSError, KeyError):
            pass

    def _read_available(self, fd: int) -> None:
        for _ in range(64):  # bounded: a grandchild may write forever
            if fd not in self._pipes:
                return
            try:
                chunk = os.read(fd, READ_SIZE)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                self._close_pipe(fd)
                return
            self._chunk(self._pipes[fd], chunk)


def log_stamp(wall: float) -> str:
    """'2026-11-30T18:23:23.123Z': the UTC time prefix of a log line (log_timestamps)."""
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + f".{int(wall * 1000) % 1000:03d}Z"
    )


class LogFileError(launcher.LaunchError):
    """The log file cannot be opened for writing (read-only, missing directory, ...)."""


def _decode_all(raw_lines: Any) -> list[tuple[str, str, str]]:
    """(text, encoding, end) of each line: one strict UTF-8 decode of them all joined by
    "\n" when that works (then each line is UTF-8 on its own: a sequence never spans an
    ASCII byte), else line by line (bridge/lines.py decode_line: UTF-8, GBK, escaped)."""
    try:
        texts = b"\n".join([raw.data for raw in raw_lines]).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return [(*decode_line(raw.data), raw.end) for raw in raw_lines]
    return [(text, "utf-8", raw.end) for text, raw in zip(texts, raw_lines)]


def open_log(path: str) -> int:
    """An fd appending to the log file, or LogFileError saying what is wrong with it."""
    try:
        return private_files.open_append(path)
    except OSError as exc:
        raise LogFileError(
            f"cannot write the log file {path}: {os_error_text(exc)}; choose a "
            f"writable path for the log"
        ) from exc


def log_failure(path: Optional[str], from_line: int, exc: OSError) -> dict[str, Any]:
    """The report's `log_error`: the log file has every line before from_line, none after."""
    return {"path": path, "from_line": from_line, "error": os_error_text(exc)}


# 'No space left on device (ENOSPC)': one helper for every OS error a user reads.
os_error_text = private_files.error_text
