#!/bin/sh
# The steps that make the taskfsm image, run as root inside the image's root filesystem: by the
# Dockerfile (two RUNs, so the dependency layer is cached apart from the code) and by the image
# test (tests/support/image.py runs them in a Debian root filesystem built offline with
# mmdebstrap, then starts the entry point from it read-only as the non-root user).
#
#   image-install.sh deps SRC      the non-root user, the config mount point and the locked
#                                  dependencies in /opt/taskfsm (reads SRC/pyproject.toml, uv.lock)
#   image-install.sh project SRC   taskfsm itself, as a wheel (no editable link back to SRC)
#
# Needs: python3.11 and uv (the version the Dockerfile names) on PATH. The environment lives at
# /opt/taskfsm, the path it runs from: console scripts keep their environment's path in their
# shebang, so it is never built in one place and copied to another.
set -eu
step=${1:?usage: image-install.sh deps|project SRC}
src=${2:?usage: image-install.sh deps|project SRC}
PREFIX=/opt/taskfsm
USER_ID=65532

python=$(command -v python3.11) || { echo "image-install: python3.11 is required" >&2; exit 1; }
command -v uv >/dev/null || { echo "image-install: uv is required" >&2; exit 1; }

sync() {
  # --no-default-groups: without the test tools; bytecode compiled now, because the root
  # filesystem is read-only at run time; copies, not links into the uv cache (a build mount).
  (cd "$src" && UV_PROJECT_ENVIRONMENT=$PREFIX UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never uv sync --frozen --no-default-groups --python "$python" "$@")
}

case $step in
deps)
  # The user the Deployment runs as (runAsUser 65532, like distroless "nonroot"): a passwd entry
  # gives it a name and a home directory, which some libraries look up.
  grep -q "^nonroot:" /etc/group || echo "nonroot:x:$USER_ID:" >>/etc/group
  grep -q "^nonroot:" /etc/passwd ||
    echo "nonroot:x:$USER_ID:$USER_ID:nonroot:/home/nonroot:/usr/sbin/nologin" >>/etc/passwd
  mkdir -p /home/nonroot /etc/taskfsm
  chown "$USER_ID:$USER_ID" /home/nonroot
  sync --no-install-project
  ;;
project)
  sync --no-editable
  "$PREFIX/bin/taskfsm" --version
  ;;
*)
  echo "image-install: unknown step '$step' (deps or project)" >&2
  exit 2
  ;;
esac
