"""A certificate and key held in memory, loaded into a TLS context without touching the disk.

Python's ``ssl.SSLContext.load_cert_chain`` reads files only. A tenant's client certificate (a
remote MediaProcessingEntity's kubeconfig) and the metrics endpoint's generated serving
certificate must not be written where they outlive their use, and the controller's root
filesystem is read-only anyway. Linux's ``memfd_create`` gives an anonymous in-memory file that
``load_cert_chain`` can read as ``/proc/self/fd/N`` and that is gone when closed; elsewhere a
private temporary file is removed right after loading.

:func:`self_signed_context` makes such a pair itself (``cryptography``): the metrics endpoint's
certificate when no Secret gives one, and the development kit's simulated kubelet.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator


def load_cert_chain(
    context: ssl.SSLContext,
    cert: bytes,
    key: bytes,
    *,
    password: Callable[[], str | bytes] | None = None,
) -> None:
    """``context.load_cert_chain`` for PEM ``cert`` and ``key`` held in memory."""
    with memory_file(cert) as cert_path, memory_file(key) as key_path:
        context.load_cert_chain(cert_path, key_path, password=password)


@contextlib.contextmanager
def memory_file(data: bytes) -> Iterator[str]:
    """A path that reads ``data`` while the block runs; nothing of it stays afterwards."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("taskfsm-pem", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="taskfsm-") as tmp:  # pragma: no cover (non-Linux)
        path = os.path.join(tmp, "pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(data)
        yield path


def self_signed_context(
    common_name: str, *, dns_names: tuple[str, ...] = (), days: int
) -> ssl.SSLContext:
    """A server context with a new self-signed certificate for `common_name`, valid for
    `dns_names` and 127.0.0.1 for `days` (the key is made here and kept in memory only)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName(dns) for dns in dns_names]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load_cert_chain(
        context,
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return context
