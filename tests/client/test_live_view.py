"""The CLI live view's rendering of output lines and progress (bridge/cli.py)."""

from trainbridge.bridge.cli_views import _screen_line


def test_an_escape_is_never_cut_in_the_middle():
    """Issue 12 item 6: cutting the raw text at the width left a stray "[1" on screen."""
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


def _model(**over):
    from trainbridge.bridge.cli_views import ViewModel

    m = ViewModel()
    for t, step in ((100.0, 10), (101.0, 20), (102.0, 30)):
        m._samples.append((t, step))
    m.step, m.total, m.progress_t, m.state = 30, None, 102.0, "running"
    m.metrics = {"source": "optimizer", "loss": 2.5}
    for key, value in over.items():
        setattr(m, key, value)
    return m


def test_a_stall_shows_idle_time_and_a_falling_rate():
    """Issue 12 item 8: the rate froze at its last value and no idle time was shown."""
    m = _model()
    assert m.progress_text(102.0).startswith("30/?  10.00 step/s")
    stalled = _model(state="stalled")
    text = stalled.progress_text(122.0)
    assert "idle 20 s" in text
    assert "0.91 step/s" in text  # 20 steps over 22 s, not the frozen 10.00


def test_metadata_is_not_a_metric_and_no_eta_without_a_total():
    text = _model().progress_text(102.0)
    assert "source=" not in text and "loss=2.5" in text and "ETA" not in text
    with_total = _model(total=100).progress_text(102.0)
    assert "30/100" in with_total and "ETA 0:07" in with_total


def test_the_live_view_shows_why_while_stalled_and_no_bar_without_a_total():
    """Issue 12 items 8 and 12: the live diagnosis is on screen before any deadline."""
    import io

    from rich.console import Console

    from trainbridge.bridge.cli_views import LiveView

    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    view = LiveView(console, ["python", "train.py"])
    view.model = _model(state="stalled", progress_t=0.0)
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
    """Issue 37 item 10: the frame left on screen above the summary kept "ETA 5:03",
    "idle 3 s" and "heartbeat 2.8 s ago" for a job that had ended."""
    import io

    from rich.console import Console

    from trainbridge.bridge.cli_views import LiveView

    m = _model(total=100, worker=True, beat_t=0.0)
    assert "ETA" in m.progress_text(102.0)
    m.update({"event": "state", "state": "ended"})
    text = m.progress_text(200.0)
    assert text.startswith("30/100") and "loss=2.5" in text
    assert "ETA" not in text and "idle" not in text and "step/s" not in text
    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    view = LiveView(console, ["python", "train.py"])
    view.model = m
    console.print(view)
    screen = console.file.getvalue()
    assert "ended" in screen and "heartbeat" not in screen and "ETA" not in screen
