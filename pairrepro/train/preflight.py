"""``pairrepro preflight RECIPE``: a few training steps on one fixed batch through the real
training step, with health checks and measured speed (what it checks: docs/preflight.md), on
the training split, else a stand-in (:func:`preflight_data`)."""

from __future__ import annotations

import datetime as _dt
import math
import platform
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from torch.utils.flop_counter import FlopCounterMode

from pairrepro import paths
from pairrepro.config import Recipe
from pairrepro.console import step_progress
from pairrepro.data.batches import EpochPlan, PairBatch
from pairrepro.data.prepared import PAD, UNK, PreparedDataset, is_prepared, load_prepared
from pairrepro.device import autocast, cpu_fingerprint, device_name, resolve_precision
from pairrepro.errors import DataError, PairreproError
from pairrepro.models.base import PairModel, count_parameters
from pairrepro.models.layers import WordEmbedding
from pairrepro.planning.preflight_record import Check, PreflightRecord
from pairrepro.runs import RunFolder
from pairrepro.train.loop import Trainer, eval_outputs
from pairrepro.train.setup import TaskData, build_recipe_model, load_task_data, recipe_task

CHECKS = ("loss_falls", "finite", "gradients", "embedding_norms", "outputs_vary", "padding")
# the recipes' first-step transients (check_loss_falls) are over within 3 steps, within 7 for
# AdaGrad at the SC rate 0.3 (ARC-I/II): the last half of 10 steps comes after them
DEFAULT_STEPS = 10
NORM_TOLERANCE = 1e-5  # relative change of an unused pretrained row's norm that still passes
EXTRA_PADDING = 5  # pad tokens added to each text by the padding check
PADDING_PAIRS = 8  # pairs of the batch the padding check scores twice
PADDING_TOLERANCE = 1e-4  # max |difference| / (1 + max |output|) that still passes
CONSTANT_TOLERANCE = 1e-6  # outputs whose spread is below this (relative) are constant


# (min, max) token lengths of (left, right) the synthetic stand-in draws per text, for timing
# (sources: docs/internals.md, "Preflight")
STAND_IN_LENGTHS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "snli": ((7, 21), (4, 12)),
    "multinli": ((10, 34), (5, 17)),  # rough: longer premises than SNLI
    "quora": ((6, 16), (6, 16)),  # rough: short questions
    "scitail": ((10, 24), (8, 16)),  # rough
    "ubuntu": ((40, 132), (8, 26)),
    "yahoo": ((5, 50), (5, 50)),
    "reuters_sc": ((4, 14), (4, 14)),  # rough: two clauses of an 8-28-word sentence
    "trecqa": ((6, 16), (15, 45)),  # rough
    "twitter_url": ((8, 18), (8, 18)),  # rough
}
DEFAULT_LENGTHS = ((8, 24), (8, 24))
STAND_IN_VOCAB = 30000  # words of the synthetic stand-in vocabulary


def _stand_in_dataset(recipe: Recipe, seed: int, pairs: int
                      ) -> tuple[PreparedDataset, str]:
    """Random words at the dataset's typical lengths, as a prepared dataset in memory."""
    from pairrepro.data.formats import yahoo_l4
    from pairrepro.data.manifests import load_manifest

    label_map: list[str] = ["0", "1"]
    lengths = STAND_IN_LENGTHS.get(recipe.data.dataset, DEFAULT_LENGTHS)
    try:
        manifest = load_manifest(recipe.data.dataset)
        label_map = list(manifest.label_map) or label_map
        options = manifest.variant(recipe.data.variant or None).options
        if isinstance(options, yahoo_l4.Options):  # a construction's own length filter
            declared = (options.lengths[0], options.lengths[1])
            lengths = (declared, declared)
    except PairreproError:
        pass
    rng = np.random.default_rng([seed, 2718])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, rng.integers(2, 11))) for _ in range(STAND_IN_VOCAB)}
    vocab = [PAD, UNK, *sorted(words - {PAD, UNK})]
    ranking = recipe_task(recipe).is_ranking
    per_group = 5 if ranking else 1
    rows = []
    for i in range(pairs):
        group = i // per_group
        if i % per_group == 0:
            left = rng.integers(2, len(vocab), rng.integers(lengths[0][0], lengths[0][1] + 1))
        right = rng.integers(2, len(vocab), rng.integers(lengths[1][0], lengths[1][1] + 1))
        label = int(i % per_group == 0) if ranking else int(rng.integers(len(label_map)))
        rows.append((f"s{i}", f"g{group}", left.tolist(), right.tolist(), label))
    frame = pd.DataFrame(rows, columns=["pair_id", "group_id", "left_ids", "right_ids", "label"])
    split = recipe.data.train_split
    prepared = PreparedDataset(root=Path("<stand-in>"), vocab=vocab,
                               train_counts=[0, 0, *[1000] * (len(vocab) - 2)],
                               stats={"label_map": label_map}, _splits={split: frame})
    note = (f"{recipe.data.dataset} is not prepared here: {pairs} pairs of random words, "
            f"lengths {lengths[0][0]}-{lengths[0][1]} / {lengths[1][0]}-{lengths[1][1]} "
            f"tokens, {len(vocab)}-word vocabulary (timing only)")
    return prepared, note


