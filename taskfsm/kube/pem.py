"""A certificate and key held in memory, loaded into a TLS context without touching the disk.

Python's ``ssl.SSLContext.load_cert_chain`` reads files only. A tenant's client certificate (a
remote MediaProcessingEntity's kubeconfig) and the metrics endpoint's generated serving
certificate must not be written where they outlive their use, and the controller's root
filesystem is read-only anyway. Linux's ``memfd_create`` gives an anonymous in-memory file that
``load_cert_chain`` can read as ``/proc/self/fd/N`` and that is gone when closed; elsewhere a
private temporary file is removed right after loading.
"""

from __future__ import annotations

import contextlib
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
