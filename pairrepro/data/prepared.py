"""The prepared-data contract shared by ``preprocess`` (writer) and ``train`` (reader).

A prepared folder (``$PAIRREPRO_HOME/prepared/<dataset>[-<variant>]/``) holds:

* ``{split}.parquet``: the canonical pair table with token ids —
  ``pair_id: str, group_id: str, left: str, right: str, label: int64,
  left_ids: list<int32>, right_ids: list<int32>``.
  Classification: ``label`` is the class index of the dataset's label map.
  Ranking: ``group_id`` is the query; ``label`` is 1 for relevant candidates, else 0.
* ``vocab.tsv``: ``token<TAB>train_count`` per line; line *i* is id *i*;
  id 0 is ``<pad>``, id 1 is ``<unk>``.
* ``stats.json``: pairs per split, label distribution, average lengths, vocab size,
  malformed rows, tokenisation settings, source file sha256s.
* ``DONE``: written last; a folder without it is incomplete and never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pairrepro import io, paths
from pairrepro.errors import DataError

PAD, UNK = "<pad>", "<unk>"
PAIR_COLUMNS = ["pair_id", "group_id", "left", "right", "label"]
PREPARED_SCHEMA = pa.schema(
    [
        ("pair_id", pa.string()),
        ("group_id", pa.string()),
        ("left", pa.string()),
        ("right", pa.string()),
        ("label", pa.int64()),
        ("left_ids", pa.list_(pa.int32())),
        ("right_ids", pa.list_(pa.int32())),
    ]
)


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
        """An id -> id table sending rare tokens to ``<unk>`` (``None`` when nothing changes).

        A token seen in the train split fewer than ``min_count`` times becomes ``<unk>``.
        Tokens never seen in train (dev/test-only words) stay when ``keep_unseen`` (they can
        still get pretrained vectors) and become ``<unk>`` otherwise (nothing could train them).
        """
        counts = np.asarray(self.train_counts, dtype=np.int64)
        rare = counts < min_count
        if keep_unseen:
            rare &= counts > 0
        rare[:2] = False  # <pad>, <unk>
        if not rare.any():
            return None
        table = np.arange(len(counts), dtype=np.int64)
        table[rare] = 1
        return table

    def with_splits_from(self, source: PreparedDataset, names: Iterable[str]
                         ) -> PreparedDataset:
        """This dataset with its splits ``names`` replaced by those of ``source`` (another
        variant, tokenised alike), their token ids re-expressed in this vocabulary (words it
        lacks become ``<unk>``): e.g. a model trained on this variant scored on another's
        DEV/TEST. Every other split, the vocabulary and the statistics stay this dataset's."""
        mine, theirs = self.stats.get("tokenisation"), source.stats.get("tokenisation")
        if mine != theirs:
            raise DataError(f"{source.root} and {self.root} are tokenised differently "
                            f"({theirs} vs {mine}): ids cannot be carried across",
                            hint="score the run on a variant with the same tokenisation")
        index = {token: i for i, token in enumerate(self.vocab)}
        table = np.array([index.get(token, 1) for token in source.vocab], dtype=np.int32)
        splits = dict(self._splits)
        for name in names:
            frame = source.split(name).copy()
            for column in ("left_ids", "right_ids"):
                frame[column] = [table[np.asarray(ids, dtype=np.int64)]
                                 for ids in frame[column]]
            splits[name] = frame
        return PreparedDataset(root=self.root, vocab=self.vocab,
                               train_counts=self.train_counts, stats=self.stats,
                               _splits=splits)

    def split(self, name: str) -> pd.DataFrame:
        """The pair table of split ``name`` (a :class:`DataError` names the splits present)."""
        if name not in self._splits:
            path = self.root / f"{name}.parquet"
            if not path.is_file():
                raise DataError(
                    f"split {name!r} is not in {self.root}",
                    hint=f"splits present: {', '.join(self.split_names) or '(none)'}",
                )
            self._splits[name] = pq.read_table(path).to_pandas()
        return self._splits[name]


def write_prepared(
    root: Path,
    splits: Mapping[str, pd.DataFrame],
    vocab: list[str],
    train_counts: list[int],
    stats: Mapping[str, Any],
) -> None:
    """Write a prepared folder atomically file by file; ``DONE`` marks it complete."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "DONE").unlink(missing_ok=True)
    for name, frame in splits.items():
        table = pa.Table.from_pandas(frame[PREPARED_SCHEMA.names], schema=PREPARED_SCHEMA,
                                     preserve_index=False)
        # Arrow-backed (pd.ArrowDtype) columns store pandas metadata that to_pandas() cannot
        # read back; the schema above says everything a reader needs.
        table = table.replace_schema_metadata(None)
        with io.atomic_path(root / f"{name}.parquet") as tmp:
            pq.write_table(table, tmp)
    if vocab[:2] != [PAD, UNK]:
        raise ValueError("vocab must start with <pad>, <unk>")
    io.write_text(
        root / "vocab.tsv",
        "".join(f"{tok}\t{cnt}\n" for tok, cnt in zip(vocab, train_counts, strict=True)),
    )
    io.write_json(root / "stats.json", dict(stats))
    io.write_text(root / "DONE", "")


def load_prepared(dataset: str, variant: str | None = None, root: Path | None = None
                  ) -> PreparedDataset:
    """Open a prepared dataset; a clear :class:`DataError` says how to prepare it."""
    folder = root or paths.prepared_dir(dataset, variant or None)
    if not (folder / "DONE").is_file():
        cmd = f"pairrepro preprocess {dataset}" + (f" --variant {variant}" if variant else "")
        raise DataError(f"dataset {dataset!r} is not prepared (no complete folder {folder})",
                        hint=f"run: pairrepro fetch {dataset} && {cmd}")
    vocab: list[str] = []
    counts: list[int] = []
    with open(folder / "vocab.tsv", encoding="utf-8") as handle:
        for line in handle:
            token, _, count = line.rstrip("\n").rpartition("\t")
            vocab.append(token)
            counts.append(int(count))
    stats = json.loads((folder / "stats.json").read_text(encoding="utf-8"))
    return PreparedDataset(root=folder, vocab=vocab, train_counts=counts, stats=stats)
