"""Step 1 of the cross-check (run with pairrepro's Python, no TensorFlow): write what pairrepro
would train ``csran_trecqa`` on, for one seed, as one ``.npz`` file that ``run.py`` reads.

It holds the prepared TrecQA clean splits (full token ids; ``run.py`` keeps the first
``max_len``, pairrepro's truncation, which this script checks against pairrepro's encoding),
the vocabulary, the embedding matrix pairrepro builds for that seed (50-d GloVe 6B, its
lookup and OOV rows), and the batches of each training epoch exactly as pairrepro's trainer
draws them for that seed (every question's positives and at most 8 sampled negatives, length
bucketed). A JSON sidecar records the provenance: the pairrepro commit, the prepared files'
sha256, the recipe's settings used.

    PYTHONPATH=. python crosscheck/csran_tf/export.py --seed 1 --out /tmp/csran_tf
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pairrepro.config import Recipe, load_recipe
from pairrepro.data.batches import EpochPlan
from pairrepro.data.embeddings import build_embedding_matrix
from pairrepro.errors import PairreproError
from pairrepro.paths import PROJECT_DIR, project_relative
from pairrepro.train.provenance import git_info
from pairrepro.train.setup import load_task_data, recipe_task

RECIPE = PROJECT_DIR / "recipes" / "csran_trecqa.toml"
SPLITS = ("train", "dev", "test")


def ragged(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Flat int32 values and int64 offsets (``len + 1``) of a list of 1-d arrays."""
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in seqs])
    flat = np.concatenate(seqs) if seqs else np.zeros(0)
    return flat.astype(np.int32), offsets


def export(recipe: Recipe, seed: int, out_dir: Path) -> Path:
    """Write ``out_dir/inputs-seed-<seed>.npz`` and its ``.json``; returns the npz path."""
    prepared, data = load_task_data(recipe, seed, list(SPLITS))
    max_len = recipe.data.max_len
    arrays: dict[str, np.ndarray] = {"vocab": np.asarray(prepared.vocab, dtype=str)}
    for name in SPLITS:
        frame = prepared.split(name)
        encoded = data.splits[name]
        for side in ("left", "right"):
            full = [np.asarray(s, dtype=np.int64) for s in frame[f"{side}_ids"]]
            # run.py cuts at max_len itself: check that this is pairrepro's encoding
            if any(not np.array_equal(f[:max_len], e)
                   for f, e in zip(full, getattr(encoded, side), strict=True)):
                raise SystemExit(f"{name}.{side}: pairrepro's encoded ids are not the first "
                                 f"{max_len} prepared ids; update run.py's truncation")
            arrays[f"{name}_{side}"], arrays[f"{name}_{side}_offsets"] = ragged(full)
        arrays[f"{name}_labels"] = encoded.labels.astype(np.int64)
        arrays[f"{name}_pair_ids"] = np.asarray(encoded.pair_ids, dtype=str)
        arrays[f"{name}_group_ids"] = np.asarray(encoded.group_ids, dtype=str)
    emb = recipe.embeddings
    matrix, oov = build_embedding_matrix(prepared.vocab, emb.source, emb.path, emb.dim, seed,
                                         emb.oov_init)
    arrays["embeddings"] = np.asarray(matrix, dtype=np.float32)
    task = recipe_task(recipe)
    for epoch in range(recipe.train.epochs):  # pairrepro's trainer counts epochs from 0
        plan = EpochPlan(data.train, recipe.train.batch_size, seed, epoch, task,
                         recipe.task.negatives,
                         max_negatives_per_query=recipe.task.max_negatives_per_query)
        rows = [plan.items[b] for b in plan.batches]
        arrays[f"epoch{epoch}_rows"], arrays[f"epoch{epoch}_offsets"] = ragged(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"inputs-seed-{seed}.npz"
    np.savez_compressed(path, **arrays)
    meta = {
        "seed": seed, "recipe": recipe.name, "dataset": recipe.data.dataset,
        "variant": recipe.data.variant, "max_len": max_len, "epochs": recipe.train.epochs,
        "batch_size": recipe.train.batch_size,
        "max_negatives_per_query": recipe.task.max_negatives_per_query,
        "no_positive": data.no_positive, "embedding_source": emb.source,
        "embedding_dim": emb.dim, "embedding_oov_init": emb.oov_init, "embedding_oov": int(oov),
        "prepared_dir": project_relative(prepared.root),  # no machine's folders in a record
        "prepared_sha256": prepared.file_sha256(f"{n}.parquet" for n in SPLITS),
        "git": git_info(),
    }
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for the inputs file")
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    args = parser.parse_args(argv)
    try:
        path = export(load_recipe(args.recipe), args.seed, args.out)
    except PairreproError as exc:
        print(f"error: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""),
              file=sys.stderr)
        return exc.exit_code
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
