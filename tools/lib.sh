# Sourced by tools/*/build.sh: the Go version check and progress lines a person can follow.
#
#   require_go NAME GO_MOD     exit 1 unless `go` exists and is at least the `go` line of GO_MOD
#                              (the builds run with GOTOOLCHAIN=local: no toolchain download)
#   with_progress NAME USUALLY CMD...
#                              run CMD, printing "NAME: still building (N s; usually USUALLY)"
#                              to stderr every $TASKFSM_PROGRESS_SECONDS (default 30) seconds

go_required() {  # the `go` directive of a go.mod, e.g. 1.26.0
  awk '$1 == "go" { print $2; exit }' "$1"
}

version_at_least() {  # version_at_least HAVE WANT: HAVE >= WANT, numerically per field
  awk -v have="$1" -v want="$2" 'BEGIN {
    split(have, h, "."); split(want, w, ".")
    for (i = 1; i <= 3; i++) { if (h[i] + 0 != w[i] + 0) exit !(h[i] + 0 > w[i] + 0) }
    exit 0
  }'
}

require_go() {
  local name=$1 want have
  want=$(go_required "$2")
  if ! command -v go >/dev/null; then
    echo "$name: 'go' (>= $want, the go line of $2) is required; install Go from go.dev/dl or your distribution" >&2
    exit 1
  fi
  have=$(go env GOVERSION | sed 's/^go//; s/[^0-9.].*$//')
  if ! version_at_least "$have" "$want"; then
    echo "$name: go $have is too old: $2 needs go >= $want (the build uses GOTOOLCHAIN=local and downloads no toolchain)" >&2
    exit 1
  fi
}

with_progress() {
  local name=$1 usually=$2 start ticker rc
  shift 2
  start=$(date +%s)
  # One-second sleeps, so that no sleep outlives the ticker by more than a second holding the
  # caller's stdout or stderr open (a caller reading them to the end would wait for it).
  (
    every=${TASKFSM_PROGRESS_SECONDS:-30} waited=0
    while sleep 1; do
      waited=$((waited + 1))
      if [ $((waited % every)) -eq 0 ]; then
        echo "$name: still building ($(( $(date +%s) - start )) s; usually $usually)" >&2
      fi
    done
  ) >/dev/null &
  ticker=$!
  rc=0
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$rc"
}
