"""Task configuration merge: Function ``defaultConfig`` < TaskTemplate ``config`` < Task ``config``.

Later sources win (docs/behaviour.md D2, §3.7 step 2; the reference kept the *first* non-empty
value, so Function defaults could never be overridden).
"""

from __future__ import annotations

from collections.abc import Mapping


def merge_config(*sources: Mapping[str, str] | None) -> dict[str, str]:
    """Merge string maps left to right; a later key replaces an earlier one. ``None`` is skipped."""
    result: dict[str, str] = {}
    for source in sources:
        if source:
            result.update(source)
    return result
