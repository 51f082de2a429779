"""Test helper: write prepared synthetic folders (whitespace tokens) without the fetch and
preprocess commands, so engine tests depend only on the prepared-data contract."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pairrepro.data.prepared import PAD, UNK, write_prepared
from pairrepro.data.synthetic import NLI_LABELS, generate_nli, generate_ranking


def _write(root: Path, splits: dict[str, pd.DataFrame], label_map: list[str], task: str) -> None:
    counts: dict[str, int] = {}
    for text in pd.concat([splits["train"].left, splits["train"].right]):
        for tok in text.split():
            counts[tok] = counts.get(tok, 0) + 1
    vocab = [PAD, UNK, *sorted(counts)]
    index = {tok: i for i, tok in enumerate(vocab)}
    out = {}
    for name, frame in splits.items():
        frame = frame.copy()
        for side in ("left", "right"):
            frame[f"{side}_ids"] = [[index.get(t, 1) for t in text.split()]
                                    for text in frame[side]]
        out[name] = frame
    write_prepared(root, out, vocab, [0, 0, *(counts[t] for t in vocab[2:])],
                   {"label_map": label_map, "task": task,
                    "splits": {k: len(v) for k, v in out.items()}})


def write_synthetic(home: Path, n_train: int = 600, n_eval: int = 150, n_queries: int = 120,
                    n_eval_queries: int = 40, negatives: int = 4) -> None:
    """``prepared/synthetic-nli`` and ``prepared/synthetic-ranking`` under ``home``."""
    nli = {"train": generate_nli(n_train, seed=1),
           "dev": generate_nli(n_eval, seed=1, split="dev"),
           "test": generate_nli(n_eval, seed=1, split="test")}
    _write(home / "prepared" / "synthetic-nli", nli, list(NLI_LABELS), "classification")
    ranking = {"train": generate_ranking(n_queries, negatives, seed=1),
               "dev": generate_ranking(n_eval_queries, negatives, seed=1, split="dev"),
               "test": generate_ranking(n_eval_queries, negatives, seed=1, split="test")}
    _write(home / "prepared" / "synthetic-ranking", ranking, ["0", "1"], "ranking")
