# pairrepro: every target installs what it needs into .venv first.
# torch is pinned to the 2.13.0 CPU build before anything else: a plain `torch`
# requirement would pull a multi-GB CUDA build on machines without that file.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CLI    := $(VENV)/bin/pairrepro
TORCH_PIN ?= torch==2.13.0
STAMP  := $(VENV)/.installed
SEEDS  ?= 1
DEVICE ?= auto
MIRROR ?= $(firstword $(wildcard ../shared/datasets) $(PAIRREPRO_MIRROR))
export PAIRREPRO_MIRROR ?= $(MIRROR)

.PHONY: install demo test lint bench clean help
help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_%-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_PIN)"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install pairrepro with its dev tools

demo: $(STAMP)  ## built-in end-to-end run: synthetic data -> preprocess -> train -> eval -> report
	$(CLI) demo

test: $(STAMP)  ## run the whole test suite
	$(PY) -m pytest -q -x --durations=15

lint: $(STAMP)  ## ruff
	$(VENV)/bin/ruff check pairrepro tests bench

bench: $(STAMP)  ## every benchmark script in bench/
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

data-%: $(STAMP)  ## fetch + preprocess one dataset, e.g. make data-snli (mirror: MIRROR=dir)
	$(CLI) fetch $*
	$(CLI) preprocess $*

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache
