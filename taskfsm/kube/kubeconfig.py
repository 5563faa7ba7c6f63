"""Kubeconfigs written by tenants (a remote MediaProcessingEntity's Secret): what they may hold,
and the client built from them without touching the controller's files or running anything.

A kubeconfig is a small program for its reader: ``users[].user.exec`` and an ``auth-provider``'s
``cmd-path`` run commands, ``tokenFile`` and the path-valued keys (``certificate-authority``,
``client-certificate``, ``client-key``) read files, ``proxy-url`` and
``insecure-skip-tls-verify`` redirect or unguard the connection. The client library's
``KubeConfigLoader`` honours all of them, which is right for an operator's own kubeconfig and
wrong for one any tenant may write: it would run the tenant's command inside the controller, or
send the controller's own ServiceAccount token to the tenant's server (the confused-deputy flaw
of CVE-2022-24817; docs/security.md, "Remote kubeconfigs").

So a kubeconfig read from a Secret is checked against an allow-list (:data:`ALLOWED`) before
anything uses it: inline credentials only (``token``, ``client-certificate-data``,
``client-key-data``), ``certificate-authority-data``, an ``https`` ``server`` and
``tls-server-name``. Anything else is refused by :func:`check` with the key's path in the message
(never its value). The cluster administrator may opt in to more (:class:`KubeconfigPolicy`,
``taskfsm run --allow-kubeconfig-exec`` and friends); the opt-ins apply to the kubeconfigs of
ClusterMediaProcessingEntities only, which the administrator writes.

:func:`build_client` then builds the client itself instead of through the loader: the loader
writes inline certificates and keys to temporary files that live as long as the process. Here the
CA goes to the TLS context as data, and a client certificate and key are loaded into the context
from memory (:mod:`taskfsm.kube.pem`), so nothing of a tenant's credentials is left on disk. The
module is ours because no library offers a filtered kubeconfig loader.

Parsing is bounded too (:func:`parse`): YAML aliases are refused (an alias bomb expands
exponentially when walked) and so is nesting deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from taskfsm.kube.client import ApiClient, Configuration, configured, from_kubeconfig_dict
from taskfsm.kube.curl_settings import TlsMaterial, breaks_a_header, remember_tls
from taskfsm.kube.pem import load_cert_chain

MAX_DEPTH = 16
"""Deepest nesting a kubeconfig may have (a real one nests 4 levels; extensions a few more)."""

MAX_BYTES = 256 * 1024
"""Largest kubeconfig read (a real one with a CA and a client certificate is a few KiB)."""

ALLOWED: Mapping[str, frozenset[str]] = {
    "": frozenset(
        {"apiVersion", "kind", "clusters", "contexts", "users", "current-context", "preferences"}
    ),
    "clusters[]": frozenset({"name", "cluster"}),
    "cluster": frozenset({"server", "certificate-authority-data", "tls-server-name"}),
    "contexts[]": frozenset({"name", "context"}),
    "context": frozenset({"cluster", "user", "namespace"}),
    "users[]": frozenset({"name", "user"}),
    "user": frozenset({"token", "client-certificate-data", "client-key-data"}),
}
"""The keys a kubeconfig from a Secret may hold, by where they appear."""

EXEC_KEYS = frozenset({"exec", "auth-provider"})
"""User keys that run code in the controller (``--allow-kubeconfig-exec``)."""
INSECURE_KEYS = frozenset({"insecure-skip-tls-verify"})
"""Cluster keys that turn off server verification (``--allow-kubeconfig-insecure``)."""
PROXY_KEYS = frozenset({"proxy-url"})
"""Cluster keys that send the traffic elsewhere (``--allow-kubeconfig-proxy``)."""


class KubeconfigRefused(Exception):
    """The kubeconfig holds something a tenant's kubeconfig may not; the message names the keys
    (their paths), never a value."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class KubeconfigPolicy:
    """What the administrator allows beyond :data:`ALLOWED` in the kubeconfigs of
    ClusterMediaProcessingEntities (never in a namespaced MediaProcessingEntity's)."""

    allow_exec: bool = False
    """``exec`` and ``auth-provider`` users: run a credential plugin inside the controller."""
    allow_insecure: bool = False
    """``insecure-skip-tls-verify`` and ``http://`` servers."""
    allow_proxy: bool = False
    """``proxy-url``."""

    @property
    def any(self) -> bool:
        return self.allow_exec or self.allow_insecure or self.allow_proxy


