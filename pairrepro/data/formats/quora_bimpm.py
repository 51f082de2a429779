"""Quora question pairs, BiMPM partition (Wang et al. 2017): ``label<TAB>q1<TAB>q2<TAB>id``
(``id`` is the ``pair_id``, the line number where it repeats)."""

from __future__ import annotations

from pathlib import Path

from pairrepro.data.formats import ReaderResult
from pairrepro.data.formats._common import PairCollector, numbered_lines, raw_file
from pairrepro.data.manifests import SplitSpec, VariantSpec


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    out = PairCollector()
    seen: set[str] = set()
    for rel in split.files:
        for number, line in numbered_lines(raw_file(raw_root, rel)):
            fields = line.split("\t")
            if len(fields) != 4:
                out.bad(rel, number, f"expected 4 tab-separated fields, found {len(fields)}")
                continue
            label_text, left, right, pair_id = fields
            if label_text not in ("0", "1"):
                out.bad(rel, number, f"label {label_text!r} is not 0 or 1")
                continue
            if pair_id in seen or not pair_id:
                pair_id = f"{split.name}-{number}"
            seen.add(pair_id)
            out.add(pair_id, pair_id, left, right, int(label_text))
    return out.result()
