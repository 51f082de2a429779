"""Ubuntu Dialogue Corpus v1 (Lowe et al. 2015), the csv files of the official scripts,
already tokenised (``__eou__``/``__eot__`` end utterances and turns).

``train.csv`` (``Context,Utterance,Label``: one pair per row and group) and ``valid.csv``,
``test.csv`` (``Context,Ground Truth Utterance,Distractor_0..8``: a group per row). Split option
``format = "wu_txt"`` reads Wu et al. 2016's ``label<TAB>turn<TAB>...<TAB>response`` lines,
``group_size`` consecutive lines a group.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from pairrepro.data.formats import ReaderOptions, ReaderResult
from pairrepro.data.formats._common import (
    PairCollector,
    TextFile,
    numbered_lines,
    raw_file,
    split_options,
)
from pairrepro.data.manifests import SplitSpec, VariantSpec

TRAIN_HEADER = ["Context", "Utterance", "Label"]


class Options(ReaderOptions):
    format: Literal["csv", "wu_txt"] = "csv"
    group_size: Annotated[int, Field(ge=1)] = 1  # wu_txt: consecutive lines per group


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    out = PairCollector()
    opts = split_options(split, variant, Options)
    if opts.format == "wu_txt":
        _read_wu(raw_root, split, opts.group_size, out)
        return out.result()
    csv.field_size_limit(1 << 24)  # some contexts are long
    for rel in split.files:
        stem = Path(rel).stem
        with TextFile(raw_file(raw_root, rel)) as handle:
            reader = csv.reader(handle)
            header = next(reader, None) or []
            train = header == TRAIN_HEADER
            if not train and not (header[:2] == ["Context", "Ground Truth Utterance"] and all(
                    h.startswith("Distractor_") for h in header[2:])):
                out.bad(rel, 1, f"unexpected header {header[:4]}: expected {TRAIN_HEADER} or "
                                "Context,Ground Truth Utterance,Distractor_0..")
                continue
            for fields in reader:
                number = reader.line_num
                group = f"{stem}-{number}"
                if len(fields) != len(header):
                    out.bad(rel, number, f"expected {len(header)} fields, found {len(fields)}")
                    continue
                if not train:  # the true response, then the distractors
                    for i, response in enumerate(fields[1:]):
                        out.add(f"{group}-{i}", group, fields[0], response, int(i == 0))
                    continue
                try:
                    label = int(float(fields[2]))
                except ValueError:
                    label = -1
                if label not in (0, 1):
                    out.bad(rel, number, f"label {fields[2]!r} is not 0 or 1")
                    continue
                out.add(group, group, fields[0], fields[1], label)
    return out.result()


def _read_wu(raw_root: Path, split: SplitSpec, group_size: int, out: PairCollector) -> None:
    for rel in split.files:
        stem = Path(rel).stem
        index = 0
        for number, line in numbered_lines(raw_file(raw_root, rel)):
            fields = line.split("\t")
            if len(fields) < 3 or fields[0] not in ("0", "1"):
                out.bad(rel, number, "expected label<TAB>turn...<TAB>response with label 0/1")
                continue
            group = f"{stem}-{index // group_size}"
            out.add(f"{stem}-{number}", group, " __eot__ ".join(fields[1:-1]), fields[-1],
                    int(fields[0]))
            index += 1
        if index % group_size:
            out.bad(rel, index, f"{index} pairs is not a multiple of the group size {group_size}")
