"""An in-memory :class:`taskfsm.selection.choose.Catalog` for unit tests of the pure builders."""

from __future__ import annotations

import copy
from typing import Any

from taskfsm.kube.resources import BY_KIND


class DictCatalog:
    """Objects by kind; namespaced kinds by (namespace, name), cluster kinds by name only."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = obj["kind"]
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if BY_KIND[kind].namespaced else ""
        self._objects[(kind, namespace, meta["name"])] = copy.deepcopy(obj)
        return obj

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        ns = (namespace or "") if BY_KIND[kind].namespaced else ""
        found = self._objects.get((kind, ns, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        namespaced = BY_KIND[kind].namespaced
        return [
            copy.deepcopy(obj)
            for (k, ns, _), obj in self._objects.items()
            if k == kind and (not namespaced or namespace is None or ns == namespace)
        ]
