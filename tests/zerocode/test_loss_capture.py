"""Zero-code mode reports the loss an unmodified script passes to
backward() and the total a OneCycleLR schedule was given (nanoGPT showed "301/?" and no loss)."""

import pytest

from tests.zerocode.test_zero_code import PY, run


def test_the_loss_given_to_backward_and_the_schedule_total_are_progress():
    report, events = run([PY, "loss_loop.py"])
    assert report["outcome"] == "succeeded", report["summary"]
    progress = report["progress"]
    assert progress["step"] == 120 and progress["total"] == 120, progress
    metrics = progress["metrics"]
    assert metrics["source"] == "optimizer"
    printed = float(report["log_tail"][-1].split()[-1])
    # The value read when the beacon last sent: the last step's loss or one a little older.
    seen = [
        e["body"]["metrics"].get("loss")
        for e in events
        if e["event"] == "message" and e["kind"] == "progress"
    ]
    assert all(isinstance(v, float) for v in seen if v is not None) and seen[-1] is not None
    assert abs(metrics["loss"] - printed) < 0.5, (metrics["loss"], printed)


def test_a_script_reporting_its_own_progress_keeps_its_metrics(tmp_path):
    script = tmp_path / "own.py"
    script.write_text(
        "import torch\nfrom trainbridge import worker\n"
        "m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(5):\n"
        "    loss = m(torch.ones(1, 2)).sum(); opt.zero_grad(); loss.backward(); opt.step()\n"
        "    worker.progress(i + 1, 5, acc=0.5)\n",
        encoding="utf-8",
    )
    report, events = run([PY, str(script)])
    assert report["progress"]["metrics"] == {"acc": 0.5}, report["progress"]
    # The curve is the script's: no optimizer loss among the points, each step once (the
    # loss of zero-code's first step, taken before the script's first call, was a second
    # point for step 1 once).
    steps = []
    for e in events:
        if e["event"] == "message" and e["kind"] == "progress" and e["body"].get("points"):
            points = e["body"]["points"]
            assert "loss" not in points["metrics"], points
            steps.extend(points["steps"])
    assert len(steps) == len(set(steps)), steps


# (pattern, total): a schedule's horizon in optimizer steps once its pace is seen; none for a
# composite schedule or nanoGPT's lr set by hand (nothing a library sees knows the length).
SCHEDULES = [
    ("cosine_per_step", 30),
    ("cosine_per_epoch", 30),
    ("poly_per_step", 30),
    ("sequential", None),
    ("by_hand", None),
]


@pytest.mark.parametrize(("pattern", "total"), SCHEDULES, ids=[p for p, _ in SCHEDULES])
def test_a_schedules_horizon_is_the_total(pattern, total):
    report, _ = run([PY, "schedule_loop.py", pattern])
    assert report["outcome"] == "succeeded", report["summary"]
    progress = report["progress"]
    assert progress["step"] == 30 and progress["total"] == total, progress
    assert progress["metrics"].get("loss") is not None, progress


def test_every_optimizer_steps_loss_reaches_the_parent():
    """An unmodified loop of 300 fast steps (several a millisecond): every step's loss is a
    point of the progress messages, equal to what the script computed, so a curve (or a NaN
    of one step) is whole for a script that never heard of trainbridge."""
    report, events = run([PY, "every_loss.py"])
    assert report["outcome"] == "succeeded", report["summary"]
    printed = {}
    for e in events:
        if e["event"] == "output" and e.get("stream") == "stdout":
            step, value = e["text"].split()
            printed[int(step)] = float(value)
    assert sorted(printed) == list(range(1, 301))
    sent = {}
    for e in events:
        if e["event"] == "message" and e["kind"] == "progress":
            body = e["body"]
            points = body.get("points") or {"steps": [], "metrics": {}}
            for step, loss in zip(points["steps"], points["metrics"].get("loss", [])):
                sent[step] = loss
            if body["metrics"].get("loss") is not None:  # the latest value: no point of its own
                sent.setdefault(body["step"], body["metrics"]["loss"])
    assert sorted(sent) == list(range(1, 301)), sorted(set(range(1, 301)) - set(sent))
    assert all(abs(sent[s] - printed[s]) < 1e-5 for s in printed), [
        (s, sent[s], printed[s]) for s in printed if abs(sent[s] - printed[s]) >= 1e-5
    ][:5]