STRICT = KubeconfigPolicy()


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (``*name``) and deep nesting."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not allowed in a kubeconfig")
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_DEPTH:
            raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth


def parse(raw: bytes) -> dict[str, Any]:
    """The kubeconfig document in ``raw`` (YAML or JSON).

    Raises:
        ValueError: too large, not YAML, aliases, too deep, or not a mapping (the message says
            which, never quoting the content).
    """
    if len(raw) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES // 1024} KiB")
    try:
        doc = yaml.load(raw, Loader=_NoAliasLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"not valid YAML: {problem}") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(doc, dict):
        raise ValueError("not a mapping")
    return doc


def check(doc: Mapping[str, Any], policy: KubeconfigPolicy = STRICT) -> None:
    """Refuse a kubeconfig that holds anything :data:`ALLOWED` (and ``policy``) does not allow.

    Raises:
        KubeconfigRefused: naming each key refused, by path (``users[0].user.exec``).
    """
    problems: list[str] = []
    _keys(doc, "", "", problems, policy)
    for section, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
        entries = doc.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            problems.append(f"{section}: not a list")
            continue
        for i, entry in enumerate(entries):
            path = f"{section}[{i}]"
            if not isinstance(entry, dict):
                problems.append(f"{path}: not a mapping")
                continue
            _keys(entry, f"{section}[]", path, problems, policy)
            body = entry.get(inner)
            if body is None:
                continue
            if not isinstance(body, dict):
                problems.append(f"{path}.{inner}: not a mapping")
                continue
            _keys(body, inner, f"{path}.{inner}", problems, policy)
            if inner == "cluster":
                _check_server(body, f"{path}.cluster", problems, policy)
            if inner == "user" and breaks_a_header(body.get("token")):
                # Sent as a header line: a line break would make a second header or request.
                problems.append(f"{path}.user.token: holds a line break")
    if problems:
        raise KubeconfigRefused(problems)


def _keys(
    obj: Mapping[str, Any], where: str, path: str, problems: list[str], policy: KubeconfigPolicy
) -> None:
    allowed = ALLOWED[where]
    if where == "user" and policy.allow_exec:
        allowed = allowed | EXEC_KEYS
    if where == "cluster":
        allowed = allowed | (INSECURE_KEYS if policy.allow_insecure else frozenset())
        allowed = allowed | (PROXY_KEYS if policy.allow_proxy else frozenset())
    for key in obj:
        if key not in allowed:
            name = key if isinstance(key, str) else type(key).__name__
            problems.append(f"{path + '.' if path else ''}{name}: not allowed")


def _check_server(
    cluster: Mapping[str, Any], path: str, problems: list[str], policy: KubeconfigPolicy
) -> None:
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        problems.append(f"{path}.server: required")
        return
    try:
        parts = urlsplit(server)
    except ValueError:
        problems.append(f"{path}.server: not a URL")
        return
    schemes = ("https", "http") if policy.allow_insecure else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        problems.append(f"{path}.server: must be an https:// URL")
    elif parts.username is not None or parts.password is not None:
        problems.append(f"{path}.server: must not carry credentials")


@dataclass(frozen=True)
class _Target:
    server: str
    ca_data: bytes | None
    tls_server_name: str
    token: str
    cert_data: bytes | None
    key_data: bytes | None


def _current(doc: Mapping[str, Any], context: str | None) -> _Target:
    """The cluster and user of the current (or named) context, decoded."""
    name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), name, "context", "contexts")
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster", "clusters")
    user = _named(doc.get("users"), ctx.get("user"), "user", "users") if ctx.get("user") else {}
    return _Target(
        server=str(cluster.get("server") or ""),
        ca_data=_b64(cluster, "certificate-authority-data"),
        tls_server_name=str(cluster.get("tls-server-name") or ""),
        token=str(user.get("token") or ""),
        cert_data=_b64(user, "client-certificate-data"),
        key_data=_b64(user, "client-key-data"),
    )


