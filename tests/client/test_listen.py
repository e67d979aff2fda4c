"""`trainbridge run --listen ADDR[:PORT] --rank-env FILE` (docs/CLIENT.md, Other hosts):
the address is checked before anything starts, and the file is what a shell on node 2
sources. The ranks of other hosts joining is tests/distributed/test_two_hosts.py."""

import os
import subprocess
import sys

import pytest

from trainbridge.bridge import remote


def trainbridge(*args):
    return subprocess.run(
        [sys.executable, "-m", "trainbridge", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--listen", "10.0.0.1"], "--listen and --rank-env go together"),
        (["--listen", "127.0.0.1", "--rank-env", "x.env"], "loopback address"),
        (["--listen", "node1", "--rank-env", "x.env"], "is not an IP address"),
        (["--listen", "10.0.0.1:99999", "--rank-env", "x.env"], "port must be a number"),
    ],
)
def test_a_bad_listen_is_a_usage_error_before_anything_starts(args, says, tmp_path):
    marker = tmp_path / "ran"
    out = trainbridge("run", *args, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert out.returncode == 2, out.stderr
    assert says in out.stderr, out.stderr
    assert not marker.exists(), "the command ran"


def test_parse_listen():
    assert remote.parse_listen("10.0.0.1") == ("10.0.0.1", 0)
    assert remote.parse_listen("10.0.0.1:29600") == ("10.0.0.1", 29600)
    assert remote.parse_listen("[fd00::1]:29600") == ("fd00::1", 29600)
    assert remote.parse_listen("fd00::1") == ("fd00::1", 0)


def test_the_rank_env_file_is_private_and_a_shell_reads_it_back(tmp_path):
    path = tmp_path / "rank.env"
    path.write_text("old")
    os.chmod(path, 0o644)
    variables = {"TRAINBRIDGE_KEY": "ab" * 32, "TRAINBRIDGE_ENDPOINT": "tcp://10.0.0.1:5"}
    variables["TRAINBRIDGE_SERVER_KEY"] = "a'b$c\"d`e" + "x" * 31  # z85 has quotes and $
    remote.write_env_file(str(path), variables)
    assert os.stat(path).st_mode & 0o777 == 0o600
    out = subprocess.run(
        ["sh", "-c", '. "$1" && env', "sh", str(path)], capture_output=True, text=True, check=True
    )
    got = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    for name, value in variables.items():
        assert got[name] == value
