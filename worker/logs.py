"""A logging.Handler that forwards records to the client as `log` messages.

    logging.getLogger().addHandler(worker.LogHandler())

Formatting happens in the calling thread (as for any handler); sending is the beacon's.
"""

from __future__ import annotations

import logging

from trainbridge.worker import runtime


def level_name(levelno: int) -> str:
    if levelno >= logging.CRITICAL:
        return "critical"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    if levelno >= logging.INFO:
        return "info"
    return "debug"


class LogHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if not runtime.STATE.enabled:
            return
        try:
            runtime.enqueue_log(
                {
                    "level": level_name(record.levelno),
                    "message": self.format(record),
                    "logger": record.name,
                    "created": record.created,
                }
            )
        except Exception as exc:  # noqa: BLE001 - logging must never break the script
            runtime.internal_error("LogHandler", exc)
