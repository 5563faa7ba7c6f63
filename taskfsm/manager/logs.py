"""Structured logging: stdlib ``logging`` rendered by structlog, as text or JSON.

Every module logs with the stdlib (``log.info("became leader", extra={...})``): a constant
message with the variables as key/value pairs (controller-runtime's logging guide). The reconcile
workers bind ``task`` and ``reconcile_id`` with :func:`bind`, so every line of a pass carries them.
Secret values are never logged (the code never passes them), and :func:`redact` masks any key
that looks like a credential as a second line of defence.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

_SENSITIVE = ("password", "token", "secret", "kubeconfig", "data")


def redact(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
    for key in list(event):
        if (
            key != "event"
            and any(word in key.lower() for word in _SENSITIVE)
            and key not in ("secret_name",)
        ):
            event[key] = "***"
    return event


def configure(*, level: str = "INFO", json: bool = False) -> None:
    """Route all stdlib logging through structlog's renderer (idempotent)."""
    renderer: Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact,
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The client's informer logs every reconnect with a traceback; our wrapper reports it once.
    logging.getLogger("kubernetes.informer.informer").setLevel(logging.CRITICAL)
    logging.getLogger("leaderelection").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def bind(**values: Any) -> None:
    """Attach key/values to every log line of this thread's current work (e.g. a reconcile)."""
    structlog.contextvars.bind_contextvars(**values)


def clear() -> None:
    structlog.contextvars.clear_contextvars()
