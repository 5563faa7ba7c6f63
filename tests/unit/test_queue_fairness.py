"""WorkQueue fairness across namespaces: round robin, weights, the per-namespace cap, FIFO on
request, and the per-namespace depth metric with bounded cardinality (fake clock, no sleeps)."""

from __future__ import annotations

import pytest

from taskfsm.manager.queue import WorkQueue


def drain(queue: WorkQueue, count: int) -> list[str]:
    """Take ``count`` keys, marking each done at once."""
    out = []
    for _ in range(count):
        key = queue.get(timeout=0)
        assert key is not None
        queue.done(key)
        out.append(key)
    return out


def test_a_flooding_namespace_does_not_delay_another_beyond_one_turn():
    queue = WorkQueue(jitter=0.0)
    for i in range(1000):
        queue.add(f"flood/t{i}")
    queue.add("quiet/t0")
    taken = drain(queue, 3)
    assert taken == ["flood/t0", "quiet/t0", "flood/t1"]
    assert len(queue) == 998


def test_namespaces_take_turns_in_the_order_they_arrived_each_in_fifo_order():
    queue = WorkQueue(jitter=0.0)
    for key in ("a/1", "a/2", "a/3", "b/1", "c/1", "c/2"):
        queue.add(key)
    assert drain(queue, 6) == ["a/1", "b/1", "c/1", "a/2", "c/2", "a/3"]


def test_weights_serve_a_namespace_that_many_keys_per_turn():
    queue = WorkQueue(jitter=0.0, weights={"big": 3})
    for i in range(6):
        queue.add(f"big/{i}")
        queue.add(f"small/{i}")
    order = [key.split("/")[0] for key in drain(queue, 8)]
    assert order == ["big", "big", "big", "small", "big", "big", "big", "small"]


def test_fifo_keeps_one_queue_for_every_key():
    queue = WorkQueue(jitter=0.0, fair=False)
    for i in range(3):
        queue.add(f"flood/t{i}")
    queue.add("quiet/t0")
    assert drain(queue, 4) == ["flood/t0", "flood/t1", "flood/t2", "quiet/t0"]


@pytest.mark.parametrize("fair", [True, False])
def test_the_cap_holds_a_namespace_to_its_keys_in_flight(fair):
    queue = WorkQueue(jitter=0.0, fair=fair, max_in_flight_per_namespace=2)
    for i in range(4):
        queue.add(f"flood/t{i}")
    queue.add("quiet/t0")
    first, second = queue.get(timeout=0), queue.get(timeout=0)
    assert {first, second} <= {"flood/t0", "flood/t1", "quiet/t0"}
    third = queue.get(timeout=0)
    taken = {first, second, third}
    assert "quiet/t0" in taken
    assert sum(key.startswith("flood/") for key in taken) == 2
    assert queue.get(timeout=0) is None  # flood is at its cap: nothing for a fourth worker
    queue.done(next(key for key in taken if key.startswith("flood/")))
    assert (queue.get(timeout=0) or "").startswith("flood/")


def test_duplicates_and_one_worker_per_key_hold_across_namespaces():
    queue = WorkQueue(jitter=0.0)
    queue.add("a/x")
    queue.add("a/x")
    queue.add("b/y")
    key = queue.get(timeout=0)
    assert key == "a/x"
    queue.add("a/x")  # while it runs: queued again only when it is done
    assert queue.get(timeout=0) == "b/y"
    assert queue.get(timeout=0) is None
    queue.done("a/x")
    assert queue.get(timeout=0) == "a/x"


def test_depth_by_namespace_counts_ready_keys():
    queue = WorkQueue(jitter=0.0)
    for key in ("a/1", "a/2", "b/1"):
        queue.add(key)
    queue.add_after("c/1", 60.0)  # delayed: not waiting for a worker yet
    assert queue.depth_by_namespace() == {"a": 2, "b": 1}
    queue.get(timeout=0)
    assert queue.depth_by_namespace() == {"a": 1, "b": 1}


def test_weights_and_cap_are_validated():
    with pytest.raises(ValueError, match="weight"):
        WorkQueue(weights={"a": 0})
    with pytest.raises(ValueError, match="negative"):
        WorkQueue(max_in_flight_per_namespace=-1)


@pytest.mark.parametrize("named", [True, False])
def test_namespace_depth_series_keep_the_deepest_namespaces_and_sum_the_rest(named):
    """Bounded either way; the namespaces' names only when tenant labels are opted in, their
    ranks otherwise (a namespace is a tenant's)."""
    from prometheus_client import generate_latest

    from taskfsm.manager.metrics import NAMESPACE_DEPTH_TOP, Metrics

    metrics = Metrics()
    metrics.name_tenants(named)
    queue = WorkQueue(jitter=0.0, metrics=metrics.queue("task"))
    for n in range(NAMESPACE_DEPTH_TOP + 5):
        for i in range(n + 1):
            queue.add(f"tenant-{n:02d}/t{i}")
    text = generate_latest(metrics.registry).decode()
    rows = [
        line for line in text.splitlines() if line.startswith("taskfsm_workqueue_namespace_depth{")
    ]
    assert len(rows) == NAMESPACE_DEPTH_TOP + 1  # bounded: the top ones and one sum
    deepest = NAMESPACE_DEPTH_TOP + 4
    label = f"tenant-{deepest:02d}" if named else "#1"
    assert (
        f'taskfsm_workqueue_namespace_depth{{controller="task",namespace="{label}"}} '
        f"{deepest + 1}.0"
    ) in rows
    assert named == any("tenant-" in row for row in rows)
    others = sum(n + 1 for n in range(5))  # the five shallowest
    assert (
        f'taskfsm_workqueue_namespace_depth{{controller="task",namespace="(other)"}} {others}.0'
    ) in rows


def test_mpe_queue_has_no_namespace_depth_series():
    from prometheus_client import generate_latest

    from taskfsm.manager.metrics import Metrics

    metrics = Metrics()
    queue = WorkQueue(jitter=0.0, fair=False, metrics=metrics.queue("mpe", namespaced=False))
    queue.add("MediaProcessingEntity/ns/m")
    text = generate_latest(metrics.registry).decode()
    assert 'taskfsm_workqueue_namespace_depth{controller="mpe"' not in text


def test_namespace_weights_flag_parses_and_refuses_malformed_entries():
    from taskfsm.cli.run import parse_namespace_weights

    assert parse_namespace_weights("a=2, b=1,") == (("a", 2), ("b", 1))
    assert parse_namespace_weights("") == ()
    for bad in ("a", "a=0", "=2", "a=x"):
        with pytest.raises(SystemExit, match="--namespace-weights"):
            parse_namespace_weights(bad)


def test_settings_refuse_unknown_fairness_and_negative_cap_or_weights():
    from taskfsm.manager.settings import Settings, check

    with pytest.raises(ValueError, match="--queue-fairness"):
        check(Settings(queue_fairness="lifo"))
    with pytest.raises(ValueError, match="cap"):
        check(Settings(max_in_flight_per_namespace=-1))
    with pytest.raises(ValueError, match="weight"):
        check(Settings(namespace_weights=(("a", 0),)))
