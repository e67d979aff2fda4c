"""The tcp fallback authenticates before it buffers: where ipc cannot be
used (a runtime directory path too long for a unix socket), the hub listens on loopback as a
CurveZMQ server whose public key only the job's environment holds. A peer without it, as
any other local user would be, fails the handshake and gets nothing queued; the job's own
worker connects, authenticated, and the job runs as ever."""

import os

import zmq
from zmq.utils.monitor import recv_monitor_message

from tests.client.flood_client import FloodClient

HANDSHAKE = {
    zmq.EVENT_HANDSHAKE_SUCCEEDED: "succeeded",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "failed",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "failed",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "failed",
}


def handshake(ctx, endpoint, job, curve_server_key=None, timeout_s=20):
    """Connect a DEALER as job's rank 0, send a frame with a bad MAC, and return how its
    first handshake ended ("succeeded" / "failed")."""
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, f"{job}/0/4242".encode("ascii"))
    sock.setsockopt(zmq.LINGER, 0)
    if curve_server_key is not None:  # a CURVE client that guesses the server's key
        public, secret = zmq.curve_keypair()
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = (
            curve_server_key,
            public,
            secret,
        )
    monitor = sock.get_monitor_socket()
    monitor.setsockopt(zmq.RCVTIMEO, timeout_s * 1000)
    sock.connect(endpoint)
    try:  # something to carry, once the pipe exists; the handshake happens either way
        sock.send_multipart([b"\x93" * 1024, b"\x00" * 32], flags=zmq.NOBLOCK)
    except zmq.Again:
        pass  # no pipe yet (a slow connect, another host): flake hunt run 1 on ff67ee0
    try:
        while True:
            event = recv_monitor_message(monitor)["event"]
            if event in HANDSHAKE:
                return HANDSHAKE[event]
    finally:
        sock.disable_monitor()
        monitor.close()
        sock.close()


def test_a_peer_without_the_server_key_gets_nothing_in(tmp_path):
    runtime = tmp_path / ("r" * 100)  # too long for an ipc socket path: the tcp fallback
    runtime.mkdir()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    ctx = zmq.Context()
    try:
        with FloodClient(str(tmp_path / "gate"), env) as client:
            hello = client.hello
            assert hello["endpoint"].startswith("tcp://127.0.0.1:")
            assert handshake(ctx, hello["endpoint"], hello["job"]) == "failed", "plain tcp"
            wrong = zmq.curve_keypair()[0]
            assert handshake(ctx, hello["endpoint"], hello["job"], wrong) == "failed", "guessed"
            report = client.finish(0)  # no frame of theirs reaches the hub to be counted
            assert client.close() == 0
    finally:
        ctx.term()
    assert report["outcome"] == "succeeded" and report["progress"]["step"] == 2, (
        "the job's own worker connected, authenticated"
    )
    assert report["protocol"]["rejected"] == {}, "nothing of theirs reached the hub"
