"""A hostile local process for the flood tests: `flood_sender.py ENDPOINT ROUTING_ID N`
sends N max-size messages with a bad MAC through its own connection, as fast as the client
takes them (its sends wait while the client does not read), then exits 0."""

import sys

import zmq

from trainbridge.protocol import codec

endpoint, routing_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.ROUTING_ID, routing_id.encode("ascii"))
sock.setsockopt(zmq.SNDHWM, 8)
sock.setsockopt(zmq.SNDTIMEO, 120_000)  # a client that stopped reading fails the test
sock.connect(endpoint)
envelope, mac = zmq.Frame(b"\x93" * codec.MAX_MESSAGE_BYTES), b"\x00" * codec.MAC_SIZE
for _ in range(count):
    sock.send_multipart([envelope, mac], copy=False)
sock.close(linger=-1)  # until libzmq handed all of it to the connection
ctx.term()
