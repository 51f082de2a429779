"""The prepared folder shared by ``preprocess`` (writer) and ``train`` (reader); its layout:
docs/datasets.md, "Prepared data"."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pairrepro import fileio, paths
from pairrepro.errors import ConfigError, DataError, PairreproError

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
PREPARED_SCHEMA = pa.schema([
    ("pair_id", pa.string()), ("group_id", pa.string()), ("left", pa.string()),
    ("right", pa.string()), ("label", pa.int64()), ("left_ids", pa.list_(pa.int32())),
    ("right_ids", pa.list_(pa.int32()))])


@dataclass
class PreparedDataset:
    """A prepared dataset variant; splits are read from parquet on first access."""

    root: Path
    vocab: list[str]
    train_counts: list[int]
    stats: dict[str, Any]
    _splits: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def split_names(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.parquet"))

    def rare_token_map(self, min_count: int, keep_unseen: bool) -> np.ndarray | None:
        """An id -> id table (``None``: no change) sending to ``<unk>`` the tokens seen in train
        fewer than ``min_count`` times (unseen ones too unless ``keep_unseen``)."""
        counts = np.asarray(self.train_counts, dtype=np.int64)
        rare = counts < min_count
        if keep_unseen:
            rare &= counts > 0
        rare[[PAD_ID, UNK_ID]] = False
        if not rare.any():
            return None
        table = np.arange(len(counts), dtype=np.int64)
        table[rare] = UNK_ID
        return table

    def with_splits_from(self, source: PreparedDataset, names: Iterable[str]) -> PreparedDataset:
        """This dataset with its splits ``names`` taken from ``source`` (a variant tokenised
        alike), re-encoded in this vocabulary."""
        mine, theirs = self.stats.get("tokenisation"), source.stats.get("tokenisation")
        if mine != theirs:
            raise DataError(f"{source.root} and {self.root} are tokenised differently "
                            f"({theirs} vs {mine}): ids cannot be carried across",
                            hint="score the run on a variant with the same tokenisation")
        index = {token: i for i, token in enumerate(self.vocab)}
        table = np.array([index.get(token, UNK_ID) for token in source.vocab], dtype=np.int32)
        splits = dict(self._splits)
        for name in names:
            frame = source.split(name).copy()
            for column in ("left_ids", "right_ids"):
                frame[column] = [table[np.asarray(ids, dtype=np.int64)]
                                 for ids in frame[column]]
            splits[name] = frame
        return replace(self, _splits=splits)

    def split(self, name: str) -> pd.DataFrame:
        if name not in self._splits:
            path = self.root / f"{name}.parquet"
            if not path.is_file():
                raise DataError(f"split {name!r} is not in {self.root}",
                                hint=f"splits present: {', '.join(self.split_names) or '(none)'}")
            self._splits[name] = _read_split(path, self.stats)
        return self._splits[name]

    def file_sha256(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """sha256 of the split files (``{"test.parquet": sha}``; all when ``names`` is None)."""
        recorded = _file_records(self.root, self.stats)
        wanted = (sorted(p.name for p in self.root.glob("*.parquet")) if names is None
                  else list(names))
        return {name: recorded[name]["sha256"] if "sha256" in recorded.get(name, {})
                else fileio.sha256_file(self.root / name)
                for name in wanted if (self.root / name).is_file()}

    def check_files(self, expected: Mapping[str, str], source: str) -> None:
        """Check the sha256 a run recorded (``source``) against this folder's."""
        recorded = _file_records(self.root, self.stats)
        for name, sha in expected.items():
            have = recorded.get(name, {}).get("sha256")
            if have != sha:
                raise DataError(
                    f"{source}: prepared file {name} had sha256 {sha}; {self.root / name} now "
                    f"has {have or '(none recorded)'}",
                    hint="the data was prepared again (or differently) since the run: "
                         "preprocess the version the run used, or train the run again")


def _write_bytes(path: Path, data: Any) -> str:
    with fileio.atomic_open(path, "wb") as handle:
        handle.write(data)
    return hashlib.sha256(data).hexdigest()


