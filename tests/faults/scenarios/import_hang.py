"""Hangs inside the import of a module (slow_import_mod)."""
from trainbridge import worker
from _common import say

with worker.stage("model"):
    say("importing slow_import_mod")
    import slow_import_mod  # never returns: the hang under test