def _named(entries: Any, name: Any, inner: str, section: str) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(inner) or {}
            return body if isinstance(body, dict) else {}
    raise ValueError(f"{section}: no entry named by the current context")


def _b64(obj: Mapping[str, Any], key: str) -> bytes | None:
    value = obj.get(key)
    if value in (None, ""):
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise ValueError(f"{key}: not base64") from None


def build_client(
    doc: Mapping[str, Any], policy: KubeconfigPolicy = STRICT, *, context: str | None = None
) -> ApiClient:
    """An ``ApiClient`` for the kubeconfig ``doc`` (checked by :func:`check` with ``policy``).

    With an opt-in of ``policy`` in use the client library's loader builds it (the administrator
    chose to let it run a plugin or honour a proxy); otherwise it is built here, from inline data
    only (see the module docstring).

    Raises:
        KubeconfigRefused: as :func:`check`.
        ValueError: the kubeconfig is incomplete or its data is not usable (message without
            values).
    """
    check(doc, policy)
    if policy.any and _uses_opt_in(doc):
        return from_kubeconfig_dict(dict(doc), context=context)
    target = _current(doc, context)
    configuration = Configuration()
    configuration.host = target.server.rstrip("/")
    configuration.verify_ssl = True
    if target.token:
        configuration.api_key = {"BearerToken": target.token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    if target.tls_server_name:
        configuration.tls_server_name = target.tls_server_name
    tls = _tls_context(target)
    api = configured(configuration)
    # The pool makes every connection with this context (CA and client certificate in memory);
    # libcurl (taskfsm/kube/curl.py) is handed the same material.
    api.rest_client.pool_manager.connection_pool_kw["ssl_context"] = tls
    remember_tls(
        api.rest_client.pool_manager, TlsMaterial(target.ca_data, target.cert_data, target.key_data)
    )
    return api


def _uses_opt_in(doc: Mapping[str, Any]) -> bool:
    extra = EXEC_KEYS | INSECURE_KEYS | PROXY_KEYS
    for section, inner in (("clusters", "cluster"), ("users", "user")):
        for entry in doc.get(section) or []:
            body = (entry or {}).get(inner) or {}
            if isinstance(body, dict) and extra & set(body):
                return True
            if inner == "cluster" and str(body.get("server") or "").startswith("http://"):
                return True
    return False


def _tls_context(target: _Target) -> ssl.SSLContext:
    """A TLS client context: the kubeconfig's CA (else the system's) and its client
    certificate, loaded from memory."""
    try:
        if target.ca_data is not None:
            context = ssl.create_default_context(cadata=target.ca_data.decode("ascii"))
        else:
            context = ssl.create_default_context()
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        raise ValueError("certificate-authority-data: not a PEM certificate") from None
    if (target.cert_data is None) != (target.key_data is None):
        raise ValueError("client-certificate-data and client-key-data go together")
    if target.cert_data is not None and target.key_data is not None:
        try:
            load_cert_chain(context, target.cert_data, target.key_data, password=_no_password)
        except (ssl.SSLError, OSError):
            raise ValueError(
                "client-certificate-data/client-key-data: not a PEM certificate and key"
            ) from None
    return context


def _no_password() -> str:
    """An encrypted client key would ask for a password on the terminal: refuse it instead."""
    raise ValueError("client-key-data: encrypted keys are not supported")


def namespace_of(doc: Mapping[str, Any], context: str | None = None) -> str:
    """The current (or named) context's namespace, or ``default``: a remote MPE's Job namespace
    (docs/behaviour.md §1.7)."""
    name = context or doc.get("current-context")
    for ctx in doc.get("contexts") or []:
        if isinstance(ctx, dict) and ctx.get("name") == name:
            body = ctx.get("context") or {}
            return str((body if isinstance(body, dict) else {}).get("namespace") or "default")
    return "default"
