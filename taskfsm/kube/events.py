"""Kubernetes Events (``events.k8s.io/v1``) about Tasks and MediaProcessingEntities.

One Event per phase change and per error, so ``kubectl describe`` / ``kubectl events`` tell the
story. Recording is best effort: a failed Event write is logged and never fails a reconcile.
Notes are short and never carry Secret data.

Repeats are aggregated as the Kubernetes event recorder does (docs/operations.md, "Events and
logs under bad input"), so a Task failing the same way on every retry writes a bounded number
of Events:

* the same (object, type, reason, note) again is a **series**: its Event is not created again,
  its ``series.count`` and ``series.lastObservedTime`` are patched, at most once per
  ``series_seconds`` (30 min, the Kubernetes recorder's heartbeat); the occurrences between
  are counted and carried by the next patch;
* more than ``similar_limit`` (10) different notes of one (object, type, reason) within
  ``similar_seconds`` (10 min) are **combined**: the further ones, as long as the group keeps
  repeating, are one series whose Event's note is the first of them after
  ``(combined from similar events):``;
* each object has a **budget** of Event writes (creations and series patches): ``burst`` (25)
  at once, then one more per ``refill_seconds`` (5 min), like client-go's spam filter; a write
  over budget is dropped (its occurrences still count in the series).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from taskfsm.api import names, server_limits
from taskfsm.api.timestamps import format_micro_time
from taskfsm.kube.errors import AlreadyExists, KubeError, NotFound
from taskfsm.kube.rest import EVENTS, Rest

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_NOTE = server_limits.MAX_EVENT_NOTE_BYTES  # the API server's limit for a note, in bytes


COMBINED_PREFIX: Final = "(combined from similar events): "
"""The note prefix of a series combining different notes of one reason (as Kubernetes')."""
MAX_TRACKED: Final = 10_000
"""Series and budgets kept in memory at most (the oldest are dropped beyond)."""


@dataclass
class _Series:
    """One Event written and the occurrences of it since."""

    name: str
    namespace: str
    count: int
    written_count: int
    written_at: float
    last_seen: float


@dataclass
class _Budget:
    tokens: float
    at: float


class EventRecorder:
    """Writes Events for objects of the main cluster, aggregating repeats (module docstring).

    Args:
        rest: the main cluster.
        controller: ``reportingController`` (e.g. ``engine.nagare.media/taskfsm``).
        instance: ``reportingInstance`` (default: host name and PID).
        series_seconds: a repeat patches its Event's series at most this often.
        series_idle_seconds: a repeat after this long without one starts a new Event.
        similar_limit: different notes of one (object, type, reason) within
            ``similar_seconds`` before further ones are combined into one series.
        burst: Event writes an object may make at once.
        refill_seconds: one more write per this many seconds, up to ``burst``.
        clock: monotonic seconds; injected by tests.
    """

    def __init__(
        self,
        rest: Rest,
        *,
        controller: str = "engine.nagare.media/taskfsm",
        instance: str | None = None,
        series_seconds: float = 1800.0,
        series_idle_seconds: float = 6 * 3600.0,
        similar_limit: int = 10,
        similar_seconds: float = 600.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rest = rest
        self.controller = controller
        self.instance = instance or f"{socket.gethostname()}-{os.getpid()}"
        self.series_seconds = series_seconds
        self.series_idle_seconds = series_idle_seconds
        self.similar_limit = similar_limit
        self.similar_seconds = similar_seconds
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.clock = clock
        self._series: dict[tuple[str, str, str, str], _Series] = {}
        self._notes: dict[tuple[str, str, str], dict[str, float]] = {}
        """Different notes of each (object, type, reason) and when each was last seen."""
        self._combining: dict[tuple[str, str, str], float] = {}
        """Groups whose new notes are combined, and when one last was."""
        self._budgets: dict[str, _Budget] = {}
        self._lock = threading.Lock()
        self.recorded = 0
        """Events created."""
        self.patched = 0
        """Series patches written."""
        self.dropped = 0
        """Writes dropped over an object's budget."""

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
        uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        now = self.clock()
        with self._lock:
            combined = self._combined_locked(uid, type_, reason, note, now)
            if combined:
                note = COMBINED_PREFIX + note
            note = server_limits.cut_utf8(note, MAX_NOTE)  # the API server counts bytes
            # A combined note's series is the group's, whatever the note says this time.
            key = (uid, type_, reason, COMBINED_PREFIX if combined else note)
            series = self._series.get(key)
            if series is not None and now - series.last_seen < self.series_idle_seconds:
                series.count += 1
                series.last_seen = now
                if now - series.written_at < self.series_seconds:
                    return  # counted; the next patch carries it
                if not self._spend_locked(uid, now):
                    return
                series.written_at = now
                patch = (series.name, series.namespace, series.count)
            else:
                if not self._spend_locked(uid, now):
                    return
                patch = None
        if patch is not None:
            self._patch_series(obj, key, *patch)
            return
        self._create(obj, key, type_, reason, note, action, now)

    # -- internals -------------------------------------------------------------------------------

    def _combined_locked(self, uid: str, type_: str, reason: str, note: str, now: float) -> bool:
        """Whether ``note`` goes into its group's combined series: the object has had too many
        different notes of this reason lately (and the group keeps repeating)."""
        group = (uid, type_, reason)
        seen = self._notes.setdefault(group, {})
        for old in [n for n, at in seen.items() if now - at >= self.similar_seconds]:
            del seen[old]
        if note in seen:
            seen[note] = now
            return False
        combining = self._combining.get(group)
        if combining is not None and now - combining < self.series_idle_seconds:
            # Once combined, a new note of the group stays combined while the group repeats.
            self._combining[group] = now
            return True
        if len(seen) < self.similar_limit:
            seen[note] = now
            return False
        self._combining[group] = now
        return True

    def _spend_locked(self, uid: str, now: float) -> bool:
        """Take one write from ``uid``'s budget; False (and counted as dropped) when empty."""
        budget = self._budgets.get(uid)
        if budget is None:
            budget = self._budgets[uid] = _Budget(float(self.burst), now)
            self._trim_locked()
        budget.tokens = min(
            float(self.burst), budget.tokens + (now - budget.at) / self.refill_seconds
        )
        budget.at = now
        if budget.tokens < 1.0:
            self.dropped += 1
            return False
        budget.tokens -= 1.0
        return True

    def _trim_locked(self) -> None:
        for table in (self._series, self._notes, self._budgets, self._combining):
            while len(table) > MAX_TRACKED:
                del table[next(iter(table))]  # type: ignore[arg-type]  # any of the three

    def _create(
        self,
        obj: Mapping[str, Any],
        key: tuple[str, str, str, str],
        type_: str,
        reason: str,
        note: str,
        action: str,
        now: float,
    ) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        name = names.name_with_suffix(meta.get("name") or "", uuid.uuid4().hex[:12])
        body = {
            "metadata": {
                # ≤ 253 characters whatever the object's name (D24): a long one is cut.
                "name": name,
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
        except AlreadyExists:
            pass  # its name is this Event's own: a resent create whose first send landed
        except KubeError as exc:
            # Not remembered as sent: the same Event is tried again with the next occurrence.
            log.warning("could not record event", extra={"reason": reason, "error": str(exc)})
            return
        with self._lock:
            self._series[key] = _Series(name, namespace, 1, 1, now, now)
            self._trim_locked()
            self.recorded += 1

    def _patch_series(
        self, obj: Mapping[str, Any], key: tuple[str, str, str, str], name: str, ns: str, count: int
    ) -> None:
        patch = {
            "series": {
                "count": count,
                "lastObservedTime": format_micro_time(datetime.now(UTC)),
            }
        }
        try:
            self.rest.patch(EVENTS, ns, name, patch)
        except NotFound:
            # The Event expired (the API server's --event-ttl): the next occurrence starts anew.
            with self._lock:
                self._series.pop(key, None)
            return
        except KubeError as exc:
            log.warning(
                "could not update event series", extra={"reason": key[2], "error": str(exc)}
            )
            return
        with self._lock:
            series = self._series.get(key)
            if series is not None:
                series.written_count = count
            self.patched += 1
