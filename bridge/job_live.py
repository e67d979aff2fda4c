"""The live diagnosis of a stalled job, before any deadline: from the lead's last heartbeat's
stack and a cheap look at the process (evidence.live, well under a millisecond), at most every
LIVE_DIAGNOSIS_S. The verdict at the deadline uses the same rules on fuller evidence.

A part of bridge.job.Job that owns its state (when it last looked, evidence.live's mark, the
current diagnosis) and is given the job's facts and the machine's last activity. I/O thread
only, as every part of a Job."""

from __future__ import annotations

from typing import Any, Optional

from trainbridge.bridge import diagnosis, evidence, ranks_hang

LIVE_DIAGNOSIS_S = 2.0  # while stalled, the live diagnosis is refreshed at most this often


class LiveDiagnosis:
    def __init__(self) -> None:
        self.t: Optional[float] = None  # when it last looked
        self.mark: Optional[dict[str, Any]] = None  # evidence.live's, between two looks
        # {kind, frame, summary, hint, idle_s}: the current diagnosis (job.live_diagnosis)
        self.current: Optional[dict[str, Any]] = None

    def due(self, now: float, force: bool = False) -> bool:
        """Whether to look again at `now` (force: the job has just stalled)."""
        return force or self.t is None or now - self.t >= LIVE_DIAGNOSIS_S

    def said(self, at: float) -> None:
        """The look's diagnosis was published at `at` (after the look, which takes its time:
        the first, reading the TCP table, longest): the next is due LIVE_DIAGNOSIS_S after
        that, so a face sees them at most that often, not a look's length more often."""
        self.t = at

    def refresh(
        self, pid: int, facts: dict[str, Any], last_activity_t: Optional[float], now: float
    ) -> dict[str, Any]:
        """Look at the process now and return the current diagnosis (kept in `current`).
        A failure to look is a diagnosis too ("unknown"): a live view must not cost the job."""
        self.t = now
        hb = facts["heartbeat"] or {}
        idle = round(now - last_activity_t, 1) if last_activity_t is not None else hb.get("idle_s")
        try:
            ev = evidence.live(pid, self.mark)
            self.mark = ev.pop("mark", None)
            running = [s["name"] for s in facts["stages"] if s["status"] == "running"]
            found = diagnosis.diagnose_hang(
                {
                    "reason": "stall",
                    "stage": running[-1] if running else None,
                    "stages": running,
                    "idle_s": idle,
                    "stack": hb.get("stack"),
                    "saw_hello": bool(facts["hellos"]),
                    "evidence": ev,
                    "progress": facts["progress"],
                }
            )
            # Ranks waiting in a collective for one that is elsewhere.
            found = ranks_hang.live_collective(facts["ranks"]) or found
        except Exception as exc:  # noqa: BLE001 - a live view must not cost the job
            found = {
                "kind": "unknown",
                "summary": f"live diagnosis failed: {exc}",
                "hint": "",
                "evidence": {},
            }
        self.current = {
            "kind": found["kind"],
            "frame": found["evidence"].get("frame"),
            "summary": found["summary"],
            "hint": found["hint"],
            "idle_s": idle,
        }
        return self.current
