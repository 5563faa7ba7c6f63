"""List-then-watch caches of one resource, built on ``kubernetes.informer.SharedInformer``.

The client's informer does the essential loop (list, watch from the list's resourceVersion,
resume from the last seen resourceVersion, 410 Gone → relist and diff with synthesised DELETED
events). This module wraps what it leaves out or gets wrong for a controller
(failure-modes.md F4–F6):

* plain dicts for every resource (its list path only understands typed list objects, so custom
  resources came back empty);
* a server-side watch timeout with jitter and a client read timeout just above it, so a dead TCP
  connection is noticed within ``watch_timeout + read_margin`` seconds instead of never (F5);
* bookmarks on, so a quiet watch keeps a fresh resourceVersion and resumes without a relist;
* a jittered exponential backoff before re-opening a failing watch: the client's loop re-opens
  immediately, which spins against an unreachable API server;
* 410 from the watch request itself surfaces as the ``ApiException`` the client expects (→ relist);
* ``managedFields`` dropped from cached objects (memory), ``has_synced`` and ``healthy`` flags for
  readiness, and lookups by namespace/name and by labels.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.informer import ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, SharedInformer

from taskfsm.kube.errors import Gone, KubeError
from taskfsm.kube.rest import Resource, Rest

log = logging.getLogger(__name__)

EventHandler = Callable[[str, dict[str, Any]], None]
"""Called on the informer thread with (``ADDED``/``MODIFIED``/``DELETED``, object dict)."""


class Informer:
    """A cache of ``res`` objects in ``namespace`` (all namespaces when None) kept by a watch.

    Args:
        rest: the cluster's :class:`~taskfsm.kube.rest.Rest`.
        res: the resource to watch.
        namespace: one namespace, or None for all (or a cluster-scoped resource).
        label_selector: server-side filter, e.g. ``engine.nagare.media/task-name``.
        watch_timeout: server-side watch duration in seconds (jittered up to +25 %).
        read_margin: extra seconds the client waits for bytes before declaring the stream dead.
        max_backoff: cap in seconds on the wait before re-opening a failing watch.
    """

    def __init__(
        self,
        rest: Rest,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: float = 240.0,
        read_margin: float = 30.0,
        max_backoff: float = 30.0,
        name: str = "",
    ) -> None:
        self.rest = rest
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.read_margin = read_margin
        self.max_backoff = max_backoff
        self.name = name or f"{res.plural}/{namespace or '*'}"
        self._handlers: list[EventHandler] = []
        self._stopped = threading.Event()
        self._failures = 0
        self.has_synced = False
        self.healthy = False
        self.last_error: str = ""
        self.relists = 0
        self._informer = SharedInformer(list_func=self._list_or_watch, key_func=_key)
        self._informer.add_event_handler(ADDED, self._on_added)
        self._informer.add_event_handler(MODIFIED, self._on_modified)
        self._informer.add_event_handler(DELETED, self._on_deleted)
        self._informer.add_event_handler(BOOKMARK, self._on_bookmark)
        self._informer.add_event_handler(ERROR, self._on_error)

    # -- public ----------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; register before :meth:`start` to see the initial list."""
        self._handlers.append(handler)

    def start(self) -> Informer:
        self._informer.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._informer.stop()

    def wait_synced(self, timeout: float) -> bool:
        """Block until the first list has filled the cache; False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.has_synced and time.monotonic() < deadline and not self._stopped.is_set():
            time.sleep(0.05)
        return self.has_synced

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The cached object, or None. Callers must not mutate it."""
        key = f"{namespace}/{name}" if namespace else name
        obj: dict[str, Any] | None = self._informer.cache.get_by_key(key)
        return obj

    def list(self, namespace: str | None = None, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Cached objects, optionally restricted to a namespace and to exact label matches."""
        out = []
        for obj in self._informer.cache.list():
            meta = obj.get("metadata") or {}
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            if labels:
                have = meta.get("labels") or {}
                if any(have.get(k) != v for k, v in labels.items()):
                    continue
            out.append(obj)
        return out

    def __len__(self) -> int:
        return len(self._informer.cache.list_keys())

    # -- the list/watch function given to SharedInformer -----------------------------------------

    def _list_or_watch(self, **kwargs: Any) -> Any:
        if kwargs.get("watch"):
            return self._open_watch(kwargs.get("resource_version"))
        body = self.rest.list(self.res, self.namespace, label_selector=self.label_selector)
        items = body.get("items") or []
        for item in items:
            # Lists omit apiVersion/kind on items; handlers and models want them.
            item.setdefault("apiVersion", self.res.api_version)
            item.setdefault("kind", self.res.kind)
            _slim(item)
        if self.has_synced:
            self.relists += 1
        self.has_synced = True
        self._mark_healthy()
        return SimpleNamespace(
            items=items, metadata=SimpleNamespace(resource_version=(body.get("metadata") or {}).get("resourceVersion"))
        )

    def _open_watch(self, resource_version: str | None) -> Any:
        if self._failures:
            delay = min(self.max_backoff, 0.5 * 2 ** (self._failures - 1)) * (0.5 + random.random())  # noqa: S311
            self._stopped.wait(delay)
        timeout = int(self.watch_timeout * (1 + random.random() * 0.25))  # noqa: S311 - jitter
        try:
            return self.rest.watch(
                self.res,
                self.namespace,
                timeout_seconds=timeout,
                read_timeout=timeout + self.read_margin,
                resourceVersion=resource_version,
                allowWatchBookmarks="true",
                labelSelector=self.label_selector,
            )
        except Gone as exc:
            # SharedInformer only relists on ApiException(410); give it that.
            raise ApiException(status=410, reason=str(exc)) from None
        except KubeError:
            self._failures += 1
            raise

    # -- informer callbacks (informer thread) ----------------------------------------------------

    def _dispatch(self, kind: str, obj: dict[str, Any]) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:  # one bad handler must not stop the watch
                log.exception("informer handler failed", extra={"informer": self.name})

    def _on_added(self, obj: dict[str, Any]) -> None:
        self._mark_healthy()
        _slim(obj)
        self._dispatch(ADDED, obj)

    def _on_modified(self, obj: dict[str, Any]) -> None:
        self._mark_healthy()
        _slim(obj)
        self._dispatch(MODIFIED, obj)

    def _on_deleted(self, obj: dict[str, Any]) -> None:
        self._mark_healthy()
        self._dispatch(DELETED, obj)

    def _on_bookmark(self, _obj: Any) -> None:
        self._mark_healthy()

    def _on_error(self, exc: Any) -> None:
        if self._stopped.is_set():
            return  # stop() closes the stream on purpose
        self.healthy = False
        self._failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]
        log.warning("watch failed; reconnecting with backoff", extra={"informer": self.name, "error": self.last_error})

    def _mark_healthy(self) -> None:
        self._failures = 0
        self.healthy = True
        self.last_error = ""


def _key(obj: Any) -> str:
    meta = obj.get("metadata") or {} if isinstance(obj, dict) else {}
    ns, name = meta.get("namespace"), meta.get("name") or ""
    return f"{ns}/{name}" if ns else name


def _slim(obj: dict[str, Any]) -> None:
    """Drop what a controller never reads from a cached object (managedFields: ~40 % of it)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
