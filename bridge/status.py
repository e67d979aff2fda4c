"""A job's live status as a GUI shows it: a pure tracker (values in, values out).

StatusTracker is fed the lead process's stage and progress messages with their receive time
(seconds, the shell's monotonic clock) and answers snapshot(state, pid, now):

  state, pid, elapsed_s
  stages         the open stages, outermost first (every one the worker reported)
  script_stages  the same without zero-code mode's own: "startup" and "main" at depth 0,
                 "import <module>", and the "first batch" / "train" it opens directly
                 inside "main" (worker/auto.py); what the script itself marked
  step, total, metrics (the lead's latest), rate (steps per second over the last
  RATE_SAMPLES progress messages; see rate()), eta_s (at that rate; none once ended),
  progress_age_s (since the last progress message)

This is the one place a job's rate and ETA are decided: the supervisor publishes snapshots
in its feed (the `status` event, docs/CLIENT.md) and every face (attach, the CLI views, the
dashboard, a Node Job's status()) renders them. vectors/status.json holds the cases that pin
it.
"""

from __future__ import annotations

import collections
from typing import Any, Optional

RATE_SAMPLES = 20
ZERO_CODE_TOP = ("startup", "main")  # depth 0
ZERO_CODE_IN_MAIN = ("first batch", "train")  # depth 1, directly inside "main"


def is_zero_code_stage(name: str, depth: int, parent: Optional[str]) -> bool:
    """Whether zero-code mode (worker/auto.py) opens a stage of this name at this place."""
    if depth == 0:
        return name in ZERO_CODE_TOP
    if name.startswith("import "):
        return True
    return depth == 1 and parent == "main" and name in ZERO_CODE_IN_MAIN


MAX_BACKLOG_S = 3600.0  # a message older than this by its envelope is taken as this old


def sent_at(now: float, wall_now: float, ts: Any, waited: Optional[float] = None) -> float:
    """When a message was sent, on the receiver's clock (`now`): how long it waited in a
    backlog (a paused client or keeper reading many at once), so the rate is the job's and
    not the reader's. `waited`, where the receiver shares the sender's monotonic clock (the
    envelope's mt: a wall-clock step between the send and the read does not move it); else
    its envelope's `ts` (the sender's wall clock) against the receiver's. A send from the
    future (another host's clock ahead) counts as just now."""
    if waited is None:
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            return now
        waited = wall_now - ts
    return now - min(max(0.0, waited), MAX_BACKLOG_S)


class StatusTracker:
    def __init__(self, started: float):
        self.started = started
        self._open: list[tuple[str, int]] = []  # (name, depth), outermost first
        self._samples: collections.deque[tuple[float, float]] = collections.deque(
            maxlen=RATE_SAMPLES
        )
        self.step: Any = None
        self.total: Any = None
        self.metrics: dict[str, Any] = {}
        self.progress_t: Optional[float] = None

    def stage(self, body: dict[str, Any]) -> None:
        name, depth = body["name"], body.get("depth") or 0
        if body["event"] == "begin":
            self._open = [s for s in self._open if s[1] < depth] + [(name, depth)]
        else:
            for i in range(len(self._open) - 1, -1, -1):
                if self._open[i][0] == name:
                    del self._open[i:]
                    break

    def progress(self, body: dict[str, Any], t: float) -> None:
        """The lead's progress, sent at `t` (sent_at()); never before the one before it."""
        if self.progress_t is not None:
            t = max(t, self.progress_t)
        self.step, self.total, self.progress_t = body.get("step"), body.get("total"), t
        self.metrics = dict(body.get("metrics") or {})
        if isinstance(self.step, (int, float)) and not isinstance(self.step, bool):
            if self._samples and self.step < self._samples[-1][1]:
                self._samples.clear()  # a new bar or epoch restarted the count
            self._samples.append((t, float(self.step)))

    def rate(self, now: Optional[float] = None) -> Optional[float]:
        """Steps per second from the first to the last of the samples. Once the last is older
        than the samples' mean gap, the span runs on to `now` less that gap, so a stall makes
        the rate fall (and the ETA grow) smoothly instead of freezing at the last good value."""
        if len(self._samples) < 2:
            return None
        (t0, s0), (t1, s1) = self._samples[0], self._samples[-1]
        if not (t1 > t0 and s1 > s0):
            return None
        gap = (t1 - t0) / (len(self._samples) - 1)
        end = t1 if now is None else max(t1, now - gap)
        return (s1 - s0) / (end - t0)

    def snapshot(self, state: str, pid: Optional[int], now: float) -> dict[str, Any]:
        ended = state == "ended"
        rate = self.rate(None if ended else now)
        eta = None
        if (
            rate
            and not ended
            and isinstance(self.total, (int, float))
            and isinstance(self.step, (int, float))
        ):
            eta = round(max(0.0, (self.total - self.step) / rate), 3)
        script, parent = [], None
        for name, depth in self._open:
            if not is_zero_code_stage(name, depth, parent):
                script.append(name)
            parent = name
        return {
            "state": state,
            "pid": pid,
            "elapsed_s": round(now - self.started, 3),
            "stages": [name for name, _ in self._open],
            "script_stages": script,
            "step": self.step,
            "total": self.total,
            "metrics": dict(self.metrics),
            "rate": None if rate is None else round(rate, 6),
            "eta_s": eta,
            "progress_age_s": None if self.progress_t is None else round(now - self.progress_t, 3),
        }
