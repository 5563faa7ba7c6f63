"""Install CustomResourceDefinitions into a (test) cluster and wait until they serve.

Used by the test fixtures, the demo and the benchmarks; the CRD documents themselves are generated
by ``taskfsm.crdgen`` (or may be any CRD YAML a test brings).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException


def install_crds(
    api_client: client.ApiClient, docs: Iterable[dict[str, Any]], timeout: float = 60.0
) -> list[str]:
    """Create (or replace) each CRD in ``docs`` and wait until all are ``Established``.

    Returns the CRD names. Raises ``TimeoutError`` naming the CRDs that did not become
    Established, and ``ApiException`` when the API server rejects a document.
    """
    api = client.ApiextensionsV1Api(api_client)
    names = []
    for doc in docs:
        name = doc["metadata"]["name"]
        names.append(name)
        try:
            api.create_custom_resource_definition(doc)
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = api.read_custom_resource_definition(name)
            body = dict(doc)
            body["metadata"] = {**doc["metadata"], "resourceVersion": current.metadata.resource_version}
            api.replace_custom_resource_definition(name, body)
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = api.read_custom_resource_definition(name)
            conditions = {c.type: c.status for c in (crd.status.conditions or [])}
            if conditions.get("Established") == "True":
                pending.discard(name)
        if pending:
            time.sleep(0.2)
    if pending:
        raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {sorted(pending)}")
    # Established means the API server registered the kind; discovery may lag a moment longer.
    return names
