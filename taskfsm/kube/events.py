"""Kubernetes Events (``events.k8s.io/v1``) about Tasks and MediaProcessingEntities.

One Event per phase change and per error, so ``kubectl describe`` / ``kubectl events`` tell the
story. Recording is best effort: a failed Event write is logged and never fails a reconcile. A
repeat of the same (object, reason, note) within ``dedup_seconds`` is dropped, so a Task retrying
with backoff does not flood the namespace. Notes are short and never carry Secret data.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from taskfsm.api import names, server_limits
from taskfsm.api.timestamps import format_micro_time
from taskfsm.kube.errors import KubeError
from taskfsm.kube.rest import EVENTS, Rest

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_NOTE = server_limits.MAX_EVENT_NOTE_BYTES  # the API server's limit for a note, in bytes


class EventRecorder:
    """Writes Events for objects of the main cluster.

    Args:
        rest: the main cluster.
        controller: ``reportingController`` (e.g. ``engine.nagare.media/taskfsm``).
        instance: ``reportingInstance`` (default: host name and PID).
        dedup_seconds: drop identical Events within this window.
    """

    def __init__(
        self,
        rest: Rest,
        *,
        controller: str = "engine.nagare.media/taskfsm",
        instance: str | None = None,
        dedup_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rest = rest
        self.controller = controller
        self.instance = instance or f"{socket.gethostname()}-{os.getpid()}"
        self.dedup_seconds = dedup_seconds
        self.clock = clock
        self._recent: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self.recorded = 0

    def record(
        self,
        obj: Mapping[str, Any],
        type_: str,
        reason: str,
        note: str,
        *,
        action: str = "Reconcile",
    ) -> None:
        """Record an Event about ``obj`` (a dict with apiVersion, kind and metadata)."""
        meta = obj.get("metadata") or {}
        note = server_limits.cut_utf8(note, MAX_NOTE)  # the API server counts bytes
        key = (meta.get("uid") or "", reason, note)
        now = self.clock()
        with self._lock:
            last = self._recent.get(key)
            if last is not None and now - last < self.dedup_seconds:
                return
        namespace = meta.get("namespace") or "default"
        body = {
            "metadata": {
                # ≤ 253 characters whatever the object's name (D24): a long one is cut.
                "name": names.name_with_suffix(meta.get("name") or "", uuid.uuid4().hex[:12]),
                "namespace": namespace,
            },
            "eventTime": format_micro_time(datetime.now(UTC)),
            "reportingController": self.controller,
            "reportingInstance": self.instance[:128],
            "action": action,
            "reason": reason,
            "note": note,
            "type": type_,
            "regarding": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
        }
        try:
            self.rest.create(EVENTS, namespace, body)
        except KubeError as exc:
            # Not remembered as sent: the same Event is tried again with the next occurrence.
            log.warning("could not record event", extra={"reason": reason, "error": str(exc)})
            return
        with self._lock:
            self._recent[key] = now
            if len(self._recent) > 10_000:  # bound memory: drop entries older than the window
                self._recent = {
                    k: t for k, t in self._recent.items() if now - t < self.dedup_seconds
                }
        self.recorded += 1
