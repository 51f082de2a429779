"""Batching: padding and masks, bucketing, seeded resumable order, triples, sharding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from model_harness import assert_padding_invariant

from pairrepro.data.batches import (
    EncodedSplit,
    EpochPlan,
    bucket_batches,
    pad,
    sample_triples,
    shard,
    subsample,
)
from pairrepro.data.prepared import PAD_ID
from pairrepro.data.synthetic import generate_ranking
from pairrepro.errors import DataError
from pairrepro.models.base import ModelContext, build_model
from pairrepro.tasks import CLASSIFICATION, PAIRWISE_RANKING, POINTWISE_RANKING


def split_from(lengths_left: list[int], lengths_right: list[int], labels: list[int],
               groups: list[str] | None = None) -> EncodedSplit:
    n = len(labels)
    frame = pd.DataFrame({
        "pair_id": [f"p{i}" for i in range(n)],
        "group_id": groups or [f"g{i}" for i in range(n)],
        "label": labels,
        "left_ids": [list(range(2, 2 + k)) for k in lengths_left],
        "right_ids": [list(range(3, 3 + k)) for k in lengths_right],
    })
    return EncodedSplit.from_frame(frame)


def test_pad_builds_masks_from_lengths() -> None:
    ids, mask = pad([np.array([5, 6, 7]), np.array([], dtype=np.int64), np.array([9])])
    assert ids.tolist() == [[5, 6, 7], [0, 0, 0], [9, 0, 0]]
    assert mask.tolist() == [[True] * 3, [False] * 3, [True, False, False]]
    ids, mask = pad([np.array([], dtype=np.int64)])
    assert ids.shape == (1, 1) and not mask.any()


def test_truncation_to_max_len() -> None:
    frame = pd.DataFrame({"pair_id": ["a"], "group_id": ["a"], "label": [0],
                          "left_ids": [list(range(10))], "right_ids": [[1, 2]]})
    enc = EncodedSplit.from_frame(frame, max_len=4)
    assert enc.left[0].tolist() == [0, 1, 2, 3] and enc.right[0].tolist() == [1, 2]
    with pytest.raises(DataError, match="lacks columns"):
        EncodedSplit.from_frame(frame.drop(columns=["left_ids"]))
    # each text its own limit (CSRAN's code: question 28, answer 60); 0 leaves a side whole
    enc = EncodedSplit.from_frame(frame.assign(right_ids=[list(range(7))]), max_len=3,
                                  max_len_right=5)
    assert enc.left[0].tolist() == [0, 1, 2] and enc.right[0].tolist() == [0, 1, 2, 3, 4]
    enc = EncodedSplit.from_frame(frame, max_len=3, max_len_right=0)
    assert len(enc.left[0]) == 3 and len(enc.right[0]) == 2


def test_bucketing_covers_every_item_once_and_cuts_padding() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=2000)
    batches = bucket_batches(lengths, 32, np.random.default_rng(1))
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(2000))
    assert all(len(b) <= 32 for b in batches)

    def padded_cells(bs: list[np.ndarray]) -> int:
        return sum(len(b) * lengths[b].max() for b in bs)

    random_order = np.random.default_rng(1).permutation(2000)
    unbucketed = [random_order[i: i + 32] for i in range(0, 2000, 32)]
    # sorting inside chunks of 50 batches leaves far less padding than random batches
    assert padded_cells(batches) < 0.7 * padded_cells(unbucketed)
    assert padded_cells(batches) >= lengths.sum()


def test_epoch_order_is_a_function_of_seed_and_epoch() -> None:
    split = split_from(list(range(1, 101)), [3] * 100, [i % 3 for i in range(100)])
    a = EpochPlan(split, 8, seed=1, epoch=0, task=CLASSIFICATION)
    b = EpochPlan(split, 8, seed=1, epoch=0, task=CLASSIFICATION)
    c = EpochPlan(split, 8, seed=1, epoch=1, task=CLASSIFICATION)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches, b.batches, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a.batches, c.batches, strict=True))
    # resuming at position 5 yields exactly the batches the uninterrupted plan had there
    for pos in range(5, len(a)):
        first, again = a.collate(pos), b.collate(pos)
        assert torch.equal(first.left, again.left) and torch.equal(first.labels, again.labels)
    batch = a.collate(0)
    rows = a.batches[0]
    assert batch.left.size(1) == max(len(split.left[i]) for i in rows)
    assert batch.left_mask.sum(1).tolist() == [len(split.left[i]) for i in rows]


def test_batches_collated_ahead_are_the_batches_collated_in_turn() -> None:
    """A background thread collating ahead yields each batch of the plan once, in order,
    from any start; widened batches hold the same pairs at power-of-two widths."""
    split = split_from([1 + i % 37 for i in range(300)], [2 + i % 11 for i in range(300)],
                       [i % 3 for i in range(300)])
    plan = EpochPlan(split, 16, seed=3, epoch=0, task=CLASSIFICATION)
    fields = ("left", "left_mask", "right", "right_mask", "labels")
    for start, ahead in ((0, 0), (0, 1), (0, 3), (7, 2), (len(plan) - 1, 4), (len(plan), 2)):
        got = list(plan.loaded(start, torch.device("cpu"), ahead))
        assert len(got) == len(plan) - start
        for position, batch in enumerate(got, start):
            want = plan.collate(position)
            assert all(torch.equal(getattr(batch, f), getattr(want, f)) for f in fields)
    widths = set()
    for position, batch in enumerate(plan.loaded(0, torch.device("cpu"), 2, widen=True)):
        want = plan.collate(position)
        for side in ("left", "right"):
            ids, mask = getattr(batch, side), getattr(batch, f"{side}_mask")
            width = getattr(want, side).size(1)
            widths.add(ids.size(1))
            assert ids.size(1) >= max(8, width) and ids.size(1) < max(16, 2 * width)
            assert torch.equal(ids[:, :width], getattr(want, side))
            assert not mask[:, width:].any() and (ids[:, width:] == PAD_ID).all()
            assert torch.equal(mask.sum(1), getattr(want, f"{side}_mask").sum(1))
    assert widths <= {8, 16, 32, 64}  # lengths up to 37: a few fixed shapes


def test_triples_pair_each_positive_with_negatives_of_its_group() -> None:
    frame = generate_ranking(30, negatives=4, seed=2)
    enc = EncodedSplit.from_frame(frame.assign(left_ids=[[1]] * len(frame),
                                               right_ids=[[1]] * len(frame)))
    triples = sample_triples(enc, 3, np.random.default_rng(0))
    assert len(triples) == 30 * 3
    groups = np.array(enc.group_ids)
    assert (enc.labels[triples[:, 0]] == 1).all() and (enc.labels[triples[:, 1]] == 0).all()
    assert (groups[triples[:, 0]] == groups[triples[:, 1]]).all()
    for p in np.unique(triples[:, 0]):  # 3 of 4 negatives: drawn without replacement
        assert len(set(triples[triples[:, 0] == p, 1])) == 3
    more = sample_triples(enc, 6, np.random.default_rng(0))  # more than the group holds
    assert len(more) == 30 * 6
    only_pos = split_from([1, 1], [1, 1], [1, 1], groups=["q", "q"])
    with pytest.raises(DataError, match="positive and a negative"):
        sample_triples(only_pos, 1, np.random.default_rng(0))


def test_hinge_batches_hold_positives_then_negatives() -> None:
    frame = generate_ranking(10, negatives=2, seed=3)
    enc = EncodedSplit.from_frame(frame.assign(left_ids=[[1, 2]] * len(frame),
                                               right_ids=[[3]] * len(frame)))
    plan = EpochPlan(enc, 4, seed=0, epoch=0, task=PAIRWISE_RANKING, negatives=2)
    batch = plan.collate(0)
    k = batch.num_triples
    assert k == len(plan.batches[0]) and batch.left.size(0) == 2 * k
    assert batch.labels[:k].eq(1).all() and batch.labels[k:].eq(0).all()


def test_pointwise_epochs_cap_negatives_per_query() -> None:
    """Every query keeps all its positives and min(cap, its negatives) negatives, drawn
    afresh per epoch (a function of seed and epoch, so resuming rebuilds it)."""
    frame = generate_ranking(12, negatives=6, seed=4)
    # a query with fewer negatives than the cap, and one with two positives
    extra = pd.DataFrame({"pair_id": ["x1", "x2", "x3", "y1", "y2", "y3"],
                          "group_id": ["x", "x", "x", "y", "y", "y"],
                          "left": ["a"] * 6, "right": ["b"] * 6, "label": [1, 0, 0, 1, 1, 0]})
    frame = pd.concat([frame, extra], ignore_index=True)
    enc = EncodedSplit.from_frame(frame.assign(left_ids=[[1]] * len(frame),
                                               right_ids=[[2]] * len(frame)))
    plans = [EpochPlan(enc, 8, seed=5, epoch=e, task=POINTWISE_RANKING,
                       max_negatives_per_query=3) for e in (0, 1)]
    again = EpochPlan(enc, 8, seed=5, epoch=0, task=POINTWISE_RANKING,
                      max_negatives_per_query=3)
    assert np.array_equal(plans[0].items, again.items)
    assert not np.array_equal(plans[0].items, plans[1].items)
    groups, labels = np.array(enc.group_ids), enc.labels
    for plan in plans:
        items = plan.items
        assert sorted(np.concatenate(plan.batches).tolist()) == list(range(len(items)))
        assert len(set(items.tolist())) == len(items)  # no pair twice
        for g in set(enc.group_ids):
            in_group = groups[items] == g
            n_neg_total = int(((groups == g) & (labels == 0)).sum())
            assert int((labels[items][in_group] == 1).sum()) == int(
                ((groups == g) & (labels == 1)).sum())
            assert int((labels[items][in_group] == 0).sum()) == min(3, n_neg_total)
    assert len(plans[0].items) == 12 * (1 + 3) + 3 + 3
    # off (0) or another loss: every pair, as before
    assert EpochPlan(enc, 8, seed=5, epoch=0, task=POINTWISE_RANKING).num_items == len(enc)


def test_shards_partition_a_batch() -> None:
    rows = np.arange(10)
    parts = [shard(rows, r, 3) for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    assert [len(p) for p in parts] == [4, 3, 3]
    assert shard(np.array([7]), 1, 2).tolist() == [7]  # every rank gets a row


def test_subsample_keeps_whole_groups() -> None:
    frame = generate_ranking(20, negatives=4, seed=1)
    enc = EncodedSplit.from_frame(frame.assign(left_ids=[[1]] * len(frame),
                                               right_ids=[[1]] * len(frame)))
    small = subsample(enc, 32, seed=1, by_group=True)
    assert len(small) == 30  # six whole groups of five
    assert pd.Series(small.group_ids).value_counts().eq(5).all()
    assert subsample(enc, 32, seed=1, by_group=True).pair_ids == small.pair_ids
    assert len(subsample(enc, 17, seed=1, by_group=False)) == 17


def test_bilstm_max_ignores_padding() -> None:
    def factory(ctx: ModelContext):  # type: ignore[no-untyped-def]
        return build_model("bilstm_max", ctx, {"hidden": 8, "mlp_hidden": 8})

    assert_padding_invariant(factory, num_outputs=3)
    assert_padding_invariant(factory, num_outputs=1)
