"""Building ``kubernetes.client.ApiClient`` objects for the main and the MediaProcessingEntity
clusters: from a kubeconfig file, a kubeconfig dict (a remote MPE's Secret), or in-cluster.

Every client gets :data:`RETRIES`: the HTTP client's default retries a GET whose answer does not
arrive up to three more times, so one request on a dead connection could hold a reconcile worker
for four read timeouts (2 minutes); here a read failure is retried once (a keep-alive connection
the server closed is still replaced transparently), so a GET gives up after two read timeouts,
and the reconcile is retried with backoff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client, config
from urllib3.util.retry import Retry

#: At most three retries, of which at most one after a read failure (timeout or reset).
RETRIES = Retry(total=3, read=1)

#: One connection per informer watch plus the workers' requests; urllib3's default of 10 per host
#: makes a controller with a dozen watches discard and re-open connections.
POOL_SIZE = 64


def configured(configuration: client.Configuration) -> client.ApiClient:
    """An ``ApiClient`` for ``configuration`` with a connection pool sized for a controller and
    :data:`RETRIES`."""
    configuration.connection_pool_maxsize = POOL_SIZE
    configuration.retries = RETRIES
    return client.ApiClient(configuration)


def from_kubeconfig(path: str | Path | None = None, *, context: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` for ``path`` (default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(path) if path else None, context=context, client_configuration=configuration
    )
    return configured(configuration)


def from_kubeconfig_dict(kubeconfig: dict[str, Any], *, context: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` for an in-memory kubeconfig (task-controller.md §1.7, remote MPEs).

    Raises ``kubernetes.config.ConfigException`` when the kubeconfig is unusable.
    """
    configuration = client.Configuration()
    loader = config.kube_config.KubeConfigLoader(config_dict=kubeconfig, active_context=context)
    loader.load_and_set(configuration)
    return configured(configuration)


def kubeconfig_namespace(kubeconfig: dict[str, Any]) -> str:
    """The current context's namespace, or ``default`` (the Job namespace of a remote MPE, §1.7)."""
    current = kubeconfig.get("current-context")
    for ctx in kubeconfig.get("contexts") or []:
        if ctx.get("name") == current:
            return (ctx.get("context") or {}).get("namespace") or "default"
    return "default"


def in_cluster() -> client.ApiClient:
    """An ``ApiClient`` from the Pod's service-account token (raises ``ConfigException`` outside)."""
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return configured(configuration)
