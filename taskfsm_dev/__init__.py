"""taskfsm's development kit: what the tests, the demo and the benchmarks share. Never shipped.

Not part of the wheel or the image (pyproject.toml packages ``taskfsm`` and ``machines`` only,
the image is built from those; an import contract keeps the product from importing this
package). It lives in the checkout and is importable from its virtual environment.

- ``controlplane``: a real local control plane (etcd, kube-apiserver, kube-controller-manager)
  from ``KUBEBUILDER_ASSETS`` or the checkout's build script (docs/control-plane.md);
- ``crds``: installs taskfsm's CRDs into it;
- ``kubelet``: a simulated kubelet that plays a Job's pods out, with ``podlogs`` (a Node and
  container logs for ``kubectl logs``);
- ``objects``: factories of nagare objects;
- ``proxies``: a TCP and an HTTP proxy in front of an API server, for failure tests;
- ``process``: ``taskfsm run`` as a separate process; ``replicas``: several of them sharing
  buckets; ``ui``: ``taskfsm ui`` as a process and a headless browser;
- ``waiting``: polling with a deadline;
- ``demo``: ``make demo`` (``python -m taskfsm_dev.demo``), with ``demo_samples.yaml``.
"""
