"""The CLI live view's rendering of output lines and progress (bridge/cli.py)."""

from trainbridge.bridge.cli_views import _screen_line


def test_an_escape_is_never_cut_in_the_middle():
    """Cutting the raw text at the width left a stray "[1" on screen."""
    raw = "RuntimeError: \x1b[1mWeights only load failed\x1b[0m, see below"
    for width in range(10, len(raw)):
        plain = _screen_line(raw, width, stderr=True).plain
        assert "\x1b" not in plain and "[1" not in plain and "[0" not in plain, (width, plain)
        assert len(plain) <= width
        assert "RuntimeError: Weights only load failed, see below".startswith(plain)


def test_colours_become_styles():
    line = _screen_line("\x1b[31mred\x1b[0m plain", 40, stderr=False)
    assert line.plain == "red plain"
    assert [(span.start, span.end, span.style.color.number) for span in line.spans] == [(0, 3, 1)]


def _model(now=102.0, state="running", total=None, **over):
    """The view after the judge's `status` event at `now` (bridge/status.py, the tracker a
    Job publishes): steps 10, 20, 30 at 100, 101, 102 s."""
    from trainbridge.bridge.cli_views import ViewModel
    from trainbridge.bridge.status import StatusTracker

    judge = StatusTracker(90.0)
    for t, step in ((100.0, 10), (101.0, 20), (102.0, 30)):
        judge.progress({"step": step, "total": total, "metrics": METRICS}, t)
    m = ViewModel()
    m.update({"event": "state", "state": state})
    m.update({"event": "status", "status": judge.snapshot(state, 42, now)})
    for key, value in over.items():
        setattr(m, key, value)
    return m


METRICS = {"source": "optimizer", "loss": 2.5}


def test_the_line_is_the_judges_status_not_a_rate_of_its_own():
    """After a stall the CLI said 0.13 step/s and ETA 11:30 while status() said
    1.0 step/s and ETA 1:30. The view renders the `status` event's numbers."""
    m = _model(now=122.0, state="stalled", total=100)
    status = m.status
    assert status["rate"] == round(20 / 21, 6) and status["eta_s"] == 73.5  # the judge decays it
    text = m.progress_text()
    assert f"{status['rate']:.2f} step/s" in text and "ETA 1:13" in text, text


def test_a_stall_shows_idle_time_and_a_falling_rate():
    """The rate once froze at its last value and no idle time was shown."""
    assert _model().progress_text().startswith("30/?  10.00 step/s")
    text = _model(now=122.0, state="stalled").progress_text()
    assert "idle 20 s" in text
    assert "0.95 step/s" in text  # 20 steps over 21 s (the gap of 1 s allowed), not 10.00


def test_metadata_is_not_a_metric_and_no_eta_without_a_total():
    text = _model().progress_text()
    assert "source=" not in text and "loss=2.5" in text and "ETA" not in text
    with_total = _model(total=100).progress_text()
    assert "30/100" in with_total and "ETA 0:07" in with_total


def test_the_live_view_shows_why_while_stalled_and_no_bar_without_a_total():
    """The live diagnosis is on screen before any deadline."""
    import io

    from rich.console import Console

    from trainbridge.bridge.cli_views import LiveView

    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    view = LiveView(console, ["python", "train.py"])
    view.model = _model(state="stalled")
    view.model.update(
        {
            "event": "stalled",
            "diagnosis": {
                "kind": "network_wait",
                "summary": "blocked reading from 13.33.0.1:443 for 25 s",
            },
        }
    )
    console.print(view)
    screen = console.file.getvalue()
    assert "why" in screen and "network_wait: blocked reading from 13.33.0.1:443" in screen
    assert "(total unknown)" in screen and "\u2501" not in screen  # no bar drawn full


def test_the_last_frame_of_an_ended_job_has_no_live_numbers():
    """The frame left on screen above the summary kept "ETA 5:03",
    "idle 3 s" and "heartbeat 2.8 s ago" for a job that had ended."""
    import io

    from rich.console import Console

    from trainbridge.bridge.cli_views import LiveView

    m = _model(total=100, worker=True, beat_t=0.0)
    assert "ETA" in m.progress_text()
    m.update({"event": "state", "state": "ended"})
    text = m.progress_text()
    assert text.startswith("30/100") and "loss=2.5" in text
    assert "ETA" not in text and "idle" not in text and "step/s" not in text
    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    view = LiveView(console, ["python", "train.py"])
    view.model = m
    console.print(view)
    screen = console.file.getvalue()
    assert "ended" in screen and "heartbeat" not in screen and "ETA" not in screen
