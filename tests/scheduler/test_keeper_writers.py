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
