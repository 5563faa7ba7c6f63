"""The MPE controller's writes carry the resourceVersion its pass read (its finalizer's and its
status's), and a write that does not land is retried like any failed write (it was dropped with
a log line before)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from machines.conditions import Condition
from taskfsm.api import constants as c
from taskfsm.controllers.mpe import reconciler as mpe_reconciler
from taskfsm.controllers.mpe.reconciler import MpeReconciler
from tests.support.fakes import FakeEvents, FakeRest

NS, NAME = "ns", "m"


def mpe(resource_version: str = "7") -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_MEDIA_PROCESSING_ENTITY,
        "metadata": {
            "namespace": NS,
            "name": NAME,
            "uid": "u",
            "resourceVersion": resource_version,
        },
        "status": {},
    }


def verdict(message: str) -> Any:
    """What a pass of the MPE chart decided: Ready=False with ``message``."""
    ready = Condition(
        type="Ready",
        status="False",
        last_transition_time=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        reason="NotReachable",
        message=message,
    )
    last = SimpleNamespace(
        detail=SimpleNamespace(message=message), conditions=(ready,), requeue_after=None
    )
    return SimpleNamespace(error=None, finalized=False, events=(), last=last, message="")


class World:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, cached_rv: str = "7") -> None:
        self.rest = FakeRest({(NS, NAME): mpe("7")})
        self.cached = mpe(cached_rv)
        self.remembered: list[dict[str, Any]] = []
        self.reconciler = MpeReconciler(
            rest=self.rest,  # type: ignore[arg-type]  # the fake API
            registry=None,  # type: ignore[arg-type]  # observe is not called: the engine is stubbed
            events=FakeEvents(),  # type: ignore[arg-type]  # a fake recorder
            get=lambda kind, ns, name: self.cached,
            tasks_using=lambda key: (0, []),
            on_ready=lambda key: None,
            collect_orphans=lambda cluster: None,
            resync_seconds=60,
            cleanup_timeout=30,
            remember=self.remembered.append,
        )
        engine = SimpleNamespace(reconcile=lambda *args, **kwargs: verdict("cannot reach it"))
        monkeypatch.setattr(mpe_reconciler, "MPE_ENGINE", engine)

    def reconcile(self) -> Any:
        return self.reconciler.reconcile(f"{c.KIND_MEDIA_PROCESSING_ENTITY}/{NS}/{NAME}")


def test_the_status_write_carries_the_resource_version_read(monkeypatch):
    world = World(monkeypatch)
    result = world.reconcile()
    assert result.error is None
    [(subresource, body)] = world.rest.patches
    assert subresource == "status"
    assert body["metadata"] == {"resourceVersion": "7"}
    assert body["status"]["message"] == "cannot reach it"
    # The next pass reads what was written, not a cache that may still lag.
    assert [m["status"]["message"] for m in world.remembered] == ["cannot reach it"]


def test_a_status_computed_from_a_stale_view_does_not_land_and_is_retried(monkeypatch):
    world = World(monkeypatch, cached_rv="6")  # the cache lags behind the API server
    result = world.reconcile()
    assert world.rest.objects[(NS, NAME)]["status"] == {}
    assert result.error is not None
    assert result.error.startswith("conflict"), result  # as every controller's: quiet, again
    assert result.transient
    # Nothing is read one by one (the RBAC lists and watches MPEs): the informer brings the
    # current version for the retry.
    assert world.remembered == []


def test_a_refused_status_write_is_retried_not_dropped(monkeypatch):
    world = World(monkeypatch)
    world.rest.fail = True
    result = world.reconcile()
    assert result.error is not None
    assert "API server unreachable" in result.error
    assert result.transient


def finalizer_effects(cached_rv: str = "7") -> tuple[Any, FakeRest, list[dict[str, Any]]]:
    from taskfsm.controllers.mpe.effects import MpeEffects, MpePorts

    rest = FakeRest({(NS, NAME): mpe("7")})
    remembered: list[dict[str, Any]] = []
    ports = MpePorts(
        rest,  # type: ignore[arg-type]  # the fake API
        None,  # type: ignore[arg-type]  # the finalizer needs no client
        lambda key: [],
        lambda key: None,
        lambda cluster: None,
        remembered.append,
    )
    key = (c.KIND_MEDIA_PROCESSING_ENTITY, NS, NAME)
    return MpeEffects(ports, key, mpe(cached_rv)), rest, remembered


def test_the_finalizer_is_one_merge_patch_at_the_version_read_and_the_status_follows_it():
    """The shared metadata write: the finalizer list whole, with the resourceVersion read; the
    reconcile then knows the version it answered, so its status write is made at that one
    instead of failing with 409 on its own finalizer."""
    effects, rest, remembered = finalizer_effects()
    effects.add_mpe_finalizer(None)
    [(subresource, body)] = rest.patches
    assert subresource is None
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["metadata"]["finalizers"] == [c.FINALIZER_MPE_PROTECTION]
    stored = rest.objects[(NS, NAME)]
    assert stored["metadata"]["finalizers"] == [c.FINALIZER_MPE_PROTECTION]
    assert effects.mpe["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert effects.mpe["kind"] == c.KIND_MEDIA_PROCESSING_ENTITY
    assert remembered == [stored]


def test_a_finalizer_computed_from_a_stale_view_does_not_land():
    from taskfsm.kube.errors import Conflict

    effects, rest, remembered = finalizer_effects(cached_rv="6")
    with pytest.raises(Conflict):
        effects.add_mpe_finalizer(None)
    assert "finalizers" not in rest.objects[(NS, NAME)]["metadata"]
    assert remembered == []  # MPEs are never read one by one: the informer brings the new one
