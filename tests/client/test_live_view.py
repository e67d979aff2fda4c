"""The CLI live view's rendering of output lines and progress (bridge/cli.py)."""

from trainbridge.bridge.cli import _screen_line


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
