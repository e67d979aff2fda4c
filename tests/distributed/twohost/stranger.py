"""A peer of another host that does not hold the client's CurveZMQ public key: one plain
tcp connection and one with a guessed key. argv: ENDPOINT JOB. Prints the JSON list of how
each handshake ended ("failed" is what the tests expect)."""

import json
import sys

import zmq

from tests.client.test_tcp_auth import handshake

ctx = zmq.Context()
endpoint, job = sys.argv[1], sys.argv[2]
print(
    json.dumps(
        [handshake(ctx, endpoint, job), handshake(ctx, endpoint, job, zmq.curve_keypair()[0])]
    )
)
ctx.term()
