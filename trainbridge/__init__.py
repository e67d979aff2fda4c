"""trainbridge: the one import name the product installs.

    from trainbridge import worker      # inside the training script (docs/WORKER.md)
    from trainbridge import bridge      # in the GUI or scheduler (docs/CLIENT.md)

Importing this package does nothing else: no thread, no socket, no third-party import.
Only the name `trainbridge` is ever put into a process's modules, so a training script's
own `worker`, `bridge`, `codec` or `config` module is never shadowed (zero-code mode
included).

In the wheel, `protocol/`, `worker/` and `bridge/` are installed inside this package. In a
source checkout they sit beside it, at the repository's top level (the layout the project
keeps); the package then also looks for its subpackages one level up, and nowhere else.
"""

import os as _os

__version__ = "0.2.0"

_here = _os.path.dirname(_os.path.abspath(__file__))
_top = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "worker")) and _os.path.isfile(
    _os.path.join(_top, "worker", "__init__.py")
):
    # Source checkout: trainbridge.worker is <top>/worker, trainbridge.bridge is <top>/bridge.
    __path__.append(_top)
del _here, _top

# What the worker imports (and so the supervisor too): import name -> pip's name.
REQUIREMENTS = (("zmq", "pyzmq"), ("msgpack", "msgpack"))


def missing_requirements() -> "list[str]":
    """pip's names of the worker's requirements that this interpreter cannot import (the
    supervisor at import, and zero-code mode's sitecustomize in a training interpreter, say
    which and the pip command)."""
    import importlib.util

    return [dist for mod, dist in REQUIREMENTS if importlib.util.find_spec(mod) is None]
