"""trainbridge zero-code hook (this directory, and nothing else, is put first on PYTHONPATH).

Python imports the first `sitecustomize` on sys.path at start-up. This one loads the worker
in zero-code mode when the trainbridge variables are present, then runs the sitecustomize
that would have run without us (a venv's or a distribution's), so nothing is lost.
Processes without the variables pay one environment lookup.

The worker is loaded as `trainbridge.worker`, from the trainbridge installed in this
interpreter or else from the copy this file belongs to: only the name `trainbridge` enters
sys.modules, so the script's own `worker`, `bridge` or `codec` module is never shadowed.
"""

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (milliseconds)
if TYPE_CHECKING:
    from types import ModuleType


def _import_trainbridge() -> "ModuleType":
    """Import `trainbridge`: installed, or the package this directory belongs to."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))  # .../bridge/inject
    up = os.path.dirname(os.path.dirname(here))
    # In the wheel: <site>/trainbridge/bridge/inject; in a checkout: <repo>/bridge/inject
    # next to <repo>/trainbridge. Prefer our own copy so client and worker speak one version.
    for init in (os.path.join(up, "__init__.py"), os.path.join(up, "trainbridge", "__init__.py")):
        if os.path.basename(os.path.dirname(init)) == "trainbridge" and os.path.isfile(init):
            spec = importlib.util.spec_from_file_location(
                "trainbridge", init, submodule_search_locations=[os.path.dirname(init)]
            )
            # An existing .py file always gets a spec with a SourceFileLoader: neither is None.
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # see above
            sys.modules["trainbridge"] = module
            try:
                spec.loader.exec_module(module)  # type: ignore[union-attr]  # see above
            except BaseException:
                del sys.modules["trainbridge"]
                raise
            return module
    import trainbridge

    return trainbridge


def _check_requirements() -> None:
    """The worker needs pyzmq and msgpack in the training interpreter; say so plainly."""
    import trainbridge

    missing = trainbridge.missing_requirements()
    if missing:
        raise ImportError(
            "%s not installed for %s; run `%s -m pip install %s` to turn it on"
            % (" and ".join(missing), sys.executable, sys.executable, " ".join(missing))
        )


def _start_worker() -> None:
    if not os.environ.get("TRAINBRIDGE_ENDPOINT"):
        return
    try:
        # First, whatever is missing: a script's own `from trainbridge import worker` then
        # imports, and its calls are no-ops while the worker is off.
        if "trainbridge" not in sys.modules:
            _import_trainbridge()
        _check_requirements()
        from trainbridge.worker import auto

        auto.install()
    except Exception as exc:  # noqa: BLE001 - never break the training script's start
        sys.stderr.write(
            "[trainbridge] zero-code mode is off in this process: %s: %s\n"
            % (type(exc).__name__, str(exc).encode("ascii", "backslashreplace").decode())
        )


def _run_shadowed_sitecustomize() -> None:
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
