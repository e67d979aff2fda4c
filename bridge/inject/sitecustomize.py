"""trainbridge zero-code hook (bridge/inject is put first on PYTHONPATH by the client).

Python imports the first `sitecustomize` on sys.path at start-up. This one loads the worker
in zero-code mode when the trainbridge variables are present, then runs the sitecustomize
that would have run without us (a venv's or a distribution's), so nothing is lost.
Processes without the variables pay one environment lookup.
"""

import os
import sys


def _start_worker():
    if not os.environ.get("TRAINBRIDGE_ENDPOINT"):
        return
    try:
        import worker.auto
        worker.auto.install()
    except Exception as exc:  # never break the training script's start
        sys.stderr.write("[trainbridge] zero-code mode is off in this process: %s: %s\n"
                         % (type(exc).__name__, str(exc).encode("ascii", "backslashreplace").decode()))


def _run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_trainbridge_shadowed_sitecustomize"] = module
    spec.loader.exec_module(module)


_start_worker()
_run_shadowed_sitecustomize()
