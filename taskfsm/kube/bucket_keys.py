"""Buckets of keys: which bucket a key is in, the names of the Leases, and the bucket a thread
is working for (the write gate's scope). The rules are :mod:`taskfsm.kube.buckets`' docstring's.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from contextvars import ContextVar

BUCKET_LEASE_PREFIX = "taskfsm-bucket-"
MEMBER_LEASE_PREFIX = "taskfsm-replica-"

_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of ``key`` (``namespace/name``) among ``buckets``: 32-bit FNV-1a, modulo."""
    value = _FNV_OFFSET
    for byte in key.encode():
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value % buckets


def bucket_lease_name(index: int, buckets: int) -> str:
    return f"{BUCKET_LEASE_PREFIX}{index}-of-{buckets}"


def member_lease_name(identity: str) -> str:
    """The membership Lease of ``identity`` (identities may hold characters a name may not)."""
    return MEMBER_LEASE_PREFIX + hashlib.sha256(identity.encode()).hexdigest()[:16]


def preference(identity: str, buckets: int) -> list[int]:
    """The order in which ``identity`` campaigns for buckets (and, reversed, gives them up)."""
    return sorted(range(buckets), key=lambda i: hashlib.sha256(f"{identity}/{i}".encode()).digest())


_CURRENT: ContextVar[int | None] = ContextVar("taskfsm_bucket", default=None)


@contextlib.contextmanager
def acting_in(bucket: int | None) -> Iterator[None]:
    """Within the block, this thread's writes are gated by ``bucket``'s Lease (None: no bucket)."""
    token = _CURRENT.set(bucket)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_bucket() -> int | None:
    return _CURRENT.get()
