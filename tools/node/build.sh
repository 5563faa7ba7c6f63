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
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
grep -q "k8s.io/kubernetes $K8S_VERSION" "$here/go.mod" \
  || { echo "node: go.mod does not require k8s.io/kubernetes $K8S_VERSION" >&2; exit 1; }

cache_root=${TASKFSM_NODE_CACHE:-/var/cache/taskfsm-node}
out="$cache_root/$K8S_VERSION-$(cat "$here/go.sum" "$here/cmd/workload/main.go" | sha256sum | cut -c1-12)"
built() {
  for bin in kubelet kube-scheduler kube-proxy workload; do
    [ -x "$out/$bin" ] || return 1
  done
}
if built; then
  echo "$out"
  exit 0
fi
require_go node "$here/go.mod"
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if built; then  # another run built it while this one waited
  echo "$out"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitTreeState=clean"
tmp="$out.partial.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "node: building kubelet, kube-scheduler, kube-proxy $K8S_VERSION and the workload program with $(go env GOVERSION) into $out (once; usually 3-4 min on 2 cores after the control plane's build, whose Go caches it shares)" >&2
start=$(date +%s)
( cd "$here" && with_progress node "3-4 min" go build -trimpath -tags selinux,notest -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-proxy ./cmd/workload )
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "node: built in $(( $(date +%s) - start )) s" >&2
echo "$out"
