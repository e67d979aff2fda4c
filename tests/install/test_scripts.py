"""scripts/test as a newcomer meets it: a failing Python part still runs the
Node part, and the run ends non-zero with both summaries and a last line naming what failed."""

import os
import shutil
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_scripts_test(tmp_path, python_test, node_tests="test/feed.test.js"):
    test_file = tmp_path / "test_one.py"
    test_file.write_text(python_test)
    env = dict(os.environ, TB_SKIP_LINT="1", TB_NODE_TESTS=node_tests, TB_TEST_WORKERS="0")
    return subprocess.run(
        [os.path.join(ROOT, "scripts", "test"), str(test_file), "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_failing_python_part_still_runs_the_node_part_and_fails_the_run(tmp_path):
    out = run_scripts_test(tmp_path, "def test_fails():\n    assert 1 == 2\n")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "1 failed" in out.stdout, text  # pytest's summary
    assert "# pass " in out.stdout and "# fail 0" in out.stdout, text  # node's, after it
    assert out.stderr.strip().splitlines()[-1].startswith("[test] FAILED: python"), text
    assert "node (exit" not in out.stderr, text


def test_both_parts_failures_are_said_again_last_with_their_errors(tmp_path):
    """A CI record keeps a long run's tail: the failures, with why, are in it (before this,
    only the names were, and a CI run's two failing browser tests could not be read)."""
    node_test = tmp_path / "failing.test.js"
    node_test.write_text(
        "require('node:test')('a node test that fails', () => {\n"
        "  throw new Error('the reason it failed: 41 is not 42');\n});\n"
    )
    out = run_scripts_test(
        tmp_path, "def test_fails():\n    assert 41 == 42\n", f"test/feed.test.js {node_test}"
    )
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    tail = out.stdout[out.stdout.rindex("# fail 1") :]  # after the Node part's own summary
    assert "[test] node: 1 failing test(s), again with their errors:" in tail, text
    assert "not ok - a node test that fails" in tail, text
    assert "the reason it failed: 41 is not 42" in tail, text
    assert "[test] python: FAILED " in tail and "test_fails" in tail, text
    assert out.stderr.strip().splitlines()[-1].startswith("[test] FAILED: python"), text
    assert "node (exit 1)" in out.stderr, text


def test_a_green_run_says_so_last(tmp_path):
    out = run_scripts_test(tmp_path, "def test_passes():\n    pass\n")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        out.stdout.strip().splitlines()[-1] == "[test] python and node: all passed (lint left out)"
    )


def test_the_demo_setup_installs_nothing_system_wide_the_test_setup_does(tmp_path):
    """scripts/demo (scripts/setup) as root once apt-installed Chromium and CJK
    fonts for browser tests the demo does not run. A stand-in apt-get records its calls."""
    if os.geteuid() != 0:
        import pytest

        pytest.skip("the apt-get branch of scripts/setup runs as root only")
    calls = tmp_path / "apt-calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (fake / "apt-get").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    env["TRAINBRIDGE_CHROMIUM"] = str(tmp_path / "no-chromium-here")

    def setup(*args):
        out = subprocess.run(
            [os.path.join(ROOT, "scripts", "setup"), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    setup()  # what scripts/demo runs
    assert not calls.exists(), calls.read_text()
    setup("--browser")  # what scripts/test runs
    assert "install -y -q chromium fonts-wqy-microhei" in calls.read_text()


def test_setup_run_through_a_view_of_links_installs_for_the_checkout_itself(tmp_path):
    """The doc-block test runs scripts/demo from a view of the checkout made of symbolic
    links; once pyproject.toml had changed, the scripts/setup it ran reinstalled trainbridge
    with the view's path: every console script's #! line named a folder deleted after the
    test, and the developer's `trainbridge` said "cannot execute: required file not found".
    scripts/setup works from the physical path. (A fake venv here: its python records how
    pip was asked.)"""
    real = tmp_path / "checkout"
    (real / "scripts").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "scripts", "setup"), real / "scripts" / "setup")
    for name in ("requirements-dev.txt", "pyproject.toml"):
        shutil.copy(os.path.join(ROOT, name), real / name)
    bin_dir = real / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    calls = tmp_path / "calls"
    (bin_dir / "python").write_text(f'#!/bin/sh\necho "$0 $(pwd) $*" >> {calls}\n')
    (bin_dir / "python").chmod(0o755)
    view = tmp_path / "view"
    view.mkdir()
    for entry in real.iterdir():
        (view / entry.name).symlink_to(entry)
    subprocess.run([str(view / "scripts" / "setup")], check=True, capture_output=True)
    lines = calls.read_text().splitlines()
    assert any(" -e ." in line for line in lines), lines
    for line in lines:
        program, cwd = line.split()[:2]
        assert program == str(bin_dir / "python") and cwd == str(real), line
