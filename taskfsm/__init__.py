"""taskfsm: a Kubernetes controller for nagare media engine Tasks.

Its layers, each importing only those below it (docs/architecture.md): ``cli``, ``tools``,
``manager``, ``controllers``, ``build``, ``kube``, ``api``; the lifecycles are the charts of the
``machines`` package. The local control plane, the simulated kubelet and the demo are the
development kit ``taskfsm_dev``, which is not shipped.
"""

from importlib.metadata import PackageNotFoundError, version

# The installed distribution's version: its one source is ``version`` in pyproject.toml (the
# image tag in deploy/ and the chart's appVersion are generated from it too).
try:
    __version__ = version("taskfsm")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
