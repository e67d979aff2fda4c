"""A Job's output: the child's stdout and stderr read from its pipes (or fed by a caller that
reads them), split into lines, kept in the tail, written to the log file and published as
"output" events; the log file's opening and its write failures. Part of bridge.job.Job (a
mixin: the attributes it uses are set up in Job.__init__). The one implementation: a Node
face renders these events (their `encoding` too) from bridge/jobserve.py's feed."""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from trainbridge.bridge import launcher, private_files
from trainbridge.bridge import report as reports
from trainbridge.bridge.lines import decode_line, log_text

READ_SIZE = 64 * 1024
OUTPUT_EVENT_S = 0.25  # output lines reach the state machine at most this often
# What bridge/inject/sitecustomize.py and the worker print when they cannot run: no hello
# will come from that process, so waiting for one (the startup deadline) would only kill it.
NO_WORKER_MARKERS = ("[trainbridge] zero-code mode is off", "[trainbridge] worker disabled")
# Keys of _pipes for streams the caller reads (start(read_pipes=False)): never real fds.
PSEUDO_FDS = {"stdout": -1, "stderr": -2}


class JobOutput:
    """Job's output room (I/O thread)."""

    def _read_pipe(self, fd: int) -> None:
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
            self.facts["bytes"][stream] += len(chunk)
            self._raw(stream, chunk)
            self._lines(stream, self._splitters[stream].feed(chunk))
        else:
            self._close_pipe(fd)

    def _raw(self, stream: str, chunk: bytes) -> None:
        """The bytes as read, before any splitting; b"" at EOF."""
        sink = self.stdout if stream == "stdout" else self.stderr
        if sink is not None:
            sink.feed(chunk or None)

    def feed_output(self, stream: str, chunk: bytes) -> None:
        """I/O thread, for start(proc, read_pipes=False): a chunk the caller read from the
        child's `stream` (b"" at EOF), handled as if the job had read it."""
        fd = PSEUDO_FDS[stream]
        if fd not in self._pipes:
            return  # after EOF, or after the drain gave up on the pipe
        if chunk:
            self.facts["bytes"][stream] += len(chunk)
            self._raw(stream, chunk)
            self._lines(stream, self._splitters[stream].feed(chunk))
        else:
            self._close_pipe(fd)

    def _lines(self, stream: str, raw_lines) -> None:
        if not raw_lines:
            return
        decoded = [(*decode_line(raw.data), raw.end) for raw in raw_lines]
        # The log first: when a listener hears of a line, the file already has it.
        now = time.monotonic()
        stamp = log_stamp(time.time()) + " " if self.log_timestamps else ""
        logged = [
            stamp + log_text(kept)
            for text, _, end in decoded
            for kept in self._redraws.feed(stream, text, end, now)
        ]
        if logged:
            self._write_log("\n".join(logged))
        for text, encoding, end in decoded:
            self.facts["lines"][stream] += 1
            # tqdm redraws replace each other in the tail instead of filling it.
            if (
                self.facts["tail"]
                and self.facts["tail"][-1]["end"] == "cr"
                and self.facts["tail"][-1]["stream"] == stream
            ):
                self.facts["tail"].pop()
            self.facts["tail"].append({"stream": stream, "text": text, "end": end})
            if stream == "stderr":
                self._capture_fatal(text)
                if text.startswith(NO_WORKER_MARKERS):
                    self._publish({"event": "no_worker", "reason": text})
                    self._step({"type": "no_worker", "t": time.monotonic(), "reason": text})
            self._publish(
                {
                    "event": "output",
                    "stream": stream,
                    "text": text,
                    "encoding": encoding,  # "utf-8", "gbk" or "escaped" (bridge/lines.py)
                    "end": end,
                    "line": self.facts["lines"][stream],
                }
            )
        self._output_activity()

    def _output_activity(self) -> None:
        """Tell the state machine the job printed (activity while it has no progress source),
        at most every OUTPUT_EVENT_S, and at once when that may end a stall."""
        now = self.last_output_t = time.monotonic()
        last = getattr(self, "_output_event_t", None)
        if last is None or now - last >= OUTPUT_EVENT_S or self.m["state"] == "stalled":
            self._output_event_t = now
            self._step({"type": "output", "t": now})

    def _capture_fatal(self, text: str) -> None:
        # PYTHONFAULTHANDLER prints a crashed process's stacks on stderr; keep them whole
        # even when they are longer than the tail.
        if text.startswith(reports.FATAL_MARKERS):
            self._fatal_capture = True
            self.facts["fatal_lines"] = []
        if self._fatal_capture and len(self.facts["fatal_lines"]) < reports.FATAL_LINES_MAX:
            self.facts["fatal_lines"].append(text)

    def _write_log(self, text: str) -> None:
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
            self._close_log()
            self._publish({"event": "log_error", **self.facts["log_error"]})
            return
        self.facts["log_lines"] += data.count(b"\n")

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

    def _close_pipes(self) -> None:
        for fd in list(self._pipes):
            self._read_available(fd)
            self._close_pipe(fd)

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
            stream = self._pipes[fd]
            self.facts["bytes"][stream] += len(chunk)
            self._raw(stream, chunk)
            self._lines(stream, self._splitters[stream].feed(chunk))

    def _close_log(self) -> None:
        if self._log is not None:
            try:
                os.close(self._log)
            except OSError:
                pass
            self._log = None


def log_stamp(wall: float) -> str:
    """'2026-11-30T18:23:23.123Z': the UTC time prefix of a log line (log_timestamps)."""
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + f".{int(wall * 1000) % 1000:03d}Z"
    )


class LogFileError(launcher.LaunchError):
    """The log file cannot be opened for writing (read-only, missing directory, ...)."""


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
