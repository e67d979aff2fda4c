"""What a follower of a scheduled job's feed judges beyond the feed's own lines, decided here
once for every face: Python's attach() (bridge/attach.py) and Node's attached job, through
its store helper's `judge` op (bridge/storeserve.py), which reads the lines itself.

- The keeper is not answering: the feed silent past SUPERVISOR_SILENT_S while the row says
  the job should be running (the keeper writes a `status` event at least once a second while
  the job's process lives: bridge/job_status.py), and answering again when it grows.
- The end made from the row: the row says ended but the feed has no end line, and it is not
  coming (its keeper says so in end_pending, waited for END_LINE_WAIT_S at most).

Pure: the caller says when the feed grew, and what the row says; this says what to publish.
"""

from __future__ import annotations

from typing import Any, Optional

# The keeper's Job publishes a `status` event at least once a second while the job's process
# lives (bridge/job_status.py STATUS_EVERY_S): its events file silent this long means the
# keeper is not answering (stopped, or starved), said as a `supervisor` event.
SUPERVISOR_SILENT_S = 5.0
# The keeper writes the row's end first (from then on an asker is refused) with
# end_pending set, answers what was asked before, writes the feed's end line, then clears
# end_pending (bridge/keeper.py _finish); a keeper gone meanwhile has its line written by
# reconcile(), which writes a lost job's end line with the row's end. While end_pending says
# the line is coming (with its number and the answers ahead of it), it is waited for, this
# long at most: on a store nobody reconciles, a keeper killed between the two writes leaves
# the row's end as the end.
END_LINE_WAIT_S = 10.0
RUNNING = ("starting", "running", "stalled")  # the states in which the keeper writes


class FeedJudge:
    """One follower's judgement (monotonic seconds in, `supervisor` event bodies out)."""

    def __init__(self) -> None:
        # False while the keeper is not answering (said), else None (not judged yet) or True.
        self.answering: Optional[bool] = None
        self._heard: Optional[float] = None  # when the feed last grew (None: not yet)
        self._ended_at: Optional[float] = None  # when the row was first read ended

    def grew(self, now: float, row: dict[str, Any]) -> Optional[dict[str, Any]]:
        """The feed grew at `now`: the keeper answers again if it had been said silent."""
        said = None
        if self.answering is False and self._heard is not None:
            said = self._say(True, now - self._heard, row)
        self._heard = now
        return said

    def quiet(self, now: float, row: dict[str, Any]) -> Optional[dict[str, Any]]:
        """Nothing new at `now` (`row`: the row as last read): the keeper is not answering
        once the feed was silent past SUPERVISOR_SILENT_S while the job should be running;
        never once the row's end is written (the keeper is ending)."""
        if self._heard is None or self._ended_at is not None or self.answering is False:
            return None
        silent = now - self._heard
        if silent > SUPERVISOR_SILENT_S and row.get("state") in RUNNING:
            return self._say(False, silent, row)
        return None

    def end_from_row(self, now: float, row: Optional[dict[str, Any]]) -> bool:
        """The row reads ended (None: forgotten) and the feed had no end line: whether to end
        with the row's end now (True), or wait for the line (False)."""
        if self._ended_at is None:
            self._ended_at = now
        return row is None or not end_line_coming(row, now - self._ended_at)

    def _say(self, answering: bool, silent_s: float, row: dict[str, Any]) -> dict[str, Any]:
        self.answering = answering
        return {
            "event": "supervisor",
            "answering": answering,
            "silent_s": round(silent_s, 1),
            "keeper_pid": row.get("keeper_pid"),
        }


def end_line_coming(row: dict[str, Any], waited_s: float) -> bool:
    """Whether the feed's end line is still to come for a row that says ended (the keeper
    says so in end_pending) and END_LINE_WAIT_S has not passed."""
    return waited_s < END_LINE_WAIT_S and bool(row.get("end_pending"))
