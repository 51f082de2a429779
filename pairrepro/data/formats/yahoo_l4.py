"""Yahoo! Answers Manner Questions (Webscope L4) -> ranking lists with BM25 negatives
(the construction: docs/datasets.md, "Yahoo! Answers")."""

from __future__ import annotations

import gzip
import html
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import AfterValidator, Field

from pairrepro.data.formats import MalformedRow, ReaderOptions, ReaderResult
from pairrepro.data.formats._common import split_options
from pairrepro.data.manifests import SplitSpec, VariantSpec, find_raw_file
from pairrepro.data.negatives import BM25Params, analyze, bm25_top_k, sample_negatives
from pairrepro.errors import ConfigError, DataError
from pairrepro.fileio import atomic_open

_BR_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SPACE_RE = re.compile(r"\s+")
_FORMAT_VERSION = 1


@dataclass
class L4Question:
    uri: str
    subject: str
    content: str
    best: str
    answers: list[str] = field(default_factory=list)


def clean_text(text: str | None) -> str:
    """Undo L4's markup: ``<br />`` (stored escaped) to spaces, HTML entities, whitespace runs."""
    if not text:
        return ""
    return _SPACE_RE.sub(" ", html.unescape(_BR_RE.sub(" ", text))).strip()


def iter_l4(path: Path, malformed: list[MalformedRow]) -> Iterator[L4Question]:
    """Stream the documents of an L4 ``.xml[.gz]`` file (one without ``<uri>`` is malformed)."""
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    with opener(path, "rb") as handle:
        try:
            for _, elem in ET.iterparse(handle, events=("end",)):
                if elem.tag != "document":
                    continue
                number += 1
                uri = (elem.findtext("uri") or "").strip()
                if not uri:
                    malformed.append(MalformedRow(str(path), 0, f"document #{number}: no <uri>"))
                else:
                    items = elem.iterfind("nbestanswers/answer_item")
                    answers = [clean_text(a.text) for a in items]
                    yield L4Question(uri, clean_text(elem.findtext("subject")),
                                     clean_text(elem.findtext("content")),
                                     clean_text(elem.findtext("bestanswer")), answers)
                elem.clear()  # keep memory flat on the 142k-document file
        except ET.ParseError as exc:
            line, column = exc.position
            raise DataError(f"{path}:{line}:{column}: not valid XML ({exc})",
                            hint="give the Webscope L4 manner.xml file as distributed "
                                 "(pairrepro fetch yahoo --from FILE)") from None
    if number == 0:
        raise DataError(f"{path}: no <document> elements: not a Webscope L4 file")


def _lengths(value: list[int]) -> list[int]:
    if len(value) != 2 or value[0] > value[1]:
        raise ValueError("expected [min, max] words with min <= max")
    return value


class Options(ReaderOptions):
    # questions whose question and best answer both have lo..hi words (negatives.analyze's)
    lengths: Annotated[list[int], AfterValidator(_lengths)] = Field(
        default_factory=lambda: [5, 50])
    question: Literal["subject", "subject+content"] = "subject"
    retrieval_query: Literal["best_answer", "question"] = "best_answer"  # the BM25 query
    # "the whole answer set" searched; kept_best: every candidate obeys the length filter
    answer_pool: Literal["kept_best", "all_best", "all_answers"] = "kept_best"
    bm25: BM25Params = BM25Params()  # Lucene's
    # a question-level split, the first part taking the rounding remainder
    split_ratios: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"train": 8, "dev": 1, "test": 1}, min_length=1)
    seed: int = 1


class SplitOptions(ReaderOptions):
    part: str | None = None  # the part of split_ratios it draws from (default: its name)
    negatives: Annotated[int, Field(ge=1)] = 4


@dataclass(frozen=True)
class _Construction:
    opts: Options
    splits: dict[str, tuple[str, int]]

    def as_json(self) -> str:
        ratios = {k: float(v) for k, v in self.opts.split_ratios.items()}
        return json.dumps({**self.opts.model_dump(), "format": _FORMAT_VERSION,
                           "split_ratios": ratios,
                           "splits": {k: list(v) for k, v in self.splits.items()}},
                          sort_keys=True)


