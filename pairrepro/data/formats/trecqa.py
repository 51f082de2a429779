"""TrecQA answer selection (Wang et al. 2007), from any of its three published layouts.

Per-split option ``format``: ``jacana_xml`` (the pseudo-XML ``*.manual-edit.xml``, read line
by line as its HTML characters are not escaped), ``jsonl`` (lexdecomp's TRAIN-ALL lines) or
``toks`` (castorini's ``a.toks``/``b.toks``/``sim.txt``/``id.txt``). Option ``clean`` drops
every question without both a positive and a negative answer (Rao et al. 2016); questions
without any candidate are always dropped (:data:`EMPTY_GROUP_RULE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pairrepro.data.formats import ReaderOptions, ReaderResult
from pairrepro.data.formats._common import (
    EMPTY_GROUP_RULE,
    PairCollector,
    json_lines,
    numbered_lines,
    raw_file,
    split_options,
    toks_lines,
)
from pairrepro.data.manifests import SplitSpec, VariantSpec

CLEAN_RULE = "clean: questions without both a positive and a negative answer"
CLEAN_PAIRS_RULE = "clean: candidate pairs of those questions"
_QID = re.compile(r"""id=['"]([^'"]+)['"]""")
_TOKS = ("a.toks", "b.toks", "id.txt", "sim.txt")


class Options(ReaderOptions):
    format: Literal["jacana_xml", "jsonl", "toks"] = "jacana_xml"
    clean: bool = False  # drop questions without both a positive and a negative answer


@dataclass
class _Question:
    qid: str
    text: str
    candidates: list[tuple[str, int]] = field(default_factory=list)


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    opts = split_options(split, variant, Options)
    fmt, clean = opts.format, opts.clean
    out = PairCollector()
    if fmt == "toks":
        questions = _read_toks(raw_root, split, out)
    else:
        questions = (q for rel in split.files for q in
                     (_read_jacana if fmt == "jacana_xml" else _read_jsonl)(raw_root, rel, out))
    for q in questions:
        if not q.candidates:
            out.drop(EMPTY_GROUP_RULE)
            continue
        if clean and {label for _, label in q.candidates} != {0, 1}:
            out.drop(CLEAN_RULE)
            out.drop(CLEAN_PAIRS_RULE, len(q.candidates))
            continue
        for i, (answer, label) in enumerate(q.candidates):
            out.add(f"{q.qid}-{i}", q.qid, q.text, answer, label)
    return out.result()


def _read_jacana(raw_root: Path, rel: str, out: PairCollector) -> Iterator[_Question]:
    current: _Question | None = None
    expect: str | None = None  # the block whose token line comes next
    start = 0
    for number, line in numbered_lines(raw_file(raw_root, rel)):
        if expect is not None:
            if current is None:  # reported at its tag
                pass
            elif not line or line.startswith("<"):
                out.bad(rel, number, f"<{expect}> block has no token line")
            elif expect == "question":
                current.text = " ".join(line.split("\t"))
            else:
                current.candidates.append((" ".join(line.split("\t")), int(expect == "positive")))
            expect = None
            continue
        if line.startswith("<QApairs"):
            if current is not None:
                out.bad(rel, start, "<QApairs> is not closed before the next one")
                yield current
            match = _QID.search(line)
            if match is None:
                out.bad(rel, number, "<QApairs> without an id")
            qid = match.group(1) if match else f"line{number}"
            current, start = _Question(qid, ""), number
        elif line in ("<question>", "<positive>", "<negative>"):
            if current is None:
                out.bad(rel, number, f"{line} outside a <QApairs> block")
            expect = line[1:-1]
        elif line == "</QApairs>":
            if current is None:
                out.bad(rel, number, "</QApairs> without an opening tag")
            elif not current.text:
                out.bad(rel, start, f"question {current.qid!r} has no <question> text")
            else:
                yield current
            current = None
    if current is not None:
        out.bad(rel, start, f"question {current.qid!r}: file ends before </QApairs>")


def _read_jsonl(raw_root: Path, rel: str, out: PairCollector) -> Iterator[_Question]:
    stem = Path(rel).name.split(".")[0]

    def question(row: Any, number: int) -> _Question:
        q = _Question(f"{stem}-q{number}", row["question"])
        for cand in row["candidates"]:
            label = cand["label"]
            if label not in (0, 1):
                raise ValueError(f"candidate label {label!r} is not 0 or 1")
            q.candidates.append((cand["sentence"], int(label)))
        return q

    yield from (q for _, q in json_lines(raw_root, rel, out, question))


def _read_toks(raw_root: Path, split: SplitSpec, out: PairCollector) -> Iterator[_Question]:
    current: _Question | None = None
    for _, (question, answer, qid), label in toks_lines(raw_root, split, _TOKS, "trecqa", out):
        if current is None or current.qid != qid:
            if current is not None:
                yield current
            current = _Question(qid, question)
        current.candidates.append((answer, label))
    if current is not None:
        yield current
