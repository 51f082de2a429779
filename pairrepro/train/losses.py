"""Losses of the papers and the conversion of model outputs to scores.

* ``cross_entropy`` (classification): softmax cross-entropy over ``num_classes`` logits.
* ``hinge`` (pairwise ranking): ``max(0, margin - s(q, d+) + s(q, d-))`` averaged over the
  (query, positive, negative) triples of a batch; the model outputs one score per pair.
* ``pointwise`` (ranking as two-class classification, CSRAN): cross-entropy on 2 logits;
  candidates are ranked by ``P(class 1)``, computed as its log-odds ``z1 - z0`` (the same
  order, but a probability rounds to exactly 1.0 in floating point for confident
  candidates, which would tie them artificially).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def num_outputs_for(loss: str, num_classes: int) -> int:
    """What ``ModelContext.num_outputs`` must be for ``loss``."""
    return {"cross_entropy": num_classes, "hinge": 1, "pointwise": 2}[loss]


def hinge_loss(pos_scores: torch.Tensor, neg_scores: torch.Tensor, margin: float
               ) -> torch.Tensor:
    """Mean pairwise max-margin loss."""
    return torch.clamp(margin - pos_scores + neg_scores, min=0).mean()


def batch_loss(outputs: torch.Tensor, labels: torch.Tensor, loss: str, margin: float,
               num_triples: int = 0) -> torch.Tensor:
    """The training loss of one batch (float32 even under bf16 autocast)."""
    outputs = outputs.float()
    if loss == "hinge":
        scores = outputs[:, 0]
        return hinge_loss(scores[:num_triples], scores[num_triples:], margin)
    return F.cross_entropy(outputs, labels)


def batch_correct(outputs: torch.Tensor, labels: torch.Tensor, loss: str, num_triples: int = 0
                  ) -> torch.Tensor:
    """Correct decisions in a training batch (class argmax, or positive scored above its
    negative for hinge triples): the running training accuracy."""
    if loss == "hinge":
        scores = outputs[:, 0]
        return (scores[:num_triples] > scores[num_triples:]).sum()
    return (outputs.argmax(dim=-1) == labels).sum()


def l2_penalty(params: list[nn.Parameter], coefficient: float) -> torch.Tensor | None:
    """``0.5 * coefficient * sum ||p||^2`` over ``params`` (the trainable ones)."""
    if coefficient <= 0 or not params:
        return None
    return 0.5 * coefficient * torch.stack([p.pow(2).sum() for p in params]).sum()


def outputs_to_scores(outputs: np.ndarray, loss: str) -> np.ndarray:
    """Raw model outputs ``[N, K]`` -> class probabilities ``[N, C]`` (cross-entropy) or
    ranking scores ``[N]`` (hinge: the output; pointwise: the log-odds of class 1, float64;
    ``sigmoid`` of it is ``P(class 1)``)."""
    if loss == "hinge":
        return outputs[:, 0]
    if loss == "pointwise":
        return outputs[:, 1].astype(np.float64) - outputs[:, 0].astype(np.float64)
    shifted = outputs - outputs.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(axis=1, keepdims=True)
    return probs
