"""The controller-runtime and client-go series a Go controller's dashboards read
(docs/operations.md, "Metrics"): reconcile panics, terminal errors, the number of workers and the
API request latency, with controller-runtime's names, types and labels."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from taskfsm.controllers.result import Result, internal_error
from taskfsm.kube.client import configured
from taskfsm.kube.errors import NotFound, Unavailable
from taskfsm.manager import workers
from taskfsm.manager.manager import Manager
from taskfsm.manager.metrics import REST_BUCKETS, Metrics
from taskfsm.manager.ownership import Ownership
from taskfsm.manager.queue import WorkQueue
from taskfsm.manager.settings import Settings

MAIN = "https://main.example:6443"
TENANT = "https://cluster.tenant-a.example:6443"


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def run_worker(metrics: Metrics, outcomes: dict[str, Callable[[], Result]]) -> WorkQueue:
    """Reconcile each key of ``outcomes`` once (in order) with one worker of the ``task``
    controller; retries are far off (base delay 1,000 s), so every key is taken once."""
    queue = WorkQueue(base_delay=1000.0, jitter=0.0, fair=False)
    last = list(outcomes)[-1]

    def reconcile(key: str) -> Result:
        if key == last:
            queue.shutdown()  # the worker returns once this key is done
        return outcomes[key]()

    for key in outcomes:
        queue.add(key)
    workers.run(
        workers.Worker(queue, reconcile, "task", lambda _key: None),
        ownership=Ownership(),
        metrics=metrics,
        stop=threading.Event(),
        api_error_max_backoff=30.0,
    )
    return queue


def boom() -> Result:
    raise RuntimeError("a bug")


def test_panics_are_counted_as_errors_and_retried_and_the_worker_lives_on() -> None:
    """A reconcile that raises (controller-runtime's panic) and one whose reconciler caught an
    unexpected exception (``Result.panic``) each count once in
    ``controller_runtime_reconcile_panics_total`` and as errors; the worker goes on to the next
    key, and the raising key is re-added with backoff. A plain error is no panic."""
    m = Metrics()
    queue = run_worker(
        m,
        {
            "ns/raises": boom,
            "ns/caught": lambda: internal_error(KeyError("spec")),
            "ns/error": lambda: Result(error="bad input"),
            "ns/ok": Result,
        },
    )
    assert value(m, "controller_runtime_reconcile_panics_total", controller="task") == 2.0
    assert value(m, "controller_runtime_reconcile_errors_total", controller="task") == 3.0
    assert value(m, "controller_runtime_reconcile_total", controller="task", result="error") == 3.0
    assert value(m, "controller_runtime_reconcile_total", controller="task", result="success") == 1
    assert queue.failures("ns/raises") == 1
    assert queue.failures("ns/ok") == 0


def test_errors_are_never_terminal() -> None:
    """taskfsm retries every error: ``controller_runtime_terminal_reconcile_errors_total``
    exists at 0 for the controller and stays 0 after errors, and every failed key is re-added."""
    m = Metrics()
    assert value(m, "controller_runtime_terminal_reconcile_errors_total", controller="task") == 0
    queue = run_worker(
        m,
        {
            "ns/object": lambda: Result(error="bad input"),
            "ns/api": lambda: Result(error="unreachable", transient=True),
            "ns/bug": boom,
        },
    )
    assert value(m, "controller_runtime_terminal_reconcile_errors_total", controller="task") == 0
    assert [queue.failures(k) for k in ("ns/object", "ns/api", "ns/bug")] == [1, 1, 1]


def test_a_failure_of_the_api_is_no_panic() -> None:
    """The reconcilers' catch-all marks a panic only what is no answer of the API."""
    assert internal_error(ValueError("x")).panic is True
    assert internal_error(Unavailable("503")).panic is False
    assert internal_error(NotFound("gone")).panic is False
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = Unavailable("503")
    assert internal_error(wrapped).panic is False
    assert internal_error(ValueError("x")).error == "internal error: ValueError: x"


@pytest.fixture
def controller() -> Iterator[Manager]:
    with configured(client.Configuration(host=MAIN)) as api:
        yield Manager(api, Settings(metrics_address=None, health_address=None, workers=3))


def test_max_concurrent_reconciles_is_the_number_of_workers(controller: Manager) -> None:
    """Starting a controller's workers publishes their number, with its error, panic and
    terminal-error series at 0."""
    started: list[str] = []
    done = threading.Event()

    def worker() -> None:
        started.append(threading.current_thread().name)
        if len(started) == 3:
            done.set()

    controller._spawn_workers(worker, "task", "task-worker", 3)
    controller._spawn_workers(lambda: None, "workflow", "workflow-worker", 1)
    assert done.wait(10)
    m = controller.metrics
    assert value(m, "controller_runtime_max_concurrent_reconciles", controller="task") == 3
    assert value(m, "controller_runtime_max_concurrent_reconciles", controller="workflow") == 1
    assert sorted(started) == ["task-worker-0", "task-worker-1", "task-worker-2"]
    for name in ("reconcile_errors", "reconcile_panics", "terminal_reconcile_errors"):
        assert value(m, f"controller_runtime_{name}_total", controller="workflow") == 0


def test_request_duration_has_client_gos_buckets_and_labels() -> None:
    m = Metrics()
    m.request_timer(MAIN)("LIST", 0.03)
    m.request_timer(MAIN)("PATCH", 2.5)
    name = "rest_client_request_duration_seconds"
    assert REST_BUCKETS == (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)
    assert value(m, f"{name}_count", verb="GET", host=MAIN) == 1
    assert value(m, f"{name}_bucket", verb="GET", host=MAIN, le="0.025") == 0
    assert value(m, f"{name}_bucket", verb="GET", host=MAIN, le="0.1") == 1
    assert value(m, f"{name}_bucket", verb="PATCH", host=MAIN, le="4.0") == 1
    assert value(m, f"{name}_bucket", verb="PATCH", host=MAIN, le="2.0") == 0


@pytest.mark.parametrize("tenant_labels", [False, True])
def test_request_duration_names_a_remote_server_only_with_tenant_labels(
    tenant_labels: bool,
) -> None:
    """The Rests the controller builds time their requests under the same host as
    ``rest_client_requests_total``: the main cluster's address, a remote cluster's only with
    ``--metrics-tenant-labels`` (else ``remote``)."""
    settings = Settings(
        metrics_address=None, health_address=None, metrics_tenant_labels=tenant_labels
    )
    with (
        configured(client.Configuration(host=MAIN)) as main,
        configured(client.Configuration(host=TENANT)) as remote,
    ):
        ctl = Manager(main, settings)
        for rest in (ctl.rest, ctl.rest_factory(remote)):
            assert rest.timer is not None
            rest.timer("GET", 0.01)
    name = "rest_client_request_duration_seconds_count"
    remote_host = TENANT if tenant_labels else "remote"
    assert value(ctl.metrics, name, verb="GET", host=MAIN) == 1
    assert value(ctl.metrics, name, verb="GET", host=remote_host) == 1
    hosts = {s.labels.get("host") for f in ctl.metrics.registry.collect() for s in f.samples}
    assert (TENANT in hosts) is tenant_labels
