"""The main thread joins a loader thread that downloads through urllib from a server that
accepted the connection and never answers (FAULT_SERVER_PORT): the wait chain's end is the
loader's socket, not the main thread's join."""
import os
import threading
import urllib.request

from trainbridge import worker
from _common import say


def fetch_shards(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/shard-0.tar").read()


with worker.stage("data"):
    loader = threading.Thread(target=fetch_shards, args=(int(os.environ["FAULT_SERVER_PORT"]),),
                              name="loader")
    loader.start()
    say("waiting for the loader")
    loader.join()
