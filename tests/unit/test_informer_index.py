"""The informer's indexes (client-go's indexers): an object is found by its index value as it
is added, moved from one value to another, and deleted, with one key kept as a plain string
and several as a set (docs/performance.md, "Memory levers")."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from taskfsm.kube.informer import ADDED, DELETED, MODIFIED, Informer
from taskfsm.kube.rest import JOBS


def job(name: str, task: str, rv: int) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ns",
            "name": name,
            "resourceVersion": str(rv),
            "labels": {"task": task},
        }
    }


def informer() -> Informer:
    inf = Informer(None, JOBS)  # type: ignore[arg-type]  # no request is made here
    inf.index("task", lambda obj: obj["metadata"]["labels"].get("task") or None)
    return inf


def names(inf: Informer, value: str) -> list[str]:
    return sorted(obj["metadata"]["name"] for obj in inf.by_index("task", value))


def test_objects_are_found_by_their_index_value_as_they_come_move_and_go():
    inf = informer()
    inf._handle({"type": ADDED, "object": job("a", "t1", 1)})
    assert names(inf, "t1") == ["a"]
    assert isinstance(inf._indices["task"]["t1"], str)  # one key: no set
    inf._handle({"type": ADDED, "object": job("b", "t1", 2)})
    assert names(inf, "t1") == ["a", "b"]
    assert inf.count("task", "t1") == 2
    inf._handle({"type": MODIFIED, "object": job("a", "t2", 3)})
    assert names(inf, "t1") == ["b"]
    assert names(inf, "t2") == ["a"]
    assert isinstance(inf._indices["task"]["t1"], str)  # back to one key
    inf._handle({"type": DELETED, "object": job("b", "t1", 4)})
    assert names(inf, "t1") == []
    assert inf.count("task", "t1") == 0
    assert "t1" not in inf._indices["task"]


events = st.lists(
    st.tuples(st.sampled_from("abcd"), st.sampled_from(["t1", "t2", ""]), st.booleans()),
    max_size=30,
)


@given(events)
def test_the_index_always_says_what_a_scan_of_the_cache_says(steps):
    inf = informer()
    for rv, (name, task, delete) in enumerate(steps, start=1):
        kind = DELETED if delete else ADDED
        inf._handle({"type": kind, "object": job(name, task, rv)})
        for value in ("t1", "t2"):
            scanned = sorted(
                obj["metadata"]["name"]
                for obj in inf.list()
                if obj["metadata"]["labels"].get("task") == value
            )
            assert names(inf, value) == scanned
            assert inf.count("task", value) == len(scanned)
