# Sourced by tools/*/build.sh: the Go version check, progress lines a person can follow and the
# cached build of Kubernetes' commands.
#
#   require_go NAME GO_MOD     exit 1 unless `go` exists and is at least the `go` line of GO_MOD
#                              (the builds run with GOTOOLCHAIN=local: no toolchain download)
#   require_module NAME GO_MOD MODULE VERSION
#                              exit 1 unless GO_MOD requires MODULE at VERSION (the script's pin)
#   with_progress NAME USUALLY CMD...
#                              run CMD, printing "NAME: still building (N s; usually USUALLY)"
#                              to stderr every $TASKFSM_PROGRESS_SECONDS (default 30) seconds
#   k8s_build NAME MODULE_DIR VERSION OUT USUALLY PACKAGE... [--copy FILE...]
#                              build Kubernetes commands into the cache directory OUT (below)

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

require_module() {
  grep -q "$3 $4" "$2" || { echo "$1: $2 does not require $3 $4" >&2; exit 1; }
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

k8s_build() {
  # k8s_build NAME MODULE_DIR VERSION OUT USUALLY PACKAGE... [--copy FILE...]
  #   print OUT, first building it unless it holds every binary: the PACKAGEs of MODULE_DIR's
  #   go.mod (GOTOOLCHAIN=local, static, with Kubernetes VERSION's version ldflags) and the
  #   FILEs copied in (binaries of another build). Concurrent runs wait for each other (flock on
  #   OUT's parent); the build is published atomically, so a killed one leaves no half-filled
  #   OUT behind. USUALLY is how long a build usually takes, for the progress lines.
  local name=$1 module=$2 version=$3 out=$4 usually=$5 minor arg bins=() pkgs=() copies=() what
  shift 5
  while [ $# -gt 0 ]; do
    arg=$1
    shift
    if [ "$arg" = --copy ]; then
      copies=("$@")
      break
    fi
    pkgs+=("$arg")
  done
  for arg in "${pkgs[@]}" "${copies[@]}"; do bins+=("$(basename "$arg")"); done
  _k8s_built() {
    for arg in "${bins[@]}"; do [ -x "$out/$arg" ] || return 1; done
  }
  if _k8s_built; then
    echo "$out"
    return 0
  fi
  require_go "$name" "$module/go.mod"
  mkdir -p "$(dirname "$out")"
  exec 9>"$(dirname "$out")/.build.lock"
  flock 9
  if _k8s_built; then  # another run built it while this one waited
    echo "$out"
    return 0
  fi
  minor=$(echo "$version" | cut -d. -f2)
  local ld="-s -w" component
  for component in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $component.gitVersion=$version -X $component.gitMajor=1"
    ld="$ld -X $component.gitMinor=$minor -X $component.gitTreeState=clean"
  done
  local tmp="$out.partial.$$" start
  mkdir -p "$tmp"
  trap "rm -rf '$tmp'" EXIT
  what=$(for arg in "${pkgs[@]}"; do basename "$arg"; done | paste -sd' ')
  [ ${#copies[@]} -eq 0 ] || what="$what (and copying ${copies[*]})"
  echo "$name: building $what $version with $(go env GOVERSION) into $out (once; usually $usually)" >&2
  start=$(date +%s)
  ( cd "$module" && export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
      && with_progress "$name" "$usually" go build -trimpath -tags selinux,notest -ldflags "$ld" -o "$tmp/" "${pkgs[@]}" )
  [ ${#copies[@]} -eq 0 ] || cp -p "${copies[@]}" "$tmp/"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
  echo "$name: built in $(( $(date +%s) - start )) s" >&2
  echo "$out"
}
