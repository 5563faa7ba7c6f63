"""A Task waiting for its MediaProcessingEntity's client misses no wake-up, and never waits for a
client nobody will set up again (docs/operations.md, "Deleting a namespace").

Regression: in a namespace deletion, a finished Task whose Job was already gone named an MPE
whose deletion had just finished. The Task read the MPE from the cache; the MPE's last
reconcile dropped its client and woke the waiting Tasks before this Task registered as one; the
registry, which no longer knew the MPE, called it "still being set up", so the Task waited
quietly for a wake-up that had already come, until its resync (CI: the namespace's objects
were not gone after 120 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import ref_of_key
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.kube.client import configured
from taskfsm.manager.manager import Manager
from taskfsm.manager.settings import Settings

KEY = (c.KIND_MEDIA_PROCESSING_ENTITY, "ns", "m")
REF = ref_of_key(KEY)
MPE = {"kind": KEY[0], "metadata": {"namespace": "ns", "name": "m", "resourceVersion": "1"}}


def registry() -> MpeRegistry:
    return MpeRegistry(
        None,  # type: ignore[arg-type]  # nothing here talks to the API
        on_job_event=lambda _key: None,
        rest_factory=lambda _api: None,  # type: ignore[arg-type,return-value]  # not used
    )


def test_an_mpe_let_go_at_the_end_of_its_deletion_is_released_not_pending():
    reg = registry()
    assert reg.pending(REF)  # never set up: its reconcile is due
    reg.release(KEY)
    assert reg.released(REF)
    assert not reg.pending(REF)  # nothing will set it up again: no Task waits for it


def test_the_release_is_forgotten_once_the_mpe_is_gone():
    reg = registry()
    reg.release(KEY)
    reg.forget(KEY)  # its removal was seen: a new MPE of that name starts afresh
    assert not reg.released(REF)
    assert reg.pending(REF)


@pytest.fixture
def manager() -> Iterator[Manager]:
    with configured(client.Configuration(host="https://main.invalid")) as api:
        yield Manager(api, Settings(metrics_address=None, health_address=None))


def cache_holding(obj: dict[str, Any] | None) -> Any:
    return lambda kind, namespace, name: obj


def test_a_task_waits_for_a_client_being_set_up_of_an_mpe_that_is_there(manager: Manager):
    manager.caches.get = cache_holding(MPE)  # type: ignore[method-assign]  # the cache's answer
    assert manager._wait_for_mpe(KEY, "ns/t") is True
    assert list(manager.waiters.waiting()) == [KEY]  # the MPE's reconcile wakes it


def test_a_task_does_not_wait_for_an_mpe_whose_last_reconcile_already_ran(manager: Manager):
    """The MPE is gone from the cache (its reconcile, which wakes the waiters, ran before the
    Task registered): the Task decides again now and finds it gone."""
    manager.caches.get = cache_holding(None)  # type: ignore[method-assign]  # the cache's answer
    assert manager.registry.pending(REF)  # the registry alone cannot tell a gone MPE
    assert manager._wait_for_mpe(KEY, "ns/t") is False
    assert list(manager.waiters.waiting()) == []


def test_a_task_does_not_wait_for_an_mpe_released_at_its_deletion(manager: Manager):
    """Still in the cache (someone else's finalizer, or its removal not seen yet), but let go."""
    manager.caches.get = cache_holding(MPE)  # type: ignore[method-assign]  # the cache's answer
    manager.registry.release(KEY)
    assert manager._wait_for_mpe(KEY, "ns/t") is False
