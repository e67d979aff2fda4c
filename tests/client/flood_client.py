"""A client process for the flood tests (test_flood.py, test_tcp_auth.py), and FloodClient,
the tests' handle on it.

The process supervises a child that waits for a gate file, prints {"endpoint", "job", "pid"}
once the child said hello, then the job's report, then stays until its stdin closes (so the
test can read its peak RSS after the job).

The test writes the number of frames it sent as a line on stdin; this client opens the gate
(ending the job) once its job has counted that many rejections, or after 60 s. A frame the
sender handed to its connection can still be in a socket buffer when the test returns from
sending: ending the job then would leave it uncounted by the job (seen 4,996 of 5,000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Optional


class FloodClient:
    """Starts this file as a client process and reads its hello (endpoint, job, pid)."""

    def __init__(self, gate: str, env: Optional[dict[str, str]] = None):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), gate],
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.hello: dict[str, Any] = json.loads(self.proc.stdout.readline())

    def finish(self, frames: int) -> dict[str, Any]:
        """Tell the client how many frames were sent (it ends the job once it has counted
        them all) and return the job's report. The process stays until close()."""
        self.proc.stdin.write(f"{frames}\n".encode())
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> int:
        """Let the process end; its exit status (0 unless it failed)."""
        self.proc.stdin.close()
        return self.proc.wait(30)

    def __enter__(self) -> FloodClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


def main(gate: str) -> None:
    from trainbridge import bridge

    child = (
        f"import os, time\nfrom trainbridge import worker\nworker.progress(1, 2)\n"
        f"while not os.path.exists({gate!r}):\n    time.sleep(0.01)\nworker.progress(2, 2)\n"
    )
    hello = threading.Event()

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "message" and event["kind"] == "hello":
            hello.set()

    job = bridge.launch([sys.executable, "-c", child], zero_code=False, on_event=on_event)
    if not hello.wait(60):
        sys.exit("no hello")
    print(json.dumps({"endpoint": job.hub.endpoint, "job": job.id, "pid": os.getpid()}), flush=True)
    expected = int(sys.stdin.readline())
    deadline = time.monotonic() + 60
    while sum(job.channel.rejected.values()) < expected and time.monotonic() < deadline:
        time.sleep(0.01)  # polling a counter the hub thread fills, with a deadline
    open(gate, "w").close()
    report = job.wait(600)
    print(json.dumps(report, default=str), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main(sys.argv[1])
