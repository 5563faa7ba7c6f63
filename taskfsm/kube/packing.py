"""Cold cache entries, packed: finished Tasks and Jobs kept as compressed JSON in the informer.

A cluster that has run for months holds mostly finished Tasks and their Jobs, and the
controller reads one of them again only for housekeeping (a Job's finalizer, a deletion, a
sweep). Parsed into Python objects a Task costs about 3.5 KiB and its Job 1.5 KiB even with
the transforms' shared strings (docs/performance.md, "Memory levers"): most of it is the dicts
themselves. So an informer given a ``pack_when`` predicate keeps each object it matches as
bytes -- its JSON (``orjson``), deflated (``zlib``) against a preset dictionary -- and gives
readers a fresh dict decoded from them; an object no longer matching (a finished Task being
deleted) is kept as a dict again.

The preset dictionary is the JSON of the first object the informer packs: Tasks (or Jobs) of
one controller share almost every key and most values, so a later one deflates to the few
hundred bytes in which it differs (a 1.9 KiB Task to about 0.1-0.3 KiB, against 0.65 KiB
without the dictionary). Packing costs about 20 µs and each read of a packed object about
16 µs (``benchmarks/``: measured on the bench machine), paid only for finished objects.

Own code, not a library: the cache stores are plain dicts and the question is only how one
value is held; ``zlib`` and ``orjson`` do the work. Anything that cannot be packed (``orjson``
refuses integers beyond 64 bits) stays a dict: packing never loses an object.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, Final

import orjson

from taskfsm.api import constants as c

LEVEL: Final = 6
"""zlib level: 1 is no faster on objects this small and packs 10-20 % larger."""
PRESET_MAX: Final = 16 * 1024
"""Longest preset dictionary taken from the first packed object (zlib uses at most 32 KiB)."""

PackWhen = Callable[[dict[str, Any]], bool]
"""Whether a cached object is cold enough to keep packed."""


class Packer:
    """Packs and unpacks the cold objects of one informer (one preset dictionary each)."""

    def __init__(self) -> None:
        self._preset: bytes | None = None

    def pack(self, obj: dict[str, Any]) -> bytes | None:
        """``obj`` as deflated JSON; None when it cannot be packed (keep the dict)."""
        try:
            raw = orjson.dumps(obj)
        except (TypeError, orjson.JSONEncodeError):
            return None
        if self._preset is None:
            self._preset = raw[:PRESET_MAX]
        deflate = zlib.compressobj(LEVEL, zdict=self._preset)
        return deflate.compress(raw) + deflate.flush()

    def unpack(self, packed: bytes) -> dict[str, Any]:
        """A fresh dict of what :meth:`pack` packed."""
        assert self._preset is not None  # set by the first pack
        inflate = zlib.decompressobj(zdict=self._preset)
        obj: dict[str, Any] = orjson.loads(inflate.decompress(packed) + inflate.flush())
        return obj


def finished_task(task: dict[str, Any]) -> bool:
    """A Task whose outcome is recorded and that is not being deleted."""
    meta = task.get("metadata") or {}
    phase = (task.get("status") or {}).get("phase")
    return phase in c.TASK_TERMINAL_PHASES and not meta.get("deletionTimestamp")


def finished_job(job: dict[str, Any]) -> bool:
    """A Job that completed or failed, not being deleted, whose finalizer is released."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    return isinstance(conditions, list) and any(
        isinstance(cond, dict)
        and cond.get("type") in ("Complete", "Failed")
        and cond.get("status") == "True"
        for cond in conditions
    )
