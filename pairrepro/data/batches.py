"""Batches for training and evaluation: length bucketing, padding, masks, ranking triples.
Pure functions of their inputs and a seed: an epoch's order is rebuilt from ``(seed, epoch)``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from pairrepro.data.prepared import PAD_ID
from pairrepro.device import to_device
from pairrepro.errors import DataError


@dataclass
class EncodedSplit:
    """One split's pairs as arrays of token ids."""

    pair_ids: list[str]
    group_ids: list[str]
    left: list[np.ndarray]
    right: list[np.ndarray]
    labels: np.ndarray

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, max_len: int = 0, name: str = "split",
                   max_len_right: int = -1) -> EncodedSplit:
        """Encode a prepared pair table, ids cut to ``max_len`` when > 0 (the right text's to
        ``max_len_right`` where it is not -1)."""
        if missing := {"pair_id", "group_id", "label", "left_ids", "right_ids"} - {*frame.columns}:
            raise DataError(f"{name}: prepared table lacks columns {sorted(missing)}",
                            hint="re-run pairrepro preprocess for this dataset")

        def cut(seqs: pd.Series, limit: int) -> list[np.ndarray]:  # limit 0: uncut
            return [np.asarray(s, dtype=np.int64)[:limit or None] for s in seqs]

        return cls(
            pair_ids=[str(p) for p in frame["pair_id"]],
            group_ids=[str(g) for g in frame["group_id"]],
            left=cut(frame["left_ids"], max_len),
            right=cut(frame["right_ids"], max_len if max_len_right < 0 else max_len_right),
            labels=frame["label"].to_numpy(dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.labels)

    def lengths(self) -> np.ndarray:
        return np.array([len(a) + len(b) for a, b in zip(self.left, self.right, strict=True)],
                        dtype=np.int64)

    def subset(self, rows: np.ndarray) -> EncodedSplit:
        picked = ([seq[i] for i in rows] for seq in (self.pair_ids, self.group_ids, self.left,
                                                      self.right))
        return EncodedSplit(*picked, labels=self.labels[rows])


@dataclass
class PairBatch:
    """A padded batch. For hinge triples, rows ``[:num_triples]`` are (query, positive)
    and rows ``[num_triples:]`` the matching (query, negative) pairs."""

    left: torch.Tensor
    left_mask: torch.Tensor
    right: torch.Tensor
    right_mask: torch.Tensor
    labels: torch.Tensor
    num_triples: int = 0

    @property
    def num_pairs(self) -> int:
        """Training examples in the batch (triples count once)."""
        return self.num_triples or int(self.left.size(0))

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> PairBatch:
        return PairBatch(*(fn(t) for t in (self.left, self.left_mask, self.right,
                                           self.right_mask, self.labels)), self.num_triples)

    def to(self, device: torch.device | str) -> PairBatch:
        """The batch on ``device`` (lengths are read on its host tensors: ``on_host``)."""
        return self.map_tensors(lambda t: to_device(t, device))

    def widened(self, extra: Sequence[int] = ()) -> PairBatch:
        """``extra`` (left, right) more pad columns, else each side padded to a power-of-two
        width (8 at least): few shapes, so a compiled model (``train.compile``) builds few
        graphs. Outputs must not move."""
        left, right = extra or [max(8, 1 << (n - 1).bit_length()) - n
                                for n in (self.left.size(1), self.right.size(1))]
        (lids, lmask), (rids, rmask) = ((F.pad(ids, (0, n), value=PAD_ID), F.pad(mask, (0, n)))
                                        for ids, mask, n in ((self.left, self.left_mask, left),
                                                             (self.right, self.right_mask, right)))
        return PairBatch(lids, lmask, rids, rmask, self.labels, self.num_triples)


def pad(seqs: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """``LongTensor[B, T]`` ids padded to the longest (T >= 1) and ``BoolTensor[B, T]`` mask."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    width = max(1, int(lengths.max(initial=0)))
    ids = np.full((len(seqs), width), PAD_ID, dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
    mask = np.arange(width)[None, :] < lengths[:, None]
    return torch.from_numpy(ids), torch.from_numpy(mask)


def collate_pairs(split: EncodedSplit, rows: np.ndarray) -> PairBatch:
    left, left_mask = pad([split.left[i] for i in rows])
    right, right_mask = pad([split.right[i] for i in rows])
    return PairBatch(left, left_mask, right, right_mask, torch.from_numpy(split.labels[rows]))


def collate_triples(split: EncodedSplit, triples: np.ndarray) -> PairBatch:
    """Pad ``[B, 2]`` (positive row, negative row) triples as ``2B`` pairs sharing a width."""
    rows = np.concatenate([triples[:, 0], triples[:, 1]])
    return replace(collate_pairs(split, rows), num_triples=len(triples))


def group_rows(group_ids: Sequence[str]) -> dict[str, np.ndarray]:
    codes, uniques = pd.factorize(pd.Series(list(group_ids)), sort=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    return {str(g): order[bounds[i]: bounds[i + 1]] for i, g in enumerate(uniques)}


def sample_triples(split: EncodedSplit, negatives: int, rng: np.random.Generator) -> np.ndarray:
    """``[T, 2]`` (positive row, negative row): every positive of a group with ``negatives``
    of its negatives (without replacement where there are enough)."""
    out: list[np.ndarray] = []
    for rows in group_rows(split.group_ids).values():
        labels = split.labels[rows]
        pos, neg = rows[labels > 0], rows[labels <= 0]
        if len(pos) == 0 or len(neg) == 0:
            continue
        for p in pos:
            chosen = rng.choice(neg, size=negatives, replace=len(neg) < negatives)
            out.append(np.stack([np.full(negatives, p), chosen], axis=1))
    if not out:
        raise DataError("no training group has both a positive and a negative candidate",
                        hint="the hinge loss needs ranking groups with labels 1 and 0")
    return np.concatenate(out).astype(np.int64)


def sample_query_negatives(split: EncodedSplit, max_negatives: int,
                           rng: np.random.Generator) -> np.ndarray:
    """Sorted rows of one epoch: every group's positives and at most ``max_negatives`` of
    its negatives."""
    keep: list[np.ndarray] = []
    for rows in group_rows(split.group_ids).values():
        labels = split.labels[rows]
        negatives = rows[labels <= 0]
        keep.append(rows[labels > 0])
        if len(negatives) > max_negatives:
            negatives = rng.choice(negatives, size=max_negatives, replace=False)
        keep.append(negatives)
    return np.sort(np.concatenate(keep)).astype(np.int64)


def bucket_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                   chunk_batches: int = 50) -> list[np.ndarray]:
    """Index arrays into ``lengths``: sorted by length within random chunks of
    ``chunk_batches`` batches, the batch order shuffled."""
    n = len(lengths)
    perm = rng.permutation(n)
    chunk = batch_size * max(1, chunk_batches)
    batches: list[np.ndarray] = []
    for start in range(0, n, chunk):
        idx = perm[start: start + chunk]
        idx = idx[np.argsort(lengths[idx], kind="stable")]
        batches += [idx[i: i + batch_size] for i in range(0, len(idx), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def eval_batches(split: EncodedSplit, batch_size: int) -> list[np.ndarray]:
    order = np.argsort(split.lengths(), kind="stable")
    return [order[i: i + batch_size] for i in range(0, len(order), batch_size)]


def shard(rows: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """``rank``'s strided part of a global batch; a rank left without rows gets the first (DDP
    needs every rank in every all-reduce)."""
    part = rows[rank::world_size]
    return part if len(part) else rows[:1]


def subsample(split: EncodedSplit, max_pairs: int, seed: int, by_group: bool) -> EncodedSplit:
    """A seeded subset of at most ``max_pairs`` pairs (whole groups when ``by_group``)."""
    if max_pairs <= 0 or len(split) <= max_pairs:
        return split
    rng = np.random.default_rng([seed, 7919])
    if not by_group:
        return split.subset(np.sort(rng.choice(len(split), size=max_pairs, replace=False)))
    groups = list(group_rows(split.group_ids).values())
    shuffled = [groups[g] for g in rng.permutation(len(groups))]
    # the longest run of shuffled groups within max_pairs (the first group at least)
    fits = np.searchsorted(np.cumsum([len(g) for g in shuffled]), max_pairs, side="right")
    return split.subset(np.sort(np.concatenate(shuffled[:max(1, int(fits))])))


class EpochTask(Protocol):
    """What an epoch needs of a task (``pairrepro.tasks.Task``, which imports this module)."""

    def epoch_items(self, split: EncodedSplit, rng: np.random.Generator, negatives: int = 1,
                    max_negatives_per_query: int = 0) -> tuple[np.ndarray, np.ndarray]: ...

    def collate(self, split: EncodedSplit, items: np.ndarray) -> PairBatch: ...


class EpochPlan:
    """The seeded order of one training epoch: ``batches`` index ``items`` (pairs or triples)."""

    def __init__(self, split: EncodedSplit, batch_size: int, seed: int, epoch: int,
                 task: EpochTask, negatives: int = 1, chunk_batches: int = 50,
                 max_negatives_per_query: int = 0) -> None:
        self.split = split
        self.task = task
        rng = np.random.default_rng([seed, epoch, 104729])
        self.items, item_lengths = task.epoch_items(split, rng, negatives,
                                                    max_negatives_per_query)
        self.batches = bucket_batches(item_lengths, batch_size, rng, chunk_batches)

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def num_items(self) -> int:
        return len(self.items)

    def collate(self, position: int, rank: int = 0, world_size: int = 1) -> PairBatch:
        return self.task.collate(self.split, self.items[shard(self.batches[position], rank,
                                                              world_size)])

    def loaded(self, start: int, device: torch.device, ahead: int = 0, widen: bool = False,
               rank: int = 0, world_size: int = 1) -> Iterator[PairBatch]:
        """Batches ``start``... on ``device`` (``widen``: :meth:`PairBatch.widened`); with
        ``ahead``, that many collated in advance by a thread, pinned on CUDA and copied without
        blocking: the same batches in the same order (collating draws no random numbers)."""
        def load(position: int) -> PairBatch:
            batch = self.collate(position, rank, world_size)
            batch = batch.widened() if widen else batch
            pin = ahead and device.type == "cuda"
            return batch.map_tensors(torch.Tensor.pin_memory) if pin else batch

        if not ahead:
            yield from (load(position).to(device) for position in range(start, len(self)))
            return
        # the thread pins memory for the run's own GPU (no stray context on the first one)
        pool = ThreadPoolExecutor(1, "collate", lambda: device.index is None
                                  or torch.cuda.set_device(device))
        queue = deque[Future[PairBatch]]()
        try:
            for position in range(start, len(self)):
                queue.append(pool.submit(load, position))
                if len(queue) > ahead:
                    yield queue.popleft().result().to(device)
            while queue:
                yield queue.popleft().result().to(device)
        finally:
            pool.shutdown(cancel_futures=True)
