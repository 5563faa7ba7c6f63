"""Building ``kubernetes.client.ApiClient`` objects for the main and the MediaProcessingEntity
clusters: from a kubeconfig file, a kubeconfig dict (a remote MPE's Secret), or in-cluster.

Every client gets, from :func:`configured`:

* no retries in the HTTP client (:data:`RETRIES`). urllib3's defaults retried a request whose
  answer did not arrive up to three more times (one GET on a dead connection held a worker for
  minutes), and it waits out ``Retry-After`` by itself, unbounded and for writes too, after any
  check the caller made. :class:`taskfsm.kube.rest.Rest` retries instead: a dropped keep-alive
  connection once for idempotent verbs, ``Retry-After`` answers within a deadline, each attempt
  passing the write guard again (docs/operations.md, "Request timeouts and retries"). The
  client's own ``client_go_retries`` (GET and HEAD only, without a deadline) stays off;
* TCP keepalive (:data:`KEEPALIVE`, built by the client's own ``tcp_keepalive_socket_options``),
  so the kernel finds a pooled or watching connection whose peer vanished without a FIN or RST
  within :data:`KEEPALIVE_DEAD_AFTER` seconds of silence; urllib3 then discards it instead of
  handing it to the next request;
* a connection pool sized for a controller (:data:`POOL_SIZE`);
* the credential refresh hook the kubeconfig loaders install (re-read an expiring token) run at
  most every :data:`REFRESH_EVERY` seconds instead of before every request. The loaders' hook
  re-applies the whole kubeconfig to the configuration each time, and setting ``host`` makes the
  client look its proxy up in the process environment again: 4 % of the controller's CPU in a
  burst (docs/benchmarks.md) for a token that changes at most every few minutes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.config import ConfigException
from kubernetes.utils.keepalive import tcp_keepalive_socket_options
from urllib3.util.retry import Retry

ApiClient = client.ApiClient
"""The client library's API client, re-exported: nothing outside ``taskfsm.kube`` imports the
library (an import contract checks it)."""
Configuration = client.Configuration

__all__ = [
    "ApiClient",
    "ConfigException",
    "Configuration",
    "configured",
    "from_kubeconfig",
    "from_kubeconfig_dict",
    "in_cluster",
]

#: No retries of any kind in urllib3: failures reach :class:`taskfsm.kube.rest.Rest` at once.
RETRIES = Retry(total=False, redirect=False, respect_retry_after_header=False)

#: Keepalive probes after 15 s idle, every 5 s, 3 unanswered ones mean dead. (The client's
#: defaults, client-go's, take 30 s + 9 x 15 s = 165 s.)
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 15, 5, 3
KEEPALIVE_DEAD_AFTER = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT
KEEPALIVE = tcp_keepalive_socket_options(KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT)

#: One connection per informer watch plus the workers' requests; urllib3's default of 10 per host
#: makes a controller with a dozen watches discard and re-open connections.
POOL_SIZE = 64

#: Seconds between two runs of the credential refresh hook (tokens expire in minutes or hours;
#: an expired one is refreshed within this bound, and a 401 is retried by the caller anyway).
REFRESH_EVERY = 1.0


def _throttled(
    hook: Callable[[client.Configuration], None], every: float
) -> Callable[[client.Configuration], None]:
    """``hook``, run at most once per ``every`` seconds (monotonic); other calls return at once.

    The kubeconfig loader's hook installs itself again each time it runs (it re-applies the
    whole kubeconfig, hook included); the new one becomes the inner hook and this wrapper stays.
    """
    lock = threading.Lock()
    due = [0.0]
    inner = [hook]

    def refresh(configuration: client.Configuration) -> None:
        now = time.monotonic()
        if now < due[0] or not lock.acquire(blocking=False):
            return  # refreshed recently, or another thread is refreshing right now
        try:
            inner[0](configuration)
            installed = configuration.refresh_api_key_hook
            if installed is not refresh and installed is not None:
                inner[0] = installed
                configuration.refresh_api_key_hook = refresh
            due[0] = time.monotonic() + every
        finally:
            lock.release()

    return refresh


def configured(configuration: client.Configuration) -> client.ApiClient:
    """An ``ApiClient`` for ``configuration`` with :data:`POOL_SIZE`, :data:`RETRIES` and
    :data:`KEEPALIVE` (see the module docstring)."""
    configuration.connection_pool_maxsize = POOL_SIZE
    configuration.retries = RETRIES
    configuration.client_go_retries = False
    configuration.socket_options = list(KEEPALIVE)
    hook = configuration.refresh_api_key_hook
    if hook is not None:
        configuration.refresh_api_key_hook = _throttled(hook, REFRESH_EVERY)
    return client.ApiClient(configuration)


def from_kubeconfig(
    path: str | Path | None = None, *, context: str | None = None
) -> client.ApiClient:
    """An ``ApiClient`` for ``path`` (default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(path) if path else None, context=context, client_configuration=configuration
    )
    return configured(configuration)


def from_kubeconfig_dict(
    kubeconfig: dict[str, Any], *, context: str | None = None
) -> client.ApiClient:
    """An ``ApiClient`` for an in-memory kubeconfig, through the client library's loader, which
    honours everything in it (commands, files, proxies): only for kubeconfigs the operator or
    administrator wrote. A tenant's goes through :mod:`taskfsm.kube.kubeconfig`.

    Raises ``kubernetes.config.ConfigException`` when the kubeconfig is unusable.
    """
    configuration = client.Configuration()
    loader = config.kube_config.KubeConfigLoader(config_dict=kubeconfig, active_context=context)
    loader.load_and_set(configuration)
    return configured(configuration)


def in_cluster() -> client.ApiClient:
    """An ``ApiClient`` from the Pod's service-account token (raises ``ConfigException`` outside
    a Pod)."""
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return configured(configuration)
