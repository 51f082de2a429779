"""The data preflight trains on (:func:`preflight_data`) and whether the recipe's pretrained
vectors are here (:func:`embeddings_here`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pairrepro.config import Recipe
from pairrepro.data.prepared import PAD, UNK, PreparedDataset, is_prepared, load_prepared
from pairrepro.errors import DataError, PairreproError
from pairrepro.train.setup import TaskData, load_task_data, recipe_task

# (min, max) token lengths of (left, right) the synthetic stand-in draws per text, for timing
# (sources: docs/internals.md, "Preflight")
STAND_IN_LENGTHS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "snli": ((7, 21), (4, 12)),
    "multinli": ((10, 34), (5, 17)),  # rough: longer premises than SNLI
    "quora": ((6, 16), (6, 16)),  # rough: short questions
    "scitail": ((10, 24), (8, 16)),  # rough
    "ubuntu": ((40, 132), (8, 26)),
    "yahoo": ((5, 50), (5, 50)),
    "reuters_sc": ((4, 14), (4, 14)),  # rough: two clauses of an 8-28-word sentence
    "trecqa": ((6, 16), (15, 45)),  # rough
    "twitter_url": ((8, 18), (8, 18)),  # rough
}
DEFAULT_LENGTHS = ((8, 24), (8, 24))
STAND_IN_VOCAB = 30000  # words of the synthetic stand-in vocabulary


def _stand_in_dataset(recipe: Recipe, seed: int, pairs: int
                      ) -> tuple[PreparedDataset, str]:
    """Random words at the dataset's typical lengths, as a prepared dataset in memory."""
    from pairrepro.data.formats import yahoo_l4
    from pairrepro.data.manifests import load_manifest

    label_map: list[str] = ["0", "1"]
    lengths = STAND_IN_LENGTHS.get(recipe.data.dataset, DEFAULT_LENGTHS)
    try:
        manifest = load_manifest(recipe.data.dataset)
        label_map = list(manifest.label_map) or label_map
        options = manifest.variant(recipe.data.variant or None).options
        if isinstance(options, yahoo_l4.Options):  # a construction's own length filter
            declared = (options.lengths[0], options.lengths[1])
            lengths = (declared, declared)
    except PairreproError:
        pass
    rng = np.random.default_rng([seed, 2718])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, rng.integers(2, 11))) for _ in range(STAND_IN_VOCAB)}
    vocab = [PAD, UNK, *sorted(words - {PAD, UNK})]
    ranking = recipe_task(recipe).is_ranking
    per_group = 5 if ranking else 1
    rows = []
    for i in range(pairs):
        group = i // per_group
        if i % per_group == 0:
            left = rng.integers(2, len(vocab), rng.integers(lengths[0][0], lengths[0][1] + 1))
        right = rng.integers(2, len(vocab), rng.integers(lengths[1][0], lengths[1][1] + 1))
        label = int(i % per_group == 0) if ranking else int(rng.integers(len(label_map)))
        rows.append((f"s{i}", f"g{group}", left.tolist(), right.tolist(), label))
    frame = pd.DataFrame(rows, columns=["pair_id", "group_id", "left_ids", "right_ids", "label"])
    split = recipe.data.train_split
    prepared = PreparedDataset(root=Path("<stand-in>"), vocab=vocab,
                               train_counts=[0, 0, *[1000] * (len(vocab) - 2)],
                               stats={"label_map": label_map}, _splits={split: frame})
    note = (f"{recipe.data.dataset} is not prepared here: {pairs} pairs of random words, "
            f"lengths {lengths[0][0]}-{lengths[0][1]} / {lengths[1][0]}-{lengths[1][1]} "
            f"tokens, {len(vocab)}-word vocabulary (timing only)")
    return prepared, note


def preflight_data(recipe: Recipe, seed: int, stand_in: bool = False
                   ) -> tuple[Recipe, PreparedDataset, TaskData, dict[str, Any]]:
    """The training split, else a prepared stand-in (dev first), else (``stand_in``) random
    words: the recipe training on it, the prepared dataset, the data and a description."""
    d = recipe.data
    info: dict[str, Any] = {"dataset": d.dataset, "variant": d.variant, "stand_in": None,
                            "synthetic": False}
    if is_prepared(d.dataset, d.variant):
        prepared = load_prepared(d.dataset, d.variant or None)
        present = prepared.split_names
        order = [d.train_split, d.dev_split, *d.test_splits, *present]
        split = next((s for s in order if s in present), None)
        if split is None:
            raise DataError(f"{prepared.root} holds no split", hint="re-run pairrepro preprocess")
        if split != d.train_split:
            info["stand_in"] = (f"the training split {d.train_split!r} is not prepared here: "
                                f"split {split!r} stands in for it")
    elif stand_in:
        split = d.train_split
        prepared, info["stand_in"] = _stand_in_dataset(
            recipe, seed, max(4 * recipe.train.batch_size, 256))
        info["synthetic"] = True
    else:
        from pairrepro.data.prepared import data_status

        raise DataError(f"{d.dataset}{'/' + d.variant if d.variant else ''} is not prepared",
                        hint=f"{data_status(d.dataset, d.variant)[1]}; or pass --stand-in to "
                             "time the model on random words")
    run_recipe = recipe.with_changes(data={"train_split": split})
    _, data = load_task_data(run_recipe, seed, [split], prepared=prepared)
    info.update(split=split, pairs=len(data.train))
    return run_recipe, prepared, data, info


def embeddings_here(recipe: Recipe) -> str | None:
    """``None`` when the recipe's pretrained vectors can be read here, else why not."""
    emb = recipe.embeddings
    if emb.source == "glove-file" and not Path(emb.path).is_file():
        return f"{emb.path} is not here"
    if emb.source == "glove-6b-50d":
        from pairrepro.data.embeddings import glove_package_files

        try:
            glove_package_files()
        except PairreproError as exc:
            return exc.message
    return None
