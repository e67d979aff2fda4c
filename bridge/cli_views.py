"""What `trainbridge run` shows while it follows a job: one JSON object per event
(--json), a live screen on a terminal (rich), or plain lines when piped; and the summary
at the end. `ViewModel` is the pure bookkeeping the screen draws from."""

from __future__ import annotations

import collections
import sys
import time
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from trainbridge.bridge import jsonform

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.text import Text


class Followed(Protocol):
    """What a view follows: a launched Job or an attached one (bridge/attach.py)."""

    @property
    def pid(self) -> Optional[int]: ...

    def next_event(self, timeout: Optional[float] = None) -> Optional[dict[str, Any]]: ...


def unreadable_note(event: dict[str, Any]) -> str:
    """An attached job's feed line that is not an event (bridge/attach.py)."""
    after = event.get("after_seq")
    where = f"after event {after}" if after is not None else "at its start"
    return (
        f"a line of the job's events file could not be read ({event.get('bytes')} bytes "
        f"{where}: {event.get('error')}); {event.get('count')} so far, what it held is lost"
    )


class JsonView:
    """One ASCII JSON object per event on stdout; the last is "end" with the report."""

    def follow(self, job: Followed) -> dict[str, Any]:
        report: Optional[dict[str, Any]] = None
        while report is None:
            event = job.next_event(0.2)
            if event is None:
                continue
            print(jsonform.dumps(event, default=str), flush=True)
            if event["event"] == "end":
                report = event["report"]
        return report

    def close(self, report: dict[str, Any]) -> None:
        pass


def make_view(cmd: list[str], log_path: Optional[str] = None) -> Union[LiveView, PlainView]:
    """The live screen on a terminal when rich is installed; plain lines otherwise (rich is
    optional: a venv with only pyzmq and msgpack supervises all the same, README "Install")."""
    try:
        from rich.console import Console
    except ImportError:
        return PlainView(None, log_path)
    console = Console()
    return LiveView(console, cmd) if console.is_terminal else PlainView(console, log_path)


