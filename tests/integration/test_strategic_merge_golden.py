"""Golden tests: taskfsm's strategic merge gives what a real kube-apiserver gives (docs/behaviour.md D4).

The API server applies strategic merge patches to built-in objects itself, with Kubernetes' own
code (k8s.io/apimachinery strategicpatch). For every case of the shared table
(tests/unit/strategic_merge/smp_cases.py) a real PodTemplate holding the case's pod template is created and
PATCHed with ``application/strategic-merge-patch+json``; the server's result is compared with
:func:`taskfsm.strategic_merge.apply_strategic_merge` applied to the *stored* original. The server
defaults the object after patching, so taskfsm's result is passed through the same defaulting by a
dry-run create before the comparison. The table's hand-written ``expected`` is checked the same way,
so the table documents Kubernetes' behaviour. Malformed patches must be rejected by both sides.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm.strategic_merge import PatchError, apply_strategic_merge

SMP = "application/strategic-merge-patch+json"


def _load_cases():
    """The case table lives beside the unit tests; load it by path (tests are not a package)."""
    if "smp_cases" in sys.modules:
        return sys.modules["smp_cases"]
    path = Path(__file__).resolve().parents[1] / "unit" / "strategic_merge" / "smp_cases.py"
    spec = importlib.util.spec_from_file_location("smp_cases", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["smp_cases"] = module
    spec.loader.exec_module(module)
    return module


cases = _load_cases()


def _json(response) -> dict[str, Any]:
    return json.loads(response.data)


def _create(
    core: client.CoreV1Api, namespace: str, name: str, template: dict, **kwargs
) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name},
        "template": template,
    }
    return _json(
        core.create_namespaced_pod_template(namespace, body, _preload_content=False, **kwargs)
    )


def _defaulted(core: client.CoreV1Api, namespace: str, name: str, template: dict) -> dict[str, Any]:
    """``template`` as the API server would store it (validated and defaulted), via a dry run."""
    return _create(core, namespace, name, template, dry_run="All")["template"]


@pytest.mark.parametrize("case", cases.MERGE_CASES, ids=lambda c: c.id)
def test_merge_matches_api_server(api_client, namespace, case):
    core = client.CoreV1Api(api_client)
    name = case.id.replace("_", "-")
    stored = _create(core, namespace, name, case.original)["template"]

    response = core.patch_namespaced_pod_template(
        name, namespace, {"template": case.patch}, _content_type=SMP, _preload_content=False
    )
    server = _json(response)["template"]

    ours = apply_strategic_merge(stored, case.patch, cases.POD_TEMPLATE_SPEC)
    assert _defaulted(core, namespace, f"{name}-ours", ours) == server
    assert _defaulted(core, namespace, f"{name}-expected", case.expected) == server


@pytest.mark.parametrize("case", cases.ERROR_CASES, ids=lambda c: c.id)
def test_malformed_patch_rejected_by_both(api_client, namespace, case):
    core = client.CoreV1Api(api_client)
    name = case.id.replace("_", "-")
    stored = _create(core, namespace, name, case.original)["template"]

    with pytest.raises(ApiException) as server_error:
        core.patch_namespaced_pod_template(
            name, namespace, {"template": case.patch}, _content_type=SMP
        )
    assert server_error.value.status in (400, 422, 500)
    assert (
        core.read_namespaced_pod_template(name, namespace).template is not None
    )  # nothing applied

    with pytest.raises(PatchError) as ours:
        apply_strategic_merge(stored, case.patch, cases.POD_TEMPLATE_SPEC)
    assert ours.value.problem
    assert case.error_text in str(ours.value)