def preflight_data(recipe: Recipe, seed: int, stand_in: bool = False
                   ) -> tuple[Recipe, PreparedDataset, TaskData, dict[str, Any]]:
    """The training split, else a prepared stand-in (dev first), else (``stand_in``) random
    words: the recipe training on it, the prepared dataset, the data and a description."""
    d = recipe.data
    info: dict[str, Any] = {"dataset": d.dataset, "variant": d.variant, "stand_in": None,
                            "synthetic": False}
    if is_prepared(d.dataset, d.variant):
        prepared = load_prepared(d.dataset, d.variant or None)
        present = prepared.split_names
        order = [d.train_split, d.dev_split, *d.test_splits, *present]
        split = next((s for s in order if s in present), None)
        if split is None:
            raise DataError(f"{prepared.root} holds no split", hint="re-run pairrepro preprocess")
        if split != d.train_split:
            info["stand_in"] = (f"the training split {d.train_split!r} is not prepared here: "
                                f"split {split!r} stands in for it")
    elif stand_in:
        split = d.train_split
        prepared, info["stand_in"] = _stand_in_dataset(
            recipe, seed, max(4 * recipe.train.batch_size, 256))
        info["synthetic"] = True
    else:
        from pairrepro.data.prepared import data_status

        raise DataError(f"{d.dataset}{'/' + d.variant if d.variant else ''} is not prepared",
                        hint=f"{data_status(d.dataset, d.variant)[1]}; or pass --stand-in to "
                             "time the model on random words")
    run_recipe = recipe.with_changes(data={"train_split": split})
    _, data = load_task_data(run_recipe, seed, [split], prepared=prepared)
    info.update(split=split, pairs=len(data.train))
    return run_recipe, prepared, data, info


