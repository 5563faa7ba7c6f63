"""Cold objects are kept packed in the informer and read back exactly as they came
(taskfsm/kube/packing.py): finished Tasks and Jobs cost the cache a few hundred bytes each."""

from __future__ import annotations

import copy
import sys
from typing import Any

from taskfsm.kube.informer import ADDED, DELETED, MODIFIED, Informer
from taskfsm.kube.packing import finished_job, finished_task
from taskfsm.kube.resources import TASKS


def task(name: str, rv: int, phase: str = "Succeeded", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "engine.nagare.media/v1alpha1",
        "kind": "Task",
        "metadata": {
            "namespace": "ns",
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
            "labels": {"engine.nagare.media/workflow-name": "wf"},
            **meta,
        },
        "spec": {"workflowRef": {"name": "wf"}, "weight": 1.5, "replicas": 3, "on": True},
        "status": {"phase": phase, "message": "é ünïcode ✓", "conditions": []},
    }


def informer() -> Informer:
    inf = Informer(None, TASKS, pack_when=finished_task)  # type: ignore[arg-type]  # no request here
    inf.index("phase", lambda obj: obj["status"]["phase"])
    return inf


def test_a_finished_task_is_kept_packed_and_read_back_as_it_came():
    inf = informer()
    seen: list[dict[str, Any]] = []
    inf.add_handler(lambda _event, obj: seen.append(obj))
    for i in range(3):
        inf._handle({"type": ADDED, "object": task(f"t{i}", i + 1)})
    stored = inf._store["ns/t1"]
    assert isinstance(stored, bytes)
    assert len(stored) < sys.getsizeof(task("t1", 2)) + 400  # a few hundred bytes
    expected = task("t1", 2)
    assert inf.get("ns", "t1") == expected
    assert inf.get("ns", "t1") is not inf.get("ns", "t1")  # a fresh dict for each reader
    assert seen[1] == expected  # handlers get the object itself
    assert sorted(o["metadata"]["name"] for o in inf.by_index("phase", "Succeeded")) == [
        "t0",
        "t1",
        "t2",
    ]
    assert inf.counts("phase") == {"Succeeded": 3}
    assert inf.list(labels={"engine.nagare.media/workflow-name": "wf"})[0]["spec"]["weight"] == 1.5


def test_a_task_that_is_no_longer_cold_is_kept_as_a_dict_and_moves_in_its_indexes():
    inf = informer()
    inf._handle({"type": ADDED, "object": task("t", 1, phase="Running")})
    assert isinstance(inf._store["ns/t"], dict)
    inf._handle({"type": MODIFIED, "object": task("t", 2)})
    assert isinstance(inf._store["ns/t"], bytes)
    assert inf.counts("phase") == {"Succeeded": 1}
    deleting = task("t", 3, deletionTimestamp="2026-12-07T00:00:00Z")
    inf._handle({"type": MODIFIED, "object": deleting})
    assert isinstance(inf._store["ns/t"], dict)
    inf._handle({"type": DELETED, "object": copy.deepcopy(deleting)})
    assert inf.get("ns", "t") is None
    assert inf.counts("phase") == {}


def test_what_cannot_be_packed_stays_a_dict():
    inf = informer()
    huge = task("big", 1)
    huge["spec"]["count"] = 2**70  # orjson refuses integers beyond 64 bits
    inf._handle({"type": ADDED, "object": huge})
    assert isinstance(inf._store["ns/big"], dict)
    assert inf.get("ns", "big") == huge
    odd = Informer(None, TASKS, pack_when=lambda _obj: 1 / 0)  # type: ignore[arg-type]  # no request here
    odd._handle({"type": ADDED, "object": task("t", 1)})  # a failing predicate stops nothing
    assert odd.get("ns", "t") == task("t", 1)


def test_a_relist_reads_packed_objects_for_its_diff():
    class Lister:
        def __init__(self) -> None:
            self.items: list[dict[str, Any]] = []

        def list(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
            return {"metadata": {"resourceVersion": "9"}, "items": copy.deepcopy(self.items)}

    rest = Lister()
    inf = Informer(rest, TASKS, pack_when=finished_task)  # type: ignore[arg-type]  # a fake
    events: list[tuple[str, str]] = []
    inf.add_handler(lambda event, obj: events.append((event, obj["metadata"]["name"])))
    rest.items = [task("a", 1), task("b", 1)]
    inf._relist()
    rest.items = [task("a", 1), task("b", 2), task("c", 1)]
    inf._relist()
    assert events == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("MODIFIED", "b"),
        ("ADDED", "c"),
    ]
    assert all(isinstance(v, bytes) for v in inf._store.values())


def test_which_objects_are_cold():
    assert finished_task(task("t", 1))
    assert not finished_task(task("t", 1, phase="Running"))
    assert not finished_task(task("t", 1, deletionTimestamp="2026-12-07T00:00:00Z"))
    done = {"metadata": {}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert finished_job(done)
    assert not finished_job({**done, "metadata": {"finalizers": ["x"]}})  # still followed
    assert not finished_job({"metadata": {}, "status": {"conditions": "not a list"}})
    assert not finished_job({"metadata": {}, "status": {"conditions": [1, "x"]}})


def test_each_reads_one_packed_object_at_a_time_as_the_iteration_reaches_it():
    """`Informer.each` (the orphan sweep's walk over every cached Job) unpacks lazily: a
    sweep of 10,000 finished Jobs never holds them all decoded at once."""
    inf = informer()
    for i in range(5):
        inf._handle({"type": ADDED, "object": task(f"t{i}", i + 1)})
    reads: list[int] = []
    real = inf._loaded
    inf._loaded = lambda stored: reads.append(1) or real(stored)  # type: ignore[method-assign]
    walk = inf.each()
    assert reads == []
    first = next(walk)
    assert len(reads) == 1
    rest = list(walk)
    assert len(reads) == 5
    assert sorted(o["metadata"]["name"] for o in [first, *rest]) == [f"t{i}" for i in range(5)]
