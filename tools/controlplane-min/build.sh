#!/usr/bin/env bash
# Build the control plane at the oldest Kubernetes taskfsm supports (docs/install.md, "Kubernetes
# versions"): kube-apiserver and kube-controller-manager v1.30.14, beside etcd and kubectl of the
# main build (tools/controlplane/build.sh, built first if needed), so that the directory is a
# complete KUBEBUILDER_ASSETS directory for the integration tier's run against 1.30
# (docs/testing.md).
#
# Prints that directory on stdout (last line); progress goes to stderr. It is cached in
# $TASKFSM_CONTROLPLANE_CACHE (default /var/cache/taskfsm-controlplane) under
# <k8s version>-<hash of this go.sum and the main build's>, so a second run costs nothing.
# KUBEBUILDER_ASSETS is ignored here: it is what this directory is made for.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
K8S_VERSION=v1.30.14
require_module controlplane-min "$here/go.mod" k8s.io/kubernetes "$K8S_VERSION"

main=$(env -u KUBEBUILDER_ASSETS bash "$here/../controlplane/build.sh" | tail -n 1)
cache_root=${TASKFSM_CONTROLPLANE_CACHE:-/var/cache/taskfsm-controlplane}
key=$(cat "$here/go.sum" "$here/../controlplane/go.sum" | sha256sum | cut -c1-12)
k8s_build controlplane-min "$here" "$K8S_VERSION" "$cache_root/$K8S_VERSION-$key" \
  "5-7 min on 2 idle cores with Go's caches empty, up to 25 under heavy load" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  --copy "$main/etcd" "$main/kubectl"
