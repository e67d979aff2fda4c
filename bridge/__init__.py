"""trainbridge client side: launch and supervise a training process (docs/CLIENT.md).

    from trainbridge import bridge
    job = bridge.launch(["python", "train.py"], stall_timeout=600, log_path="train.log")
    for event in job.events():
        ...
    report = job.wait()

The asyncio form of the same thing is bridge.aio.

The names below are loaded on first use, so that importing a light submodule (the CLI's
`run --transparent`, which spawns before it loads the rest) costs no zmq import.
"""

from __future__ import annotations

import sys as _sys

TYPE_CHECKING = False  # no typing import: `run --transparent` spawns before it loads more
if TYPE_CHECKING:
    from typing import Any


def _check_client_requirements() -> None:
    """One sentence, at import, when the client cannot work here (README "Install")."""
    if not _sys.platform.startswith("linux"):
        raise ImportError(
            f"the trainbridge client (trainbridge.bridge, the `trainbridge` command) supports "
            f"Linux only and this is {_sys.platform}; the worker (trainbridge.worker) does run "
            f"here, so supervise the training process from a Linux machine or container"
        )
    import trainbridge

    # What the worker needs is all the supervisor needs: a GUI's training venv
    # supervises its own jobs. rich (the live screen) and nvidia-ml-py (GPU detail) are used
    # when present; without them the CLI prints plain lines and the report says what it could
    # not see.
    missing = trainbridge.missing_requirements()
    if missing:
        raise ImportError(
            f"the trainbridge supervisor needs {' and '.join(missing)}, not installed for "
            f"{_sys.executable}; run `{_sys.executable} -m pip install {' '.join(missing)}`"
        )


_check_client_requirements()

__all__ = ["Job", "LaunchError", "Report", "Scheduler", "launch"]


def __getattr__(name: str) -> Any:
    if name in ("Job", "launch"):
        from trainbridge.bridge import job

        return getattr(job, name)
    if name == "Report":
        from trainbridge.bridge.report import Report

        return Report
    if name == "LaunchError":
        from trainbridge.bridge.launcher import LaunchError

        return LaunchError
    if name == "Scheduler":
        from trainbridge.bridge.scheduler import Scheduler

        return Scheduler
    raise AttributeError(f"module 'trainbridge.bridge' has no attribute {name!r}")
