"""Sets of strings that mostly hold one: kept as the string itself until a second one comes.

The informers' indexes map a value to the cache keys that have it, and most values name one
object (a Task's Jobs, a Job's Task); the Task controller remembers the Job names it saw per
Task, and a Task has one. An empty ``set`` costs 216 bytes, which for 10,000 Jobs was 2 MiB of
the cache, so a one-member set is the plain string and only a second member makes it a set.
Own code: the standard library has no such container, and this is the whole of it.
"""

from __future__ import annotations

StrSet = str | set[str]
"""One member as the string itself, several as a set."""


def add(table: dict[str, StrSet], key: str, member: str) -> None:
    """Add ``member`` to the set ``table[key]`` (made when absent)."""
    entry = table.get(key)
    if entry is None:
        table[key] = member
    elif isinstance(entry, str):
        if entry != member:
            table[key] = {entry, member}
    else:
        entry.add(member)


def discard(table: dict[str, StrSet], key: str, member: str) -> None:
    """Remove ``member`` from the set ``table[key]``; an emptied set leaves ``table``."""
    entry = table.get(key)
    if entry is None:
        return
    if isinstance(entry, str):
        if entry == member:
            del table[key]
        return
    entry.discard(member)
    if len(entry) == 1:
        table[key] = next(iter(entry))
    elif not entry:
        del table[key]


def members(entry: StrSet | None) -> tuple[str, ...] | set[str]:
    """The members of one entry (none for None)."""
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else entry
