"""Task types: the one place that knows what ``[task] type``/``loss`` mean and which ``[task]``
keys each uses. torch is imported on first use, so the recipe schema can name the choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pairrepro.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from pairrepro.data.batches import EncodedSplit, PairBatch


@dataclass(frozen=True)
class Task:
    """What a task type means for model, loss, epoch and predictions (the base: classification)."""

    type: str
    loss: str
    recipe_keys: frozenset[str] = frozenset()  # the [task] keys it uses besides type and loss
    default_select_metric: str = "accuracy"
    outputs: int = 0  # per pair (0: one logit per class)

    @property
    def is_ranking(self) -> bool:
        return self.type == "ranking"

    by_group = is_ranking  # whether subsets (max_train_pairs, score_train_pairs) keep groups

    def num_classes(self, label_map: list[str] | None, max_label: int) -> int:
        """Classes of the data: the label map's length, else the largest label + 1."""
        return len(label_map) if label_map else max_label + 1

    def num_outputs(self, num_classes: int) -> int:
        """What ``ModelContext.num_outputs`` must be."""
        return self.outputs or num_classes

    def batch_loss(self, outputs: torch.Tensor, labels: torch.Tensor, margin: float,
                   num_triples: int = 0) -> torch.Tensor:
        """The training loss of one batch (float32 even under bf16 autocast)."""
        import torch.nn.functional as F

        return F.cross_entropy(outputs.float(), labels)

    def batch_correct(self, outputs: torch.Tensor, labels: torch.Tensor, num_triples: int = 0
                      ) -> torch.Tensor:
        """Correct decisions in a training batch (the running training accuracy)."""
        return (outputs.argmax(dim=-1) == labels).sum()

    def scores(self, outputs: np.ndarray) -> np.ndarray:
        """Raw model outputs ``[N, K]`` -> class probabilities ``[N, C]`` (a softmax)."""
        probs = np.exp(outputs - outputs.max(axis=1, keepdims=True))
        return probs / probs.sum(axis=1, keepdims=True)

    def metrics(self, split: EncodedSplit, scores: np.ndarray, num_classes: int,
                no_positive: str = "skip") -> dict[str, float]:
        """Metrics of a split from its :meth:`scores`."""
        from pairrepro.metrics import classification_metrics

        return classification_metrics(split.labels, scores.argmax(axis=1), num_classes)

    def prediction_frame(self, split: EncodedSplit, scores: np.ndarray) -> pd.DataFrame:
        """The predictions file: ids, label, class probabilities, predicted class."""
        frame = _id_columns(split)
        for c in range(scores.shape[1]):
            frame[f"prob_{c}"] = scores[:, c]
        frame["prediction"] = scores.argmax(axis=1)
        return frame

    def epoch_items(self, split: EncodedSplit, rng: np.random.Generator, negatives: int = 1,
                    max_negatives_per_query: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The items of one training epoch and their lengths (for bucketing): every pair."""
        return np.arange(len(split)), split.lengths()

    def collate(self, split: EncodedSplit, items: np.ndarray) -> PairBatch:
        """A padded batch of ``items`` (of :meth:`epoch_items`)."""
        from pairrepro.data.batches import collate_pairs

        return collate_pairs(split, items)


@dataclass(frozen=True)
class _Ranking(Task):
    """Ranking: 0/1 relevance labels, one score per candidate, trec_eval metrics."""

    default_select_metric: str = "map"

    def num_classes(self, label_map: list[str] | None, max_label: int) -> int:
        return 2  # relevant or not, whatever the data's label map says

    def metrics(self, split: EncodedSplit, scores: np.ndarray, num_classes: int,
                no_positive: str = "skip") -> dict[str, float]:
        from pairrepro.metrics import ranking_metrics

        return ranking_metrics(split.group_ids, split.labels, scores, pair_ids=split.pair_ids,
                               no_positive=no_positive)

    def prediction_frame(self, split: EncodedSplit, scores: np.ndarray) -> pd.DataFrame:
        frame = _id_columns(split)
        frame["score"] = scores
        return frame


@dataclass(frozen=True)
class _PairwiseRanking(_Ranking):
    """``max(0, margin - s(q, d+) + s(q, d-))``: ``B`` triples are ``2B`` pairs, positives first."""

    def batch_loss(self, outputs: torch.Tensor, labels: torch.Tensor, margin: float,
                   num_triples: int = 0) -> torch.Tensor:
        import torch

        scores = outputs.float()[:, 0]
        return torch.clamp(margin - scores[:num_triples] + scores[num_triples:], min=0).mean()

    def batch_correct(self, outputs: torch.Tensor, labels: torch.Tensor, num_triples: int = 0
                      ) -> torch.Tensor:
        """Triples whose positive is scored above its negative."""
        scores = outputs[:, 0]
        return (scores[:num_triples] > scores[num_triples:]).sum()

    def scores(self, outputs: np.ndarray) -> np.ndarray:
        return outputs[:, 0]

    def epoch_items(self, split: EncodedSplit, rng: np.random.Generator, negatives: int = 1,
                    max_negatives_per_query: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``[T, 2]`` (positive row, negative row) triples, ``negatives`` per positive."""
        from pairrepro.data.batches import sample_triples

        items = sample_triples(split, negatives, rng)
        lengths = split.lengths()
        return items, lengths[items[:, 0]] + lengths[items[:, 1]]

    def collate(self, split: EncodedSplit, items: np.ndarray) -> PairBatch:
        from pairrepro.data.batches import collate_triples

        return collate_triples(split, items)


@dataclass(frozen=True)
class _PointwiseRanking(_Ranking):
    """Ranking as two-class classification (CSRAN): candidates rank by the class-1 log-odds
    ``z1 - z0`` (a probability would round confident candidates to tied 1.0s)."""

    def scores(self, outputs: np.ndarray) -> np.ndarray:
        """The class-1 log-odds (float64); ``sigmoid`` of it is ``P(class 1)``."""
        return outputs[:, 1].astype(np.float64) - outputs[:, 0].astype(np.float64)

    def prediction_frame(self, split: EncodedSplit, scores: np.ndarray) -> pd.DataFrame:
        """``score`` = class-1 log-odds and ``prob_1`` = P(class 1)."""
        frame = super().prediction_frame(split, scores)
        frame["prob_1"] = 0.5 * (1.0 + np.tanh(scores / 2.0))  # a stable sigmoid
        return frame

    def epoch_items(self, split: EncodedSplit, rng: np.random.Generator, negatives: int = 1,
                    max_negatives_per_query: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Every pair, or all positives and up to ``max_negatives_per_query`` negatives each."""
        if max_negatives_per_query <= 0:
            return super().epoch_items(split, rng)
        from pairrepro.data.batches import sample_query_negatives

        items = sample_query_negatives(split, max_negatives_per_query, rng)
        return items, split.lengths()[items]


def _id_columns(split: EncodedSplit) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({"pair_id": split.pair_ids, "group_id": split.group_ids,
                         "label": split.labels})


CLASSIFICATION = Task("classification", "cross_entropy")
PAIRWISE_RANKING = _PairwiseRanking("ranking", "hinge", frozenset({"margin", "negatives"}),
                                    outputs=1)
POINTWISE_RANKING = _PointwiseRanking("ranking", "pointwise",
                                      frozenset({"max_negatives_per_query"}), outputs=2)
TASKS: dict[str, Task] = {t.loss: t for t in (CLASSIFICATION, PAIRWISE_RANKING,
                                               POINTWISE_RANKING)}
TASK_TYPES = ("classification", "ranking")
LOSSES = tuple(TASKS)


def task_for(type_: str, loss: str) -> Task:
    """The task of ``[task] type`` and ``loss`` (a ConfigError if they do not fit)."""
    if (task := TASKS.get(loss)) is None or task.type != type_:
        fitting = sorted(t.loss for t in TASKS.values() if t.type == type_)
        raise ConfigError(f"[task] loss: {loss!r} does not fit type {type_!r}",
                          hint=f"use one of {fitting}" if fitting else
                          f"type is one of {', '.join(TASK_TYPES)}")
    return task
