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
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
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
    # A failure repeated on every retry writes a bounded number of lines (RepeatFilter).
    handler.addFilter(RepeatFilter())
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


class RepeatFilter(logging.Filter):
    """Bounds the lines one failure repeated over and over may write (docs/operations.md,
    "Events and logs under bad input").

    Lines are the same when their logger, level, message, the work they belong to (the bound
    ``key``, or a ``task`` field), every other field they carry (``bucket``, ``lease``, ...:
    lines about different things are never one run) and their exception are. Of
    such a run of repeats, the first ``burst`` lines pass, then only the 2^k-th (16th, 32nd,
    ...) and at least one per ``interval`` seconds; a line that passes after dropped ones
    carries ``repeated`` (how many were dropped), and a repeat never carries its traceback again
    (the first did). A repeat after ``interval`` seconds of quiet starts a new run.
    """

    def __init__(
        self,
        *,
        burst: int = 3,
        interval: float = 3600.0,
        max_tracked: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.interval = interval
        self.max_tracked = max_tracked
        self.clock = clock
        self._runs: OrderedDict[tuple[Any, ...], list[float]] = OrderedDict()
        """signature → [occurrences, dropped since the last line, last line's time, last seen]"""
        self._lock = threading.Lock()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        signature = self._signature(record)
        now = self.clock()
        with self._lock:
            run = self._runs.get(signature)
            if run is None or now - run[3] >= self.interval:
                run = [0.0, 0.0, now, now]
                self._runs[signature] = run
                while len(self._runs) > self.max_tracked:
                    self._runs.popitem(last=False)
            self._runs.move_to_end(signature)
            run[0] += 1
            run[3] = now
            count = int(run[0])
            passes = (
                count <= self.burst or count & (count - 1) == 0 or now - run[2] >= self.interval
            )
            if not passes:
                run[1] += 1
                self.dropped += 1
                return False
            dropped, run[1], run[2] = int(run[1]), 0.0, now
        if count > 1:
            record.exc_info = None  # the first line of the run had the traceback
            record.exc_text = None
            record.occurrence = count
        if dropped:
            record.repeated = dropped
        return True

    @staticmethod
    def _signature(record: logging.LogRecord) -> tuple[Any, ...]:
        fields = record.__dict__
        work = structlog.contextvars.get_contextvars().get("key") or fields.get("task")
        exc = record.exc_info[1] if record.exc_info else None
        extra = tuple(sorted((k, str(v)) for k, v in fields.items() if k not in _RECORD_ATTRIBUTES))
        return (
            record.name,
            record.levelno,
            str(record.msg),
            str(work or ""),
            extra,
            "" if exc is None else f"{type(exc).__name__}: {exc}",
        )


_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "occurrence",
    "repeated",
    "_logger",
    "_name",
    "_from_structlog",
}
"""A LogRecord's own attributes (and what formatters and this filter add): not line fields."""
