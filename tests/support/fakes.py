"""The unit tier's one set of fakes: an informer, an in-memory API (``Rest``) and an Event recorder.

Each stands in for the real type's surface that the controllers use, and nothing more; a test that
needs a behaviour (a write refused, an informer not yet synced, a watch failing) sets it on the fake
instead of writing a fake of its own. The real types are tested against the real control plane in
the integration tiers (docs/testing.md).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from taskfsm.kube.errors import Conflict, NotFound, Unavailable

Key = tuple[str, str]
"""(namespace, name); ``""`` for a cluster-scoped object."""


class FakeInformer:
    """An informer's cache of ``objects`` and its health, as the controllers read them.

    ``synced``, ``failures`` and ``status`` are what a real informer reports after its first list
    and after failed lists or watches (``status`` the last HTTP status: 401/403 a refusal).
    """

    def __init__(
        self,
        objects: dict[Key, dict[str, Any]] | None = None,
        *,
        synced: bool = True,
        failures: int = 0,
        status: int = 0,
    ) -> None:
        self.objects = objects if objects is not None else {}
        self.has_synced = synced
        self.healthy = synced and not failures
        self.failures = failures
        self.last_status = status
        self.last_error = "Forbidden" if status == 403 else ("timed out" if failures else "")
        self.stopped = False
        self.handlers: list[Any] = []
        self.indexes: dict[str, Callable[[dict[str, Any]], str]] = {}

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace or "", name))

    def list(
        self, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        return [o for (ns, _), o in self.objects.items() if namespace in (None, ns)]

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def index(self, name: str, function: Callable[[dict[str, Any]], str]) -> None:
        self.indexes[name] = function

    def by_index(self, name: str, value: str) -> list[dict[str, Any]]:
        function = self.indexes[name]
        return [o for o in self.objects.values() if function(o) == value]

    def count(self, name: str, value: str) -> int:
        return len(self.by_index(name, value))

    def stop(self) -> None:
        self.stopped = True


class FakeRest:
    """An in-memory API server for one kind of object, as ``taskfsm.kube.rest.Rest`` reaches it.

    Writes land in ``objects`` (share an informer's dict to make the cache see them) and are kept
    in ``created`` and ``patches``; a patch carrying ``metadata.resourceVersion`` is refused with
    a Conflict unless it matches, as the API server's precondition is; ``fail`` makes every write
    raise Unavailable. ``request`` answers other calls (reviews) through ``answer``.
    """

    def __init__(
        self,
        objects: dict[Key, dict[str, Any]] | None = None,
        *,
        answer: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.objects = objects if objects is not None else {}
        self.answer = answer
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str | None, Any]] = []
        self.requests: list[str] = []
        self.deletes: list[Key] = []
        self.fail = False
        self.rv = 100

    def _write(self) -> None:
        if self.fail:
            raise Unavailable("API server unreachable")

    def create(self, res: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._write()
        self.created.append(body)
        return body

    def get(self, res: Any, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((namespace, name)))

    def patch(
        self,
        res: Any,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        content_type: str = "",
    ) -> dict[str, Any]:
        """A merge patch (a dict), or a JSON patch (a list) of ``add``/``remove`` operations on
        ``/metadata/finalizers`` as ``taskfsm.kube.finalizers`` writes them."""
        self._write()
        self.patches.append((subresource, copy.deepcopy(body)))
        obj = copy.deepcopy(self.objects[(namespace, name)])
        if isinstance(body, list):
            finalizers = obj["metadata"].setdefault("finalizers", [])
            for op in body:
                if op["op"] == "add":
                    value = op["value"]
                    finalizers.extend(value if isinstance(value, list) else [value])
                elif op["op"] == "remove":
                    del finalizers[int(op["path"].rsplit("/", 1)[1])]
        else:
            meta = dict(body.get("metadata") or {})
            wanted = meta.pop("resourceVersion", None)
            if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
                raise Conflict(f"the object has been modified (want {wanted})")
            merge_patch(obj, {**body, "metadata": meta} if meta else _without_metadata(body))
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[(namespace, name)] = obj
        return copy.deepcopy(obj)

    def delete(
        self,
        res: Any,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        """A DELETE with the API server's preconditions (UID, resourceVersion: Conflict unless
        they match; NotFound when gone): an object with finalizers gets a deletionTimestamp,
        one without goes. Kept in ``deletes``."""
        self._write()
        obj = self.objects.get((namespace, name))
        if obj is None:
            raise NotFound(f"{name} not found")
        meta = obj["metadata"]
        if uid and uid != meta.get("uid"):
            raise Conflict(f"precondition failed: UID in precondition: {uid}")
        if resource_version and resource_version != meta.get("resourceVersion"):
            raise Conflict(
                f"precondition failed: ResourceVersion in precondition: {resource_version}"
            )
        self.deletes.append((namespace, name))
        if not meta.get("finalizers"):
            return self.objects.pop((namespace, name))
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("deletionTimestamp", "2024-05-01T12:00:00Z")
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[(namespace, name)] = obj
        return copy.deepcopy(obj)

    def request(
        self, method: str, res: Any, path: str, *, body: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        self.requests.append(res.kind)
        assert self.answer is not None, f"no answer set for {method} {path}"
        return self.answer(res.kind, body)


def _without_metadata(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "metadata"}


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386: ``None`` removes a key, a dict merges, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merge_patch(target.setdefault(key, {}), value)
        else:
            target[key] = value


class FakeEvents:
    """An Event recorder that keeps what it was asked to record."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, obj: Any, type_: str, reason: str, note: str) -> None:
        self.recorded.append((type_, reason, note))

    def reasons(self) -> list[str]:
        return [f"{type_}/{reason}" for type_, reason, _ in self.recorded]
