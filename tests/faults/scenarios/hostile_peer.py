"""A hostile peer on the job's own endpoint while the script trains: frames signed with a
wrong key, replayed sequence numbers, a flood of unknown kinds, non-ASCII strings, then an
oversize message. Each must be rejected and counted; the job itself must not notice."""
import os

import msgpack
import zmq

from trainbridge import worker
from _common import say, wait_for_go
from trainbridge.protocol import codec

JOB, KEY = os.environ["TRAINBRIDGE_JOB_ID"], bytes.fromhex(os.environ["TRAINBRIDGE_KEY"])


def raw(kind, seq, body, key=KEY, job=JOB):
    packed = msgpack.packb({"body": body, "job": job, "kind": kind, "seq": seq, "ts": 0,
                            "v": 1}, use_bin_type=True)
    return [packed, codec.sign(key, packed)]


def attack():
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, f"{JOB}/9".encode())
    sock.setsockopt(zmq.LINGER, 2000)
    sock.connect(os.environ["TRAINBRIDGE_ENDPOINT"])
    for seq in range(1, 6):
        sock.send_multipart(raw("log", seq, {"level": "info", "message": "x"}, key=b"k" * 32))
    good = codec.encode("log", 1, {"level": "info", "message": "first"}, KEY, JOB)
    for _ in range(4):  # the first is accepted, the next three are replays
        sock.send_multipart(good)
    for seq in range(2, 1002):
        sock.send_multipart(raw("flood", seq, {}))
    sock.send_multipart(raw("log", 1002, {"level": "info", "message": "\u4e2d"}))
    # Just over the protocol's 1 MiB but under ZMQ_MAXMSGSIZE: reaches the decoder.
    sock.send_multipart([b"\0" * (codec.MAX_MESSAGE_BYTES + 10), b"\0" * 32])
    sock.send_multipart(codec.encode("log", 1003, {"level": "info", "message": "hostile-done"},
                                     KEY, JOB))
    wait_for_go()  # the client has processed everything above (one connection, in order)
    # Beyond ZMQ_MAXMSGSIZE: libzmq closes this connection before the client sees it.
    sock.send_multipart([b"\0" * (codec.MAX_MESSAGE_BYTES + 1024), b"\0" * 32])
    sock.close()
    ctx.term()


with worker.stage("train"):
    attack()
    for step in range(1, 11):
        worker.progress(step, 10)
say("trained through a hostile peer")
