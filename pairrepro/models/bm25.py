"""BM25 baseline (MV-LSTM Tables 3 and 5) with Lucene's formula (:mod:`pairrepro.data.negatives`).

The left text is the query, the right the document; the collection statistics come from the
distinct right texts of the training pairs. With two outputs it outputs ``[0, score -
threshold]``, the threshold maximising class 1's F1 on the training pairs (a constant shift
leaves every ranking unchanged).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.metrics import precision_recall_curve

from pairrepro.data.batches import pad
from pairrepro.data.negatives import LUCENE_B, LUCENE_K1, lucene_idf, lucene_term_weight
from pairrepro.data.prepared import UNK_ID
from pairrepro.errors import ConfigError
from pairrepro.models.base import (
    Allowed,
    ModelContext,
    PairModel,
    at_least,
    check_hparams,
    register_model,
)


@register_model("bm25")
class BM25(PairModel):
    """Lucene BM25 score of the right text for the left text as query; ``match_unknown``:
    whether ``<unk>`` tokens match each other (off: all unknown words share one id)."""

    needs_training = False

    def __init__(self, ctx: ModelContext, k1: float = LUCENE_K1, b: float = LUCENE_B,
                 match_unknown: bool = False) -> None:
        super().__init__(ctx)
        if ctx.num_outputs not in (1, 2):
            raise ConfigError(f"bm25 gives one score per pair: it can rank (1 or 2 outputs) or "
                              f"decide between 2 classes, not {ctx.num_outputs}")
        check_hparams("bm25", k1=(k1, at_least(0)),
                      b=(b, Allowed("in 0..1", lambda value: 0 <= value <= 1)))
        self.k1 = float(k1)
        self.b = float(b)
        self.match_unknown = match_unknown
        # buffers, so checkpoints hold the statistics
        self.register_buffer("idf", torch.zeros(ctx.vocab_size, dtype=torch.float64))
        self.register_buffer("avg_doc_len", torch.ones((), dtype=torch.float64))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))
        self.register_buffer("threshold", torch.zeros((), dtype=torch.float64))

    def fit_statistics(self, left_ids: Sequence[Sequence[int]], right_ids: Sequence[Sequence[int]],
                       labels: Sequence[int] | None = None) -> None:
        """Collection statistics; with ``labels`` (and two outputs) the threshold too."""
        docs = {tuple(int(t) for t in doc if int(t) != self.ctx.padding_idx) for doc in right_ids}
        if not docs:
            raise ConfigError("bm25: fit_statistics got no training documents")
        doc_freq = np.zeros(self.ctx.vocab_size, dtype=np.int64)
        for doc in docs:
            doc_freq[np.unique(np.asarray(doc, dtype=np.int64))] += 1
        lengths = np.array([len(doc) for doc in docs], dtype=np.float64)
        self.idf.copy_(torch.from_numpy(lucene_idf(doc_freq, len(docs))))
        self.avg_doc_len.fill_(max(float(lengths.mean()), 1e-9))
        self.fitted.fill_(True)
        self.threshold.fill_(0.0)
        if labels is not None and self.ctx.num_outputs == 2:
            scores = self.score_ids(left_ids, right_ids)
            self.threshold.fill_(best_f1_threshold(scores, np.asarray(labels) == 1))

    def score_ids(self, left_ids: Sequence[Sequence[int]], right_ids: Sequence[Sequence[int]],
                  batch_size: int = 1024) -> np.ndarray:
        """BM25 scores ``[N]`` (float64) of pairs given as token id lists."""
        out = []
        for start in range(0, len(left_ids), batch_size):
            end = start + batch_size
            left, left_mask = pad([np.asarray(s, dtype=np.int64) for s in left_ids[start:end]])
            right, right_mask = pad([np.asarray(s, dtype=np.int64)
                                     for s in right_ids[start:end]])
            out.append(self._score(left, left_mask, right, right_mask)[:, 0].numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        score = self._score(left, left_mask, right, right_mask)
        if self.ctx.num_outputs == 2:
            return torch.cat([torch.zeros_like(score), score - self.threshold],
                             dim=1).to(torch.float32)
        return score.to(torch.float32)

    def _score(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
               right_mask: torch.Tensor) -> torch.Tensor:
        """``[B, 1]`` float64 BM25 scores."""
        if not bool(self.fitted):
            raise ConfigError("bm25: fit_statistics must be called before scoring")
        query_ok = left_mask if self.match_unknown else left_mask & (left != UNK_ID)
        # tf of every query token in its document
        same = (left.unsqueeze(2) == right.unsqueeze(1)) & right_mask.unsqueeze(1)
        tf = same.sum(dim=2).to(torch.float64)
        doc_len = right_mask.sum(dim=1, keepdim=True).to(torch.float64)
        weight = lucene_term_weight(tf, doc_len, self.avg_doc_len, self.k1, self.b)
        per_term = self.idf[left] * weight * query_ok
        return per_term.sum(dim=1, keepdim=True)


def best_f1_threshold(scores: np.ndarray, positive: np.ndarray) -> float:
    """The threshold ``t`` whose rule "class 1 iff score > t" gives the highest F1 of class 1
    (the highest on ties), moved midway down to the next lower distinct score."""
    if len(scores) == 0 or not positive.any():
        return 0.0
    precision, recall, thresholds = precision_recall_curve(positive, scores)
    precision, recall = precision[:-1], recall[:-1]  # the last point has no threshold
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(denom), where=denom > 0)
    best = len(f1) - 1 - int(np.argmax(f1[::-1]))  # ties: the highest threshold
    chosen = thresholds[best]
    lower = np.unique(scores[scores < chosen])
    return float((chosen + lower[-1]) / 2) if len(lower) else float(chosen - 1.0)
