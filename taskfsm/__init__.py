"""taskfsm: a Kubernetes controller for nagare media engine Tasks.

Organization, in data-flow order (see docs/architecture.md):

* ``taskfsm.testing`` -- a real local control plane (etcd, kube-apiserver, kube-controller-manager)
  and a simulated kubelet, for tests, benchmarks and the demo.
"""

from importlib.metadata import PackageNotFoundError, version

# The installed distribution's version: its one source is ``version`` in pyproject.toml (the
# image tag in deploy/ and the chart's appVersion are generated from it too).
try:
    __version__ = version("taskfsm")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
