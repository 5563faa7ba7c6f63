"""Task configuration merge: Function ``defaultConfig`` < TaskTemplate ``config`` < Task ``config``.

Later sources win (decisions.md D2; the reference kept the *first* non-empty value, so Function
defaults could never be overridden, task-controller.md §3.7 step 9).
"""

from __future__ import annotations

from collections.abc import Mapping

from mergedeep import Strategy, merge


def merge_config(*sources: Mapping[str, str] | None) -> dict[str, str]:
    """Merge string maps left to right; a later key replaces an earlier one. ``None`` is skipped."""
    result: dict[str, str] = {}
    merge(result, *(dict(s) for s in sources if s), strategy=Strategy.REPLACE)
    return result
