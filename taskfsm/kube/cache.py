"""The controller's read side: informer caches of the main cluster, and read-your-writes.

Reconciles read cached objects (the informers of :mod:`taskfsm.kube.informer`), never the API
server, except where a cache can be behind the controller's own last write. That is the stale
read behind duplicate children in many controllers (docs/behaviour.md F1 and D7):
the cache may still show a Task without the ``status.jobRef`` the previous pass wrote. So every
object this process writes is remembered (:class:`WrittenObjects`) until the cache has caught up
with it, and a read returns whichever of the two is newer. Only when neither is known does a
reconcile fall back to a fresh GET.
"""

from __future__ import annotations

import threading
from typing import Any

from taskfsm.api import constants as c
from taskfsm.kube import packing
from taskfsm.kube.informer import Informer
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import Rest


def _rv(obj: dict[str, Any] | None) -> int:
    """The resourceVersion as an int (etcd revisions are integers; unknown → -1)."""
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


def newer(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The newer of two versions of one object by resourceVersion (None-safe)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if _rv(a) >= _rv(b) else b


class WrittenObjects:
    """The last version this process wrote of each object, until the cache shows it too; and
    the objects seen deleted lately (tombstones), so a read of one of them needs no GET.

    Keys are free-form tuples, e.g. ``("main", "tasks", ns, name)``.
    """

    TOMBSTONES = 10_000
    """Deleted keys remembered (oldest forgotten first)."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, ...], dict[str, Any]] = {}
        self._deleted: dict[tuple[str, ...], int] = {}
        """Keys seen deleted → the resourceVersion they were seen deleted at (-1: unknown)."""
        self._lock = threading.Lock()

    def wrote(self, key: tuple[str, ...], obj: dict[str, Any]) -> None:
        """Our write of ``obj`` landed. A version no newer than the one the object was seen
        deleted at is ignored: the answer to a write made before the deletion, handled after
        the watch's DELETED event, must not bring the object back (nothing would ever remove
        that copy again, and every read would see a Task or Job that no longer exists)."""
        with self._lock:
            deleted_at = self._deleted.get(key)
            if deleted_at is not None and 0 <= _rv(obj) <= deleted_at:
                return
            self._deleted.pop(key, None)
            if _rv(obj) >= _rv(self._objects.get(key)):
                self._objects[key] = obj

    def gone(self, key: tuple[str, ...], last: dict[str, Any] | None = None) -> None:
        """The object was observed deleted (``last``: its final version, when known): forget
        what we wrote, remember that it went."""
        with self._lock:
            self._objects.pop(key, None)
            self._deleted.pop(key, None)
            self._deleted[key] = _rv(last)
            if len(self._deleted) > self.TOMBSTONES:
                del self._deleted[next(iter(self._deleted))]

    def seen(self, key: tuple[str, ...], obj: dict[str, Any]) -> bool:
        """The watch delivered ``obj`` (the cache holds it now): forget our copy once the cache
        has caught up with it, so the copies of objects nobody reads again do not pile up; True
        when ``obj`` is exactly the version this process last wrote (its own write coming back:
        nothing in it is news to us)."""
        version = _rv(obj)
        with self._lock:
            written = self._objects.get(key)
            if written is None or not ((obj.get("metadata") or {}).get("resourceVersion")):
                return False
            if version >= _rv(written):
                del self._objects[key]
            return version == _rv(written)

    def deleted(self, key: tuple[str, ...]) -> bool:
        """The object was seen deleted and nothing was written to it since."""
        with self._lock:
            return key in self._deleted

    def pick(self, key: tuple[str, ...], cached: dict[str, Any] | None) -> dict[str, Any] | None:
        """The newer of ``cached`` and our last write; drops our copy once the cache caught up."""
        with self._lock:
            written = self._objects.get(key)
            if written is None:
                return cached
            if cached is not None and _rv(cached) >= _rv(written):
                del self._objects[key]
                return cached
            return written

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)


class Caches:
    """Informers for every engine kind in the main cluster, plus a :class:`Catalog` view.

    Args:
        rest: the main cluster.
        namespace: watch one namespace (None: all namespaces); cluster kinds are always whole.
        informer_options: passed to every :class:`Informer` (timeouts).
    """

    def __init__(
        self,
        rest: Rest,
        *,
        namespace: str | None = None,
        informer_options: dict[str, Any] | None = None,
    ):
        self.rest = rest
        self.informers: dict[str, Informer] = {}
        for kind, res in BY_KIND.items():
            self.informers[kind] = Informer(
                rest,
                res,
                namespace=namespace if res.namespaced else None,
                name=res.plural,
                # Finished Tasks are most of a long-running cluster's cache, and cold.
                pack_when=packing.finished_task if kind == c.KIND_TASK else None,
                **(informer_options or {}),
            )
        self.written = WrittenObjects()

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def wait_synced(self, timeout: float) -> bool:
        return all(inf.wait_synced(timeout) for inf in self.informers.values())

    def synced(self) -> bool:
        return all(inf.has_synced for inf in self.informers.values())

    def healthy(self) -> list[tuple[str, float]]:
        return [(inf.name, 1.0 if inf.healthy else 0.0) for inf in self.informers.values()]

    # -- Catalog protocol (taskfsm.selection.choose) --------------------------------------------

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        informer = self.informers[kind]
        ns = namespace if informer.res.namespaced else None
        cached = informer.get(ns, name)
        return self.written.pick(("main", informer.res.plural, ns or "", name), cached)

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        informer = self.informers[kind]
        return informer.list(namespace if informer.res.namespaced else None)
