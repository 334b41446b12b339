# Two commands do everything on a fresh machine with Python 3.11:
#   make quickstart   # create .venv if missing, then train on the embedded defaults
#   make test         # create .venv if missing, then run the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: quickstart test test-fast lint tune mlflow-ui clean gpu-check gpu-check-cpu wheelhouse test-wheelhouse docs docs-serve docs-reference

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: the local CPU build (an unpinned torch pulls a multi-GB CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

quickstart: $(STAMP)
	$(BIN)/distalign train jobs/configs/quickstart.yaml

# lint-imports: imports only run downward (the layers in pyproject.toml).
# The tests without Ray run in two processes, a test file each (--dist loadfile keeps a file's order); the
# Ray tests share one local cluster, so they run in one.
PYTEST_SPLIT := -n 2 --dist loadfile
# `make lint` first: the code's format, lint rules and types are part of the test
test: $(STAMP) lint
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q $(PYTEST_SPLIT) -m "not ray" --durations=10
	$(BIN)/python -m pytest -q -m ray --durations=15

# the tests that need no Ray cluster (marker `ray`, set in tests/conftest.py) and start no training
# processes or servers (marker `heavy`), after ruff (mypy, about a minute cold, is left to `make lint`/`make test`)
test-fast: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q $(PYTEST_SPLIT) -m "not ray and not heavy"

# the code's habits ([tool.ruff] and [tool.mypy] in pyproject.toml; .pre-commit-config.yaml runs the same on commit):
# the format ruff writes, its lint rules, and mypy on distalign/ (ruff: 2 s; mypy: about a minute of CPU cold, seconds
# with its .mypy_cache)
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

tune: $(STAMP)
	$(BIN)/distalign tune tuning/quickstart.yaml

mlflow-ui: $(STAMP)
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$${DISTALIGN_HOME:-$(CURDIR)}/mlflow.db --host 127.0.0.1 --port 5000

# The GPU check (distalign/tools/gpu_check): on a machine with a GPU, from the repository root, after `make wheelhouse`
# here (the image's python3 runs it; .gpu-carry travels with the tree). One report in $$OUT (else gpu-check-report/).
gpu-check:
	python3 -m distalign.tools.gpu_check --site .gpu-carry/site.tar.xz $(GPU_CHECK_ARGS)

# the same steps rehearsed on CPU, smaller, in this venv (~20-40 min on 2 cores)
gpu-check-cpu: $(STAMP)
	$(BIN)/python -m distalign.tools.gpu_check --cpu $(GPU_CHECK_ARGS)

# What a bare CUDA image lacks, for CPython $(PYTHON_VERSION) manylinux x86_64: wheels in .wheelhouse/, the stripped
# site archive and the bench corpus in .gpu-carry/ (what travels: <= 60 MiB). Needs python$(PYTHON_VERSION) (PATH or pyenv).
PYTHON_VERSION ?= 3.12
wheelhouse: $(STAMP)
	$(BIN)/python -m distalign.tools.gpu_check.wheelhouse --python-version $(PYTHON_VERSION)

# the wheelhouse built and installed offline into a clean Python 3.12 stand-in of the GPU image, a ZeRO-2 run there,
# then gpu-check's test collection and its whole CPU rehearsal in those packages (downloads; ~25 min): not in `make test`
test-wheelhouse: $(STAMP)
	$(BIN)/python -m pytest -q -m wheelhouse tests/test_wheelhouse.py

# The docs site (mkdocs.yml, docs/): built into site/, any warning (a broken link or anchor) an error. The pages of
# docs/reference/ are generated from the code: regenerate them after changing the config schema, the command line or
# the metric names (tests/test_docs.py fails while they are stale).
export NO_MKDOCS_2_WARNING := 1
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	$(BIN)/mkdocs serve

docs-reference: $(STAMP)
	$(BIN)/python -m distalign.tools.reference

clean:
	rm -rf runs mlflow.db site
