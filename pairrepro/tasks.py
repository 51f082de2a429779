"""Task types: the one place that knows what a recipe's ``[task] type``/``loss`` mean.

Three tasks (one object each):

* ``classification`` / ``cross_entropy``: softmax cross-entropy over the classes;
* ``ranking`` / ``hinge`` (pairwise ranking): ``max(0, margin - s(q, d+) + s(q, d-))`` over
  sampled (query, positive, negative) triples; the model outputs one score per pair;
* ``ranking`` / ``pointwise`` (ranking as two-class classification, CSRAN): cross-entropy on
  two logits, candidates ranked by the class-1 log-odds.

Each task owns which ``[task]`` keys it uses (:attr:`Task.recipe_keys`); a key it does not
use must keep its default, so ``max_negatives_per_query`` on a hinge recipe is an error
rather than silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from pairrepro.errors import ConfigError


@dataclass(frozen=True)
class Task:
    """What one task type means for the model, the loss, the epoch and the predictions."""

    type: str  # the recipe's [task] type
    loss: str  # the recipe's [task] loss
    # the [task] keys this task uses besides type and loss
    recipe_keys: frozenset[str] = frozenset()

    @property
    def is_ranking(self) -> bool:
        return self.type == "ranking"


CLASSIFICATION = Task("classification", "cross_entropy")
PAIRWISE_RANKING = Task("ranking", "hinge", frozenset({"margin", "negatives"}))
POINTWISE_RANKING = Task("ranking", "pointwise", frozenset({"max_negatives_per_query"}))
TASKS: dict[str, Task] = {t.loss: t for t in (CLASSIFICATION, PAIRWISE_RANKING,
                                               POINTWISE_RANKING)}
TASK_TYPES = ("classification", "ranking")
LOSSES = tuple(TASKS)


def task_for(type_: str, loss: str) -> Task:
    """The task of a recipe's ``[task] type`` and ``loss`` (a ConfigError if they do not
    fit together)."""
    task = TASKS.get(loss)
    if task is None or task.type != type_:
        fitting = sorted(t.loss for t in TASKS.values() if t.type == type_)
        raise ConfigError(f"[task] loss: {loss!r} does not fit type {type_!r}",
                          hint=f"use one of {fitting}" if fitting else
                          f"type is one of {', '.join(TASK_TYPES)}")
    return task
