"""Which keys this replica works on, and under which Lease its writes go.

docs/operations.md, "Running several replicas":

* without leader election, or with the one Lease of ``--buckets 1``: every key; the single
  Lease's write gate covers every write (taskfsm/kube/leader.py);
* with ``--buckets B`` above 1: the keys of the buckets this replica holds
  (taskfsm/kube/buckets.py). Keys of other buckets are not queued; a worker that takes a key
  whose bucket it no longer holds drops it without a reconcile (or, while the bucket's renewal
  is only late, looks at it again shortly), and reconciles the others inside
  :func:`taskfsm.kube.buckets.acting_in`, so the write gate checks that bucket's Lease.
  The MediaProcessingEntity status controller works for bucket 0 (:data:`MPE_BUCKET`).

"Holds" means what the write gate means: the bucket's Lease was renewed less than the renew
deadline ago. A replica cut off from the API server therefore stops starting reconciles of a
bucket before another replica can take its Lease (lease duration > renew deadline).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager

from taskfsm.kube.buckets import BucketElector, acting_in, bucket_of

MPE_BUCKET = 0
"""The bucket whose holder runs the MediaProcessingEntity status controller."""


class Ownership:
    """The key filter and write scope of one replica (see the module docstring).

    Args:
        buckets: ``--buckets``; 1 means one leader (or none) does everything.
    """

    def __init__(self, buckets: int = 1) -> None:
        self.buckets = buckets
        self.elector: BucketElector | None = None
        """Set once the bucket election starts; until then no bucket is held."""

    @property
    def bucketed(self) -> bool:
        return self.buckets > 1

    def bucket(self, key: str) -> int | None:
        """The bucket of ``key`` (``namespace/name``); None when keys are not bucketed."""
        return bucket_of(key, self.buckets) if self.bucketed else None

    def holds(self, bucket: int | None) -> bool:
        """Whether this replica may work on ``bucket`` now (None: not bucketed, always)."""
        if bucket is None or not self.bucketed:
            return True
        return self.elector is not None and self.elector.holds(bucket)

    def owns(self, key: str) -> bool:
        """Whether this replica works on ``key`` now."""
        return self.holds(self.bucket(key))

    def leads(self, bucket: int | None) -> bool:
        """Whether ``bucket`` is this replica's, though its renewal may be late (see
        :meth:`taskfsm.kube.buckets.BucketElector.leads`): its keys are queued and kept."""
        if bucket is None or not self.bucketed:
            return True
        return self.elector is not None and self.elector.leads(bucket)

    def claims(self, key: str) -> bool:
        """Whether ``key`` is queued here (its bucket is this replica's, see :meth:`leads`)."""
        return self.leads(self.bucket(key))

    def scope(self, key: str) -> AbstractContextManager[None]:
        """Writes within the block are gated by ``key``'s bucket."""
        return self.scope_bucket(self.bucket(key))

    def scope_bucket(self, bucket: int | None) -> AbstractContextManager[None]:
        return acting_in(bucket) if self.bucketed else contextlib.nullcontext()

    def held(self) -> list[int]:
        """The buckets held now (empty when not bucketed)."""
        return self.elector.held() if self.elector is not None else []
