"""taskfsm: a Kubernetes controller for nagare media engine Tasks.

Organization, in data-flow order (see docs/architecture.md):

* ``taskfsm.testing`` -- a real local control plane (etcd, kube-apiserver, kube-controller-manager)
  and a simulated kubelet, for tests, benchmarks and the demo.
"""
