"""``preprocess``: raw files -> tokenised pair tables, vocabulary and statistics
(tokenisation and vocabulary order: docs/datasets.md, "Prepared data")."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd
import pyarrow as pa

from pairrepro import __version__, fileio, paths
from pairrepro.data.formats import ReaderResult, get_reader
from pairrepro.data.formats._common import EMPTY_GROUP_RULE, take_read_hashes
from pairrepro.data.manifests import (
    Holdout,
    Manifest,
    TokenizerName,
    VariantSpec,
    find_raw_file,
    load_manifest,
    missing_files,
)
from pairrepro.data.prepared import PAD, UNK, write_prepared
from pairrepro.errors import ChecksumError, DataError

#: Words (with PTB-style ``n't`` split off), clitics ``'s 're 'll ...``, single symbols.
TOKEN_PATTERN = r"\w+(?=n't\b)|n't\b|'\w+|\w+|[^\w\s]"
TOKENIZERS: tuple[TokenizerName, ...] = get_args(TokenizerName)
#: A number token as TRAIN-ALL's normalisation saw it (``1997``, ``50,000``, ``3.5``; not
#: ``1980s``, ``.08``, ``1/2``).
NUMBER_PATTERN = r"\d+(?:,\d{3})*(?:\.\d+)?"
_SPACE_OUT_SYMBOLS = str.maketrans({
    c: f" {c} " for c in map(chr, range(128)) if not re.fullmatch(r"[\w\s]", c)})
MAX_MALFORMED_IN_STATS = 1000
_FINDALL = re.compile(TOKEN_PATTERN).findall
_IS_NUMBER = re.compile(NUMBER_PATTERN).fullmatch
#: A split's flat left ids, left lengths, right ids, right lengths.
_Encoded = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclasses.dataclass
class Tokenizer:
    kind: TokenizerName = "regex"
    lowercase: bool = True
    numbers: str = ""  # placeholder for number tokens ("" keeps them)

    def split(self, text: str) -> list[str]:
        tokens = self._tokens(text.lower() if self.lowercase else text)
        if self.numbers:
            return [self.numbers if _IS_NUMBER(t) else t for t in tokens]
        return tokens

    def _tokens(self, text: str) -> list[str]:
        if self.kind == "whitespace":
            return text.split()
        # same tokens, faster: without an apostrophe the pattern is \w+|[^\w\s]
        if "'" not in text and text.isascii():
            return text.translate(_SPACE_OUT_SYMBOLS).split()
        return _FINDALL(text)

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokenizer": self.kind, "lowercase": self.lowercase}
        if self.numbers:
            out["numbers"] = {"pattern": NUMBER_PATTERN, "placeholder": self.numbers}
        out["pattern"] = (TOKEN_PATTERN if self.kind == "regex"
                          else "str.split() (source is published tokenised)")
        return out

    def encode(self, texts: Iterable[str], index: defaultdict[str, int]
               ) -> tuple[np.ndarray, np.ndarray]:
        """Flat int32 ids of the tokens (``index``'s: a new token gets the next id) and the
        lengths."""
        flat = array("i")
        lengths = array("i")
        extend, append, lookup, split = flat.extend, lengths.append, index.__getitem__, self.split
        for text in texts:
            tokens = split(text)
            append(len(tokens))
            extend(map(lookup, tokens))
        return np.frombuffer(flat, dtype=np.int32), np.frombuffer(lengths, dtype=np.int32)


def _variant_with_labels(manifest: Manifest, variant: VariantSpec) -> VariantSpec:
    if "label_map" in variant.options.model_fields_set:
        return variant
    options = variant.options.model_copy(update={"label_map": list(manifest.label_map)})
    return dataclasses.replace(variant, options=options)


def _check_expected(name: str, split: str, expected: dict[str, Any], frame: pd.DataFrame,
                    result: ReaderResult, summary: dict[str, Any]) -> None:
    actual: dict[str, Any] = {
        "pairs": summary["pairs"],
        "groups": summary["groups"],
        "questions": summary["groups"] + result.dropped.get(EMPTY_GROUP_RULE, 0),
        "positive": int((frame["label"] == 1).sum()),
        "labels": summary["labels"],
    }
    for key, want in expected.items():
        got = actual[key]
        if key == "labels":
            got = {k: got.get(k, 0) for k in want}
        if got != want:
            raise DataError(f"{name}: split {split!r}: expected {key} = {want}, found {got}",
                            hint="the raw files differ from the published release; re-fetch "
                                 f"them (pairrepro fetch {name} --force) or check the "
                                 "manifest's expected counts")


def _counts(frame: pd.DataFrame, label_map: list[str]) -> dict[str, Any]:
    labels = frame["label"].to_numpy()
    counts = np.bincount(labels, minlength=len(label_map)) if labels.size else []
    return {"pairs": len(frame), "groups": int(frame["group_id"].nunique()),
            "labels": {(label_map[i] if i < len(label_map) else str(i)): int(c)
                       for i, c in enumerate(counts)}}


def _split_off_holdout(name: str, results: dict[str, ReaderResult], holdout: Holdout,
                       spec: VariantSpec, label_map: list[str]) -> dict[str, ReaderResult]:
    """Carve a dev split out of a published one (seeded), after checking the source's counts."""
    source, target = holdout.from_, holdout.to
    if source not in results:
        return results
    frame = results[source].pairs
    _check_expected(name, source, spec.splits[source].expected, frame, results[source],
                    _counts(frame, label_map))
    keys = frame["left" if holdout.by == "left" else "group_id"]
    groups = keys.unique()
    rng = np.random.default_rng(holdout.seed)
    chosen = set(rng.permutation(groups)[: round(len(groups) * holdout.fraction)])
    in_target = keys.isin(chosen).to_numpy()
    whole = " by first text" if holdout.by == "left" else ""
    moved = {**results[source].dropped,
             f"moved to {target!r} (held out{whole}, seed {holdout.seed})":
             int(in_target.sum())}
    kept = dataclasses.replace(results[source], pairs=frame[~in_target].reset_index(drop=True),
                               dropped=moved)
    derived = ReaderResult(pairs=frame[in_target].reset_index(drop=True))
    return {**results, source: kept, target: derived}


def _source_hashes(manifest: Manifest, raw_root: Path, files: Iterable[str]
                   ) -> tuple[dict[str, str], list[str]]:
    """sha256 of every raw file used and the files no pin verified; a fetched file changed
    since is a :class:`ChecksumError` (exit 5)."""
    from pairrepro.data.fetch_record import read_record

    read = take_read_hashes()
    recorded = {e.get("path"): e for e in (read_record(manifest.name) or {}).get("files", [])
                if isinstance(e, dict)}
    out: dict[str, str] = {}
    unverified: list[str] = []
    for rel in sorted(set(files)):
        path = find_raw_file(raw_root, rel)
        if path is None:
            continue
        key = path.relative_to(raw_root).as_posix()
        out[key] = sha = read[path][0] if path in read else fileio.sha256_file(path)
        entry = recorded.get(key)
        if entry is None:  # put there by hand, not by fetch: used, but never called verified
            unverified.append(key)
            continue
        pin = manifest.pin(key)
        for expected, what in ((pin, f"pinned in {manifest.source}"),
                               (entry.get("sha256"), "recorded by fetch")):
            if expected and sha != expected:
                raise ChecksumError(
                    f"{path}: the bytes read have sha256 {sha}, not the {expected} {what}",
                    hint=f"the raw file changed after fetch; run: pairrepro fetch "
                         f"{manifest.name} --force (or --verify to re-check what is there)")
        if not (pin and entry.get("verified")):
            unverified.append(key)
    return out, unverified


def _ids_array(flat: np.ndarray, lengths: np.ndarray, remap: np.ndarray
               ) -> pd.api.extensions.ExtensionArray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = remap[flat] if flat.size else np.zeros(0, dtype=np.int32)
    arr = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.int32()))
    arr = arr.cast(pa.list_(pa.int32()))
    return pd.array(arr, dtype=pd.ArrowDtype(pa.list_(pa.int32())))


