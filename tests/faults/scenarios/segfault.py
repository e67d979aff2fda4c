"""A native crash: reading address 0 through ctypes (SIGSEGV)."""
import ctypes

from trainbridge import worker
from _common import say


def poke_null():
    say("touching address 0")
    ctypes.string_at(0)


with worker.stage("model"):
    poke_null()
