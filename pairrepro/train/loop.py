"""The epoch loop (train, select on dev, stop early, checkpoint, resume exactly on CPU),
:func:`predict_outputs`, the one scoring pass over a split, and :func:`score_splits`, a finished
run's (signals: docs/internals.md)."""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch import nn

from pairrepro.config import Recipe
from pairrepro.console import PlainProgress, step_progress
from pairrepro.data.batches import (
    EncodedSplit,
    EpochPlan,
    PairBatch,
    collate_pairs,
    eval_batches,
    subsample,
)
from pairrepro.device import (
    DistContext,
    all_reduce_sum,
    autocast,
    barrier,
    broadcast_object,
    capture_rng_state,
    compiled,
    gather_rows,
    restore_rng_state,
)
from pairrepro.errors import ConfigError, TrainingError
from pairrepro.models.base import PairModel
from pairrepro.runs import RunFolder, checkpoints
from pairrepro.train.optim import L2Penalty, build_optimizer, clip_gradients, trainable_parameters
from pairrepro.train.setup import TaskData, recipe_task


class Interrupted(Exception):
    """Training stopped by Ctrl-C or SIGTERM after a checkpoint was written."""


@dataclass
class TrainHooks:
    """Test and tooling hooks, called on every rank (``on_start`` after a resume's restore,
    ``on_epoch`` after the epoch's ``metrics.jsonl`` line, ``on_end`` however fit ends)."""

    on_step: Callable[[Trainer], object] = lambda trainer: None
    on_start: Callable[[Trainer], object] = lambda trainer: None
    on_epoch: Callable[[Trainer, dict[str, Any]], object] = lambda trainer, line: None
    on_end: Callable[[Trainer], object] = lambda trainer: None


@dataclass
class TrainState:
    """Where training stands (saved in every checkpoint; plain numbers and lists only)."""

    epoch: int = 0  # 0-based epoch in progress
    position: int = 0  # next batch of that epoch's order
    global_step: int = 0
    loss_sum: float = 0.0
    correct: float = 0.0
    pairs: float = 0.0
    # the step sums not yet added to the three above when the checkpoint was written: when
    # they are added up (every sync_every steps) must not depend on where a run stopped
    pending_loss: float = 0.0
    pending_correct: float = 0.0
    pending_pairs: int = 0
    train_time: float = 0.0
    best_value: float = -math.inf
    best_epoch: int = 0  # 1-based; 0 = none yet
    bad_epochs: int = 0
    done: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def _handling(signals: tuple[int, ...], handler: Callable[[int, Any], None]
              ) -> Iterator[None]:
    """``handler`` for ``signals`` during the block (off the main thread: nothing)."""
    try:
        previous = {sig: signal.signal(sig, handler) for sig in signals}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def deferred_stop(flag: dict[str, Any]) -> AbstractContextManager[None]:
    """The first SIGINT/SIGTERM sets ``flag['stop']``; a second raises ``KeyboardInterrupt``,
    or during a checkpoint write sets ``flag['abort']`` (:meth:`Trainer.saving`)."""
    def handler(signum: int, frame: Any) -> None:
        if flag["stop"] and flag.get("saving"):
            flag["abort"] = True
        elif flag["stop"]:
            raise KeyboardInterrupt
        flag["stop"] = True

    # the signals that stop training cleanly (checkpoint, status "interrupted", exit 130)
    return _handling((signal.SIGINT, signal.SIGTERM), handler)


def sigterm_as_interrupt() -> AbstractContextManager[None]:
    """SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does (outside the epoch loop), so a
    terminated run ends ``interrupted``, not ``running``."""
    return _handling((signal.SIGTERM,), signal.default_int_handler)


