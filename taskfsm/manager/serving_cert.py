"""The TLS certificate of the metrics endpoint (``taskfsm run --metrics-secure``).

With ``--metrics-cert-dir`` the certificate and key are ``tls.crt`` and ``tls.key`` in that
directory (a mounted Secret, e.g. one cert-manager keeps fresh); they are read again when their
modification time changes, at most every :data:`RELOAD_CHECK_SECONDS`, so a rotated certificate
is served without a restart. Without it the controller makes a self-signed certificate at start
(``cryptography``), held in memory only, as controller-runtime does (this is why
``cryptography`` is a runtime dependency of the controller in pyproject.toml, not only a
development one); Prometheus then scrapes with
``insecureSkipVerify`` (the bearer token still decides who reads, see
:mod:`taskfsm.manager.metrics_auth`).
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
from pathlib import Path

from taskfsm.kube.pem import self_signed_context

log = logging.getLogger(__name__)

RELOAD_CHECK_SECONDS = 10.0
"""How often the certificate files' modification times are looked at."""
SELF_SIGNED_DAYS = 365
"""Validity of a generated certificate (the process restarts far more often)."""


class ServingCertificate:
    """The TLS context for new connections (call the instance), from ``cert_dir`` or generated.

    Raises ``OSError``/``ssl.SSLError`` at construction when ``cert_dir`` holds no usable pair.
    """

    def __init__(self, cert_dir: str | Path | None = None) -> None:
        self.cert_dir = Path(cert_dir) if cert_dir else None
        self._lock = threading.Lock()
        self._checked = 0.0
        self._stamp: tuple[float, float] | None = None
        self._context = self._load() if self.cert_dir else _self_signed()

    def __call__(self) -> ssl.SSLContext:
        if self.cert_dir is None:
            return self._context
        now = time.monotonic()
        with self._lock:
            if now - self._checked >= RELOAD_CHECK_SECONDS:
                self._checked = now
                try:
                    if self._mtimes() != self._stamp:
                        self._context = self._load()
                        log.info("metrics serving certificate reloaded")
                except (OSError, ssl.SSLError) as exc:  # keep serving the last good one
                    log.warning(
                        "metrics serving certificate not reloaded", extra={"error": str(exc)}
                    )
            return self._context

    def _mtimes(self) -> tuple[float, float]:
        assert self.cert_dir is not None
        return (
            os.stat(self.cert_dir / "tls.crt").st_mtime,
            os.stat(self.cert_dir / "tls.key").st_mtime,
        )

    def _load(self) -> ssl.SSLContext:
        assert self.cert_dir is not None
        stamp = self._mtimes()
        context = _server_context()
        context.load_cert_chain(self.cert_dir / "tls.crt", self.cert_dir / "tls.key")
        self._stamp = stamp
        return context


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _self_signed() -> ssl.SSLContext:
    """A context serving a new self-signed certificate for this host (key kept in memory)."""
    host = socket.gethostname() or "taskfsm"
    return self_signed_context(
        f"taskfsm metrics ({host})", dns_names=(host, "localhost"), days=SELF_SIGNED_DAYS
    )
