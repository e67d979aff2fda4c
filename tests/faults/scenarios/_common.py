"""Helpers shared by the scenario scripts: a tiny fake training run with the demo's stages.

The scripts run as child processes under a trainbridge client; each one misbehaves in one
way. They import the worker explicitly (except those testing a script that never does)."""

import os
import socket

STAGES = ("config", "data", "model", "optimizer", "train", "save")


def say(text):
    """One output line the report's log tail must keep."""
    print(text, flush=True)


def wait_for_go():
    """Block until the test runner says go (matrix.json `go_when`): it does once the client
    has heard the named worker message, so a crash right after cannot outrun the worker's
    messages. Without FAULT_GO_PORT (run by hand) there is nothing to wait for."""
    port = os.environ.get("FAULT_GO_PORT")
    if not port:
        return
    with socket.create_connection(("127.0.0.1", int(port)), timeout=30) as conn:
        conn.recv(2)
