# taskfsm developer commands; `make help` lists them.
.DEFAULT_GOAL := help
PY := .venv/bin/python

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

setup: ## install the pinned Python env, graphviz and build the control plane (idempotent)
	@scripts/setup.sh

demo: setup ## run the controller on an embedded local control plane with sample Tasks
	$(PY) -m taskfsm demo

test: setup lint ## run the whole test suite: lint, types, import contracts, unit tests, tests against the real control plane
	$(PY) -m pytest

lint: ## ruff (lint + format check), mypy --strict, import contracts
	$(PY) -m ruff check taskfsm machines tests benchmarks
	$(PY) -m ruff format --check taskfsm machines tests benchmarks
	$(PY) -m mypy
	.venv/bin/lint-imports

test-fast: ## run only the tests that need no control plane
	$(PY) -m pytest -m "not integration"

bench: setup ## benchmark taskfsm run on a local control plane (≤ 30 min, then ≈ 40 min of HTTP, admission, memory and UI benchmarks); writes docs/benchmarks.md
	$(PY) benchmarks/bench_controller.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_http.py
	$(PY) benchmarks/bench_admission.py
	$(PY) benchmarks/bench_memory.py
	$(PY) benchmarks/bench_ui.py

.PHONY: help setup demo test lint test-fast bench
