"""Bounded memory under hostile input: 5,000 max-size frames with a bad
MAC, sent as fast as the client takes them, leave the client's peak RSS under +64 MiB, and
the job it supervises ends as it would have anyway, with every rejected frame counted."""

import os
import subprocess
import sys
import time

import zmq

from tests.client.conftest import ROOT
from tests.client.flood_client import FloodClient
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
    with FloodClient(str(tmp_path / "gate")) as client:
        hello = client.hello
        before = status_kib(hello["pid"], "VmRSS")
        flood(hello["endpoint"], hello["job"])
        report = client.finish(FRAMES)
        peak = status_kib(hello["pid"], "VmHWM")
        assert client.close() == 0
    print(f"client RSS {before / 2**20:.0f} MiB before, peak {peak / 2**20:.0f} MiB")
    assert peak - before < BUDGET, f"peak RSS grew by {(peak - before) / 2**20:.0f} MiB"
    assert report["outcome"] == "succeeded" and report["progress"]["step"] == 2
    rejected = report["protocol"]["rejected"]
    assert set(rejected) <= {"bad_signature", "over_budget"}, rejected
    assert sum(rejected.values()) == FRAMES, "each one counted"
    # Past the budget for unauthenticated input the sender's frames go unverified.
    assert rejected.get("over_budget", 0) > 0, rejected


SENDERS = 8  # hostile processes, each with its own connection
EACH = 250  # 1 MiB frames each


def test_a_flood_from_many_processes_is_budgeted_in_total(tmp_path):
    """Per connection libzmq holds 16 unread messages; in total, past 16 MiB a second of
    input that failed authentication, a sender that failed is dropped unverified (counted
    as over_budget), so the hub drains the flood at memory speed. Every frame is counted,
    the verified bad bytes stay within the budget, and the job's report is right."""
    from trainbridge.bridge import intake

    sender = os.path.join(ROOT, "tests", "client", "flood_sender.py")
    env = dict(os.environ, PYTHONPATH=ROOT)
    with FloodClient(str(tmp_path / "gate")) as client:
        hello = client.hello
        before = status_kib(hello["pid"], "VmRSS")
        started = time.monotonic()
        floods = [
            subprocess.Popen(
                [
                    sys.executable,
                    sender,
                    hello["endpoint"],
                    f"{hello['job']}/0/{7000 + i}",
                    str(EACH),
                ],
                cwd=ROOT,
                env=env,
            )
            for i in range(SENDERS)
        ]
        assert all(f.wait(120) == 0 for f in floods)
        took = time.monotonic() - started
        report = client.finish(SENDERS * EACH)
        peak = status_kib(hello["pid"], "VmHWM")
        assert client.close() == 0
    rejected = report["protocol"]["rejected"]
    print(
        f"{SENDERS} senders x {EACH} MiB in {took:.1f} s: client RSS {before / 2**20:.0f} MiB "
        f"before, peak {peak / 2**20:.0f} MiB; rejected {rejected}"
    )
    assert report["outcome"] == "succeeded" and report["progress"]["step"] == 2
    assert sum(rejected.values()) == SENDERS * EACH, "each one counted"
    assert rejected.get("over_budget", 0) > 0, rejected
    # Verified bad input: the budget per window (one more for the window in progress) plus
    # each sender's first frame, which is verified before it is suspect.
    windows = took / intake.UNAUTH_WINDOW_S + 2
    frame = codec.MAX_MESSAGE_BYTES
    assert rejected.get("bad_signature", 0) * frame <= (
        windows * (intake.UNAUTH_BUDGET_BYTES + frame) + SENDERS * frame
    ), rejected
