"""Install CustomResourceDefinitions into a (test) cluster and wait until they serve.

Used by the test fixtures, the demo and the benchmarks; the CRD documents themselves are generated
by ``taskfsm.api.crdgen`` (or may be any CRD YAML a test brings).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from taskfsm.kube.client import ApiClient
from taskfsm.kube.errors import AlreadyExists
from taskfsm.kube.rest import CRDS, Rest


def install_crds(
    api_client: ApiClient, docs: Iterable[dict[str, Any]], timeout: float = 60.0
) -> list[str]:
    """Create (or replace) each CRD in ``docs`` and wait until all are ``Established``.

    Returns the CRD names. Raises ``TimeoutError`` naming the CRDs that did not become
    Established, and a :class:`taskfsm.kube.errors.KubeError` when the API server rejects a
    document.
    """
    rest = Rest(api_client)
    names = []
    for doc in docs:
        name = doc["metadata"]["name"]
        names.append(name)
        try:
            rest.create(CRDS, None, doc)
        except AlreadyExists:
            current = rest.get(CRDS, None, name)
            body = dict(doc)
            body["metadata"] = {
                **doc["metadata"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
            rest.replace(
                CRDS, None, name, {"apiVersion": CRDS.api_version, "kind": CRDS.kind, **body}
            )
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = rest.get(CRDS, None, name)
            conditions = {
                c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []
            }
            if conditions.get("Established") == "True":
                pending.discard(name)
        if pending:
            time.sleep(0.2)
    if pending:
        raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {sorted(pending)}")
    # Established means the API server registered the kind; discovery may lag a moment longer.
    return names
