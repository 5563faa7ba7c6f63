#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager and kubectl for taskfsm's tests and demo.
#
# Prints the directory holding the four binaries on stdout (last line); progress goes to stderr.
# Binaries are cached in $TASKFSM_CONTROLPLANE_CACHE (default /var/cache/taskfsm-controlplane)
# under <k8s version>-<go.sum hash>, so a second run costs nothing. If KUBEBUILDER_ASSETS names a
# directory holding etcd and kube-apiserver, it is printed instead and nothing is built (kubectl is
# then whatever that directory holds). Concurrent runs wait for each other (flock on the cache
# root), so two test sessions starting at once build once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
K8S_VERSION=v1.35.4

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if [ -x "$KUBEBUILDER_ASSETS/etcd" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]; then
    echo "controlplane: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS" >&2
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "controlplane: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks etcd or kube-apiserver" >&2
  exit 1
fi

cache_root=${TASKFSM_CONTROLPLANE_CACHE:-/var/cache/taskfsm-controlplane}
k8s_build controlplane "$here" "$K8S_VERSION" "$cache_root/$K8S_VERSION-$(sha256sum "$here/go.sum" | cut -c1-12)" \
  "6-7 min on 2 idle cores with Go's caches empty, module downloads included, up to 15 under load" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl ./cmd/etcd