def embeddings_here(recipe: Recipe) -> str | None:
    """``None`` when the recipe's pretrained vectors can be read here, else why not."""
    emb = recipe.embeddings
    if emb.source == "glove-file" and not Path(emb.path).is_file():
        return f"{emb.path} is not here"
    if emb.source == "glove-6b-50d":
        from pairrepro.data.embeddings import glove_package_files

        try:
            glove_package_files()
        except PairreproError as exc:
            return exc.message
    return None


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory so far: CUDA ``max_memory_allocated``, else the process's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    # ru_maxrss is KiB on Linux, bytes on macOS
    scale = 1 if platform.system() == "Darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _pick_batch(plan: EpochPlan) -> int:
    """The position of the batch with the median mean length: a typical step to time."""
    lengths = plan.split.lengths()
    # items are pair rows, or triples of them
    means = [float(lengths[plan.items[rows].reshape(-1)].mean()) for rows in plan.batches]
    order = np.argsort(means, kind="stable")
    return int(order[len(order) // 2])


def _eval_loss(model: PairModel, batch: PairBatch, recipe: Recipe) -> tuple[float, torch.Tensor]:
    out = eval_outputs(model, batch)
    return float(recipe_task(recipe).batch_loss(out, batch.labels, recipe.task.margin,
                                                batch.num_triples)), out


def check_padding(model: PairModel, batch: PairBatch) -> Check:
    """``padding``: more pad tokens leave the outputs of the batch's first pairs alone."""
    base = batch.map_tensors(lambda t: t[:PADDING_PAIRS])
    a = eval_outputs(model, base)
    b = eval_outputs(model, base.widened((EXTRA_PADDING, EXTRA_PADDING + 2)))
    diff = float((a - b).abs().max()) / (1.0 + float(a.abs().max()))
    ok = diff <= PADDING_TOLERANCE
    return Check("padding", "pass" if ok else "fail",
                 f"outputs moved by {diff:.2g} (relative) with {EXTRA_PADDING} more pads"
                 + ("" if ok else f" > {PADDING_TOLERANCE:g}: padding leaks into the output"),
                 diff)


def check_loss_falls(before: float, after_steps: list[float], steps_asked: int,
                     finite: bool) -> Check:
    """``loss_falls``: the lowest eval-mode loss of the last half of the steps is below
    ``before`` (the first steps may rise); ``n/a`` when the budget cut the steps short."""
    if not finite or not after_steps:
        return Check("loss_falls", "fail", "no finite loss after the steps")
    ran = len(after_steps)
    first = ran // 2  # 0-based index of the first step of the last half
    best = min(after_steps[first:])
    at = first + after_steps[first:].index(best) + 1
    peak = max(after_steps)
    falls = best < before or (before == 0 and best == 0)
    judged = f"step {ran}" if first + 1 == ran else f"steps {first + 1}-{ran}"
    detail = (f"batch loss {before:.4g} before; lowest over {judged} "
              f"{best:.4g} (step {at}), last {after_steps[-1]:.4g}"
              + (f", peak {peak:.4g} at step {after_steps.index(peak) + 1}"
                 if peak > before else ""))
    if falls:
        return Check("loss_falls", "pass", detail, best - before)
    if ran < steps_asked:
        return Check("loss_falls", "n/a", detail + f": only {ran} of {steps_asked} steps fitted "
                     "in the budget, too few to tell the optimiser's first-step transient from "
                     "a model that does not learn (give more --budget)", best - before)
    return Check("loss_falls", "fail", detail + ": it did not fall (lower [optim] lr, check the "
                 "init and the data)", best - before)


def check_outputs_vary(outputs: torch.Tensor) -> Check:
    """``outputs_vary``: some output differs across the rows of the batch."""
    spread = float((outputs.max(dim=0).values - outputs.min(dim=0).values).max())
    scale = max(1.0, float(outputs.abs().max()))
    ok = spread > CONSTANT_TOLERANCE * scale
    return Check("outputs_vary", "pass" if ok else "fail",
                 f"largest spread of an output across the batch {spread:.3g}"
                 + ("" if ok else ": the model outputs the same for every pair"), spread)


def gradient_probe(model: PairModel, batch: PairBatch, recipe: Recipe, device: torch.device,
                   precision: str = "fp32") -> tuple[Check, int]:
    """``gradients``: every trainable tensor gets a non-zero gradient from the data loss;
    and the FLOPs of that forward and backward."""
    task = recipe_task(recipe)
    model.zero_grad(set_to_none=True)
    with FlopCounterMode(display=False) as counter:  # as bench/flops.py counts
        with autocast(device, precision):
            out = model(batch.left, batch.left_mask, batch.right, batch.right_mask)
        task.batch_loss(out, batch.labels, recipe.task.margin, batch.num_triples).backward()
    flops = int(counter.get_total_flops())
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    dead = [n for n, p in named if p.grad is None or not bool(p.grad.abs().sum() > 0)]
    if task.num_outputs(2) == 1:
        # a pairwise loss sees only score differences: a one-number bias on the score adds
        # the same to both and never gets a gradient, by construction
        shift = {n for n, p in named if p.numel() == 1 and n.endswith("bias")}
        dead = [n for n in dead if n not in shift]
    model.zero_grad(set_to_none=True)
    if dead:
        shown = ", ".join(dead[:6]) + (f" (+{len(dead) - 6} more)" if len(dead) > 6 else "")
        return Check("gradients", "fail", f"{len(dead)} of {len(named)} trainable tensors get "
                     f"a zero gradient from the loss: {shown}", float(len(dead))), flops
    return Check("gradients", "pass", f"all {len(named)} trainable tensors get a non-zero "
                 "gradient", 0.0), flops


def embedding_norms(model: PairModel, recipe: Recipe, batch: PairBatch) -> Callable[[], Check]:
    """``embedding_norms``: pretrained trainable word rows the batch never uses keep their
    norm (within :data:`NORM_TOLERANCE`; docs/internals.md, "L2 scope"); the norms are taken
    now, the returned check compares them after the steps."""
    tables = [m.embedding.weight for m in model.modules()
              if isinstance(m, WordEmbedding) and m.embedding.weight.requires_grad]
    why_not = ("random embeddings (learned from scratch)" if recipe.embeddings.source == "random"
               else "frozen embeddings" if not tables else "")
    if why_not:
        return lambda: Check("embedding_norms", "n/a", why_not)
    used = torch.unique(torch.cat([batch.left.reshape(-1), batch.right.reshape(-1)]))
    before: list[tuple[torch.Tensor, torch.Tensor]] = []
    with torch.no_grad():
        for table in tables:
            norms = table.detach().float().norm(dim=1)
            unused = norms > 0  # the padding row is zero and stays so
            unused[used.to(norms.device)] = False
            rows = unused.nonzero().squeeze(1)
            before.append((rows, norms[rows].clone()))

    def check() -> Check:
        worst, count = 0.0, 0
        for table, (rows, norms) in zip(tables, before, strict=True):
            with torch.no_grad():
                after = table.detach().float()[rows].norm(dim=1)
            if len(rows):
                worst = max(worst, float(((after - norms).abs() / norms).max()))
            count += len(rows)
        ok = worst <= NORM_TOLERANCE
        return Check("embedding_norms", "pass" if ok else "fail",
                     f"{count} pretrained rows unused by the batch: largest relative norm "
                     f"change {worst:.2g}" + ("" if ok else
                                             " (an L2 term or weight decay shrinks rows "
                                             "without data: use [optim] l2_scope = "
                                             "\"weights\" or \"lazy\")"), worst)

    return check


def run_preflight(recipe: Recipe, overrides: list[str] | None = None,
                  steps: int = DEFAULT_STEPS,
                  budget_s: float = 300.0, device: torch.device | None = None, seed: int = 1,
                  stand_in: bool = False, show_progress: bool = False) -> PreflightRecord:
    """Preflight ``recipe``; failed checks are in the result, not raised."""
    from pairrepro.device import seed_everything

    device = device or torch.device("cpu")
    precision = resolve_precision(recipe.train.precision, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seed_everything(seed, recipe.train.deterministic)
    run_recipe, prepared, data, data_info = preflight_data(recipe, seed, stand_in)
    missing = embeddings_here(recipe)
    model, emb_info = build_recipe_model(run_recipe, prepared, data.num_classes, seed,
                                         with_embeddings=missing is None)
    model = model.to(device)
    result = PreflightRecord(
        recipe=recipe.name, model=recipe.model.name, source=paths.project_relative(recipe.source),
        overrides=list(overrides or []),
        device=str(device), device_name=device_name(device),
        hardware="gpu" if device.type == "cuda" else "cpu", threads=torch.get_num_threads(),
        torch_version=torch.__version__, measured=_dt.date.today().isoformat(),
        precision=precision, cpu=cpu_fingerprint(), config=recipe.to_dict(),
        data=data_info, embeddings={
            "source": recipe.embeddings.source, "dim": recipe.embeddings.dim,
            "trainable": recipe.embeddings.trainable, "oov": emb_info.get("embedding_oov"),
            "stand_in": (None if missing is None or recipe.embeddings.source == "random" else
                         f"{missing}: the model's initial values at {recipe.embeddings.dim} "
                         "dimensions stand in (treated as pretrained)")},
        trains=model.needs_training, batch_size=recipe.train.batch_size, pairs_per_step=0,
        steps=0, budget_s=budget_s, parameters=count_parameters(model))
    task = recipe_task(recipe)
    plan = EpochPlan(data.train, recipe.train.batch_size, seed, 0, task, recipe.task.negatives,
                     max_negatives_per_query=recipe.task.max_negatives_per_query)
    position = _pick_batch(plan)
    batch = plan.collate(position).to(device)
    result.pairs_per_step = batch.num_pairs
    if not model.needs_training:
        _score_only(result, model, data, batch, data_info["synthetic"])
        result.peak_mb = peak_memory_mb(device)
        return result
    result.loss_before, _ = _eval_loss(model, batch, run_recipe)
    gradients, flops = gradient_probe(model, batch, run_recipe, device, precision)
    result.flops_per_step = flops
    result.flops_per_pair = flops / max(batch.num_pairs, 1)
    norms = embedding_norms(model, run_recipe, batch)
    with tempfile.TemporaryDirectory() as tmp:  # the trainer's folder: nothing is written
        trainer = Trainer(run_recipe, model, data, RunFolder(Path(tmp) / "preflight"), seed,
                          device, show_progress=False, precision=precision)
        outputs = _train_steps(trainer, batch, result, steps, budget_s,
                               show_progress, lambda: _eval_loss(model, batch, run_recipe))
    finite = all(math.isfinite(v) for v in [*result.losses, *result.eval_losses]) and all(
        bool(torch.isfinite(p).all()) for p in model.parameters())
    result.loss_after = result.eval_losses[-1]
    result.checks = [
        check_loss_falls(result.loss_before, result.eval_losses, steps, finite),
        Check("finite", "pass" if finite else "fail",
              "losses and weights finite" if finite else
              f"non-finite loss or weights (losses {result.losses})"),
        gradients, norms(), check_outputs_vary(outputs),
        check_padding(model, batch),
    ]
    result.peak_mb = peak_memory_mb(device)
    return result


def _train_steps(trainer: Trainer, batch: PairBatch, result: PreflightRecord,
                 steps: int, budget_s: float, show_progress: bool,
                 evaluate: Callable[[], tuple[float, torch.Tensor]]) -> torch.Tensor:
    """Steps on ``batch`` until ``steps`` or ``budget_s``, recorded in ``result``;
    returns the outputs after the last step."""
    progress = step_progress(
        TextColumn(f"preflight {result.recipe}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"), enabled=show_progress, unit="steps")
    started = time.perf_counter()
    with progress:
        bar = progress.add_task(f"preflight {result.recipe}", total=steps, loss="-")
        for _ in range(max(steps, 1)):
            t0 = time.perf_counter()
            loss_sum, _, pairs = trainer.train_step(batch)
            loss = float(loss_sum) / max(pairs, 1)  # float(): waits for the device
            result.step_s.append(time.perf_counter() - t0)
            result.losses.append(loss)
            result.steps += 1
            after, outputs = evaluate()
            result.eval_losses.append(after)
            progress.update(bar, advance=1, loss=f"{after:.4f}",
                            speed=f"{result.pairs_per_step / max(result.step_s[-1], 1e-9):.0f}")
            if (not (math.isfinite(loss) and math.isfinite(after))
                    or time.perf_counter() - started > budget_s):
                break
    timed = result.step_s[1:] or result.step_s  # the first step warms up
    result.pairs_per_s = result.pairs_per_step / statistics.median(timed)
    return outputs


def _score_only(result: PreflightRecord, model: PairModel, data: TaskData, batch: PairBatch,
                synthetic: bool) -> None:
    """A scorer without training: one scoring pass; only the output checks apply."""
    model.fit_statistics(data.train.left, data.train.right, data.train.labels)
    t0 = time.perf_counter()
    outputs = eval_outputs(model, batch)
    result.step_s = [time.perf_counter() - t0]
    result.pairs_per_s = batch.num_pairs / max(result.step_s[0], 1e-9)
    result.checks = [Check(name, "n/a", "n/a: the model is not trained") for name in CHECKS[:4]]
    varies = (Check("outputs_vary", "n/a", "n/a: a scorer that is not trained, on random "
                    "stand-in words (unrelated texts: a lexical scorer gives them all the same "
                    "score by construction); checked on the real data")
              if synthetic else check_outputs_vary(outputs))
    if model.constant_output:
        varies = Check("outputs_vary", "n/a", "n/a: the same output for every pair by design")
    result.checks += [varies, check_padding(model, batch)]
