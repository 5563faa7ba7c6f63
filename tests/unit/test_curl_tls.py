"""The libcurl transport speaks TLS as the client's pool would (taskfsm/kube/curl.py): a tenant's
kubeconfig whose CA, client certificate and key are held in memory reaches a TLS server that
requires that client certificate, over libcurl, with nothing written to disk."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from taskfsm.kube import kubeconfig
from taskfsm.kube.errors import Unavailable
from taskfsm.kube.rest import LEASES, Rest
from taskfsm_dev.proxies import _make_ca_and_cert


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    peers: ClassVar[list[Any]] = []

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        Handler.peers.append(self.connection.getpeercert())
        body = b'{"kind":"Lease","metadata":{"name":"l"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path, Path, Path]]:
    ca, cert, key = _make_ca_and_cert(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED  # the client must show a certificate from the CA
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", ca, cert, key
    httpd.shutdown()
    httpd.server_close()


def test_in_memory_tls_material_reaches_the_server_over_libcurl(tls_server) -> None:
    url, ca, cert, key = tls_server
    b64 = {p: base64.b64encode(p.read_bytes()).decode() for p in (ca, cert, key)}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": url, "certificate-authority-data": b64[ca]}}
        ],
        "users": [
            {
                "name": "u",
                "user": {"client-certificate-data": b64[cert], "client-key-data": b64[key]},
            }
        ],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    temp_before = set(os.listdir(tempfile.gettempdir()))
    api = kubeconfig.build_client(document)
    rest = Rest(api, curl=True)
    assert rest.curl is not None  # the request below goes over libcurl
    Handler.peers.clear()
    assert rest.get(LEASES, "ns", "l")["metadata"]["name"] == "l"
    assert Handler.peers
    assert Handler.peers[0]  # the server saw the client certificate
    assert set(os.listdir(tempfile.gettempdir())) == temp_before
    api.close()


def test_a_server_outside_the_kubeconfig_ca_is_refused_over_libcurl(tls_server, tmp_path) -> None:
    url, *_ = tls_server
    (tmp_path / "other").mkdir()
    other_ca, _, _ = _make_ca_and_cert(tmp_path / "other")
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(other_ca.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    api = kubeconfig.build_client(document)
    rest = Rest(api, curl=True)
    assert rest.curl is not None
    with pytest.raises(Unavailable, match=r"(?i)certificate"):
        rest.get(LEASES, "ns", "l")
    api.close()


def test_the_urllib3_transport_never_loads_pycurl(tmp_path) -> None:
    """Reading a tenant's kubeconfig and building a Rest on the urllib3 pool (the CLI's tools,
    ``--http-transport=urllib3``) leaves pycurl unloaded: libcurl costs its RSS only where it
    carries requests."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from kubernetes import client\n"
        "import taskfsm.kube.kubeconfig, taskfsm.manager.manager\n"
        "from taskfsm.kube.rest import Rest\n"
        "Rest(client.ApiClient(client.Configuration()))\n"
        "print('pycurl' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False", out.stderr
