#!/usr/bin/env bash
# Build the Kueue manager for taskfsm's Kueue test (tests/integration/test_kueue.py: Kueue admits
# the suspended Jobs taskfsm creates, on the local control plane) from the Go module proxy: this
# module requires sigs.k8s.io/kueue and names its cmd/kueue as a tool, so go.mod and go.sum pin
# every dependency. The test installs Kueue's CRDs from the same module's directory in the module
# cache (`go list -m -f '{{.Dir}}' sigs.k8s.io/kueue`, run here).
#
# Prints the path of the kueue binary on stdout (last line); progress goes to stderr. The binary
# is cached in $TASKFSM_KUEUE_CACHE (default /var/cache/taskfsm-kueue) under <kueue version>-<go.sum
# hash>, so a second run costs nothing; a build is published atomically and concurrent runs wait
# for each other (flock on the cache root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
KUEUE_VERSION=v0.17.0

require_module kueue "$here/go.mod" sigs.k8s.io/kueue "$KUEUE_VERSION"
cache_root=${TASKFSM_KUEUE_CACHE:-/var/cache/taskfsm-kueue}
out="$cache_root/$KUEUE_VERSION-$(sha256sum "$here/go.sum" | cut -c1-12)"
if [ -x "$out/kueue" ]; then
  echo "$out/kueue"
  exit 0
fi
require_go kueue "$here/go.mod"
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if [ -x "$out/kueue" ]; then  # another run built it while this one waited
  echo "$out/kueue"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
ld="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
tmp="$out.partial.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "kueue: building kueue $KUEUE_VERSION with $(go env GOVERSION) into $out (once; usually 5.5-8 min on 2 cores, module downloads included)" >&2
start=$(date +%s)
( cd "$here" && with_progress kueue "5.5-8 min" go build -trimpath -ldflags "$ld" -o "$tmp/kueue" sigs.k8s.io/kueue/cmd/kueue )
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "kueue: built in $(( $(date +%s) - start )) s" >&2
echo "$out/kueue"
