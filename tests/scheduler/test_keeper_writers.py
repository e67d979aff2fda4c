"""The keeper's writer threads (bridge/keeper.py) on a disk that refuses every write: the
events file tries its kept events again RETRY_S apart, also while it closes (until
CLOSE_RETRY_S), never in a tight loop; what it could not write is counted."""

from trainbridge.bridge import keeper


def test_the_feeds_end_is_retried_at_its_pace_not_in_a_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(keeper, "RETRY_S", 0.05)
    monkeypatch.setattr(keeper, "CLOSE_RETRY_S", 0.3)
    attempts = []

    def refused(self, batch):  # a full disk: output dropped, the state kept
        attempts.append(len(batch))
        self.error = "No space left on device (ENOSPC)"
        return [e for e in batch if keeper.kept_event(e)]

    monkeypatch.setattr(keeper.EventsFile, "_write", refused)
    events = keeper.EventsFile(str(tmp_path / "events.jsonl"))
    events.write({"event": "state", "state": "ended"})
    events.close()  # returns once CLOSE_RETRY_S is over
    # 0.3 s of retries 0.05 s apart: about 7 tries. A loop without the pause made thousands.
    assert 2 <= len(attempts) <= 12, len(attempts)
    assert events.failed == 1  # the state event, given up on and counted


def test_kept_events_are_written_once_the_disk_has_room_with_nothing_new_coming(
    tmp_path, monkeypatch
):
    """A job that went quiet while its disk was full: its state event is written on a retry
    once there is room, not only when the next event comes (there may be none)."""
    import threading

    monkeypatch.setattr(keeper, "RETRY_S", 0.05)
    real = keeper.EventsFile._write
    refusals = [2]  # the first two writes meet a full disk
    written = threading.Event()

    def full_then_free(self, batch):
        if refusals[0] > 0:
            refusals[0] -= 1
            self.error = "No space left on device (ENOSPC)"
            return [e for e in batch if keeper.kept_event(e)]
        kept = real(self, batch)
        written.set()
        return kept

    monkeypatch.setattr(keeper.EventsFile, "_write", full_then_free)
    path = tmp_path / "events.jsonl"
    events = keeper.EventsFile(str(path))
    try:
        events.write({"event": "state", "state": "stalled"})
        assert written.wait(20), f"never written again; refusals left {refusals[0]}"
        assert events.written == 1 and events.failed == 0, (events.written, events.failed)
        assert '"state": "stalled"' in path.read_text()
    finally:
        events.close()


def test_an_end_the_disk_refused_to_the_last_is_known_unwritten(tmp_path, monkeypatch):
    """The keeper leaves the row's end_pending set (and reconcile() writes the line later)
    only when its feed's end event never reached the file: a real write refusal (/dev/full
    answers ENOSPC) to the last retry leaves end_written False and the error said; a feed that
    took its end says end_written."""
    import os

    monkeypatch.setattr(keeper, "RETRY_S", 0.05)
    monkeypatch.setattr(keeper, "CLOSE_RETRY_S", 0.3)
    path = tmp_path / "events.jsonl"
    events = keeper.EventsFile(str(path))
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, events.fd)  # the disk fills under it
    os.close(full)
    events.write({"event": "end", "outcome": "succeeded"})
    events.close()
    assert not events.end_written and events.failed == 1
    assert "ENOSPC" in (events.error or ""), events.error

    events = keeper.EventsFile(str(path))
    events.write({"event": "state", "state": "running"})
    events.write({"event": "end", "outcome": "succeeded"})
    events.close()
    assert events.end_written and events.failed == 0
    assert '"event": "end"' in path.read_text()
