"""SciTail v1.1 (Khot et al. 2018). Per-split option ``format``: ``tsv``, the official
``scitail_1.0_{train,dev,test}.tsv`` (``premise<TAB>hypothesis<TAB>label``, ``entails`` or
``neutral``); ``csv``, a derived ``premise,hypothesis,label`` copy with a header (the mirror's
spells ``entailment``/``not_entailment``: map them with ``label_aliases``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pairrepro.data.formats import LabelOptions, ReaderResult
from pairrepro.data.formats._common import (
    LabelMapper,
    PairCollector,
    TextFile,
    numbered_lines,
    raw_file,
    split_options,
)
from pairrepro.data.manifests import SplitSpec, VariantSpec

LABELS = ["entails", "neutral"]


class Options(LabelOptions):
    format: Literal["tsv", "csv"] = "tsv"


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    fmt = split_options(split, variant, Options).format
    labels = LabelMapper(split, variant, LABELS)
    out = PairCollector()
    for rel in split.files:
        path = raw_file(raw_root, rel)
        stem = Path(rel).stem
        rows = _csv_rows(path, rel, out) if fmt == "csv" else (
            (n, line.split("\t")) for n, line in numbered_lines(path))
        for number, fields in rows:
            if len(fields) != 3:
                out.bad(rel, number, f"expected 3 fields, found {len(fields)}")
                continue
            left, right, name = fields
            label = labels(name.strip())
            if label is None:
                out.bad(rel, number, f"unknown label {name!r} (labels: {labels.names})")
                continue
            pair_id = f"{stem}-{number}"
            out.add(pair_id, pair_id, left, right, label)
    return out.result()


def _csv_rows(path: Path, rel: str, out: PairCollector) -> Iterator[tuple[int, list[str]]]:
    with TextFile(path) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != ["premise", "hypothesis", "label"]:
            out.bad(rel, 1, f"header {header} is not premise,hypothesis,label")
            return
        for fields in reader:
            # csv reports the line where the record ends; records may span lines
            yield reader.line_num, fields
