"""Reading from a server that accepted the connection and never answers.
The port comes from FAULT_SERVER_PORT (the test runs the server on 127.0.0.1)."""
import os
import socket

from trainbridge import worker
from _common import say


def fetch_remote(port):
    sock = socket.create_connection(("127.0.0.1", port))
    say(f"connected to 127.0.0.1:{port}, reading")
    sock.recv(1024)


with worker.stage("data"):
    fetch_remote(int(os.environ["FAULT_SERVER_PORT"]))
