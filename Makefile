# Two entry points: `make serve` (set up and serve the examples) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HTTP_PORT ?= 8000
GRPC_PORT ?= 8001
METRICS_PORT ?= 8002

.PHONY: serve test venv check lint clean bench image image-test deploy-check

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

# The quality gates run first; any finding fails the target before the tests start. The
# suite runs in $(TEST_WORKERS) processes (a file per process at a time), then the tests
# marked `serial` (timing, CPU and process-wide checks) run alone. A test process that dies
# ends the run with the test it was running named (a replacement worker can leave the
# file-by-file scheduling waiting forever).
TEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --max-worker-restart=0 -m 'not slow and not serial'
	$(BIN)/python -m pytest -q -m 'serial and not slow'

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

# Deployment (deploy/, docs/deployment.md). Each target prints what it ran and what it
# skipped and why; as root on Debian it installs the packages it needs (podman, runc,
# mmdebstrap, prometheus).
IMAGE ?= localhost/tritium:latest

$(VENV)/.installed-deploy: $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet -e '.[test,deploy]'
	touch $@

# The container image, from a registry's Debian base or, offline, from a bookworm root file
# system made with mmdebstrap: whichever this machine allows.
image: $(BIN)/python
	IMAGE=$(IMAGE) PYTHON=$(BIN)/python deploy/container/build-image.sh

# Build, then run it read-only as UID 1000 with KServe's Triton arguments: inference over
# HTTP and gRPC, /metrics, a stop with a request in flight; measures size, start, memory.
image-test: $(VENV)/.installed-test
	IMAGE=$(IMAGE) PYTHON=$(BIN)/python $(BIN)/python deploy/container/image_test.py

# Chart render + lint + Kubernetes schemas, KServe objects, promtool, the autoscaling
# queries on a real Prometheus scraping tritium under load, podman kube play.
deploy-check: $(VENV)/.installed-deploy
	@deploy/container/ensure-tools.sh prometheus || echo "deploy-check: Prometheus checks will be skipped"
	IMAGE=$(IMAGE) PYTHONPATH=deploy $(BIN)/python -m deploycheck
