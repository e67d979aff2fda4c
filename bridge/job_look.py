"""The look a job takes when a startup, heartbeat or stall deadline passes (the machine's
"look" action): the first sample of the job's tree and when the second is due, and what the
lead's heartbeats said of its work and where its main thread was, which the stall's verdict
reads. The verdict itself is bridge/look.py's; the samples are the job's (procfs).

A part of bridge.job.Job that owns its state; pure (no clock, no I/O: the times and samples
are given). I/O thread only, as every part of a Job."""

from __future__ import annotations

from typing import Any, Optional

from trainbridge.bridge import look, machine


class Look:
    def __init__(self) -> None:
        self.asked: Optional[dict[str, Any]] = None  # {"reason", "sample"}: a look under way
        self.due: Optional[float] = None  # when its second sample is due
        # The lead's heartbeats: its last `work` count and where its main thread was at each
        # change of place (look.heard); {} for a new lead.
        self.heard: dict[str, Any] = {}

    def heartbeat(self, body: dict[str, Any], now: float) -> bool:
        """The lead's heartbeat, heard at `now`: True when it counted more work than the last."""
        self.heard, worked = look.heard(self.heard, body, now)
        return worked

    def new_lead(self) -> None:
        """Another process leads now: its own heartbeats count from here."""
        self.heard = {}

    def start(self, reason: str, sample: dict[str, Any], now: float) -> None:
        """A deadline passed (reason: startup, heartbeat or stall): the first sample, taken
        at `now`; the second is due machine.LOOK_S later."""
        self.asked = {"reason": reason, "sample": sample}
        self.due = now + machine.LOOK_S

    def take(self) -> Optional[dict[str, Any]]:
        """The look under way, if any, which is then over."""
        asked, self.asked, self.due = self.asked, None, None
        return asked

    def judge(
        self, asked: dict[str, Any], after: dict[str, Any], last_activity_t: Optional[float]
    ) -> dict[str, Any]:
        """look.judge over the look's two samples; a stall's second sample carries where the
        lead's main thread was since the last activity (look.stall_wheres)."""
        reason = asked["reason"]
        if reason == "stall" and last_activity_t is not None:
            wheres = look.stall_wheres(self.heard.get("wheres") or [], last_activity_t)
            after = dict(after, wheres=wheres, **{"from": last_activity_t})
        return look.judge(reason, asked["sample"], after)
