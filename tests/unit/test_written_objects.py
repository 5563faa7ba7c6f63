"""Read-your-writes copies (taskfsm.kube.cache.WrittenObjects) go once the watch delivers the
version they hold: before, the copy of every object written once and never read again stayed
until its next read (for a finished Task, the resync), which held one extra full copy of every
recently finished Task and Job in memory (docs/benchmarks.md, "RSS after the run")."""

from __future__ import annotations

from typing import Any

from taskfsm.kube.cache import WrittenObjects

KEY = ("main", "tasks", "ns", "a")


def obj(rv: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": str(rv)}}


def test_our_own_version_coming_back_is_recognised_and_the_copy_dropped():
    written = WrittenObjects()
    written.wrote(KEY, obj(5))
    assert written.seen(KEY, obj(5)) is True
    assert len(written) == 0
    assert written.pick(KEY, None) is None


def test_an_older_version_from_the_watch_keeps_our_newer_copy():
    written = WrittenObjects()
    written.wrote(KEY, obj(5))
    assert written.seen(KEY, obj(4)) is False
    assert written.pick(KEY, obj(4)) == obj(5)


def test_a_newer_version_than_ours_drops_the_copy_and_is_news():
    written = WrittenObjects()
    written.wrote(KEY, obj(5))
    assert written.seen(KEY, obj(7)) is False
    assert len(written) == 0


def test_nothing_written_is_never_our_own():
    assert WrittenObjects().seen(KEY, obj(5)) is False


def test_a_write_answered_after_the_deletion_does_not_bring_the_object_back():
    """Regression: a write that landed before the object was deleted, whose answer was handled
    after the watch's DELETED event, made every later read see the deleted Task (nothing would
    ever drop that copy): its Job and Secret were never collected as orphans."""
    written = WrittenObjects()
    written.wrote(KEY, obj(5))
    written.gone(KEY, obj(7))  # deleted at 7, after our write at 6 landed
    written.wrote(KEY, obj(6))  # ... whose answer comes only now
    assert written.pick(KEY, None) is None
    assert written.deleted(KEY)


def test_a_write_to_a_new_object_of_that_name_is_kept():
    written = WrittenObjects()
    written.gone(KEY, obj(7))
    written.wrote(KEY, obj(9))  # a Task created again under that name, then written by us
    assert written.pick(KEY, None) == obj(9)
    assert not written.deleted(KEY)


def test_a_deletion_seen_without_its_version_still_lets_a_later_write_in():
    written = WrittenObjects()
    written.gone(KEY)  # a read answered NotFound: the version it went at is not known
    written.wrote(KEY, obj(3))
    assert written.pick(KEY, None) == obj(3)
