#!/usr/bin/env bash
# Install what taskfsm's tests, benchmarks and demo need, from the project's own pinned files:
# uv (from PyPI), the locked Python environment (.venv from uv.lock), graphviz (Debian), and the
# control-plane binaries (tools/controlplane/build.sh, cached outside the repository).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9

command -v python3 >/dev/null || { echo "setup: python3 (3.11) is required" >&2; exit 1; }
command -v go >/dev/null || { echo "setup: go (>= 1.25) is required to build the control plane" >&2; exit 1; }
if command -v uv >/dev/null 2>&1; then
  UV=(uv)
else
  if ! python3 -m uv --version >/dev/null 2>&1; then
    echo "setup: installing uv $UV_VERSION from PyPI" >&2
    python3 -m pip install --quiet "uv==$UV_VERSION"
  fi
  UV=(python3 -m uv)
fi
if ! command -v dot >/dev/null 2>&1; then
  echo "setup: installing graphviz (Debian package)" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
  fi
fi
"${UV[@]}" sync --frozen --quiet
bins=$(tools/controlplane/build.sh)
echo "setup: control-plane binaries in $bins" >&2
