"""Majority class: the floor a classifier must clear (ties: the first label)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext, PairModel, register_model


@register_model("majority_class")
class MajorityClass(PairModel):
    """One-hot logits of the training split's most frequent label, whatever the pair."""

    needs_training = False
    constant_output = True

    def __init__(self, ctx: ModelContext) -> None:
        super().__init__(ctx)
        if ctx.num_outputs < 2:
            raise ConfigError("majority_class predicts a class: it needs a classification "
                              f"task (2 or more outputs), not {ctx.num_outputs} output")
        # a buffer, so the checkpoint holds the chosen label (-1: not fitted yet)
        self.register_buffer("label", torch.tensor(-1, dtype=torch.int64))

    def fit_statistics(self, left_ids: Sequence[Sequence[int]], right_ids: Sequence[Sequence[int]],
                       labels: Sequence[int] | None = None) -> None:
        if labels is None or len(labels) == 0:
            raise ConfigError("majority_class: the training split has no labels to count")
        counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=self.ctx.num_outputs)
        self.label.fill_(int(np.argmax(counts)))

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        if int(self.label) < 0:
            raise ConfigError("majority_class: fit_statistics must be called before scoring")
        logits = torch.zeros(left.size(0), self.ctx.num_outputs, device=left.device)
        logits[:, int(self.label)] = 1.0
        return logits
