"""Twitter URL paraphrase corpus (Lan et al. 2017). Per-split option ``format``:

* ``raw``, ``Twitter_URL_Corpus_{train,test}.txt``: ``sentence1<TAB>sentence2<TAB>(n,6)<TAB>url``;
  Lan et al.'s rule: ``n <= 2`` -> 0, ``n >= 4`` -> 1, ``n == 3`` discarded.
* ``toks``, castorini's ``a.toks``/``b.toks``/``sim.txt`` (lower-cased, tokenised).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pairrepro.data.formats import ReaderOptions, ReaderResult
from pairrepro.data.formats._common import (
    PairCollector,
    numbered_lines,
    raw_file,
    split_options,
    toks_lines,
)
from pairrepro.data.manifests import SplitSpec, VariantSpec

AMBIGUOUS_RULE = "label (3,6): annotators split, discarded by Lan et al."
BLANK_RULE = "blank line"
_VOTES = re.compile(r"\((\d),\s*(\d)\)")


class Options(ReaderOptions):
    format: Literal["raw", "toks"] = "raw"


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    if split_options(split, variant, Options).format == "toks":
        return _read_toks(raw_root, split)
    return _read_raw(raw_root, split)


def _read_raw(raw_root: Path, split: SplitSpec) -> ReaderResult:
    out = PairCollector()
    for rel in split.files:
        stem = Path(rel).stem
        for number, line in numbered_lines(raw_file(raw_root, rel)):
            if not line.strip():
                out.drop(BLANK_RULE)
                continue
            fields = line.split("\t")
            # a few lines have an empty 4th field before the url: tolerate empty extras only
            if len(fields) < 3 or (len(fields) > 4 and any(f for f in fields[3:-1])):
                out.bad(rel, number, f"expected 4 tab-separated fields, found {len(fields)}")
                continue
            match = _VOTES.fullmatch(fields[2].strip())
            if match is None:
                out.bad(rel, number, f"label {fields[2]!r} is not of the form (n,6)")
                continue
            votes, total = int(match.group(1)), int(match.group(2))
            if total != 6 or votes > 6:
                out.bad(rel, number, f"label {fields[2]!r}: expected n out of 6 annotators")
                continue
            if votes == 3:
                out.drop(AMBIGUOUS_RULE)
                continue
            pair_id = f"{stem}-{number}"
            out.add(pair_id, pair_id, fields[0].strip(), fields[1].strip(), int(votes >= 4))
    return out.result()


def _read_toks(raw_root: Path, split: SplitSpec) -> ReaderResult:
    out = PairCollector()
    names = ("a.toks", "b.toks", "sim.txt")
    for number, (left, right), label in toks_lines(raw_root, split, names, "twitter_url", out):
        pair_id = f"{split.name}-{number}"
        out.add(pair_id, pair_id, left, right, label)
    return out.result()
