"""Which replica acts: the Lease election ``taskfsm run --leader-elect`` starts, and the write gate
that goes with it.

One Lease (client-go's leader election, :class:`taskfsm.kube.leader.LeaderElector`) makes one
replica do everything; with ``--buckets`` above 1 every replica holds some of the bucket Leases
(:class:`taskfsm.kube.buckets.BucketElector`) and works on their keys only
(:mod:`taskfsm.manager.ownership`). Either way, every write of this replica, to the main cluster
or any MediaProcessingEntity cluster, carries the elector's write guard: it is not sent unless the
replica can show it holds the Lease of the key it works for (docs/operations.md, "Running several
replicas"). The Lease's own requests go through a Rest of their own, the one thing the guard lets
through.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.kube.buckets import BucketElector
from taskfsm.kube.client import ApiClient
from taskfsm.kube.leader import LeaderElector
from taskfsm.kube.rest import Rest
from taskfsm.manager.metrics import Metrics
from taskfsm.manager.ownership import Ownership
from taskfsm.manager.settings import Settings


@dataclass(frozen=True)
class Election:
    """A started election: its elector and the Rest its Lease requests use."""

    elector: LeaderElector | BucketElector
    lease_rest: Rest


@dataclass(frozen=True)
class ElectionHooks:
    """What the manager does when leadership changes.

    Attributes:
        leading: the single Lease was acquired (start the workers).
        lost: the single Lease was lost (stop the process).
        bucket_acquired: a bucket Lease became this replica's (queue its keys).
        bucket_given_up: a bucket Lease was released or lost (``"released"`` or ``"lost"``).
    """

    leading: Callable[[], None]
    lost: Callable[[], None]
    bucket_acquired: Callable[[int], None]
    bucket_given_up: Callable[[int, str], None]


def start_election(
    settings: Settings,
    *,
    lease_rest: Rest,
    rest: Rest,
    registry: MpeRegistry,
    ownership: Ownership,
    metrics: Metrics,
    hooks: ElectionHooks,
) -> Election:
    """Build the elector ``settings`` ask for, put its write guard on ``rest`` and on every Rest
    ``registry`` makes from now on, and start it."""
    s = settings
    identity = s.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    elector: LeaderElector | BucketElector
    if ownership.bucketed:
        elector = ownership.elector = BucketElector(
            lease_rest,
            namespace=s.lease_namespace,
            buckets=s.buckets,
            identity=identity,
            on_acquired=hooks.bucket_acquired,
            on_given_up=hooks.bucket_given_up,
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
        )
    else:
        metrics.leader.labels(s.lease_name).set(0)
        elector = LeaderElector(
            lease_rest,
            namespace=s.lease_namespace,
            name=s.lease_name,
            identity=identity,
            on_started=hooks.leading,
            on_stopped=hooks.lost,
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
        )
    guard = elector.write_guard
    rest.write_guard = guard
    make_rest = registry.rest_factory

    def guarded_rest(api: ApiClient) -> Rest:
        made = make_rest(api)
        made.write_guard = guard
        return made

    registry.rest_factory = guarded_rest
    elector.start()
    return Election(elector, lease_rest)