@contextlib.contextmanager
def _steps(enabled: bool) -> Iterator[Callable[[str], None]]:
    """A rich progress display of the preprocessing steps (a no-op one when not ``enabled``)."""
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    from pairrepro.console import live_progress

    with live_progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                       enabled=enabled) as progress:
        task = progress.add_task("preprocess", total=None)
        yield lambda msg: progress.update(task, description=msg)


def _link_default(name: str, variant: str) -> None:
    """Point ``prepared/<name>`` at the default variant's folder."""
    link = paths.prepared_dir(name)
    if link.exists() and not link.is_symlink():
        return  # a real folder from an older layout: leave it alone
    tmp = link.with_name(f".{link.name}.link.partial")
    tmp.unlink(missing_ok=True)
    os.symlink(f"{name}-{variant}", tmp, target_is_directory=True)
    os.replace(tmp, link)


def prepare_dataset(name: str, variant: str | None = None, strict: bool = False,
                    progress: bool = True) -> dict[str, Any]:
    """Preprocess one dataset variant; its ``stats.json``. A :class:`DataError` when no raw
    data is here, counts are not the ``expected``, or with ``strict`` a row is malformed."""
    started = time.perf_counter()
    manifest = load_manifest(name)
    manifest.require_published()
    spec = manifest.variant(variant)
    label_map = list(spec.options.label_map or manifest.label_map)
    raw_root = paths.raw_dir(name)
    missing = {split: absent for split, files in spec.splits.items()
               if (absent := missing_files(raw_root, files.files))}
    present = [split for split in spec.splits if split not in missing]
    if not present:
        from_hub = spec.options.reader == "hub_parquet"
        raise DataError(f"no raw data for {name!r} (variant {spec.name!r}) in {raw_root}",
                        hint=f"run: pairrepro fetch {name} --source hub  (offline: --from DIR, "
                             "a local copy of the hub repository)" if from_hub else
                             f"run: pairrepro fetch {name}  (with --mirror DIR or --from PATH "
                             "offline)")
    reader_name = spec.options.reader or manifest.reader  # the hub variant has its own
    reader_variant = _variant_with_labels(manifest, spec)
    tokenizer = Tokenizer(spec.options.tokenizer, spec.options.lowercase, spec.options.numbers)

    take_read_hashes()  # forget files read before: the hashes below are this run's
    with _steps(progress) as step:
        results = _read_splits(name, get_reader(reader_name), raw_root, reader_variant,
                               present, step)
        sources, unverified = _source_hashes(manifest, raw_root,
                                             (f for s in present for f in spec.splits[s].files))
        malformed = [{"split": split, **dataclasses.asdict(row)}
                     for split, result in results.items() for row in result.malformed]
        if strict and malformed:
            first = malformed[0]
            raise DataError(f"{name}: {len(malformed)} malformed row(s); first: {first['file']} "
                            f"line {first['line']}: {first['reason']}",
                            hint="fix or re-fetch the file, or run without --strict to skip "
                                 "and report them")
        if spec.options.holdout:
            results = _split_off_holdout(name, results, spec.options.holdout, spec, label_map)

        index: defaultdict[str, int] = defaultdict()
        index.default_factory = index.__len__  # provisional ids, in order of first appearance
        encoded: dict[str, _Encoded] = {}
        summaries: dict[str, dict[str, Any]] = {}
        for split, result in results.items():
            step(f"{name}: tokenising {split} ({len(result.pairs):,} pairs)")
            encoded[split], summaries[split] = _encode_split(name, split, result, tokenizer,
                                                             index, spec, label_map)

        step(f"{name}: building the vocabulary")
        vocab, vocab_counts, remap, train_counts = _build_vocab(list(index), encoded,
                                                                spec.options.vocab_split)

        step(f"{name}: writing")
        for split, (left, left_len, right, right_len) in encoded.items():
            results[split].pairs["left_ids"] = _ids_array(left, left_len, remap)
            results[split].pairs["right_ids"] = _ids_array(right, right_len, remap)

        stats: dict[str, Any] = {
            "dataset": name,
            "variant": spec.name,
            "description": spec.options.description,
            "task": spec.options.task or manifest.task,
            "label_map": label_map,
            "splits": summaries,
            "missing_splits": missing,
            "vocab_size": len(vocab),
            "vocab_split": (spec.options.vocab_split if spec.options.vocab_split in results
                            else None),
            "train_vocab_size": int((train_counts > 0).sum()) + 2,
            "tokenisation": tokenizer.settings(),
            "lexical_only": spec.options.lexical_only,
            "malformed_count": len(malformed),
            "malformed": malformed[:MAX_MALFORMED_IN_STATS],
            "dropped": {split: dict(r.dropped) for split, r in results.items()},
            "sources": sources,
            "unverified_sources": unverified,
            "reader": reader_name,
            "pairrepro_version": __version__,
        }
        root = paths.prepared_dir(name, spec.name)
        frames = {split: result.pairs for split, result in results.items()}
        stats["files"] = write_prepared(root, frames, vocab, vocab_counts, stats)
        if spec.name == manifest.variant(None).name:
            _link_default(name, spec.name)
    stats["prepared_dir"] = str(root)
    stats["seconds"] = round(time.perf_counter() - started, 3)
    return stats


