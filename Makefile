# taskfsm developer commands; `make help` lists them.
.DEFAULT_GOAL := help
PY := .venv/bin/python
# pytest-xdist workers (docs/testing.md): most cluster tests wait on a control plane, so the whole
# suite runs three on two cores (four made the run slower: 24.5 min against 22.6); the tests that need no cluster are CPU-bound and run one per core.
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

setup: ## what the demo needs: the pinned Python env, graphviz, the control plane (idempotent)
	@scripts/setup.sh demo

setup-test: ## setup, then what the tests need: helm, Kueue, promtool, the image's root filesystem, skopeo
	@scripts/setup.sh test

demo: setup ## run the controller on an embedded local control plane with sample Tasks
	$(PY) -m taskfsm_dev.demo

# The integration tier once more against the oldest supported Kubernetes (docs/testing.md): the
# control plane of tools/controlplane-min (v1.30.14) for every control plane the session starts.
# A failed build fails the run (an empty KUBEBUILDER_ASSETS would mean the main build's 1.35).
TEST_OLDEST = assets=$$(tools/controlplane-min/build.sh) && KUBEBUILDER_ASSETS=$$assets \
	$(PY) -m pytest tests/integration -n $(TEST_WORKERS) --durations=10 \
	--junitxml=test-artefacts/junit-k8s-oldest.xml

test: setup-test lint ## run the whole test suite: lint, types, import contracts, unit tests, tests against the real control plane, then the integration tier against Kubernetes 1.30
	@status=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) --durations=30 --junitxml=test-artefacts/junit.xml || status=$$?; \
	echo "make test: the integration tier against the oldest supported Kubernetes (v1.30.14)"; \
	$(TEST_OLDEST) || status=$$?; \
	exit $$status

test-oldest: setup-test ## run only the integration tier against the oldest supported Kubernetes (1.30)
	$(TEST_OLDEST)

image: ## write the controller image as an OCI archive and its SBOM into dist/ (offline, from the tested root filesystem)
	@scripts/setup.sh image
	$(PY) -m tests.support.oci_image --output dist

release: setup-test ## a release from a tag into dist/ (TAG=vX.Y.Z): wheel, sdist, image archive + SBOM, chart package, SHA256SUMS; pushing is docs/install.md's 'Releasing'
	$(PY) -m tests.support.release --tag "$(TAG)"

lint: ## ruff (lint + format check), mypy --strict, import contracts
	$(PY) -m ruff check taskfsm machines taskfsm_dev tests benchmarks
	$(PY) -m ruff format --check taskfsm machines taskfsm_dev tests benchmarks
	$(PY) -m mypy
	.venv/bin/lint-imports

# Every generator, in an order where each reads only what the ones before it wrote: the CRDs
# before deploy/ (which copies them), the monitoring files before deploy/ (its kustomize
# monitoring component embeds the dashboard and the rules). tests/unit/test_make_generate.py
# checks that this list names every generator the freshness tests check.
GENERATORS := \
	taskfsm.strategic_merge.generate \
	taskfsm.api.crdgen \
	machines.diagrams.render \
	taskfsm.flagdoc \
	taskfsm.tools.monitoring \
	taskfsm.tools.deploygen

generate: ## regenerate every generated file: patch metadata, CRDs, lifecycle diagrams and doc blocks, flag table, alerts and dashboard, deploy/ (RBAC, chart, kustomize components)
	@set -e; for module in $(GENERATORS); do echo "$(PY) -m $$module"; $(PY) -m $$module; done

test-fast: ## run only the tests that need no control plane
	$(PY) -m pytest -n $(FAST_WORKERS) -m "not integration"

bench: setup ## benchmark taskfsm run on a local control plane (first the flood rows, six runs of 5,000 Tasks; then ≤ 30 min, then ≈ 70 min of HTTP, admission, memory (10,000 Tasks with Jobs, 100,000 without) and UI benchmarks); writes docs/benchmarks.md
	$(PY) benchmarks/bench_controller.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_http.py
	$(PY) benchmarks/bench_admission.py
	$(PY) benchmarks/bench_memory.py
	$(PY) benchmarks/bench_memory.py --jobs-expired --tasks 100000 --repeats 1 --variants "as shipped" --json benchmarks/last-memory-100k-run.json
	$(PY) benchmarks/bench_ui.py

.PHONY: help setup setup-test demo test test-oldest image lint generate test-fast bench
