# syntax=docker/dockerfile:1
# The taskfsm controller image: Python 3.11 on Debian bookworm, the locked environment installed
# in /opt/taskfsm (the path it runs from), run as the non-root user 65532 with a read-only root
# filesystem (deploy/manager.yaml, the chart). The steps are scripts/image-install.sh; the image
# test (tests/e2e/test_image.py) runs the same script on the same files (.dockerignore) in a
# Debian root filesystem and starts this ENTRYPOINT from it as this USER.
FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

FROM python:3.11-slim-bookworm
# Dependencies first (a layer reused until uv.lock changes), then taskfsm itself as a wheel.
RUN --mount=from=uv,source=/uv,target=/usr/local/bin/uv \
    --mount=type=bind,source=scripts/image-install.sh,target=/src/scripts/image-install.sh \
    --mount=type=bind,source=pyproject.toml,target=/src/pyproject.toml \
    --mount=type=bind,source=uv.lock,target=/src/uv.lock \
    --mount=type=cache,target=/root/.cache/uv \
    sh /src/scripts/image-install.sh deps /src
RUN --mount=from=uv,source=/uv,target=/usr/local/bin/uv \
    --mount=type=bind,target=/src \
    --mount=type=cache,target=/root/.cache/uv \
    sh /src/scripts/image-install.sh project /src
USER 65532:65532
ENTRYPOINT ["/opt/taskfsm/bin/taskfsm"]
CMD ["run"]
