"""Fixtures for end-to-end tests: taskfsm's CRDs, a dict client for the test namespace, and
``taskfsm run`` processes whose log tails are printed when a test fails."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from taskfsm.kube.rest import Rest
from taskfsm.manager.manager import Manager, Settings
from taskfsm.manager.metrics import Metrics
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.process import ControllerProcess
from tests.support import identity
from tests.support.cluster import Cluster
from tests.support.reports import FAILED


@pytest.fixture
def cluster(api_client: client.ApiClient, namespace: str, crds: list[str]) -> Cluster:
    return Cluster(api_client, namespace)


@pytest.fixture
def installed_kubeconfig(
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    crds: list[str],
    tmp_path: Path,
) -> Iterator[Callable[[str | None], Path]]:
    """The kubeconfig of the controller as installed (:mod:`tests.support.identity`): the
    generated RBAC for a controller whose Leases are in the given namespace (default: the
    test's)."""
    installed: dict[str, Path] = {}

    def kubeconfig(lease_namespace: str | None = None) -> Path:
        where = lease_namespace or namespace
        if where not in installed:
            installed[where] = identity.install_controller(
                api_client, control_plane, where, tmp_path
            )
        return installed[where]

    yield kubeconfig
    for where in installed:
        identity.uninstall(api_client, where)


@pytest.fixture
def installed_token(installed_kubeconfig: Callable[[str | None], Path]) -> Callable[..., str]:
    """The bearer token of the installed controller (for kubeconfigs that reach the API server
    through a test proxy), with its Leases in the given namespace (default: the test's)."""

    def token(lease_namespace: str | None = None) -> str:
        return identity.token_of(installed_kubeconfig(lease_namespace))

    return token


@pytest.fixture
def start_controller(
    control_plane: ControlPlane,
    namespace: str,
    crds: list[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    installed_kubeconfig: Callable[[str | None], Path],
) -> Iterator[Callable[..., ControllerProcess]]:
    """Start ``taskfsm run`` processes (default: the main cluster, the test's namespace, no
    leader election, fast watches) as the installed controller: a token bound to exactly the
    generated RBAC, with its Leases in ``lease_namespace`` (default the test's namespace); all
    are stopped after the test, and their log tails are printed when it failed."""
    started: list[ControllerProcess] = []

    def start(
        *, wait_ready: bool = True, kubeconfig: str | Path | None = None, **options: Any
    ) -> ControllerProcess:
        if kubeconfig is None:
            kubeconfig = installed_kubeconfig(options.get("lease_namespace"))
        options.setdefault("namespace", namespace)
        options.setdefault("name", f"taskfsm-{len(started)}")
        args = list(options.pop("args", ()))
        if not any(a.startswith("--watch-timeout") for a in args):
            args += ["--watch-timeout=20", "--watch-read-margin=5"]
        if not any(a.startswith("--shutdown-timeout") for a in args):
            args += ["--shutdown-timeout=10"]
        proc = ControllerProcess(kubeconfig, log_dir=tmp_path, args=args, **options)
        started.append(proc)
        return proc.start(wait_ready=wait_ready)

    yield start
    for proc in started:
        proc.ensure_stopped()
    if request.node.stash.get(FAILED, False):
        for proc in started:
            print(proc.tail(80))


class RequestCounter:
    """A :data:`taskfsm.kube.rest.Observer` counting requests by (verb, resource, code)."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str, int]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, verb: str, resource: str, code: int) -> None:
        with self._lock:
            self._counts[(verb, resource, code)] += 1

    def count(
        self, verb: str | None = None, resource: str | None = None, code: int | None = None
    ) -> int:
        with self._lock:
            return sum(
                n
                for (v, r, c_), n in self._counts.items()
                if (verb is None or v == verb)
                and (resource is None or r == resource)
                and (code is None or c_ == code)
            )

    def writes(self) -> int:
        return sum(self.count(verb) for verb in ("POST", "PUT", "PATCH", "DELETE"))


@pytest.fixture
def make_controller(
    api_client: client.ApiClient, namespace: str, crds: list[str]
) -> Iterator[Callable[..., tuple[Manager, RequestCounter]]]:
    """Build and start an in-process Manager for the test's namespace whose every Rest (main
    and MediaProcessingEntity clusters) reports to the metrics and to a :class:`RequestCounter`;
    ``rest_class`` swaps the Rest implementation, Settings fields may be overridden."""
    built: list[Manager] = []

    def make(*, rest_class: type[Rest] = Rest, **overrides: Any) -> tuple[Manager, RequestCounter]:
        metrics, counter = Metrics(), RequestCounter()

        def factory(api: client.ApiClient) -> Rest:
            observe = metrics.request_observer(api.configuration.host)

            def both(verb: str, resource: str, code: int) -> None:
                observe(verb, resource, code)
                counter(verb, resource, code)

            return rest_class(api, observer=both)

        options: dict[str, Any] = {
            "namespace": namespace,
            "metrics_address": None,
            "health_address": None,
            "resync_seconds": 30,
            "watch_timeout": 20,
            "read_margin": 5,
            "shutdown_timeout": 5,
            **overrides,
        }
        ctl = Manager(api_client, Settings(**options), metrics=metrics, rest_factory=factory)
        built.append(ctl)
        return ctl.start(), counter

    yield make
    for ctl in reversed(built):
        ctl.stop()
