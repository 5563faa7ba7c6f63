#!/usr/bin/env bash
# Install what taskfsm needs, from the project's own pinned files, for one purpose:
#
#   scripts/setup.sh [demo]   `make demo`, `make bench`: uv (from PyPI), the locked Python
#                             environment (.venv from uv.lock), graphviz (Debian) and the control
#                             plane (tools/controlplane/build.sh)
#   scripts/setup.sh test     `make test`: the above, then mmdebstrap, skopeo, podman, and the real
#                             node's containerd, runc, CNI plugins, conntrack, iptables (Debian),
#                             helm, the Kueue manager, promtool, the node's kubelet, kube-proxy and
#                             kube-scheduler, the control plane at the oldest supported
#                             Kubernetes (tools/*/build.sh) and the image's root filesystem
#                             (tests/support/image.py). The tests would build each of
#                             these on first use too; building them first keeps the build time
#                             out of the tests' timeouts.
#   scripts/setup.sh image    `make image`: uv, the environment, mmdebstrap and skopeo
#
# Each step says what it builds, how long that usually takes and where it is cached; what is
# cached is only checked (a second run takes seconds). Go is checked against the `go` line of each
# tools/*/go.mod before building it (tools/lib.sh):
#   demo: tools/controlplane, >= 1.25
#   test: helm and Kueue, >= 1.26
# Python: pyproject.toml's requires-python.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
purpose=${1:-demo}
case $purpose in
demo | test | image) ;;
*)
  echo "usage: scripts/setup.sh [demo|test|image]" >&2
  exit 2
  ;;
esac
setup_start=$(date +%s)
say() { echo "setup: $*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

command -v python3 >/dev/null || { say "python3 is required (pyproject.toml: requires-python)"; exit 1; }
requires=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["requires-python"])' 2>/dev/null) \
  || { say "python3 >= 3.11 is required (it reads pyproject.toml with tomllib)"; exit 1; }
say "python3 $(python3 -c 'import platform; print(platform.python_version())'); taskfsm needs Python $requires (uv picks a matching interpreter)"

if command -v uv >/dev/null 2>&1; then
  UV=(uv)
else
  if ! python3 -m uv --version >/dev/null 2>&1; then
    say "installing uv $UV_VERSION from PyPI (pip; a few seconds)"
    python3 -m pip install --quiet "uv==$UV_VERSION"
  fi
  UV=(python3 -m uv)
fi
uv_have=$("${UV[@]}" --version | awk '{print $2}')
if [ "$uv_have" != "$UV_VERSION" ]; then
  if [ "$purpose" = demo ]; then
    say "uv $uv_have (the image build pins $UV_VERSION, the Dockerfile's; the demo does not mind)"
  else
    say "uv $uv_have is on PATH, but the image build needs uv $UV_VERSION (the Dockerfile's): python3 -m pip install uv==$UV_VERSION"
    exit 1
  fi
fi

# Debian packages: graphviz (`dot`, the diagrams); for the tests and the image, mmdebstrap (the
# image's root filesystem) and skopeo (copies the image archive); for the tests, podman (loads
# it), chromium (the headless browser tests/integration/test_ui.py and `make bench` drive
# through Playwright; Playwright's own browser download is never used) and valgrind (the smoke
# test of benchmarks/bench_http.py counts instructions per request with callgrind); and what the
# real node of tests/node runs (taskfsm_dev/node.py: containerd, runc, the CNI bridge,
# host-local and loopback plugins, conntrack and iptables for kube-proxy, ip for its veth pair).
need=(dot:graphviz)
[ "$purpose" = demo ] || need+=(mmdebstrap:mmdebstrap skopeo:skopeo)
[ "$purpose" != test ] || need+=(podman:podman chromium:chromium valgrind:valgrind
  containerd:containerd runc:runc conntrack:conntrack iptables:iptables ip:iproute2
  nsenter:util-linux /usr/lib/cni/bridge:containernetworking-plugins)
missing=()
for pair in "${need[@]}"; do
  what=${pair%%:*}
  if [ "${what:0:1}" = / ]; then [ -e "$what" ] && continue; fi
  command -v "$what" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} (Debian packages, apt-get; usually under a minute)"
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

step=$(date +%s)
say "Python environment: .venv from uv.lock (${UV[*]} sync; the first time it downloads the locked packages, usually under a minute)"
"${UV[@]}" sync --frozen --quiet --extra client
say "Python environment ready ($(elapsed "$step"))"

if [ "$purpose" != image ]; then
  step=$(date +%s)
  say "control plane: etcd, kube-apiserver, kube-controller-manager, kubectl (tools/controlplane/build.sh; cached in ${TASKFSM_CONTROLPLANE_CACHE:-/var/cache/taskfsm-controlplane})"
  bins=$(tools/controlplane/build.sh)
  say "control plane in $bins ($(elapsed "$step"))"
fi

if [ "$purpose" = test ]; then
  step=$(date +%s)
  say "helm (tools/helm/build.sh; cached in ${TASKFSM_HELM_CACHE:-/var/cache/taskfsm-helm})"
  say "helm $(tools/helm/build.sh) ($(elapsed "$step"))"
  step=$(date +%s)
  say "Kueue manager (tools/kueue/build.sh; cached in ${TASKFSM_KUEUE_CACHE:-/var/cache/taskfsm-kueue})"
  say "kueue $(tools/kueue/build.sh) ($(elapsed "$step"))"
  step=$(date +%s)
  say "promtool (tools/promtool/build.sh; cached in ${TASKFSM_PROMTOOL_CACHE:-/var/cache/taskfsm-promtool})"
  say "promtool $(tools/promtool/build.sh) ($(elapsed "$step"))"
  step=$(date +%s)
  say "real node: kubelet, kube-proxy, kube-scheduler, the workload program (tools/node/build.sh; cached in ${TASKFSM_NODE_CACHE:-/var/cache/taskfsm-node})"
  say "real node in $(tools/node/build.sh) ($(elapsed "$step"))"
  step=$(date +%s)
  say "control plane at the oldest supported Kubernetes: kube-apiserver, kube-controller-manager v1.30.14 (tools/controlplane-min/build.sh; cached in ${TASKFSM_CONTROLPLANE_CACHE:-/var/cache/taskfsm-controlplane})"
  say "control plane 1.30 in $(tools/controlplane-min/build.sh) ($(elapsed "$step"))"
  # Services between pods on the node's bridge need the bridge netfilter hooks (best effort:
  # the tests name what is still missing, taskfsm_dev/node.py missing_prerequisites).
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null \
    || say "br_netfilter is not loaded and could not be (modprobe br_netfilter as root); tests/node will say so"
  # The image's root filesystem for tests/e2e/test_image.py (Debian packages + the Dockerfile's
  # steps; rebuilt only where its inputs changed).
  step=$(date +%s)
  say "image root filesystem (tests/support/image.py: Debian from its mirrors + the locked environment; usually about a minute the first time; cached in ${TASKFSM_IMAGE_CACHE:-/var/cache/taskfsm-image})"
  say "image root filesystem $(.venv/bin/python -m tests.support.image) ($(elapsed "$step"))"
fi
say "ready for make $purpose ($(elapsed "$setup_start"))"
