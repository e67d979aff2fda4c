"""README.md's code blocks as a newcomer copies them (issue 37): run as written, in a fresh
directory, on this machine (no GPU), they work and print what the text says."""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def block(markdown, lang, containing):
    """The one fenced `lang` block of `markdown` that contains `containing`."""
    found = [
        body
        for body in re.findall(rf"^```{lang}\n(.*?)^```", markdown, re.S | re.M)
        if containing in body
    ]
    assert len(found) == 1, f"{len(found)} {lang} blocks contain {containing!r}"
    return found[0]


def test_the_scheduler_example_runs_on_a_machine_without_a_gpu(tmp_path):
    """It asked for resources={"gpus": 1}, which raises where there is no GPU."""
    code = block(open(os.path.join(ROOT, "README.md")).read(), "python", "bridge.Scheduler(")
    (tmp_path / "train.py").write_text("print('trained')\n")
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "TRAINBRIDGE_STORE")
    }
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # `python`
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "succeeded", out.stdout
    assert (tmp_path / "jobs.db").exists()