def _read_splits(name: str, reader: Any, raw_root: Path, reader_variant: VariantSpec,
                 present: list[str], step: Callable[[str], None]) -> dict[str, ReaderResult]:
    if hasattr(reader, "read_variant"):
        step(f"{name}: reading {', '.join(present)}")
        return {k: v for k, v in reader.read_variant(raw_root, reader_variant).items()
                if k in present}
    results: dict[str, ReaderResult] = {}
    for split in present:
        step(f"{name}: reading {split}")
        results[split] = reader.read_split(raw_root, reader_variant.splits[split],
                                           reader_variant)
    return results


def _encode_split(name: str, split: str, result: ReaderResult, tokenizer: Tokenizer,
                  index: defaultdict[str, int], spec: VariantSpec, label_map: list[str]
                  ) -> tuple[_Encoded, dict[str, Any]]:
    """One split's token ids and summary, checked against ``expected`` (unless held out from)."""
    frame = result.pairs
    left, left_len = tokenizer.encode(frame["left"], index)
    right, right_len = tokenizer.encode(frame["right"], index)
    summary = {**_counts(frame, label_map), "dropped": dict(result.dropped),
               "malformed": len(result.malformed)}
    for side, lengths in (("left", left_len), ("right", right_len)):
        summary[f"avg_len_{side}"] = round(float(lengths.mean()), 3) if lengths.size else 0.0
        summary[f"max_len_{side}"] = int(lengths.max(initial=0))
        summary[f"empty_{side}"] = int((lengths == 0).sum())
    holdout = spec.options.holdout
    if split in spec.splits and not (holdout and split == holdout.from_):
        _check_expected(name, split, spec.splits[split].expected, frame, result, summary)
    return (left, left_len, right, right_len), summary


def _build_vocab(tokens: list[str], encoded: dict[str, _Encoded], vocab_split: str | None
                 ) -> tuple[list[str], list[int], np.ndarray, np.ndarray]:
    """``(vocab, its train counts, provisional id -> vocab id, train counts by provisional id)``
    of the ``tokens`` in provisional id order."""
    size = len(tokens)
    train_counts = np.zeros(size, dtype=np.int64)
    total_counts = np.zeros(size, dtype=np.int64)
    for split, (left, _, right, _) in encoded.items():
        counts = np.bincount(left, minlength=size) + np.bincount(right, minlength=size)
        total_counts += counts
        if split == vocab_split:
            train_counts += counts
    order = np.lexsort((np.arange(size), -total_counts, -train_counts))
    remap = np.empty(size, dtype=np.int32)
    remap[order] = np.arange(2, size + 2, dtype=np.int32)
    vocab = [PAD, UNK, *(tokens[i] for i in order)]
    vocab_counts = [0, 0, *train_counts[order].tolist()]
    return vocab, vocab_counts, remap, train_counts

