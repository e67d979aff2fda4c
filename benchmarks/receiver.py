"""A minimal trainbridge peer for benchmarks that measure the worker alone: a ROUTER that
counts what arrives and acks last words, so a worker runs exactly as under a client."""

from __future__ import annotations

import os
import secrets
import tempfile
import threading

import zmq

from trainbridge.protocol import codec


class Receiver:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tb-bench-")
        os.chmod(self.dir, 0o700)
        self.endpoint = f"ipc://{self.dir}/r.sock"
        self.key = secrets.token_bytes(32)
        self.counts: dict[str, int] = {}
        self.hello = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(5)

    def env(self, job: str = "bench") -> dict[str, str]:
        return {
            "TRAINBRIDGE_ENDPOINT": self.endpoint,
            "TRAINBRIDGE_JOB_ID": job,
            "TRAINBRIDGE_KEY": self.key.hex(),
        }

    def _run(self) -> None:
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(self.endpoint)
        self._ready.set()
        seqs: dict[bytes, int] = {}
        while not self._stop.is_set():
            if not sock.poll(50):
                continue
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    msg = codec.decode(frames[1:], self.key, expect="worker")
                except codec.ProtocolError:
                    continue
                self.counts[msg.kind] = self.counts.get(msg.kind, 0) + 1
                if msg.kind == "hello":
                    self.hello.set()
                if msg.kind in codec.FINAL_KINDS:
                    seq = seqs.get(frames[0], 0) + 1
                    seqs[frames[0]] = seq
                    sock.send_multipart(
                        [frames[0], *codec.encode("ack", seq, {"to": msg.seq}, self.key, msg.job)]
                    )
        sock.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
