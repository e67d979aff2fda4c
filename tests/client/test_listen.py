"""`trainbridge run --listen ADDR[:PORT] --rank-env FILE` (docs/CLIENT.md, Other hosts):
the address is checked before anything starts, and the file is what a shell on node 2
sources. The ranks of other hosts joining is tests/distributed/test_two_hosts.py."""

import os
import subprocess
import sys

import pytest

from trainbridge.bridge import listen, remote


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
        # CLIENT.md's example address, on a host that does not have it: words, not a traceback
        (["--listen", "10.0.0.1", "--rank-env", "x.env"], "not an address of this host"),
        (["--listen", "192.0.2.7:29600", "--rank-env", "x.env"], "not an address of this host"),
        # a file trainbridge did not write: the keys would go to whoever can read it
        (["--listen", "{local}", "--rank-env", "{foreign}"], "trainbridge did not write it"),
        (["--listen", "{local}", "--rank-env", "{link}"], "not a regular file"),
    ],
)
def test_a_bad_listen_is_a_usage_error_before_anything_starts(args, says, tmp_path):
    (tmp_path / "foreign.env").write_text("export PATH=/usr/bin\n")
    (tmp_path / "link.env").symlink_to(tmp_path / "foreign.env")
    args = [
        a.format(
            local=local_address(), foreign=tmp_path / "foreign.env", link=tmp_path / "link.env"
        )
        for a in args
    ]
    marker = tmp_path / "ran"
    out = trainbridge("run", *args, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert out.returncode == 2, out.stderr
    assert says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert not marker.exists(), "the command ran"
    assert (tmp_path / "foreign.env").read_text() == "export PATH=/usr/bin\n"


def local_address():
    """An IPv4 address of this host that is not loopback (one made up would be refused first)."""
    import socket

    import psutil

    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    pytest.skip("this host has no IPv4 address but loopback")


def test_parse_listen():
    assert listen.parse_listen("10.0.0.1") == ("10.0.0.1", 0)
    assert listen.parse_listen("10.0.0.1:29600") == ("10.0.0.1", 29600)
    assert listen.parse_listen("[fd00::1]:29600") == ("fd00::1", 29600)
    assert listen.parse_listen("fd00::1") == ("fd00::1", 0)


def test_the_rank_env_file_is_private_and_a_shell_reads_it_back(tmp_path):
    path = tmp_path / "rank.env"
    variables = {"TRAINBRIDGE_KEY": "ab" * 32, "TRAINBRIDGE_ENDPOINT": "tcp://10.0.0.1:5"}
    variables["TRAINBRIDGE_SERVER_KEY"] = "a'b$c\"d`e" + "x" * 31  # z85 has quotes and $
    remote.write_env_file(str(path), variables)
    assert os.stat(path).st_mode & 0o777 == 0o600
    # The next run's file replaces this one, and is private whatever its mode became.
    os.chmod(path, 0o644)
    remote.write_env_file(str(path), variables)
    assert os.stat(path).st_mode & 0o777 == 0o600
    out = subprocess.run(
        ["sh", "-c", '. "$1" && env', "sh", str(path)], capture_output=True, text=True, check=True
    )
    got = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    for name, value in variables.items():
        assert got[name] == value


def test_remote_env_refuses_an_address_this_host_lacks_in_words():
    from trainbridge import bridge

    job = bridge.launch([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(ValueError, match="not an address of this host"):
            job.remote_env("192.0.2.7")
    finally:
        job.cancel(grace=0)
        job.wait(30)