def write_prepared(root: Path, splits: Mapping[str, pd.DataFrame], vocab: list[str],
                   train_counts: list[int], stats: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Write a prepared folder atomically file by file, ``DONE`` last; the ``files`` record."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "DONE").unlink(missing_ok=True)
    if vocab[:2] != [PAD, UNK]:
        raise ValueError("vocab must start with <pad>, <unk>")
    files: dict[str, dict[str, Any]] = {}
    for name, frame in splits.items():
        table = pa.Table.from_pandas(frame[PREPARED_SCHEMA.names], schema=PREPARED_SCHEMA,
                                     preserve_index=False)
        # Arrow-backed (pd.ArrowDtype) columns store pandas metadata that to_pandas() cannot
        # read back; the schema above says everything a reader needs.
        table = table.replace_schema_metadata(None)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        files[f"{name}.parquet"] = {"sha256": _write_bytes(root / f"{name}.parquet",
                                                           sink.getvalue()),
                                    "rows": table.num_rows,
                                    "groups": int(frame["group_id"].nunique())}
    text = "".join(f"{tok}\t{cnt}\n" for tok, cnt in zip(vocab, train_counts, strict=True))
    files["vocab.tsv"] = {"sha256": _write_bytes(root / "vocab.tsv", text.encode("utf-8")),
                          "rows": len(vocab)}
    fileio.write_json(root / "stats.json", {**stats, "files": files})
    fileio.write_text(root / "DONE", "")
    return files


def _file_records(folder: Path, stats: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    files = stats.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise DataError(f"{folder / 'stats.json'}: damaged: 'files' is not a table of records",
                        hint=f"prepare it again (pairrepro preprocess {stats.get('dataset', '')})")
    return files


def _read_checked(path: Path, record: Mapping[str, Any] | None, dataset: str) -> bytes:
    """The bytes of ``path``, checked against the sha256 that ``record`` holds (if any)."""
    data = path.read_bytes()
    if not record or "sha256" not in record:
        return data
    if (found := hashlib.sha256(data).hexdigest()) != record["sha256"]:
        raise DataError(
            f"{path}: sha256 {found} ({len(data):,} bytes) is not the {record['sha256']} that "
            "preprocess recorded in stats.json",
            hint="the file was replaced or damaged after preprocess; run: pairrepro "
                 f"preprocess {dataset} (with the same --variant)")
    return data


def _read_split(path: Path, stats: Mapping[str, Any]) -> pd.DataFrame:
    dataset = str(stats.get("dataset", ""))
    record = _file_records(path.parent, stats).get(path.name)
    data = _read_checked(path, record, dataset)
    try:
        frame = pq.read_table(pa.BufferReader(data)).to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable parquet file ({exc})",
                        hint=f"run: pairrepro preprocess {dataset} (with the same --variant)"
                        ) from None
    for key, found in (("rows", len(frame)), ("groups", int(frame["group_id"].nunique()))):
        if record and key in record and record[key] != found:
            raise DataError(f"{path}: {found:,} {key}, stats.json records {record[key]:,}",
                            hint=f"run: pairrepro preprocess {dataset} (same --variant)")
    return frame


def load_prepared(dataset: str, variant: str | None = None, root: Path | None = None
                  ) -> PreparedDataset:
    folder = root or paths.prepared_dir(dataset, variant or None)
    command = f"pairrepro preprocess {dataset}" + (f" --variant {variant}" if variant else "")
    if not (folder / "DONE").is_file():
        steps: list[Step] = []
        if root is None:
            with contextlib.suppress(PairreproError):  # e.g. a variant the manifest lacks
                steps = prepare_steps(dataset, variant or "")
        commands = [step.command for step in steps] or [command]
        raise DataError(f"dataset {dataset!r} is not prepared (no complete folder {folder})",
                        hint="run: " + " && ".join(commands))
    again = f"run: {command}"
    stats_path = folder / "stats.json"
    try:
        stats = json.loads(stats_path.read_bytes().decode("utf-8"))
        if not isinstance(stats, dict):
            raise ValueError("not a JSON object")
    except (ValueError, OSError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise DataError(f"{stats_path}: damaged ({exc})", hint=again) from None
    vocab_path = folder / "vocab.tsv"
    try:
        data = _read_checked(vocab_path, _file_records(folder, stats).get("vocab.tsv"), dataset)
    except OSError as exc:
        raise DataError(f"{vocab_path}: cannot be read ({exc.strerror})", hint=again) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{vocab_path}: not UTF-8 at byte {exc.start}", hint=again) from None
    vocab: list[str] = []
    counts: list[int] = []
    # only \n ends a line: a token may hold any other separator
    for number, line in enumerate(text.removesuffix("\n").split("\n") if text else [], 1):
        token, tab, count = line.rpartition("\t")
        if not tab or not count.isdigit():
            raise DataError(f"{vocab_path}: line {number} is not token<TAB>count: {line[:60]!r}",
                            hint=again)
        vocab.append(token)
        counts.append(int(count))
    if vocab[:2] != [PAD, UNK] or len(vocab) != stats.get("vocab_size", len(vocab)):
        raise DataError(f"{vocab_path}: {len(vocab):,} tokens starting {vocab[:2]}; stats.json "
                        f"records {stats.get('vocab_size')} starting ['{PAD}', '{UNK}']",
                        hint=again)
    return PreparedDataset(root=folder, vocab=vocab, train_counts=counts, stats=stats)


def is_prepared(dataset: str, variant: str | None = None) -> bool:
    """Whether :func:`load_prepared` would open ``dataset``/``variant``."""
    return (paths.prepared_dir(dataset, variant or None) / "DONE").is_file()


class Step(NamedTuple):
    """Something a run needs that is not here yet, and the command that makes it."""

    missing: str
    command: str


def prepare_steps(dataset: str, variant: str = "") -> list[Step]:
    """What stands between ``dataset``/``variant`` and :func:`load_prepared`, in order; raises
    the manifest's errors (a variant it lacks, data never published)."""
    from pairrepro.data.manifests import load_manifest, reads_hub, variant_missing

    if is_prepared(dataset, variant):
        return []
    suffix = f" --variant {variant}" if variant else ""
    shown = f"{dataset}/{variant}" if variant else dataset
    preprocess = Step(f"{shown}: not prepared", f"pairrepro preprocess {dataset}{suffix}")
    try:
        manifest = load_manifest(dataset)
    except ConfigError:  # no manifest (data written straight into prepared/): only preprocess
        return [preprocess]
    manifest.require_published()
    steps = []
    if variant_missing(manifest, variant or None):
        if reads_hub(manifest, variant or None):
            steps.append(Step(f"{shown}: not fetched from the Hugging Face hub",
                              f"pairrepro fetch {dataset} --source hub"))
        elif not manifest.public:
            steps.append(Step(f"{dataset}: not fetched; it is licence-gated: "
                              f"{manifest.licence.strip()}",
                              f"pairrepro fetch {dataset} --from DIR"))
        else:
            mirror = " --mirror DIR" if paths.mirror_dir() is None else ""
            steps.append(Step(f"{dataset}: not fetched", f"pairrepro fetch {dataset}{mirror}"))
    return [*steps, preprocess]


def data_status(dataset: str, variant: str = "") -> tuple[bool, str]:
    """Whether ``dataset`` is prepared and, if not, what would make it so."""
    from pairrepro.data.manifests import load_manifest

    try:
        manifest = load_manifest(dataset)
    except PairreproError:
        return False, f"no manifest data_manifests/{dataset}.toml: the dataset is not packaged"
    if is_prepared(dataset, variant):
        return True, ""
    why = f"not public ({manifest.notes.strip() or manifest.licence})"
    try:
        steps = prepare_steps(dataset, variant)
    except PairreproError as exc:  # never published, or a variant the manifest lacks
        return False, why if manifest.never_published else exc.message
    if len(steps) > 1 and not manifest.public:
        return False, f"{why}; put the files in a folder and run: {steps[0].command}"
    return False, " && ".join(step.command for step in steps)


def split_pairs(dataset: str, variant: str | None, split: str) -> int | None:
    """Pairs of ``split`` as the prepared ``stats.json`` counts them (None: not prepared)."""
    if not is_prepared(dataset, variant):
        return None
    try:
        stats = fileio.read_json(paths.prepared_dir(dataset, variant or None) / "stats.json")
        pairs = stats["splits"][split]["pairs"]
    except (OSError, ValueError, LookupError, TypeError):  # unreadable, or not as written
        return None
    return pairs if isinstance(pairs, int) else None


def capped_pairs(dataset: str, variant: str | None, split: str, negatives: int) -> int | None:
    """Pairs of an epoch of ``split`` keeping at most ``negatives`` negatives per query (None:
    not prepared)."""
    if not is_prepared(dataset, variant):
        return None
    path = paths.prepared_dir(dataset, variant or None) / f"{split}.parquet"
    if not path.is_file():
        return None
    frame = pd.read_parquet(path, columns=["group_id", "label"])
    per_query = frame.groupby("group_id")["label"].agg(["sum", "count"])
    kept = (per_query["count"] - per_query["sum"]).clip(upper=negatives)
    return int((per_query["sum"] + kept).sum())
