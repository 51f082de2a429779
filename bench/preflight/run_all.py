"""Preflight every recipe a paper table names (rows and comparison rows) into
``bench/preflight/<recipe>.json``: the figures of the compute plan (``pairrepro/planning/plan.py``).

Each recipe runs in its own process (so its peak memory is its own), on the CPU with one
thread unless told otherwise, at the recipe's own size; datasets that are not prepared here
are timed on random words at their typical lengths (``--stand-in``), pretrained vectors that
are not here are stand-in values at the recipe's dimension. A recipe whose JSON exists is
skipped (delete it to measure again). One model per family runs first, so that a partial
run already covers every model.

``--steps`` defaults to ``DEFAULT_STEPS`` (10) of ``pairrepro/train/preflight.py``:
``loss_falls`` is judged on the last half of the steps, after the first-step transient of
Adam and AdaGrad (see that module); 2 steps judged the transient itself. A recipe whose
steps take longer than ``--budget`` runs fewer of them, and its ``loss_falls`` is ``n/a``
unless the loss already fell.

    .venv/bin/python bench/preflight/run_all.py --budget 60
    .venv/bin/python bench/preflight/run_all.py --only cin csran_trecqa --force
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from pairrepro.planning.paper_tables import PAPERS, load_paper
from pairrepro.planning.preflight_record import PREFLIGHT_DIR
from pairrepro.planning.recipe_index import load_recipe_index, table_recipes
from pairrepro.train.preflight import DEFAULT_STEPS

ROOT = Path(__file__).resolve().parents[2]


def table_recipe_names() -> list[str]:
    """Every recipe of a paper table, one per model family first, then the rest."""
    index = load_recipe_index()
    names: set[str] = set()
    for name in PAPERS:
        paper = load_paper(name)
        for table in paper.tables:
            names.update(table_recipes(paper, table, index, comparisons=True))
    first: dict[str, str] = {}
    for name in sorted(names):
        first.setdefault(index.recipes[name].model.name, name)
    return [*first.values(), *sorted(names - set(first.values()))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    cli = Path(sys.executable).with_name("pairrepro")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    for name in args.only or table_recipe_names():
        out = PREFLIGHT_DIR / f"{name}.json"
        if out.exists() and not args.force:
            continue
        cmd = [str(cli), "--quiet", "preflight", name, "--steps", str(args.steps),
               "--budget", str(args.budget), "--threads", str(args.threads),
               "--device", args.device, "--stand-in", "--out-dir", str(PREFLIGHT_DIR)]
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        print(f"{name}: exit {rc}", flush=True)


if __name__ == "__main__":
    main()
