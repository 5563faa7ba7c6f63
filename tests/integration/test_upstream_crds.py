"""Taskfsm on the CRDs of a cluster that ran nagare's Go controller.

Those CRDs have no ``status.observedGeneration`` on Tasks, so the API server prunes it from
every status write; a controller comparing its wanted status with the stored one would then
write again on every reconcile. Each case runs on a control plane of its own (CRDs are
cluster-wide): taskfsm's own CRDs with that one field removed, and, opt-in, the upstream CRDs
from ``../shared/reference/crds`` (skipped when that folder is absent).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.api.crdgen import crd_documents
from taskfsm.kube.resources import BY_KIND, TASKS
from taskfsm.kube.rest import Rest
from taskfsm.manager.manager import Manager, Settings
from taskfsm_dev import objects
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.crds import install_crds
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Faults, FaultyRest, ReconcileTap, RequestLog

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"


def without_observed_generation(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for doc in docs:
        if doc["spec"]["names"]["kind"] == c.KIND_TASK:
            for version in doc["spec"]["versions"]:
                status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
                status["properties"].pop("observedGeneration")
    return docs


def reference_crds() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted((REFERENCE / "crds").glob("*.yaml"))]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("own-without-observedGeneration"),
        pytest.param(
            "reference",
            marks=[
                pytest.mark.reference,
                pytest.mark.skipif(
                    not REFERENCE.is_dir(), reason=f"reference inputs not present at {REFERENCE}"
                ),
            ],
        ),
    ],
)
def upstream_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    with ControlPlane(name="taskfsm-upstream-crds") as cp:
        with cp.api_client() as api:
            docs = (
                without_observed_generation(crd_documents())
                if request.param != "reference"
                else reference_crds()
            )
            install_crds(api, docs)
        yield cp


@pytest.fixture
def upstream(upstream_plane: ControlPlane) -> Iterator[tuple[client.ApiClient, str]]:
    with upstream_plane.api_client() as api:
        namespace = f"upstream-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        yield api, namespace


def test_no_status_write_when_nothing_changed_on_crds_without_observed_generation(upstream):
    """A Running Task on CRDs without ``status.observedGeneration``: further reconciles make no
    status write (before: one per reconcile, as the pruned field always looked changed)."""
    api, namespace = upstream
    rest = Rest(api)
    for obj in (
        objects.workflow("wf"),
        objects.never_starting(objects.function("f")),
        objects.local_mpe("m"),
        objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"),
    ):
        rest.create(BY_KIND[obj["kind"]], namespace, obj)
    log = RequestLog()
    settings = Settings(
        namespace=namespace, metrics_address=None, health_address=None, shutdown_timeout=5
    )
    ctl = Manager(api, settings, rest_factory=lambda a: FaultyRest(a, log=log, faults=Faults()))
    tap = ReconcileTap(ctl)
    ctl.start()
    try:
        wait_for(
            lambda: (rest.get(TASKS, namespace, "t").get("status") or {}).get("phase") == "Running",
            timeout=60,
            what="Task Running",
        )
        stored = rest.get(TASKS, namespace, "t")["status"]
        assert "observedGeneration" not in stored  # the CRD really prunes it
        key = f"{namespace}/t"
        tap.settle(key)
        log.clear()
        for _ in range(3):
            tap.settle(key)
        assert log.select(verb="PATCH", resource="tasks/status") == []
        assert rest.get(TASKS, namespace, "t")["status"]["phase"] == "Running"
    finally:
        ctl.stop()


def with_atomic_conditions(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """taskfsm's CRDs with ``status.conditions`` an atomic list, as the upstream CRDs have it."""
    for doc in docs:
        status = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].get("status")
        conditions = (status or {}).get("properties", {}).get("conditions")
        if conditions is not None:
            conditions["x-kubernetes-list-type"] = "atomic"
            conditions.pop("x-kubernetes-list-map-keys")
    return docs


def go_conditions(*types_and_status: tuple[str, str]) -> list[dict[str, str]]:
    """Conditions as nagare's Go controller writes them (utils.MarkCondition: one per type)."""
    stamp = "2026-01-02T03:04:05Z"
    return [{"type": t, "status": s, "lastTransitionTime": stamp} for t, s in types_and_status]


def test_conditions_list_map_keeps_upstream_objects_writable():
    """`status.conditions` is a list-map keyed by `type`: a status with two conditions of one
    type is refused, the status nagare's Go controller writes (one per type, replaced in place)
    is accepted, and a Task stored under the upstream CRDs' atomic list with duplicate types
    (which that schema allowed) stays writable after taskfsm's CRDs replace them: the API server
    checks map keys only of lists that already satisfied them."""
    with ControlPlane(name="taskfsm-conditions-map") as cp, cp.api_client() as api:
        rest = Rest(api)
        namespace = f"conds-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        install_crds(api, with_atomic_conditions(crd_documents()))
        for name in ("old", "go"):
            rest.create(TASKS, namespace, objects.task(name, workflow_name="wf"))
        duplicated = go_conditions(("Ready", "False"), ("Ready", "True"))
        rest.patch(
            TASKS,
            namespace,
            "old",
            {"status": {"phase": "Running", "conditions": duplicated}},
            subresource="status",
        )

        install_crds(api, crd_documents())  # taskfsm's: list-map keyed by type
        wait_for(
            lambda: _rejects_duplicates(rest, namespace),
            timeout=30,
            what="the API server serving the list-map schema",
        )
        go = rest.get(TASKS, namespace, "go")
        go["status"] = {
            "phase": "Running",
            "conditions": go_conditions(("Initialized", "True"), ("Ready", "True")),
        }
        written = rest.request(
            "PUT", TASKS, TASKS.path(namespace, "go", "status"), body=go
        )  # an Update of the whole status, as controller-runtime's client sends it
        assert [c["type"] for c in written["status"]["conditions"]] == ["Initialized", "Ready"]

        old = rest.patch(
            TASKS,
            namespace,
            "old",
            {"status": {"message": "still writable"}},
            subresource="status",
        )
        assert old["status"]["conditions"] == duplicated
        assert old["status"]["message"] == "still writable"


def _rejects_duplicates(rest: Rest, namespace: str) -> bool:
    from taskfsm.kube.errors import Invalid

    name = f"dup-{uuid.uuid4().hex[:6]}"
    rest.create(TASKS, namespace, objects.task(name, workflow_name="wf"))
    try:
        rest.patch(
            TASKS,
            namespace,
            name,
            {"status": {"conditions": go_conditions(("Ready", "True"), ("Ready", "False"))}},
            subresource="status",
        )
    except Invalid as exc:
        return "Duplicate value" in str(exc)
    return False
