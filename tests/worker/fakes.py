"""Stand-ins for driving a Beacon that is never started (the `beacon` fixture, conftest.py):
a zmq module and a socket whose sends libzmq refuses at will."""

from __future__ import annotations

import random


class Again(Exception):
    pass


class FakeZmq:
    NOBLOCK = 1
    Again = Again


class RefusingSocket:
    """Refuses each send with probability `refuse`; keeps what it accepted."""

    def __init__(self, rng: random.Random, refuse: float):
        self.rng, self.refuse, self.sent = rng, refuse, []

    def send_multipart(self, frames, flags=0, copy=True):
        if self.rng.random() < self.refuse:
            raise Again()
        self.sent.append(frames)


def expand(messages):
    """`logs` batches as the clients see them: one `log` message per record, in order."""
    out = []
    for m in messages:
        if m.kind == "logs":
            out += [m._replace(kind="log", body=record) for record in m.body["records"]]
        else:
            out.append(m)
    return out
