"""Loss terms that do not depend on the task: the L2 penalty of the papers.

The task losses (cross-entropy, pairwise hinge, pointwise) and the conversion of model
outputs to scores belong to the tasks: :meth:`pairrepro.tasks.Task.batch_loss`,
:meth:`pairrepro.tasks.Task.scores`.

Which parameters the penalty covers is the recipe's ``[optim] l2_scope``. It matters for
fine-tuned pretrained vectors: under AdaGrad and Adam the dense penalty gradient is rescaled
per coordinate, so a word row that gets no data gradient (a rare word, absent from the
batches) shrinks at a rate set by the learning rate alone, whatever the coefficient (AdaGrad
lr 0.005 / l2 1e-5 leaves ~5% of a row's norm after 20,000 steps; Adam lr 4e-4 / l2 2e-6
~0.7% after 5,000): rare words lose their GloVe vectors.

* ``all``: every trainable parameter (the embedding tables included);
* ``weights``: the connection weights only: matrices (``dim >= 2``), no embedding tables
  and no biases (1-D parameters, and matrices a module names in ``bias_parameters``, e.g.
  CIN's filter bias ``B``), as CIN's paper defines theta;
* ``lazy``: every trainable parameter but the word-embedding tables densely, and of those
  tables only the rows of the words in the batch (the sparse "lazy" regularisation: a row
  is penalised when it is used, so an unused row keeps its vector).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

import torch
from torch import nn

from pairrepro.config import L2Scope
from pairrepro.models.layers import WordEmbedding


def l2_penalty(params: list[torch.Tensor], coefficient: float) -> torch.Tensor | None:
    """``0.5 * coefficient * sum ||p||^2`` over ``params``."""
    if coefficient <= 0 or not params:
        return None
    return 0.5 * coefficient * torch.stack([p.pow(2).sum() for p in params]).sum()


def bias_parameter_ids(model: nn.Module) -> set[int]:
    """Ids of the biases of ``model``: 1-D parameters, and the matrices that a module lists
    by name in its ``bias_parameters`` attribute (a bias that is not a vector)."""
    out = {id(p) for p in model.parameters() if p.dim() < 2}
    for module in model.modules():
        for name in getattr(module, "bias_parameters", ()):
            out.add(id(module.get_parameter(name)))
    return out


class L2Penalty:
    """``0.5 * l2 * ||theta||^2`` with theta as ``scope`` says (see the module docstring).

    Call it with the batch's word ids (``left``, ``right``) for the ``lazy`` scope; the
    other scopes ignore them. Returns ``None`` when there is nothing to add.
    """

    def __init__(self, model: nn.Module, coefficient: float, scope: L2Scope = "all") -> None:
        self.coefficient = coefficient
        trainable = [p for p in model.parameters() if p.requires_grad]
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        words = {id(m.embedding.weight): m.embedding.weight for m in model.modules()
                 if isinstance(m, WordEmbedding) and m.embedding.weight.requires_grad}
        self.rows: list[torch.Tensor] = []  # tables penalised on the batch's rows only
        self.dense: list[torch.Tensor]
        if scope == "all":
            self.dense = list(trainable)
        elif scope == "weights":
            biases = bias_parameter_ids(model)
            self.dense = [p for p in trainable if p.dim() >= 2 and id(p) not in embeddings
                          and id(p) not in biases]
        elif scope == "lazy":
            self.dense = [p for p in trainable if id(p) not in words]
            self.rows = list(words.values())
        else:
            raise ValueError(f"l2 scope {scope!r} is not one of {get_args(L2Scope)}")

    def __call__(self, *ids: torch.Tensor) -> torch.Tensor | None:
        if self.coefficient <= 0:
            return None
        dense = l2_penalty(self.dense, self.coefficient)
        rows = self._row_penalty(ids) if self.rows and ids else None
        if rows is None:
            return dense
        return rows if dense is None else dense + rows

    def _row_penalty(self, ids: Iterable[torch.Tensor]) -> torch.Tensor | None:
        used = torch.unique(torch.cat([t.reshape(-1) for t in ids]))
        return l2_penalty([table[used] for table in self.rows], self.coefficient)
