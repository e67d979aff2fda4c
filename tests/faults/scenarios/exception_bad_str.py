"""An exception whose __str__ itself raises: the report must still name type and frame."""
from trainbridge import worker
from _common import say


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("__str__ is broken too")


def explode():
    say("about to raise an unprintable error")
    raise Unprintable("hidden")


with worker.stage("model"):
    explode()
