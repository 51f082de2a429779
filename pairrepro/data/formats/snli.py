"""SNLI 1.0 / MultiNLI jsonl (plain or gzipped): one JSON object per line.

Fields used: ``gold_label``, ``sentence1`` (left), ``sentence2`` (right), ``pairID``.
Pairs whose gold label is ``-`` (no majority among the annotators) are dropped and
counted, as every paper using SNLI does (dev 158, test 176 in SNLI 1.0).
"""

from __future__ import annotations

import json
from pathlib import Path

from pairrepro.data.formats import ReaderResult
from pairrepro.data.formats._common import LabelMapper, PairCollector, numbered_lines, raw_file
from pairrepro.data.manifests import SplitSpec, VariantSpec

LABELS = ["entailment", "neutral", "contradiction"]
NO_MAJORITY_RULE = "gold label '-' (no annotator majority)"


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    """Read the jsonl file(s) of one split into canonical pairs."""
    labels = LabelMapper(split, variant, LABELS)
    out = PairCollector()
    # raw_decode skips json.loads' Python-level wrappers (a third of the cost per line)
    decode = json.JSONDecoder().raw_decode
    for rel in split.files:
        path = raw_file(raw_root, rel)
        for number, line in numbered_lines(path):
            if not line.strip():
                out.bad(rel, number, "empty line")
                continue
            try:
                row, end = decode(line)
                if end != len(line) and line[end:].strip():
                    out.bad(rel, number, f"extra data after the JSON object at column {end + 1}")
                    continue
                gold = row["gold_label"]
                left, right = row["sentence1"], row["sentence2"]
                pair_id = str(row.get("pairID") or f"{split.name}-{number}")
            except json.JSONDecodeError as exc:
                out.bad(rel, number, f"not valid JSON: {exc.msg} at column {exc.colno}")
                continue
            except KeyError as exc:
                out.bad(rel, number, f"missing field {exc.args[0]!r}")
                continue
            except TypeError:
                out.bad(rel, number, "not a JSON object")
                continue
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