def eval_outputs(model: nn.Module, batch: PairBatch) -> torch.Tensor:
    """``batch``'s outputs in eval mode (no dropout), without gradients, and in fp32 whatever
    the training precision (bf16 ties scores); the model's mode is restored."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(batch.left, batch.left_mask, batch.right, batch.right_mask).float()
    model.train(was_training)
    return out


def predict_outputs(model: PairModel, split: EncodedSplit, batch_size: int,
                    device: torch.device, dist_ctx: DistContext | None = None) -> np.ndarray:
    """Raw outputs ``[N, num_outputs]`` (float32, input order), on every rank under DDP."""
    dist_ctx = dist_ctx or DistContext()
    width = model.ctx.num_outputs
    mine = eval_batches(split, batch_size)[dist_ctx.rank::dist_ctx.world_size]
    rows_parts, out_parts = [np.zeros(0, dtype=np.int64)], [np.zeros((0, width), np.float32)]
    for rows in mine:
        rows_parts.append(rows)
        out_parts.append(eval_outputs(model, collate_pairs(split, rows).to(device)).cpu().numpy())
    rows, outs = gather_rows(np.concatenate(rows_parts), np.concatenate(out_parts), dist_ctx)
    result = np.zeros((len(split), width), dtype=np.float32)
    result[rows] = outs
    return result


def score_splits(recipe: Recipe, model: PairModel, data: TaskData, folder: RunFolder,
                 device: torch.device, dist_ctx: DistContext, seed: int
                 ) -> dict[str, dict[str, float]]:
    """A finished run's metrics: train (or ``score_train_pairs`` of it), dev and tests scored
    once, their predictions saved."""
    task = recipe_task(recipe)
    metrics: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys([data.train_split, data.dev_split, *data.test_splits]):
        split = data.splits[name]
        if name == data.train_split:
            split = subsample(split, recipe.train.score_train_pairs, seed + 1,
                              by_group=task.by_group)
        outputs = predict_outputs(model, split, recipe.train.eval_batch_size, device, dist_ctx)
        scores = task.scores(outputs)
        key = "train" if name == data.train_split else "dev" if name == data.dev_split else name
        metrics[key] = task.metrics(split, scores, data.num_classes, data.no_positive)
        if dist_ctx.is_main:
            folder.write_predictions(key, task.prediction_frame(split, scores))
    return metrics


class Trainer:
    """Trains one model of one recipe with one seed in the run ``folder``; ``on_checkpoint``
    (rank 0) runs after each ``last.pt`` (the runner then drops the run ``--force`` replaced)."""

    def __init__(self, recipe: Recipe, model: PairModel, data: TaskData, folder: RunFolder,
                 seed: int, device: torch.device, dist_ctx: DistContext | None = None,
                 show_progress: bool = True, hooks: TrainHooks | None = None,
                 on_checkpoint: Callable[[], None] = lambda: None,
                 precision: str = "fp32") -> None:
        self.recipe = recipe
        self.task = recipe_task(recipe)
        self.module = model.to(device)
        self.data = data
        self.folder = folder
        self.on_checkpoint = on_checkpoint
        self.seed = seed
        self.device = device
        self.precision = precision  # resolved: "fp32" or "bf16" (training forward only)
        self.dist = dist_ctx or DistContext()
        self.show_progress = show_progress and self.dist.is_main
        self.hooks = hooks or TrainHooks()
        self.params = trainable_parameters(self.module)
        self.l2 = L2Penalty(self.module, recipe.optim.l2, recipe.optim.l2_scope)
        self.optimizer = build_optimizer(self.module, recipe.optim)
        # per-epoch exponential decay (lr_decay = 1 keeps the rate constant)
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(self.optimizer,
                                                                gamma=recipe.optim.lr_decay)
        self.model: nn.Module = self.module
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [device.index] if device.type == "cuda" else None
            self.model = DistributedDataParallel(self.module, device_ids=ids)
        if recipe.train.compile:  # on widened batches: few shapes, few graphs
            self.model = compiled(self.model, device)
        self.state = TrainState()
        self.steps_in_epoch = 0  # of the epoch in progress (for checkpoints/last.json)
        self.stop_flag: dict[str, Any] = {"stop": False, "saving": 0, "abort": False}
        # loss values are read back every step on CPU; on GPU rarely, to avoid syncs
        self.sync_every = 1 if device.type == "cpu" else 50
        # batches collated ahead by a thread on CUDA; on a CPU the cores are the compute's
        self.batches_ahead = 0 if device.type == "cpu" else 2

    @contextmanager
    def saving(self) -> Iterator[None]:
        """A checkpoint write no signal cuts: a second signal inside it raises
        ``KeyboardInterrupt`` once the outermost block is done."""
        flag = self.stop_flag
        flag["saving"] += 1
        try:
            yield
        finally:
            flag["saving"] -= 1
        if not flag["saving"] and flag["abort"]:
            flag["abort"] = False
            raise KeyboardInterrupt("interrupted again while a checkpoint was written; "
                                    "checkpoint saved")

    def save_last(self) -> None:
        """Write ``last.pt`` (rank 0), unless the weights went non-finite (TrainingError)."""
        if not all(bool(torch.isfinite(p).all()) for p in self.params):
            self._check_finite(math.nan)
        if self.dist.is_main:
            with self.saving():
                st = self.state
                checkpoints.save_checkpoint(self.folder.checkpoint("last"), {
                    "model": self.module.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(), "rng": capture_rng_state(),
                    "progress": dict(vars(st)),
                    "meta": {"recipe": self.recipe.name, "seed": self.seed}})
                self.folder.write_progress({
                    "epochs_done": st.epoch, "step": st.position,
                    "steps": self.steps_in_epoch, "global_step": st.global_step,
                    "epochs": self.recipe.train.epochs,
                    "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                self.on_checkpoint()

    def train_step(self, batch: PairBatch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """One optimiser step on ``batch`` (on the device); returns (loss * pairs, correct
        decisions, pairs)."""
        recipe = self.recipe
        with autocast(self.device, self.precision):
            outputs = self.model(batch.left, batch.left_mask, batch.right, batch.right_mask)
        loss = self.task.batch_loss(outputs, batch.labels, recipe.task.margin,
                                    batch.num_triples)
        penalty = self.l2(batch.left, batch.right)
        total = loss if penalty is None else loss + penalty
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        clip_gradients(self.params, recipe.optim.clip_norm)
        self.optimizer.step()
        with torch.no_grad():
            correct = self.task.batch_correct(outputs.detach(), batch.labels,
                                              batch.num_triples)
        return loss.detach() * batch.num_pairs, correct, batch.num_pairs

    def _check_finite(self, value: float) -> None:
        if not math.isfinite(value):
            raise TrainingError(
                f"non-finite training loss or weights ({value}) in epoch {self.state.epoch + 1} "
                f"near batch {self.state.position} of run {self.folder.path}",
                hint="lower [optim] lr, set [optim] clip_norm, or check the data; the last "
                     f"good checkpoint is kept in {self.folder.checkpoint_dir}")

    def fit(self, resume: bool = False) -> TrainState:
        """Run the epochs left (after ``last.pt`` with ``resume``); the final state. The model
        ends holding the weights chosen on dev."""
        if resume:
            resume_state = checkpoints.load_checkpoint(self.folder.checkpoint("last"))
            self.module.load_state_dict(resume_state["model"])
            self.optimizer.load_state_dict(resume_state["optimizer"])
            self.scheduler.load_state_dict(resume_state["scheduler"])
            restore_rng_state(resume_state["rng"])
            self.state = TrainState(**resume_state["progress"])
        self.module.train()
        progress = step_progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[speed]} pairs/s"),
            TimeRemainingColumn(), enabled=self.show_progress)
        self.hooks.on_start(self)
        try:
            with progress, deferred_stop(self.stop_flag):
                while not self.state.done and self.state.epoch < self.recipe.train.epochs:
                    self._run_epoch(progress)
        finally:
            self.hooks.on_end(self)
        if self.state.best_epoch == 0:
            raise TrainingError(f"{self.recipe.source}: no epoch was trained",
                                hint="[train] epochs must be >= 1")
        barrier(self.dist)  # rank 0 writes best.pt; the other ranks read it only after
        best = checkpoints.load_checkpoint(self.folder.checkpoint("best"))
        self.module.load_state_dict(best["model"])
        return self.state

    def _run_epoch(self, progress: Progress | PlainProgress) -> None:
        recipe, st = self.recipe, self.state
        plan = EpochPlan(self.data.train, recipe.train.batch_size, self.seed, st.epoch,
                         self.task, recipe.task.negatives,
                         max_negatives_per_query=recipe.task.max_negatives_per_query)
        self.steps_in_epoch = len(plan)
        task = progress.add_task(f"epoch {st.epoch + 1}/{recipe.train.epochs}", total=len(plan),
                                 completed=st.position, loss="-", speed="-")
        # float32 as the step losses; a resumed run starts from the sums it had not flushed
        loss_acc = torch.tensor(st.pending_loss, device=self.device, dtype=torch.float32)
        correct_acc = torch.tensor(int(st.pending_correct), device=self.device,
                                   dtype=torch.long)
        pairs_acc = st.pending_pairs
        st.pending_loss, st.pending_correct, st.pending_pairs = 0.0, 0.0, 0
        started = time.perf_counter()
        every = recipe.train.checkpoint_every
        every_s = recipe.train.checkpoint_minutes * 60
        last_saved = time.monotonic()

        def flush() -> None:
            nonlocal loss_acc, correct_acc, pairs_acc
            st.loss_sum += float(loss_acc)
            st.correct += float(correct_acc)
            st.pairs += pairs_acc
            loss_acc.zero_()
            correct_acc.zero_()
            pairs_acc = 0
            self._check_finite(st.loss_sum)

        for batch in plan.loaded(st.position, self.device, self.batches_ahead,
                                 recipe.train.compile, self.dist.rank, self.dist.world_size):
            loss_sum, correct, pairs = self.train_step(batch)
            loss_acc += loss_sum
            correct_acc += correct
            pairs_acc += pairs
            st.position += 1
            st.global_step += 1
            if st.global_step % self.sync_every == 0 or st.position == len(plan):
                flush()
                elapsed = st.train_time + time.perf_counter() - started
                progress.update(task, advance=0, completed=st.position,
                                loss=f"{st.loss_sum / max(st.pairs, 1):.4f}",
                                speed=f"{st.pairs / max(elapsed, 1e-9):.0f}")
            self.hooks.on_step(self)
            # rank 0's flag and clock decide, so every rank saves at the same step; one
            # broadcast per step, a second only when a checkpoint is due
            due = bool(every_s) and time.monotonic() - last_saved >= every_s
            save = bool(broadcast_object(self.stop_flag["stop"] or due, self.dist))
            stop = save and bool(broadcast_object(self.stop_flag["stop"], self.dist))
            if save or (every and st.global_step % every == 0):
                # not flushed here: the checkpoint keeps the open sums as they are
                st.pending_loss, st.pending_correct, st.pending_pairs = (
                    float(loss_acc), float(correct_acc), pairs_acc)
                self._check_finite(st.pending_loss)
                st.train_time += time.perf_counter() - started
                started = time.perf_counter()
                self.save_last()
                # still in the accumulators
                st.pending_loss, st.pending_correct, st.pending_pairs = 0.0, 0.0, 0
                last_saved = time.monotonic()
                if stop:
                    raise Interrupted(f"interrupted in epoch {st.epoch + 1} at batch "
                                      f"{st.position}/{len(plan)}; checkpoint saved")
        flush()
        st.train_time += time.perf_counter() - started
        progress.remove_task(task)
        self._end_epoch(plan)

    def _end_epoch(self, plan: EpochPlan) -> None:
        recipe, st = self.recipe, self.state
        loss_sum, correct, pairs = all_reduce_sum([st.loss_sum, st.correct, st.pairs], self.dist)
        outputs = predict_outputs(self.module, self.data.dev, recipe.train.eval_batch_size,
                                  self.device, self.dist)
        dev = self.task.metrics(self.data.dev, self.task.scores(outputs), self.data.num_classes,
                                self.data.no_positive)
        metric = recipe.select_metric
        if metric not in dev:
            raise ConfigError(f"{recipe.where('train', 'select_metric')}: [train] "
                              f"select_metric: {metric!r} is not "
                              f"computed for this task", hint=f"choose one of {sorted(dev)}")
        epoch = st.epoch + 1
        line = {
            "epoch": epoch, "train_loss": loss_sum / max(pairs, 1),
            "train_running_accuracy": correct / max(pairs, 1),
            "dev": dev, "lr": self.optimizer.param_groups[0]["lr"], "train_time_s": st.train_time,
            "pairs_per_s": plan.num_items / max(st.train_time, 1e-9),
            "train_pairs": plan.num_items, "steps": len(plan),
        }
        if st.best_epoch == 0 or dev[metric] > st.best_value:
            st.best_value, st.best_epoch, st.bad_epochs = dev[metric], epoch, 0
            if self.dist.is_main:
                checkpoints.save_checkpoint(self.folder.checkpoint("best"), {
                    "model": self.module.state_dict(), "epoch": epoch, "dev": dev})
        else:
            st.bad_epochs += 1
        line["best_epoch"] = st.best_epoch
        st.history.append(line)
        self.scheduler.step()
        patience = recipe.train.patience
        st.done = bool(patience and st.bad_epochs >= patience)
        st.epoch, st.position = epoch, 0
        st.loss_sum = st.correct = st.pairs = st.train_time = 0.0
        with self.saving():  # last.pt and metrics.jsonl: both or neither
            self.save_last()
            if self.dist.is_main:
                self.folder.write_metrics(st.history)
        self.hooks.on_epoch(self, line)