def parse_options(variant: VariantSpec) -> _Construction:
    """The construction of a variant; checks what involves several tables."""
    where = f"yahoo variant {variant.name!r}"
    opts = split_options(None, variant, Options)
    splits = {}
    for name, spec in variant.splits.items():
        split = split_options(spec, variant, SplitOptions)
        part = split.part or name
        if part not in opts.split_ratios:
            raise ConfigError(f"{where}: splits.{name}: part {part!r} is not in split_ratios",
                              hint=f"parts: {', '.join(opts.split_ratios)}")
        splits[name] = (part, split.negatives)
    if not splits:
        raise ConfigError(f"{where}: no splits")
    return _Construction(opts, splits)


def split_parts(num: int, ratios: dict[str, float],
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random split by ratio: indices per part; the first part gets the remainder."""
    order = rng.permutation(num)
    total = sum(ratios.values())
    rest = [int(num * ratio / total) for ratio in list(ratios.values())[1:]]
    bounds = np.cumsum([0, num - sum(rest), *rest])
    return {name: np.sort(order[bounds[i]:bounds[i + 1]]) for i, name in enumerate(ratios)}


def _source_file(raw_root: Path, variant: VariantSpec) -> Path:
    files = [f for spec in variant.splits.values() for f in spec.files]
    for rel in dict.fromkeys(files or ["manner.xml.gz", "manner.xml"]):
        if (path := find_raw_file(raw_root, rel)) is not None:
            return path
    raise DataError(f"the Yahoo! Answers L4 file is not in {raw_root} (looked for "
                    f"{', '.join(files)})", hint="request Webscope L4 (see the manifest's "
                    "licence), then: pairrepro fetch yahoo --from /path/to/manner.xml.gz")


def candidates_path(raw_root: Path, variant: str) -> Path:
    return raw_root / "candidates" / f"{variant}.tsv"


def read_variant(raw_root: Path, variant: VariantSpec) -> dict[str, ReaderResult]:
    construction = parse_options(variant)
    opts = construction.opts
    source = _source_file(raw_root, variant)
    malformed: list[MalformedRow] = []
    dropped: Counter[str] = Counter()
    lo, hi = opts.lengths
    kept: list[L4Question] = []
    pool: dict[str, str] = {}  # answer id -> text, every answer of the pool
    seen: set[str] = set()
    for doc in iter_l4(source, malformed):
        if doc.uri in seen:
            malformed.append(MalformedRow(str(source), 0, f"uri {doc.uri}: duplicate document"))
            continue
        seen.add(doc.uri)
        question = doc.subject if opts.question == "subject" else f"{doc.subject} {doc.content}"
        doc.subject = question.strip()
        rule = ("no best answer" if not doc.best
                else f"question length outside {lo}-{hi} words"
                if not lo <= len(analyze(doc.subject)) <= hi
                else f"best answer length outside {lo}-{hi} words"
                if not lo <= len(analyze(doc.best)) <= hi else "")
        if rule:
            dropped[rule] += 1
        else:
            kept.append(doc)
        if doc.best and (not rule or opts.answer_pool != "kept_best"):
            pool[doc.uri] = doc.best
        if opts.answer_pool == "all_answers":
            pool.update((f"{doc.uri}.{k}", text) for k, text in enumerate(doc.answers)
                        if text and text != doc.best)
    if not kept:
        raise DataError(f"{source}: no question passed the length filter {lo}-{hi}")

    cand_file = candidates_path(raw_root, variant.name)
    if cand_file.is_file():
        lists = _load_candidates(cand_file, construction)
    else:
        lists = _sample_lists(kept, pool, construction, dropped)
        _write_candidates(cand_file, construction, lists)
    questions = {doc.uri: doc for doc in kept}
    # the filter's counts and malformed documents are reported once, with the first split
    first = next(iter(lists))
    split_rules = {rule for rule in dropped if rule.split(":")[0] in lists}
    shared = {f"before the split: {rule}": n for rule, n in dropped.items()
              if rule not in split_rules}
    results = {}
    for split, rows in lists.items():
        records = []
        for qid, aid, label in rows:
            if qid not in questions or aid not in pool:
                raise DataError(f"{cand_file}: question {qid!r} or answer {aid!r} is not in "
                                f"{source} after filtering",
                                hint="the candidate lists were built from a different L4 file; "
                                     f"delete {cand_file} to sample new lists")
            records.append((f"{qid}:{aid}", qid, questions[qid].subject, pool[aid], label))
        pairs = pd.DataFrame(records, columns=["pair_id", "group_id", "left", "right", "label"]
                             ).astype({"label": "int64"})
        own = {rule: n for rule, n in dropped.items() if rule.split(":")[0] == split}
        results[split] = (ReaderResult(pairs, list(malformed), {**shared, **own})
                          if split == first else ReaderResult(pairs, [], own))
    return results


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    return read_variant(raw_root, variant)[split.name]


def _sample_lists(kept: list[L4Question], pool: dict[str, str], construction: _Construction,
                  dropped: Counter[str]) -> dict[str, list[tuple[str, str, int]]]:
    opts = construction.opts
    pool_ids, pool_texts = list(pool), list(pool.values())
    split_seed, sample_seed = np.random.SeedSequence(opts.seed).spawn(2)
    parts = split_parts(len(kept), opts.split_ratios, np.random.default_rng(split_seed))
    pool_index = {aid: i for i, aid in enumerate(pool_ids)}
    positives = np.array([pool_index[doc.uri] for doc in kept])
    queries = [analyze(doc.best if opts.retrieval_query == "best_answer" else doc.subject)
               for doc in kept]
    # One extra result so that removing the positive still leaves top_k candidates.
    params = opts.bm25.model_copy(update={"top_k": opts.bm25.top_k + 1})
    found, _ = bm25_top_k(queries, [analyze(t) for t in pool_texts], params, n_threads=2)
    found = found[:, : opts.bm25.top_k + 1]
    # Keep at most top_k after removing the positive (it is not always in the list).
    found = np.where(found == positives[:, None], -1, found)
    valid_rank = np.cumsum(found >= 0, axis=1)
    found = np.where(valid_rank > opts.bm25.top_k, -1, found)
    text_keys, _ = pd.factorize(pd.Series(pool_texts).str.lower())
    most = max(neg for _, neg in construction.splits.values())
    negatives = sample_negatives(found, positives, most, sample_seed, text_keys)
    lists: dict[str, list[tuple[str, str, int]]] = {}
    for split, (part, num_neg) in construction.splits.items():
        rows: list[tuple[str, str, int]] = []
        for i in parts[part]:
            negs = negatives[i, :num_neg]
            if (negs < 0).any():
                rule = f"{split}: fewer than {num_neg} BM25 results besides the positive"
                dropped[rule] += 1
                continue
            qid = kept[i].uri
            rows.append((qid, qid, 1))
            rows.extend((qid, pool_ids[j], 0) for j in negs)
        lists[split] = rows
    return lists


def _write_candidates(path: Path, opts: _Construction, lists: dict[str,
                      list[tuple[str, str, int]]]) -> None:
    with atomic_open(path) as handle:
        handle.write(f"# options: {opts.as_json()}\n")
        handle.write("split\tgroup_id\tanswer_id\tlabel\n")
        for split, rows in lists.items():
            for qid, aid, label in rows:
                handle.write(f"{split}\t{qid}\t{aid}\t{label}\n")


def _load_candidates(path: Path, opts: _Construction) -> dict[str, list[tuple[str, str, int]]]:
    with open(path, encoding="utf-8") as handle:
        header = handle.readline()
        if not header.startswith("# options: "):
            raise DataError(f"{path}:1: missing the '# options: {{...}}' header line")
        if json.loads(header[len("# options: "):]) != json.loads(opts.as_json()):
            raise DataError(f"{path}: these lists were built with other options than the "
                            "manifest's", hint=f"delete {path} to sample new lists, or restore "
                            "the options in its header")
        handle.readline()
        lists: dict[str, list[tuple[str, str, int]]] = {name: [] for name in opts.splits}
        for number, line in enumerate(handle, 3):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 4 or fields[0] not in lists or fields[3] not in ("0", "1"):
                raise DataError(f"{path}:{number}: expected split, group_id, answer_id, label")
            lists[fields[0]].append((fields[1], fields[2], int(fields[3])))
    return lists
