"""The parquet files ``pairrepro fetch NAME --source hub`` writes; ``label`` is a label map
name (``""``: dropped by rule, null: not listed in ``[hub] labels``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from pairrepro.data.formats import LabelOptions, ReaderResult
from pairrepro.data.formats._common import LabelMapper, PairCollector, raw_file
from pairrepro.data.manifests import SplitSpec, VariantSpec
from pairrepro.errors import DataError

DROPPED_RULE = "hub label mapped to no class ([hub] labels, e.g. -1: no annotator majority)"
COLUMNS = ("pair_id", "left", "right", "label", "hub_label")
Options = LabelOptions


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    labels = LabelMapper(split, variant, [])
    out = PairCollector()
    for rel in split.files:
        path = raw_file(raw_root, rel)
        try:
            table = pq.read_table(path, columns=list(COLUMNS)).to_pydict()
        except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors subclass these
            raise DataError(f"{path}: not a parquet file written by fetch --source hub "
                            f"({exc})", hint=f"run: pairrepro fetch {raw_root.name} "
                            "--source hub --force") from exc
        rows = zip(*(table[c] for c in COLUMNS), strict=True)
        for number, (pair_id, left, right, name, hub_label) in enumerate(rows, start=1):
            if name == "":
                out.drop(DROPPED_RULE)
                continue
            label = None if name is None else labels(name)
            if label is None:
                out.bad(rel, number, f"hub label {hub_label!r} is not in the manifest's "
                        "[hub] labels" if name is None else f"label {name!r} is not in the "
                        "label map")
                continue
            if not isinstance(left, str) or not isinstance(right, str):
                out.bad(rel, number, "left/right is not a string")
                continue
            out.add(str(pair_id), str(pair_id), left, right, label)
    return out.result()
