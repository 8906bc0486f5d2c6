# Two entry points: `make serve` (set up and serve the examples) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HTTP_PORT ?= 8000
GRPC_PORT ?= 8001
METRICS_PORT ?= 8002

.PHONY: serve test venv check lint clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-serve: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-serve

venv: $(VENV)/.installed-serve

serve: $(VENV)/.installed-serve
	$(BIN)/tritium serve --model-repository=examples/model_repository \
		--http-port=$(HTTP_PORT) --grpc-port=$(GRPC_PORT) --metrics-port=$(METRICS_PORT)

# The quality gates run first; any finding fails the target before the tests start.
test: lint
	$(BIN)/python -m pytest -q

# Lint, types (settings in pyproject.toml) and import layering (the [tool.importlinter]
# contracts: core < config < repository, backends, ipc < scheduling, workers < service <
# frontends < server < cli).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
	$(BIN)/lint-imports

check: test

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
