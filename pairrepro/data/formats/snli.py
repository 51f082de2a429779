"""SNLI 1.0 / MultiNLI jsonl (plain or gzipped); gold label ``-`` (no majority) is dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pairrepro.data.formats import LabelOptions, ReaderResult
from pairrepro.data.formats._common import LabelMapper, PairCollector, json_lines
from pairrepro.data.manifests import SplitSpec, VariantSpec

LABELS = ["entailment", "neutral", "contradiction"]
NO_MAJORITY_RULE = "gold label '-' (no annotator majority)"
Options = LabelOptions


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    labels = LabelMapper(split, variant, LABELS)
    out = PairCollector()

    def fields(row: Any, number: int) -> tuple[Any, Any, Any, str]:
        return (row["gold_label"], row["sentence1"], row["sentence2"],
                str(row.get("pairID") or f"{split.name}-{number}"))

    for rel in split.files:
        for number, (gold, left, right, pair_id) in json_lines(raw_root, rel, out, fields):
            if gold == "-":
                out.drop(NO_MAJORITY_RULE)
                continue
            label = labels(gold)
            if label is None:
                out.bad(rel, number, f"unknown gold_label {gold!r}")
                continue
            if not isinstance(left, str) or not isinstance(right, str):
                out.bad(rel, number, "sentence1/sentence2 is not a string")
                continue
            out.add(pair_id, pair_id, left, right, label)
    return out.result()
