"""Two threads take two locks in opposite order: a real deadlock."""
import threading

from trainbridge import worker
from _common import say

lock_a, lock_b = threading.Lock(), threading.Lock()
a_held, b_held = threading.Event(), threading.Event()


def other_thread():
    with lock_b:
        b_held.set()
        a_held.wait()
        with lock_a:
            pass


def take_both():
    with lock_a:
        a_held.set()
        b_held.wait()
        say("holding lock a, taking lock b")
        with lock_b:
            pass


with worker.stage("data"):
    threading.Thread(target=other_thread, daemon=True).start()
    take_both()
