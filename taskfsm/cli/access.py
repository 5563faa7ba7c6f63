"""The cluster a command talks to, from kubectl's flags (``--kubeconfig``, ``--context``, ``-n``,
``-A``): the client, the REST layer and the namespace, with kubectl's rules
(:mod:`taskfsm.kube.user_access`). Imports nothing of the client until a command runs, so
``--help`` and completion stay fast.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskfsm.kube.client import ApiClient
    from taskfsm.kube.rest import Rest


def add_kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig file of the main cluster (default: $KUBECONFIG, ~/.kube/config, "
        "else in-cluster)",
    )
    parser.add_argument(
        "--context", help="kubeconfig context to use (default: the current context)"
    )


def api_client(args: argparse.Namespace) -> ApiClient:
    from taskfsm.kube.user_access import ConfigException, NoClusterAccess, user_client

    try:
        return user_client(args.kubeconfig, args.context)
    except NoClusterAccess as exc:
        raise SystemExit(f"taskfsm: {exc}") from None
    except ConfigException as exc:
        raise SystemExit(f"taskfsm: the kubeconfig cannot be used: {exc}") from None


def namespace_of(args: argparse.Namespace) -> str | None:
    """``-n``, else None with ``-A``, else the kubeconfig context's namespace."""
    from taskfsm.kube.user_access import user_namespace

    if getattr(args, "all_namespaces", False):
        return None
    return str(args.namespace or user_namespace(args.kubeconfig, args.context))


def rest_of(args: argparse.Namespace) -> Rest:
    from taskfsm.kube.rest import Rest

    return Rest(api_client(args))
