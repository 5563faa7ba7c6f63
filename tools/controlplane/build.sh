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
minor=$(echo "$K8S_VERSION" | cut -d. -f2)

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
out="$cache_root/$K8S_VERSION-$(sha256sum "$here/go.sum" | cut -c1-12)"
built() {
  for bin in etcd kube-apiserver kube-controller-manager kubectl; do
    [ -x "$out/$bin" ] || return 1
  done
}
if built; then
  echo "$out"
  exit 0
fi
require_go controlplane "$here/go.mod"
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
echo "controlplane: building etcd, kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION with $(go env GOVERSION) into $out (once; usually 6-7 min on 2 idle cores with Go's caches empty, module downloads included, up to 15 under load)" >&2
start=$(date +%s)
( cd "$here" && with_progress controlplane "6-7 min" go build -trimpath -tags selinux,notest -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl ./cmd/etcd )
# Publish atomically so a killed build never leaves a half-filled cache directory behind.
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "controlplane: built in $(( $(date +%s) - start )) s" >&2
echo "$out"
