#!/usr/bin/env bash
# Build what a real node needs beside the local control plane (taskfsm_dev/node.py): kubelet,
# kube-scheduler and kube-proxy of the control plane's Kubernetes version, and `workload`, the
# static program of the node's two local images (the pod sandbox and the tests' workload; no
# registry is reachable, so nothing is pulled).
#
# Prints the directory holding the four binaries on stdout (last line); progress goes to stderr.
# Binaries are cached in $TASKFSM_NODE_CACHE (default /var/cache/taskfsm-node) under
# <k8s version>-<hash of go.sum and the workload's source>, so a second run costs nothing.
# Concurrent runs wait for each other (flock on the cache root). The go.mod is the control
# plane's (same requirements and staging replacements) with the node's commands as its tools.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
K8S_VERSION=v1.35.4
require_module node "$here/go.mod" k8s.io/kubernetes "$K8S_VERSION"

cache_root=${TASKFSM_NODE_CACHE:-/var/cache/taskfsm-node}
k8s_build node "$here" "$K8S_VERSION" \
  "$cache_root/$K8S_VERSION-$(cat "$here/go.sum" "$here/cmd/workload/main.go" | sha256sum | cut -c1-12)" \
  "3-4 min on 2 cores after the control plane's build, whose Go caches it shares" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-proxy ./cmd/workload