class ViewModel:
    """What the views show, updated from events (pure bookkeeping, no terminal)."""

    def __init__(self, lines: int = 8):
        self.state = "starting"
        self.pid: Optional[int] = None
        # The judge's latest `status` event (bridge/status.py): stages, step, total, metrics,
        # rate, ETA and progress age are shown as the supervisor decided them, never
        # recomputed here, so this line says what Job.status() says at the same event.
        self.status: dict[str, Any] = {}
        self.beat_t: Optional[float] = None
        self.worker = False
        self.notes: list[str] = []
        # (text, end, stream) of the last output lines
        self.lines: collections.deque[tuple[str, str, str]] = collections.deque(maxlen=lines)
        self.started = time.monotonic()
        self.ended_t: Optional[float] = None  # when the state became ended: the clock stops
        self.output_t: Optional[float] = None  # when the last output line came
        self.live: Optional[dict[str, Any]] = None  # the diagnosis while stalled
        self.ranks: dict[int, dict[str, Any]] = {}  # rank -> its own stage, step, state

    def update(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "status":
            self.status = event["status"]
        elif kind == "state":
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
        elif kind == "hang":
            self.notes.append(
                f"hung ({event['reason'].replace('_', ' ')}): collecting stacks, "
                "then stopping the process tree"
            )
        elif kind == "signal":
            self.notes.append(f"sent {event['signal']}")
        elif kind == "health":
            self.notes.append(f"training health: {event['text']}")
        elif kind == "starting":
            self.notes.append(f"still starting, not hung: {event['why']}")
        elif kind == "starved":
            self.notes.append(f"silent but not hung: {event['why']}")
        elif kind == "computing":
            self.notes.append(f"no progress but not hung: {event['why']}")
        elif kind == "unreadable":
            self.notes.append(unreadable_note(event))
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

    @property
    def stages(self) -> list[str]:
        return list(self.status.get("stages") or [])

    @property
    def step(self) -> Any:
        return self.status.get("step")

    @property
    def total(self) -> Any:
        return self.status.get("total")

    def progress_text(self) -> str:
        """'301/?  12.40 step/s  loss=2.31' (no ETA without a total; metadata keys such as
        source=optimizer are not metrics), plus 'idle 14 s' once progress stops: the values
        of the judge's last `status` event. An ended job has no rate, ETA or idle time: its
        last frame stays on screen."""
        status = self.status
        info = f"{_fmt(self.step)}/{_fmt(self.total) if self.total else '?'}"
        if self.state != "ended":
            rate, eta, idle = status.get("rate"), status.get("eta_s"), status.get("progress_age_s")
            if rate is not None:
                info += f"  {rate:.2f} step/s"
            if eta is not None:
                info += f"  ETA {_clock(eta)}"
            if idle is not None and (idle >= 2 or self.state == "stalled"):
                info += f"  idle {idle:.0f} s"
        metrics = status.get("metrics") or {}
        shown = [(k, v) for k, v in metrics.items() if k not in _PROGRESS_METADATA]
        text = "  ".join(f"{k}={_fmt(v)}" for k, v in shown[:4])
        return f"{info}  {text}".rstrip()


class LiveView:
    """rich live view: state, stage, progress bar with rate and ETA, heartbeat age, output."""

    def __init__(self, console: Console, cmd: list[str]):
        self.console = console
        self.cmd = cmd
        self.model = ViewModel()
        self.job: Optional[Followed] = None

    def follow(self, job: Followed) -> dict[str, Any]:
        from rich.live import Live

        self.job = job
        report: Optional[dict[str, Any]] = None
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
    def _print_above(console: Console, event: dict[str, Any]) -> None:
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

    def __rich__(self) -> Group:
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
        grid.add_row("stage", " > ".join(m.stages) if m.stages else "-")
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

    def __init__(self, console: Optional[Console], log_path: Optional[str] = None):
        self.console = console
        self.log_path = log_path
        self.log_error: Optional[dict[str, Any]] = None

    def follow(self, job: Followed) -> dict[str, Any]:
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
            elif kind == "health":
                self._note(f"training health: {event['text']}")
            elif kind == "starting":
                self._note(f"still starting, not hung: {event['why']}")
            elif kind == "starved":
                self._note(f"silent but not hung: {event['why']}")
            elif kind == "computing":
                self._note(f"no progress but not hung: {event['why']}")
            elif kind == "unreadable":
                self._note(unreadable_note(event))
            elif kind in ("dropped", "log_error"):
                self._note(loss_note(event, self.log_path, self.log_error))
                if kind == "log_error":
                    self.log_error = event
            elif kind == "end":
                report: dict[str, Any] = event["report"]
                return report

    def _note(self, text: str) -> None:
        sys.stderr.write(f"[trainbridge] {text}\n")
        sys.stderr.flush()

    def close(self, report: dict[str, Any]) -> None:
        print_summary(self.console, report)


def print_summary(console: Optional[Console], report: dict[str, Any]) -> None:
    if console is None:  # no rich: the same line, uncoloured
        print(f"trainbridge: {report.get('summary', '')}", flush=True)
        return
    from rich.text import Text

    colours = {
        "succeeded": "bold green",
        "failed": "bold red",
        "crashed": "bold red",
        "hung": "bold magenta",
        "cancelled": "bold yellow",
    }
    text = Text("trainbridge: ", style="bold")
    text.append(report.get("summary", ""), style=colours.get(str(report.get("outcome")), ""))
    # soft_wrap: never hard-wrapped (a pipe or a file has no width; a terminal wraps itself).
    console.print(text, soft_wrap=True)


# Progress metrics that describe the source, not the training (zero-code's source=optimizer,
# a tqdm bar's name and unit): shown elsewhere or not at all.
_PROGRESS_METADATA = frozenset({"source", "bar", "unit"})


def _screen_line(text: str, width: int, stderr: bool) -> Text:
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
