"""What `trainbridge run` shows while it follows a job: one JSON object per event
(--json), a live screen on a terminal (rich), or plain lines when piped; and the summary
at the end. `ViewModel` is the pure bookkeeping the screen draws from."""

from __future__ import annotations

import collections
import json
import sys
import time
from typing import Any, Optional


class JsonView:
    """One ASCII JSON object per event on stdout; the last is "end" with the report."""

    def follow(self, job) -> dict[str, Any]:
        report = None
        while report is None:
            event = job.next_event(0.2)
            if event is None:
                continue
            print(json.dumps(event, ensure_ascii=True, default=str), flush=True)
            if event["event"] == "end":
                report = event["report"]
        return report

    def close(self, report: dict[str, Any]) -> None:
        pass


def make_view(cmd: list[str], log_path: Optional[str] = None):
    from rich.console import Console

    console = Console()
    return LiveView(console, cmd) if console.is_terminal else PlainView(console, log_path)


class ViewModel:
    """What the views show, updated from events (pure bookkeeping, no terminal)."""

    def __init__(self, lines: int = 8):
        self.state = "starting"
        self.pid: Optional[int] = None
        self.stages: list[str] = []
        self.step = self.total = None
        self.metrics: dict[str, Any] = {}
        self.rate: Optional[float] = None
        self._samples: collections.deque = collections.deque(maxlen=20)
        self.beat_t: Optional[float] = None
        self.worker = False
        self.notes: list[str] = []
        self.lines: collections.deque = collections.deque(maxlen=lines)
        self.started = time.monotonic()
        self.ended_t: Optional[float] = None  # when the state became ended: the clock stops
        self.progress_t: Optional[float] = None  # when the last progress came
        self.output_t: Optional[float] = None  # when the last output line came
        self.live: Optional[dict[str, Any]] = None  # the diagnosis while stalled (issue 12)
        self.ranks: dict[int, dict[str, Any]] = {}  # rank -> its own stage, step, state

    def update(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "state":
            self.state = event["state"]
            if self.state != "stalled":
                self.live = None
            if self.state == "ended" and self.ended_t is None:
                self.ended_t = time.monotonic()
        elif kind == "stalled":
            self.live = event.get("diagnosis")
        elif kind == "output":
            self.output_t = time.monotonic()
            if self.lines and self.lines[-1][1] == "cr":
                self.lines.pop()  # a progress bar redrawing itself
            self.lines.append((event["text"], event["end"], event["stream"]))
        elif kind == "message":
            self.beat_t = time.monotonic()
            body = event["body"]
            if not (event.get("sender") or {}).get("lead", True):
                self._other(event)  # another process of the job: its own line, not the job's
                return
            if event["kind"] == "hello":
                self.worker = True
                self.pid = body.get("pid")
            elif event["kind"] == "stage":
                key = (body["name"], body.get("depth"))
                if body["event"] == "begin":
                    self.stages.append(key)
                elif key in self.stages:
                    del self.stages[len(self.stages) - 1 - self.stages[::-1].index(key) :]
            elif event["kind"] == "progress":
                self.step, self.total = body.get("step"), body.get("total")
                self.metrics = body.get("metrics") or {}
                now = self.progress_t = time.monotonic()
                self._samples.append((now, self.step))
                t0, s0 = self._samples[0]
                if now > t0 and isinstance(self.step, (int, float)) and self.step > s0:
                    self.rate = (self.step - s0) / (now - t0)
        elif kind == "hang":
            self.notes.append(
                f"hung ({event['reason'].replace('_', ' ')}): collecting stacks, "
                "then stopping the process tree"
            )
        elif kind == "signal":
            self.notes.append(f"sent {event['signal']}")
        elif kind == "log_error":
            self.notes.append(loss_note(event, None))

    def _other(self, event: dict[str, Any]) -> None:
        """A process that does not lead: a distributed rank's stage, step and failure are
        kept for its own compact line, never mixed into the job's."""
        sender, body = event["sender"], event["body"]
        if sender.get("rank") is None:
            return
        mine = self.ranks.setdefault(
            sender["rank"], {"stage": None, "step": None, "state": "running"}
        )
        if event["kind"] == "stage":
            mine["stage"] = body["name"] if body["event"] == "begin" else None
        elif event["kind"] == "progress":
            mine["step"] = body.get("step")
        elif event["kind"] == "error" and body.get("fatal"):
            mine["state"] = "failed"

    def ranks_line(self) -> Optional[str]:
        """'1 data 40 | 2 failed | 3 train 41': the other ranks, compactly (the lead's are
        the job's stage and progress above)."""
        if not self.ranks:
            return None
        parts = []
        for rank in sorted(self.ranks)[:8]:
            r = self.ranks[rank]
            bits = [str(rank), "failed" if r["state"] == "failed" else (r["stage"] or "-")]
            if r["step"] is not None and r["state"] != "failed":
                bits.append(_fmt(r["step"]))
            parts.append(" ".join(bits))
        more = len(self.ranks) - 8
        return " | ".join(parts) + (f" | +{more} more" if more > 0 else "")

    def eta(self, now: Optional[float] = None) -> Optional[float]:
        rate = self.rate_now(now)
        if rate and self.total and isinstance(self.step, (int, float)):
            return max(0.0, (self.total - self.step) / rate)
        return None

    def idle_s(self, now: Optional[float] = None) -> Optional[float]:
        """Seconds since the last progress (None before any)."""
        if self.progress_t is None:
            return None
        return max(0.0, (now if now is not None else time.monotonic()) - self.progress_t)

    def rate_now(self, now: Optional[float] = None) -> Optional[float]:
        """The rate over the recent samples measured up to now, not up to the last sample:
        during a stall it falls instead of freezing (issue 12 item 8: "38.77 step/s" was
        shown while nothing moved)."""
        now = now if now is not None else time.monotonic()
        if not self._samples or not isinstance(self.step, (int, float)):
            return None
        t0, s0 = self._samples[0]
        if now <= t0 or self.step <= s0:
            return 0.0 if self.rate else None
        return (self.step - s0) / (now - t0)

    def progress_text(self, now: Optional[float] = None) -> str:
        """'301/?  12.40 step/s  loss=2.31' (no ETA without a total; metadata keys such as
        source=optimizer are not metrics), plus 'idle 14 s' once progress stops. An ended job
        has no rate, ETA or idle time: its last frame stays on screen (issue 37 item 10)."""
        now = now if now is not None else time.monotonic()
        info = f"{_fmt(self.step)}/{_fmt(self.total) if self.total else '?'}"
        if self.state != "ended":
            rate = self.rate_now(now)
            if rate is not None:
                info += f"  {rate:.2f} step/s"
            eta = self.eta(now)
            if eta is not None:
                info += f"  ETA {_clock(eta)}"
            idle = self.idle_s(now)
            if idle is not None and (idle >= 2 or self.state == "stalled"):
                info += f"  idle {idle:.0f} s"
        shown = [(k, v) for k, v in self.metrics.items() if k not in _PROGRESS_METADATA]
        metrics = "  ".join(f"{k}={_fmt(v)}" for k, v in shown[:4])
        return f"{info}  {metrics}".rstrip()


class LiveView:
    """rich live view: state, stage, progress bar with rate and ETA, heartbeat age, output."""

    def __init__(self, console, cmd: list[str]):
        self.console = console
        self.cmd = cmd
        self.model = ViewModel()
        self.job = None

    def follow(self, job) -> dict[str, Any]:
        from rich.live import Live

        self.job = job
        report = None
        # Not transient: the last frame (stage, progress) stays on screen above the summary.
        with Live(self, console=self.console, refresh_per_second=8, transient=False) as live:
            while report is None:
                event = job.next_event(0.2)
                if event is None:
                    continue
                self.model.update(event)
                if event["event"] == "output" and event["end"] != "cr":
                    self._print_above(live.console, event)
                if event["event"] == "end":
                    report = event["report"]
        return report

    @staticmethod
    def _print_above(console, event: dict[str, Any]) -> None:
        """A finished output line goes above the live view (as rich and tqdm print), so the
        terminal's scrollback keeps every line; only a bar's redraw stays in the view."""
        from rich.text import Text

        console.print(
            Text(event["text"], style="red" if event["stream"] == "stderr" else ""),
            soft_wrap=True,
            highlight=False,
            markup=False,
            emoji=False,
        )

    def __rich__(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        m = self.model
        colours = {"starting": "yellow", "running": "green", "stalled": "magenta", "ended": "cyan"}
        head = Text.assemble(
            ("trainbridge ", "bold"),
            (m.state, f"bold {colours.get(m.state, '')}"),
            f"  pid {self.job.pid if self.job else '?'}",
            f"  {_clock((m.ended_t or time.monotonic()) - m.started)}  ",
            (" ".join(self.cmd)[:80], "dim"),
        )
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        grid.add_row("stage", " > ".join(name for name, _ in m.stages) if m.stages else "-")
        if m.step is not None:
            row = Table.grid(padding=(0, 1))
            if m.total:
                row.add_row(
                    ProgressBar(total=float(m.total), completed=float(m.step), width=30),
                    Text(m.progress_text()),
                )
            else:  # an unknown total is no bar at all, not a full one
                row.add_row(Text(m.progress_text() + "  (total unknown)"))
            grid.add_row("progress", row)
        elif m.output_t is not None:
            grid.add_row("output", f"last output {time.monotonic() - m.output_t:.0f} s ago")
        if m.state == "stalled" and m.live:
            grid.add_row(
                "why", Text(f"{m.live.get('kind')}: {m.live.get('summary')}", style="magenta")
            )
        if m.state == "ended":
            pass  # no heartbeat to age: the job is over
        elif m.worker:
            age = time.monotonic() - m.beat_t if m.beat_t else None
            grid.add_row("heartbeat", f"{age:.1f} s ago" if age is not None else "-")
        else:
            grid.add_row("heartbeat", Text("no worker in this process (yet)", style="dim"))
        ranks = m.ranks_line()
        if ranks:
            grid.add_row("ranks", ranks)
        for note in m.notes[-2:]:
            grid.add_row("note", Text(note, style="red"))
        out = Text()
        if m.lines and m.lines[-1][1] == "cr":  # a bar redrawing itself; full lines are above
            text, _, stream = m.lines[-1]
            out.append_text(_screen_line(text, self.console.width - 4, stream == "stderr"))
            out.append("\n")
        return Group(head, grid, Text("-" * min(60, self.console.width), style="dim"), out)

    def close(self, report: dict[str, Any]) -> None:
        print_summary(self.console, report)


def loss_note(
    event: dict[str, Any], log_path: Optional[str], log_error: Optional[dict[str, Any]] = None
) -> str:
    """What a `dropped` or `log_error` event means for the user, and where to look
    (`log_error`: the log file itself stopped at some line)."""
    if event["event"] == "log_error":
        return (
            f"warning: the log file {event['path']} is incomplete from line "
            f"{event['from_line']} on: {event['error']}"
        )
    spans = [
        f"{stream} lines {first}-{last}" if first != last else f"{stream} line {first}"
        for stream, (first, last) in sorted((event.get("lines") or {}).items())
    ]
    kinds = event.get("kinds") or {}
    other = event["count"] - kinds.get("output", 0)
    missed = ", ".join(spans) if spans else "no output lines"
    if other:
        missed += f" and {other} other event{'s' if other != 1 else ''}"
    if log_path and log_error:
        where = (
            f"{log_path} has the lines before its line {log_error['from_line']} only "
            f"({log_error['error']})"
        )
    elif log_path:
        where = f"every line is in {log_path}"
    else:
        where = "run with --log FILE to keep every line"
    return f"not shown here: {missed} (this view fell behind the job's output); {where}"


class PlainView:
    """No terminal (a pipe or a file): output lines as they come, then the summary. What it
    could not keep up with is said, exactly (loss_note), never skipped silently."""

    def __init__(self, console, log_path: Optional[str] = None):
        self.console = console
        self.log_path = log_path
        self.log_error: Optional[dict[str, Any]] = None

    def follow(self, job) -> dict[str, Any]:
        while True:
            event = job.next_event(0.2)
            if event is None:
                continue
            kind = event["event"]
            if kind == "output" and event["end"] != "cr":
                stream = sys.stdout if event["stream"] == "stdout" else sys.stderr
                stream.write(
                    event["text"].encode("utf-8", "backslashreplace").decode("utf-8") + "\n"
                )
                stream.flush()
            elif (
                kind == "message" and event["kind"] == "stage" and event["body"]["event"] == "begin"
            ):
                self._note(f"stage {event['body']['name']}")
            elif kind == "hang":
                self._note(f"hung ({event['reason']}): collecting stacks, then stopping the tree")
            elif kind in ("dropped", "log_error"):
                self._note(loss_note(event, self.log_path, self.log_error))
                if kind == "log_error":
                    self.log_error = event
            elif kind == "end":
                return event["report"]

    def _note(self, text: str) -> None:
        sys.stderr.write(f"[trainbridge] {text}\n")
        sys.stderr.flush()

    def close(self, report: dict[str, Any]) -> None:
        print_summary(self.console, report)


def print_summary(console, report: dict[str, Any]) -> None:
    from rich.text import Text

    colours = {
        "succeeded": "bold green",
        "failed": "bold red",
        "crashed": "bold red",
        "hung": "bold magenta",
        "cancelled": "bold yellow",
    }
    text = Text("trainbridge: ", style="bold")
    text.append(report.get("summary", ""), style=colours.get(report.get("outcome"), ""))
    # soft_wrap: never hard-wrapped (a pipe or a file has no width; a terminal wraps itself).
    console.print(text, soft_wrap=True)


# Progress metrics that describe the source, not the training (zero-code's source=optimizer,
# a tqdm bar's name and unit): shown elsewhere or not at all.
_PROGRESS_METADATA = frozenset({"source", "bar", "unit"})


def _screen_line(text: str, width: int, stderr: bool):
    """One output line for the live view: its terminal escapes become styles (never cut in
    the middle, which left a stray "[1" on screen), cut to `width` cells."""
    from rich.text import Text

    line = Text.from_ansi(text, no_wrap=True)
    line.truncate(max(1, width))
    if stderr:
        line.stylize("red")
    return line


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
