#!/usr/bin/env bash
# Install what taskfsm's tests, benchmarks and demo need, from the project's own pinned files:
# uv (from PyPI), the locked Python environment (.venv from uv.lock), graphviz and mmdebstrap
# (Debian), helm (tools/helm/build.sh), the Kueue manager (tools/kueue/build.sh), the image's root
# filesystem (tests/support/image.py), and the control-plane binaries and promtool
# (tools/controlplane/build.sh, tools/promtool/build.sh, cached outside the repository).
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
# Debian packages: graphviz (`dot`, the diagrams), mmdebstrap (the image test's root filesystem) and
# chromium (the headless browser tests/integration/test_ui.py and `make bench` drive through
# Playwright; Playwright's own browser download is never used) and valgrind (`make bench` counts
# the HTTP clients' instructions per request with callgrind, benchmarks/bench_http.py).
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} (Debian packages)" >&2
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
"${UV[@]}" sync --frozen --quiet
bins=$(tools/controlplane/build.sh)
echo "setup: control-plane binaries and kubectl in $bins" >&2
echo "setup: helm $(tools/helm/build.sh)" >&2
echo "setup: kueue $(tools/kueue/build.sh)" >&2
# The image's root filesystem for tests/e2e/test_image.py (Debian packages + the Dockerfile's steps;
# cached in /var/cache/taskfsm-image, rebuilt only where its inputs changed).
echo "setup: image root filesystem $(.venv/bin/python -m tests.support.image)" >&2
echo "setup: promtool $(tools/promtool/build.sh)" >&2
