#!/usr/bin/env bash
# Build helm for taskfsm's chart tests (helm lint, helm template, helm install on the local
# control plane) from the Go module proxy: this module requires helm.sh/helm/v4 and names its
# cmd/helm as a tool, so go.mod and go.sum pin every dependency.
#
# Prints the path of the helm binary on stdout (last line); progress goes to stderr. The binary is
# cached in $TASKFSM_HELM_CACHE (default /var/cache/taskfsm-helm) under <helm version>-<go.sum
# hash>, so a second run costs nothing; a build is published atomically and concurrent runs wait
# for each other (flock on the cache root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
HELM_VERSION=v4.3.2

require_module helm "$here/go.mod" helm.sh/helm/v4 "$HELM_VERSION"
cache_root=${TASKFSM_HELM_CACHE:-/var/cache/taskfsm-helm}
out="$cache_root/$HELM_VERSION-$(sha256sum "$here/go.sum" | cut -c1-12)"
if [ -x "$out/helm" ]; then
  echo "$out/helm"
  exit 0
fi
require_go helm "$here/go.mod"
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if [ -x "$out/helm" ]; then  # another run built it while this one waited
  echo "$out/helm"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
ld="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION \
 -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
tmp="$out.partial.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "helm: building helm $HELM_VERSION with $(go env GOVERSION) into $out (once; usually 2.5-5.5 min on 2 cores, module downloads included)" >&2
start=$(date +%s)
( cd "$here" && with_progress helm "2.5-5.5 min" go build -trimpath -ldflags "$ld" -o "$tmp/helm" helm.sh/helm/v4/cmd/helm )
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "helm: built in $(( $(date +%s) - start )) s" >&2
echo "$out/helm"
