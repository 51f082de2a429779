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
# empty: each recipe's own seeds, as `pairrepro reproduce` and `report --plan` plan them
SEEDS  ?=
DEVICE ?= auto
# a local mirror folder (<mirror>/<dataset>/<file>): MIRROR=dir; MIRROR= (empty) means the
# official URLs; unset, $PAIRREPRO_MIRROR or the user's config (pairrepro/paths.py mirror_setting)
ifneq ($(origin MIRROR),undefined)
export PAIRREPRO_MIRROR := $(MIRROR)
endif

.PHONY: install demo test lint bench clean help
help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_%-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort
	@echo "paper tables (fetch + preprocess + train + render; SEEDS=1,2,3 COMPARE=1 DRY=1 DEVICE=cuda):"
	@for p in $(PAPERS); do awk -v p=$$p '/^\[\[tables\]\]$$/ {t = 1; next} t && /^number = / {printf " %s-table%s", p, $$3; t = 0} END {print ""}' pairrepro/planning/papers/$$p.toml; done

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_PIN)"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install pairrepro with its dev tools

demo: $(STAMP)  ## fetch -> preprocess -> train -> eval -> report: TrecQA + CSRAN Table 6 if fetchable, else synthetic (offline)
	$(CLI) demo

test: $(STAMP)  ## run the whole test suite (every failure; skips counted by reason at the end)
	$(PY) -m pytest -q --durations=15

lint: $(STAMP)  ## ruff
	$(VENV)/bin/ruff check pairrepro tests bench

# the model benches print fp32 and bf16 figures with the load (bench/protocol.py); RECORD=1
# appends reference-marked runs to bench/records/, which docs/benchmarks.md's table is rendered from.
# bench_negatives runs at a third of its size here (its rank_bm25 baseline alone takes
# minutes at 60k)
BENCH_RECORD = $(if $(RECORD),--record)
bench: $(STAMP)  ## every benchmark script in bench/ (RECORD=1: record the model benches)
	@echo "== bench/bench_grid.py" && $(PY) bench/bench_grid.py $(BENCH_RECORD)
	@echo "== bench/bench_csran_cin.py" && $(PY) bench/bench_csran_cin.py $(BENCH_RECORD)
	@echo "== bench/bench_engine_overhead.py" && $(PY) bench/bench_engine_overhead.py
	@echo "== bench/bench_negatives.py" && $(PY) bench/bench_negatives.py --size 20000 --rank-bm25-queries 30
	@echo "== bench/bench_preprocess.py" && $(PY) bench/bench_preprocess.py
	@echo "== bench/bench_stats.py" && $(PY) bench/bench_stats.py

data-%: $(STAMP)  ## fetch + preprocess one dataset, e.g. make data-trecqa VARIANT=clean (mirror: MIRROR=dir)
	$(CLI) fetch $*
	$(CLI) preprocess $* $(if $(VARIANT),--variant $(VARIANT))

# Paper tables: fetch + preprocess + train (finished seeds skipped) + render; DRY=1 only plans.
# The work is done by `pairrepro reproduce` (pairrepro/pipeline.py); exit 7 = nothing ran.
PAPERS := clstm dflstm mvlstm csran cin
# COMPARE=1 also trains a table's comparison rows (models run here that the paper lacks)
REPRO_ARGS = $(if $(SEEDS),--seeds $(SEEDS)) $(if $(JOBS),--jobs $(JOBS)) $(if $(filter-out auto,$(DEVICE)),--device $(DEVICE)) $(if $(DRY),--dry-run) $(if $(COMPARE),--compare)

.PHONY: tables table2
tables: $(STAMP)  ## every table of every paper (SEEDS=1,2,3 DEVICE=cuda JOBS=2 DRY=1)
	$(CLI) reproduce all $(REPRO_ARGS)

table2: $(STAMP)  ## Table 2 of every paper (make table2 DRY=1 prints the plan)
	$(CLI) reproduce all --table 2 $(REPRO_ARGS)

define PAPER_TABLE_RULE
$(1)-table%: $$(STAMP)  ## one table, e.g. make $(1)-table2
	$$(CLI) reproduce $(1) --table $$* $$(REPRO_ARGS)
endef
$(foreach p,$(PAPERS),$(eval $(call PAPER_TABLE_RULE,$(p))))

# Reference runs (results/<recipe>/seed-<n>/, tracked): see docs/results.md.
.PHONY: verify readme-tables results
verify: $(STAMP)  ## compare every run in runs/ with its reference run in results/ (exit 9: differs)
	$(CLI) verify

readme-tables: $(STAMP)  ## rewrite the generated sections of README.md and docs/ from results/
	$(CLI) results readme

# What tests/test_recipes_golden.py, tests/test_plan.py (the preflight gate of `results add`)
# and tests/test_readme_drift.py (docs/preflight.md's table) ask of a new or changed recipe.
# STAND_IN=1: time it on random words when its dataset is not prepared here.
.PHONY: recipe-records
recipe-records: $(STAMP)  ## a recipe's records: golden config, preflight record, generated docs (RECIPE=name [STAND_IN=1])
	@test -n "$(RECIPE)" || { echo "name the recipe: make recipe-records RECIPE=<name>"; exit 2; }
	$(CLI) train $(RECIPE) --print-config > tests/golden/configs/$(RECIPE).toml.part && mv tests/golden/configs/$(RECIPE).toml.part tests/golden/configs/$(RECIPE).toml
	$(CLI) preflight $(RECIPE) --out-dir bench/preflight --threads 1 $(if $(STAND_IN),--stand-in)
	$(CLI) results readme

results: $(STAMP)  ## keep finished runs as reference runs: make results RUNS="runs/bm25_trecqa/seed-1 ..."
	$(CLI) results add $(RUNS)

# A sample of the release's fast recipes, re-made from scratch and verified against results/
# (bit-equal on the release's CPU, torch build and one thread; inside the intervals elsewhere).
# Never part of CI (it trains; the reference runs' wall times are in docs/papers/*.md).
REGRESSION ?= bm25_trecqa mv_lstm_tensor_trecqa_short mv_lstm_bilinear_trecqa mv_lstm_tensor_trecqa
REGRESSION_RUNS ?= runs/regression
.PHONY: regression
regression: $(STAMP)  ## re-make a sample of the reference runs (REGRESSION="recipe ...") and verify each
	$(CLI) fetch trecqa
	$(CLI) preprocess trecqa --variant clean
	for r in $(REGRESSION); do PAIRREPRO_RUNS=$(REGRESSION_RUNS) $(CLI) train $$r --threads 1 --force || exit $$?; done
	$(CLI) verify $(REGRESSION_RUNS)

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache
