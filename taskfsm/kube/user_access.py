"""The command-line user's cluster access: their kubeconfig (or the Pod's service account), and
the namespace a command works in when none is given.

kubectl's rules, which ``taskfsm`` and ``kubectl taskfsm`` follow so a user gets the same
objects from both: the kubeconfig is ``--kubeconfig``, else ``$KUBECONFIG`` (several files joined
by ``:`` are merged), else ``~/.kube/config``, else the in-cluster service account; the namespace
is ``-n``, else the namespace of the kubeconfig context in use (``--context`` or the current
one), else the service account's namespace in a Pod, else ``default``.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import config
from kubernetes.config import ConfigException

from taskfsm.kube import client as kube_client

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class NoClusterAccess(Exception):
    """Neither a kubeconfig nor an in-cluster service account is available."""


def _kubeconfig_path(path: str | None) -> str | None:
    """The kubeconfig to read (a ``:``-joined list for ``$KUBECONFIG``), or None for in-cluster."""
    if path:
        return path
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    default = Path("~/.kube/config").expanduser()
    return str(default) if default.exists() else None


def _current_context(kubeconfig: str) -> str | None:
    """kubectl's current context of a ``:``-joined kubeconfig list: the first file's that names
    one (the client library's merge lets a later file win, so it is resolved here, once, for
    both the client and the namespace)."""
    for name in kubeconfig.split(os.pathsep):
        try:
            data = yaml.safe_load(Path(name).expanduser().read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and data.get("current-context"):
            return str(data["current-context"])
    return None


def user_client(path: str | None = None, context: str | None = None) -> kube_client.ApiClient:
    """An API client with the user's own credentials (see the module docstring).

    Raises :class:`NoClusterAccess` when there is no kubeconfig and no service account, and
    ``ConfigException`` for an unusable kubeconfig or an unknown ``context``.
    """
    kubeconfig = _kubeconfig_path(path)
    if kubeconfig is not None:
        return kube_client.from_kubeconfig(
            kubeconfig, context=context or _current_context(kubeconfig)
        )
    try:
        return kube_client.in_cluster()
    except ConfigException:
        raise NoClusterAccess(
            "no kubeconfig found ($KUBECONFIG, ~/.kube/config) and not running in a cluster: "
            "pass --kubeconfig"
        ) from None


def user_namespace(path: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig context in use, else the Pod's, else ``default``."""
    kubeconfig = _kubeconfig_path(path)
    if kubeconfig is None:
        try:
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (ConfigException, OSError):
        return "default"  # user_client reports the unusable kubeconfig
    wanted = context or _current_context(kubeconfig)
    chosen = next((ctx for ctx in contexts or [] if ctx.get("name") == wanted), None)
    if wanted is None:
        chosen = active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


__all__ = ["ConfigException", "NoClusterAccess", "user_client", "user_namespace"]
