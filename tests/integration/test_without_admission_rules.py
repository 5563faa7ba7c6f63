"""Objects the CRDs' CEL rules refuse can still exist, and the controller still reports them.

A CRD upgrade does not revalidate stored objects, and the upstream CRDs have no such rules
(docs/behaviour.md §4.4), so a Task or Workflow stored before taskfsm's CRDs were installed may
carry a reference of a kind its field does not allow. The controller's answer is the status
message it always gave (§1.2, §3.14; D16). These tests run on a control plane of their own whose
CRDs are taskfsm's without any ``x-kubernetes-validations`` rule; the rules themselves are tested
in ``test_admission_rules.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.api.crdgen import crd_documents
from taskfsm_dev import objects
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.crds import install_crds


def without_cel_rules(node: Any) -> Any:
    """``node`` (a CRD or part of one) with every ``x-kubernetes-validations`` removed."""
    if isinstance(node, dict):
        return {k: without_cel_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_cel_rules(item) for item in node]
    return node


@pytest.fixture(scope="module")
def api_client() -> Iterator[client.ApiClient]:
    """Overrides the session's: a control plane whose CRDs carry no CEL rules."""
    with ControlPlane(name="taskfsm-no-cel-rules") as cp, cp.api_client() as api:
        yield api


@pytest.fixture(scope="module")
def crds(api_client: client.ApiClient) -> list[str]:
    """Overrides the session's: taskfsm's CRDs minus their CEL rules."""
    return install_crds(api_client, without_cel_rules(crd_documents()))


def test_crds_here_have_no_cel_rules(crds: list[str]) -> None:
    """The premise: this control plane accepts what the rules would refuse."""
    assert len(crds) == len(crd_documents())
    assert "x-kubernetes-validations" not in str(without_cel_rules(crd_documents()))
    assert "x-kubernetes-validations" in str(crd_documents())


def test_mpe_ref_of_wrong_kind_is_a_clear_error(engine, controller, probe):
    """A mediaProcessingEntityRef whose kind is not an MPE kind is reported, not guessed."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    engine.create(
        objects.task(
            "t",
            workflow_name="wf",
            function_name="f",
            mediaProcessingEntityRef={"kind": "Function", "name": "m"},
        )
    )
    task_obj = probe.wait_message(
        "t",
        "MediaProcessingEntity reference does not reference a MediaProcessingEntity or "
        "ClusterMediaProcessingEntity",
    )
    assert task_obj["status"]["phase"] == "Initializing"


def test_d16_media_location_of_wrong_kind_names_media_location(engine, controller, probe):
    """D16: a Workflow mediaLocations ref of the wrong kind is reported as not referencing a
    MediaLocation (the reference's text wrongly said MediaProcessingEntity)."""
    engine.create(
        objects.workflow(
            "wf", media_locations=[objects.location_entry("s", "f", kind=c.KIND_FUNCTION)]
        )
    )
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    task = probe.wait_message("t", "does not reference a MediaLocation or ClusterMediaLocation")
    assert "MediaProcessingEntity" not in task["status"]["message"]
