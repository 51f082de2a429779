"""The canonical pair table as jsonl (``pair_id, group_id, left, right, label``): the
``synthetic`` dataset's format, and anyone's own data; ``label`` is a class index."""

from __future__ import annotations

from pathlib import Path

from pairrepro.data.formats import ReaderResult
from pairrepro.data.formats._common import PairCollector, json_lines
from pairrepro.data.manifests import SplitSpec, VariantSpec

FIELDS = ("pair_id", "group_id", "left", "right", "label")


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    n_labels = len(variant.options.label_map or ["0", "1"])
    out = PairCollector()
    for rel in split.files:
        rows = json_lines(raw_root, rel, out, lambda row, _: [row[key] for key in FIELDS])
        for number, (pair_id, group_id, left, right, label) in rows:
            if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < n_labels:
                out.bad(rel, number, f"label {label!r} is not a class index below {n_labels}")
                continue
            if not (isinstance(left, str) and isinstance(right, str)):
                out.bad(rel, number, "left/right is not a string")
                continue
            out.add(str(pair_id), str(group_id), left, right, label)
    return out.result()
