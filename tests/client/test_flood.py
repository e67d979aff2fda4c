"""Bounded memory under hostile input (issue 11 item 3): 5,000 max-size frames with a bad
MAC, sent as fast as the client takes them, leave the client's peak RSS under +64 MiB, and
the job it supervises ends as it would have anyway, with every rejected frame counted."""

import json
import os
import subprocess
import sys

import zmq

from tests.client.conftest import ROOT
from trainbridge.protocol import codec

FRAMES = 5000
BUDGET = 64 * 1024 * 1024


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def flood(endpoint, job, frames=FRAMES):
    """Send `frames` max-size messages with a bad MAC, routed to `job`; blocks while the
    client does not take them (a flood can only go as fast as the client reads)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, f"{job}/0/4242".encode("ascii"))
    sock.setsockopt(zmq.SNDHWM, 8)
    sock.setsockopt(zmq.SNDTIMEO, 60_000)  # a client that stopped reading fails the test
    sock.connect(endpoint)
    envelope, mac = zmq.Frame(b"\x93" * codec.MAX_MESSAGE_BYTES), b"\x00" * codec.MAC_SIZE
    for _ in range(frames):
        sock.send_multipart([envelope, mac], copy=False)
    sock.close(linger=-1)  # until libzmq handed all of it to the connection
    ctx.term()


def test_a_bad_mac_flood_leaves_the_client_within_its_memory_budget(tmp_path):
    gate = tmp_path / "gate"
    client = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests", "client", "flood_client.py"), str(gate)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        hello = json.loads(client.stdout.readline())
        before = status_kib(hello["pid"], "VmRSS")
        flood(hello["endpoint"], hello["job"])
        gate.touch()
        report = json.loads(client.stdout.readline())
        peak = status_kib(hello["pid"], "VmHWM")
        client.stdin.close()
        assert client.wait(30) == 0
    finally:
        client.kill()
        client.wait()
    print(f"client RSS {before / 2**20:.0f} MiB before, peak {peak / 2**20:.0f} MiB")
    assert peak - before < BUDGET, f"peak RSS grew by {(peak - before) / 2**20:.0f} MiB"
    assert report["outcome"] == "succeeded" and report["progress"]["step"] == 2
    assert report["protocol"]["rejected"] == {"bad_signature": FRAMES}, "each one counted"
