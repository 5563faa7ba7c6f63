# The taskfsm controller image: the locked Python environment, run as a non-root user.
FROM python:3.11-slim AS build
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY taskfsm ./taskfsm
COPY machines ./machines
RUN uv sync --frozen --no-dev --no-editable --no-group test

FROM python:3.11-slim
COPY --from=build /src/.venv /opt/taskfsm
USER 65532:65532
ENTRYPOINT ["/opt/taskfsm/bin/taskfsm"]
CMD ["run"]
