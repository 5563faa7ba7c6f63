"""What libcurl would need to send a client's requests as its urllib3 pool does: the
:class:`CurlSettings` of :func:`settings_of`, and the in-memory TLS material a tenant's kubeconfig
holds (:func:`remember_tls`).

Apart from :mod:`taskfsm.kube.curl` so that reading a kubeconfig or building a
:class:`~taskfsm.kube.rest.Rest` on the urllib3 pool (the CLI's tools,
``--http-transport=urllib3``) never loads ``pycurl`` (libcurl and its TLS stack, about 9 MiB of
RSS).
"""

from __future__ import annotations

import re
import socket
import ssl
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The pool arguments of the client's urllib3 pool manager that this transport carries out.
_EXPRESSIBLE = frozenset(
    {"cert_reqs", "ca_certs", "cert_file", "key_file", "ca_cert_data", "socket_options", "maxsize"}
)


@dataclass(frozen=True)
class TlsMaterial:
    """TLS material a client holds in memory only (a tenant's kubeconfig Secret): PEM bytes."""

    ca: bytes | None
    cert: bytes | None
    key: bytes | None


_IN_MEMORY: weakref.WeakKeyDictionary[Any, TlsMaterial] = weakref.WeakKeyDictionary()


def remember_tls(pool_manager: Any, material: TlsMaterial) -> None:
    """Note the PEM material behind the ``ssl_context`` a client's pool manager was given
    (``taskfsm/kube/kubeconfig.py``), so that libcurl can be handed the same."""
    _IN_MEMORY[pool_manager] = material


@dataclass(frozen=True)
class CurlSettings:
    """What a handle is set up with: TLS verification and material (files, or CA data)."""

    verify: bool
    ca_file: str | None
    ca_path: str | None
    ca_data: bytes | None
    cert_file: str | None
    key_file: str | None
    cert_data: bytes | None
    key_data: bytes | None
    keepalive: tuple[int, int, int] | None
    """(idle, interval, count) seconds and probes, or None for none."""


def settings_of(pool_manager: Any) -> CurlSettings | None:
    """The settings for libcurl equivalent to the client's urllib3 pool manager, or None when
    it holds something only urllib3 carries out (see the module doc)."""
    if type(pool_manager).__name__ != "PoolManager":  # a ProxyManager, a SOCKS manager
        return None
    kw: dict[str, Any] = dict(getattr(pool_manager, "connection_pool_kw", {}) or {})
    kw.pop("retries", None)  # urllib3's own retries are off; libcurl has none to turn off
    memory = _IN_MEMORY.get(pool_manager)
    if memory is not None and kw.get("ssl_context") is not None:
        del kw["ssl_context"]  # made from exactly this material (kubeconfig.py)
    else:
        memory = TlsMaterial(None, None, None)
    if set(kw) - _EXPRESSIBLE:
        return None
    verify = kw.get("cert_reqs") != ssl.CERT_NONE
    data = kw.get("ca_cert_data")
    ca_data = memory.ca or (data.encode() if isinstance(data, str) else data)
    ca_file, ca_path = kw.get("ca_certs"), None
    if verify and not ca_file and not ca_data:
        defaults = ssl.get_default_verify_paths()  # what urllib3 verifies against then
        ca_file, ca_path = defaults.cafile, defaults.capath
    return CurlSettings(
        verify=verify,
        ca_file=ca_file,
        ca_path=ca_path,
        ca_data=ca_data,
        cert_file=kw.get("cert_file"),
        key_file=kw.get("key_file"),
        cert_data=memory.cert,
        key_data=memory.key,
        keepalive=_keepalive(kw.get("socket_options")),
    )


def _keepalive(options: Sequence[tuple[int, int, int]] | None) -> tuple[int, int, int] | None:
    """(idle, interval, count) from urllib3 socket options, when they turn keepalive on."""
    values = {(level, name): value for level, name, value in options or ()}
    if not values.get((socket.SOL_SOCKET, socket.SO_KEEPALIVE)):
        return None
    tcp = socket.IPPROTO_TCP
    return (
        int(values.get((tcp, getattr(socket, "TCP_KEEPIDLE", -1)), 60)),
        int(values.get((tcp, socket.TCP_KEEPINTVL), 60)),
        int(values.get((tcp, socket.TCP_KEEPCNT), 9)),
    )


_HEADER_BREAKS = re.compile(r"[\r\n\0]")


def breaks_a_header(value: object) -> bool:
    """Whether ``value`` holds what no header line may (a line break, a NUL): libcurl would send
    it as it is, a second header or a second request. A tenant's token is sent as one."""
    return isinstance(value, str) and _HEADER_BREAKS.search(value) is not None
