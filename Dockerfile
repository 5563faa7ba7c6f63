# syntax=docker/dockerfile:1
# The taskfsm controller image, its one recipe: Debian bookworm with Debian's python3.11, the
# locked environment installed in /opt/taskfsm (the path it runs from), run as the non-root user
# 65532 with a read-only root filesystem (deploy/manager.yaml, the chart). `make image` builds the
# same recipe offline (tests/support/image.py: the packages below with mmdebstrap, then the same
# scripts/image-install.sh steps on the same files, .dockerignore) and the tests run that image.
FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3.11 ca-certificates netbase tzdata \
    && rm -rf /var/lib/apt/lists/*
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
