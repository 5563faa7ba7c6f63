#!/usr/bin/env bash
# Build promtool (Prometheus' rule checker and rule unit-test runner) for taskfsm's tests.
#
# Prints the path of the promtool binary on stdout (last line); progress goes to stderr.
# The binary is cached in $TASKFSM_PROMTOOL_CACHE (default /var/cache/taskfsm-promtool) under
# <prometheus version>-<go.sum hash>, so a second run costs nothing. If PROMTOOL names an
# executable, it is printed instead and nothing is built. Built with `remove_all_sd`: promtool's
# rule commands need no service discovery, and without the SD plugins (cloud SDKs, client-go) the
# build compiles about a third of the packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
# github.com/prometheus/prometheus v0.312.0 is Prometheus v3.12.0 (the module's v0.3XX.Y tags).
MODULE_VERSION=v0.312.0
PROM_VERSION=3.12.0

if [ -n "${PROMTOOL:-}" ]; then
  if [ -x "$PROMTOOL" ]; then
    echo "promtool: using PROMTOOL=$PROMTOOL" >&2
    echo "$PROMTOOL"
    exit 0
  fi
  echo "promtool: PROMTOOL=$PROMTOOL is not an executable" >&2
  exit 1
fi

require_module promtool "$here/go.mod" github.com/prometheus/prometheus "$MODULE_VERSION"
cache_root=${TASKFSM_PROMTOOL_CACHE:-/var/cache/taskfsm-promtool}
TAGS=remove_all_sd
out="$cache_root/v$PROM_VERSION-$TAGS-$(sha256sum "$here/go.sum" | cut -c1-12)"
if [ -x "$out/promtool" ]; then
  echo "$out/promtool"
  exit 0
fi

require_go promtool "$here/go.mod"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
ld="-s -w -X github.com/prometheus/common/version.Version=$PROM_VERSION \
 -X github.com/prometheus/common/version.Branch=HEAD \
 -X github.com/prometheus/common/version.Revision=$MODULE_VERSION"
tmp="$out.partial.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "promtool: building promtool $PROM_VERSION with $(go env GOVERSION) into $out (once; usually 3-4 min on 2 cores, module downloads included)" >&2
start=$(date +%s)
( cd "$here" && with_progress promtool "3-4 min" go build -trimpath -tags "$TAGS" -ldflags "$ld" -o "$tmp/promtool" \
    github.com/prometheus/prometheus/cmd/promtool )
# Publish atomically so a killed build never leaves a half-filled cache directory behind.
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "promtool: built in $(( $(date +%s) - start )) s" >&2
echo "$out/promtool"
