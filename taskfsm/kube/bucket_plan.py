"""The fair-share decision of a bucket coordinator, pure: from the Leases seen, what to campaign
for, give up and clean up this round (:mod:`taskfsm.kube.buckets` explains the rules).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass

from taskfsm.kube.bucket_keys import (
    BUCKET_LEASE_PREFIX,
    MEMBER_LEASE_PREFIX,
    bucket_lease_name,
    preference,
)


@dataclass(frozen=True)
class LeaseView:
    """A Lease as this replica has watched it."""

    holder: str
    version: str
    first_seen: float
    """Monotonic time at which this resourceVersion was first seen (answer time)."""
    duration: float
    """Its ``leaseDurationSeconds``."""

    def expired(self, now: float) -> bool:
        """Unchanged for its duration: its holder may not have renewed it for that long."""
        return now >= self.first_seen + self.duration


@dataclass(frozen=True)
class Plan:
    """What the coordinator does this round (:func:`plan`)."""

    live: frozenset[str]
    share: int
    acquire: tuple[int, ...] = ()
    """Buckets to start campaigning for."""
    abandon: tuple[int, ...] = ()
    """Campaigns to stop (the bucket was taken meanwhile, or the share is reached)."""
    release: tuple[int, ...] = ()
    """Held buckets above the share, to give up."""
    stale_members: tuple[str, ...] = ()
    """Names of expired membership Leases of other replicas, to delete."""
    foreign: tuple[str, ...] = ()
    """Bucket Leases of another ``--buckets`` value held by someone: while there are any, no
    bucket is campaigned for (those replicas would work on the same keys)."""


def plan(
    *,
    identity: str,
    buckets: int,
    views: Mapping[str, LeaseView],
    held: Set[int],
    campaigning: Set[int],
    now: float,
) -> Plan:
    """Decide from the Leases seen (``views`` by name) what this replica does this round."""
    bucket_views = {i: views.get(bucket_lease_name(i, buckets)) for i in range(buckets)}
    dead = {
        v.holder
        for v in bucket_views.values()
        if v is not None and v.holder and v.holder != identity and v.expired(now)
    }
    members = {
        v.holder
        for name, v in views.items()
        if name.startswith(MEMBER_LEASE_PREFIX) and v.holder and not v.expired(now)
    }
    live = frozenset((members - dead) | {identity})
    share = math.ceil(buckets / len(live))

    def available(i: int) -> bool:
        v = bucket_views[i]
        return v is None or not v.holder or v.holder == identity or v.expired(now)

    own_suffix = f"-of-{buckets}"
    foreign = sorted(
        name
        for name, v in views.items()
        if name.startswith(BUCKET_LEASE_PREFIX)
        and not name.endswith(own_suffix)
        and v.holder
        and not v.expired(now)
    )
    order = preference(identity, buckets)
    kept = [i for i in order if i in campaigning and available(i)]
    if foreign:  # replicas of another B are at work: take nothing new until they are gone
        kept = []
    abandon = [i for i in order if i in campaigning and i not in kept]
    room = share - len(held) - len(kept)
    if room < 0:
        abandon += kept[len(kept) + room :]
        kept = kept[: len(kept) + room]
    release = [i for i in reversed(order) if i in held][: max(0, len(held) - share)]
    acquire = [
        i for i in order if not foreign and i not in held and i not in campaigning and available(i)
    ]
    stale = [
        name
        for name, v in views.items()
        if name.startswith(MEMBER_LEASE_PREFIX) and v.holder != identity and v.expired(now)
    ]
    return Plan(
        live=live,
        share=share,
        acquire=tuple(acquire[: max(0, room)]),
        abandon=tuple(abandon),
        release=tuple(release),
        stale_members=tuple(sorted(stale)),
        foreign=tuple(foreign),
    )
