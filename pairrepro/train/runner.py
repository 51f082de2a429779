"""Run directories: from a recipe file to ``runs/<recipe>/seed-<n>/`` with a result.json.

``train_recipe`` loads and validates the recipe, the prepared data and the embeddings,
builds the model, trains it (or fits its statistics for non-neural scorers), scores the
test splits once with the checkpoint chosen on dev, and writes::

    config.toml       the resolved recipe
    manifest.json     provenance: git, versions, device, data sha256s, seed, timings, sizes
    metrics.jsonl     one line per epoch (train loss, running accuracy, dev metrics, lr, speed)
    checkpoints/      last.pt (resumable), best.pt (weights chosen on dev)
    predictions/      <split>.parquet for train, dev and every test split
    result.json       status running | interrupted | failed | finished, metrics per split;
                      while running also ``pid`` and ``host`` of the training process, so a
                      report can tell a live run from one whose process died

A finished run is never overwritten silently: ``force`` starts over, ``resume`` continues
from ``checkpoints/last.pt`` (exactly, on CPU).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pairrepro import io, paths
from pairrepro.config import Recipe, load_recipe, recipe_from_dict
from pairrepro.data.batches import EncodedSplit, subsample
from pairrepro.data.prepared import PreparedDataset, load_prepared
from pairrepro.errors import ConfigError, DataError, PairreproError, TrainingError
from pairrepro.models.base import ModelContext, PairModel
from pairrepro.models.registry import available_models, build_model
from pairrepro.train import checkpoint as ckpt
from pairrepro.train.device import device_name, resolve_device
from pairrepro.train.distributed import (
    DistContext,
    barrier,
    broadcast_object,
    init_distributed,
)
from pairrepro.train.evaluate import (
    metrics_from_scores,
    predict_outputs,
    prediction_frame,
    write_predictions,
)
from pairrepro.train.loop import Interrupted, TaskData, Trainer, TrainHooks
from pairrepro.train.losses import num_outputs_for, outputs_to_scores
from pairrepro.train.optim import initialise
from pairrepro.train.seeding import seed_everything

PACKAGES = ["pairrepro", "torch", "numpy", "pandas", "pyarrow", "typer", "rich", "scikit-learn"]
# keys that may change between a run and its --resume (extending training, moving device)
RESUMABLE_CHANGES = {("train", "epochs"), ("train", "device")}


# --------------------------------------------------------------------------- data and model
def _no_positive_mode(recipe: Recipe, prepared: PreparedDataset) -> str:
    """How queries without a relevant candidate count: the variant says (stats or manifest)."""
    mode = prepared.stats.get("no_positive")
    if mode is None:
        try:
            from pairrepro.data.manifests import load_manifest

            variant = load_manifest(recipe.data.dataset).variant(recipe.data.variant or None)
            mode = variant.options.get("no_positive")
        except PairreproError:  # a dataset without a manifest (tests): the default
            mode = None
    return str(mode or "skip")


def load_task_data(recipe: Recipe, seed: int, splits: list[str] | None = None,
                   prepared: PreparedDataset | None = None) -> tuple[PreparedDataset, TaskData]:
    """Open the prepared data of ``recipe`` and encode the splits it uses."""
    prepared = prepared or load_prepared(recipe.data.dataset, recipe.data.variant or None)
    d = recipe.data
    wanted = splits or [d.train_split, d.dev_split, *d.test_splits]
    encoded = {name: EncodedSplit.from_frame(prepared.split(name), d.max_len, name)
               for name in dict.fromkeys(wanted)}
    # train-unseen words stay themselves where something can use them: pretrained vectors,
    # or a scorer without parameters (BM25 matches a test-only word of the question in an
    # answer); a model learning random embeddings could not train them, so they become <unk>
    model_class = available_models().get(recipe.model.name)  # unknown: reported when built
    keep_unseen = (recipe.embeddings.source != "random"
                   or not getattr(model_class, "needs_training", True))
    rare = prepared.rare_token_map(d.min_count, keep_unseen=keep_unseen)
    if rare is not None:
        for split in encoded.values():
            split.left = [rare[ids] for ids in split.left]
            split.right = [rare[ids] for ids in split.right]
    if d.train_split in encoded:
        encoded[d.train_split] = subsample(encoded[d.train_split], d.max_train_pairs, seed,
                                           by_group=recipe.task.type == "ranking")
    if recipe.task.type == "ranking":
        num_classes = 2
    elif prepared.stats.get("label_map"):
        num_classes = len(prepared.stats["label_map"])
    else:
        num_classes = int(max(int(s.labels.max(initial=0)) for s in encoded.values())) + 1
    for name, split in encoded.items():
        if len(split) and (split.labels.min() < 0 or split.labels.max() >= num_classes):
            raise DataError(f"split {name!r} of {prepared.root} has labels outside "
                            f"0..{num_classes - 1}", hint="check the dataset's label_map")
    data = TaskData(splits=encoded, train_split=d.train_split, dev_split=d.dev_split,
                    test_splits=list(d.test_splits), num_classes=num_classes,
                    no_positive=_no_positive_mode(recipe, prepared))
    return prepared, data


def build_recipe_model(recipe: Recipe, prepared: PreparedDataset, num_classes: int, seed: int,
                       with_embeddings: bool = True) -> tuple[PairModel, dict[str, Any]]:
    """Embeddings + model + initialisation, as the recipe says. Returns (model, info)."""
    emb = recipe.embeddings
    info: dict[str, Any] = {"embedding_source": emb.source}
    pretrained = None
    if emb.source != "random" and with_embeddings:
        from pairrepro.data.embeddings import build_embedding_matrix

        matrix, oov = build_embedding_matrix(prepared.vocab, emb.source, emb.path, emb.dim, seed)
        pretrained = torch.as_tensor(np.asarray(matrix), dtype=torch.float32)
        info["embedding_oov"] = int(oov)
    ctx = ModelContext(vocab_size=len(prepared.vocab), embed_dim=emb.dim,
                       num_outputs=num_outputs_for(recipe.task.loss, num_classes),
                       pretrained=pretrained, trainable_embeddings=emb.trainable,
                       vocab=prepared.vocab)
    try:
        model = build_model(recipe.model.name, ctx, recipe.model.hparams)
    except ConfigError as exc:
        raise ConfigError(f"{recipe.source}: [model] {exc.args[0]}", hint=exc.hint) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{recipe.source}: [model] {recipe.model.name}: {exc}") from None
    initialise(model, recipe.optim, keep_embeddings=emb.source != "random")
    return model, info


def resolve_split(recipe: Recipe, split: str) -> str:
    """Result-file split keys ``train``/``dev`` -> the recipe's split names."""
    return {"train": recipe.data.train_split, "dev": recipe.data.dev_split}.get(split, split)


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    """Parameters in total, without embedding tables, and trainable."""
    embedding = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding)
                 for p in m.parameters()}
    params = list(model.parameters())
    return {
        "total": sum(p.numel() for p in params),
        "without_embeddings": sum(p.numel() for p in params if id(p) not in embedding),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
    }


def load_run_model(run_dir: Path, checkpoint: str, splits: list[str], variant: str = ""
                   ) -> tuple[Recipe, PairModel, TaskData, torch.device]:
    """Rebuild a run's model from ``config.toml`` and a checkpoint (for ``pairrepro eval``).

    With ``variant`` (another prepared variant of the run's dataset, tokenised alike) the
    ``splits`` come from that variant, their words mapped into the run's vocabulary, and are
    scored as that variant says (e.g. a model trained on TrecQA ``clean`` scored on the
    ``raw`` DEV/TEST, where questions without a correct answer count 0). The train split,
    and so a lexical scorer's statistics, stay the run's own."""
    recipe, seed = read_run_recipe(run_dir)
    splits = [resolve_split(recipe, s) for s in splits]
    device = resolve_device("auto")  # re-scoring runs wherever this machine can
    train_split = recipe.data.train_split
    wanted = list(dict.fromkeys([train_split, *splits]))
    prepared = load_prepared(recipe.data.dataset, recipe.data.variant or None)
    scored, data_recipe = prepared, recipe
    if variant and variant != recipe.data.variant:
        source = load_prepared(recipe.data.dataset, variant)
        scored = prepared.with_splits_from(source, [s for s in splits if s != train_split])
        # scored as that variant says (its no-positive rule)
        data_recipe = dataclasses.replace(
            recipe, data=dataclasses.replace(recipe.data, variant=variant))
    _, data = load_task_data(data_recipe, seed, wanted, prepared=scored)
    model, _ = build_recipe_model(recipe, prepared, data.num_classes, seed,
                                  with_embeddings=False)
    if not model.needs_training:
        model.fit_statistics(data.train.left, data.train.right, data.train.labels)
    state = ckpt.load_checkpoint(run_dir / "checkpoints" / f"{checkpoint}.pt")
    model.load_state_dict(state["model"])
    return recipe, model.to(device), data, device


def read_run_recipe(run_dir: Path) -> tuple[Recipe, int]:
    """A run's resolved recipe (``config.toml``) and seed (``result.json``)."""
    config = run_dir / "config.toml"
    if not config.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.toml)",
                          hint="pass runs/<recipe>/seed-<n>")
    raw = io.read_toml(config)
    result = io.read_json(run_dir / "result.json") if (run_dir / "result.json").is_file() else {}
    recipe = recipe_from_dict(raw, name=result.get("recipe", run_dir.parent.name),
                              source=str(config))
    return recipe, int(result.get("seed", recipe.seeds[0]))


def record_evaluation(run_dir: Path, split: str, variant: str, checkpoint: str,
                      metrics: dict[str, float]) -> Path:
    """Keep a re-scoring with the run: ``evals/<split>@<variant>.json`` holds the metrics and
    how they were made (checkpoint, command, commit, sha256 of the scored split's file)."""
    recipe, _ = read_run_recipe(run_dir)
    variant = variant or recipe.data.variant
    prepared = load_prepared(recipe.data.dataset, variant or None)
    target = prepared.root / f"{resolve_split(recipe, split)}.parquet"
    path = run_dir / "evals" / f"{split}@{variant or 'default'}.json"
    io.write_json(path, {
        "split": split, "variant": variant, "checkpoint": checkpoint, "metrics": metrics,
        "command": _command_line(), "git": _git_info(),
        "prepared_sha256": {target.name: io.sha256_file(target)} if target.is_file() else {},
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })
    return path


# --------------------------------------------------------------------------- provenance
def _git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=paths.PROJECT_DIR, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _command_line() -> str:
    """The command this process was started with (program name without its path)."""
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def build_manifest(recipe: Recipe, seed: int, prepared: PreparedDataset, device: torch.device,
                   model: PairModel, dist_ctx: DistContext, extra: dict[str, Any]
                   ) -> dict[str, Any]:
    """Everything needed to trust and repeat the run (updated when it finishes)."""
    return {
        "recipe": recipe.name, "recipe_source": recipe.source, "seed": seed,
        "git": _git_info(), "packages": _versions(),
        "python": platform.python_version(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "device": str(device), "device_name": device_name(device),
        "cpu_threads": torch.get_num_threads(),
        "world_size": dist_ctx.world_size,
        "precision": "bf16-autocast" if device.type == "cuda" else "fp32",
        "deterministic": recipe.train.deterministic,
        "dataset": recipe.data.dataset, "variant": recipe.data.variant,
        "prepared_dir": str(prepared.root),
        "prepared_sha256": {p.name: io.sha256_file(p)
                            for p in sorted(prepared.root.glob("*.parquet"))},
        "parameters": count_parameters(model),
        "command": _command_line(),
        **extra,
    }


def _check_dataset_known(recipe: Recipe) -> None:
    """An unknown dataset name is a recipe error (naming the file, key and the choices)."""
    from pairrepro.data.manifests import available_datasets

    known = available_datasets() if paths.manifests_dir().is_dir() else []
    if known and recipe.data.dataset not in known:
        raise ConfigError(f"{recipe.source}: [data] dataset: unknown dataset "
                          f"{recipe.data.dataset!r}", hint=f"known datasets: {', '.join(known)}")


# --------------------------------------------------------------------------- one seed
def run_dir_for(recipe_name: str, seed: int) -> Path:
    """``runs/<recipe>/seed-<n>``."""
    return paths.runs_dir() / recipe_name / f"seed-{seed}"


def _check_existing(run_dir: Path, recipe: Recipe, resume: bool, force: bool) -> str:
    """Decide what to do with an existing run folder: 'fresh', 'resume' or 'done'."""
    result_path = run_dir / "result.json"
    if not run_dir.exists() or not any(run_dir.iterdir()):
        return "fresh"
    status = io.read_json(result_path).get("status") if result_path.is_file() else "unknown"
    if force:
        shutil.rmtree(run_dir)
        return "fresh"
    if not resume:
        what = "a finished run" if status == "finished" else f"a run with status {status!r}"
        raise ConfigError(f"{run_dir} already holds {what}",
                          hint="pass --resume to continue it (or keep it), or --force to "
                               "delete it and train again")
    saved = run_dir / "config.toml"
    if saved.is_file():
        old = io.read_toml(saved)
        new = tomllib.loads(recipe.to_toml())
        changed = sorted(f"{s}.{k}" for s in set(old) | set(new)
                         for k in set(old.get(s, {})) | set(new.get(s, {}))
                         if (s, k) not in RESUMABLE_CHANGES
                         and old.get(s, {}).get(k) != new.get(s, {}).get(k))
        if changed:
            raise ConfigError(f"--resume: the recipe changed since {run_dir} started "
                              f"({', '.join(changed)})",
                              hint="undo the change, or pass --force to start over")
    if status == "finished":
        return "done"
    return "resume" if (run_dir / "checkpoints" / "last.pt").is_file() else "fresh"


def _write_result(run_dir: Path, recipe: Recipe, seed: int, status: str,
                  chosen_epoch: int | None, metrics: dict[str, Any], **extra: Any) -> dict:
    result = {"recipe": recipe.name, "seed": seed, "status": status,
              "chosen_epoch": chosen_epoch, "metrics": metrics,
              "select_metric": recipe.select_metric, "manifest": "manifest.json", **extra}
    io.write_json(run_dir / "result.json", result)
    return result


def run_seed(recipe: Recipe, seed: int, resume: bool = False, force: bool = False,
             device: str | None = None, show_progress: bool = True,
             hooks: TrainHooks | None = None, log: Any = None) -> dict[str, Any]:
    """Train and score one seed of ``recipe``; returns its result.json content."""
    device_t = resolve_device(device or recipe.train.device)
    dist_ctx = init_distributed(device_t.type)
    if dist_ctx.enabled and device_t.type == "cuda":
        device_t = resolve_device("cuda", dist_ctx.local_rank)
        torch.cuda.set_device(device_t)
    run_dir = run_dir_for(recipe.name, seed)
    # rank 0 decides; the other ranks follow it, errors included (none may hang waiting)
    decision: tuple[str, str | None, str | None] = ("", None, None)
    if dist_ctx.is_main:
        try:
            decision = (_check_existing(run_dir, recipe, resume, force), None, None)
        except ConfigError as exc:
            decision = ("", exc.args[0], exc.hint)
    action, error, hint = broadcast_object(decision, dist_ctx)
    if error is not None:
        raise ConfigError(error, hint=hint)
    if action == "done":
        return io.read_json(run_dir / "result.json")

    _check_dataset_known(recipe)
    started = time.perf_counter()
    # every rank seeds alike: identical initial weights and identical epoch orders
    seed_everything(seed, recipe.train.deterministic)
    prepared, data = load_task_data(recipe, seed)
    model, emb_info = build_recipe_model(recipe, prepared, data.num_classes, seed)
    if model.needs_training and prepared.stats.get("lexical_only"):
        raise ConfigError(
            f"{recipe.source}: [data] variant: {recipe.data.variant!r} of "
            f"{recipe.data.dataset} is for lexical scorers only: "
            f"{prepared.stats.get('description', '')}",
            hint=f"a model trained on {recipe.data.train_split!r} needs a variant whose splits "
                 "are tokenised alike (for TrecQA: clean or raw)")
    manifest = build_manifest(recipe, seed, prepared, device_t, model, dist_ctx,
                              {**emb_info, "no_positive": data.no_positive,
                               "train_pairs": len(data.train)})
    if dist_ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        io.write_text(run_dir / "config.toml", recipe.to_toml())
        io.write_json(run_dir / "manifest.json", manifest)
        # pid + host: a crash (kill -9, OOM, power) leaves "running" behind; the report
        # checks whether this process still exists (pairrepro.report.tables.read_run)
        _write_result(run_dir, recipe, seed, "running", None, {}, pid=os.getpid(),
                      host=socket.gethostname())
    barrier(dist_ctx)

    trainer: Trainer | None = None
    chosen_epoch = 0
    try:
        if model.needs_training:
            trainer = Trainer(recipe, model, data, run_dir, seed, device_t, dist_ctx,
                              show_progress, hooks)
            resume_state = None
            if action == "resume":
                resume_state = ckpt.load_checkpoint(run_dir / "checkpoints" / "last.pt")
            state = trainer.fit(resume_state)
            chosen_epoch = state.best_epoch
            if chosen_epoch == 0:
                raise TrainingError(f"{recipe.source}: no epoch was trained",
                                    hint="[train] epochs must be >= 1")
            best = ckpt.load_checkpoint(run_dir / "checkpoints" / "best.pt")
            model.load_state_dict(best["model"])
        else:
            model.fit_statistics(data.train.left, data.train.right, data.train.labels)
            model.to(device_t)
            if dist_ctx.is_main:
                ckpt.save_checkpoint(run_dir / "checkpoints" / "best.pt",
                                     {"model": model.state_dict(), "epoch": 0, "dev": {}})
        metrics = _score_once(recipe, model, data, run_dir, device_t, dist_ctx, seed)
    except Interrupted as exc:
        if dist_ctx.is_main:
            _write_result(run_dir, recipe, seed, "interrupted", None, {}, message=str(exc))
        raise KeyboardInterrupt(str(exc)) from None
    except TrainingError as exc:
        if dist_ctx.is_main:
            _write_result(run_dir, recipe, seed, "failed", None, {}, error=str(exc))
        raise

    wall = time.perf_counter() - started
    history = trainer.state.history if trainer else []
    train_time = sum(h["train_time_s"] for h in history)
    train_items = sum(h["train_pairs"] for h in history)
    manifest.update({"chosen_epoch": chosen_epoch, "epochs_run": len(history),
                     "wall_time_s": round(wall, 3), "train_time_s": round(train_time, 3),
                     "pairs_per_s": round(train_items / train_time, 1) if train_time else None,
                     "resumed": action == "resume"})
    result: dict[str, Any] = {"recipe": recipe.name, "seed": seed}
    if dist_ctx.is_main:
        io.write_json(run_dir / "manifest.json", manifest)
        result = _write_result(run_dir, recipe, seed, "finished", chosen_epoch, metrics)
    barrier(dist_ctx)
    return result


def _score_once(recipe: Recipe, model: PairModel, data: TaskData, run_dir: Path,
                device: torch.device, dist_ctx: DistContext, seed: int
                ) -> dict[str, dict[str, float]]:
    """Score train, dev and every test split ONCE with the chosen weights; save predictions.

    The train split is scored whole, or on a seeded subsample of whole groups when
    ``[train] score_train_pairs`` is set (slow models on large training sets)."""
    metrics: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys([data.train_split, data.dev_split, *data.test_splits]):
        split = data.splits[name]
        if name == data.train_split:
            split = subsample(split, recipe.train.score_train_pairs, seed + 1,
                              by_group=recipe.task.type == "ranking")
        outputs = predict_outputs(model, split, recipe.train.eval_batch_size, device, dist_ctx)
        scores = outputs_to_scores(outputs, recipe.task.loss)
        key = "train" if name == data.train_split else "dev" if name == data.dev_split else name
        metrics[key] = metrics_from_scores(split, scores, recipe.task.loss, data.num_classes,
                                           data.no_positive)
        if dist_ctx.is_main:
            write_predictions(run_dir / "predictions" / f"{key}.parquet",
                              prediction_frame(split, scores, recipe.task.loss))
    return metrics


# --------------------------------------------------------------------------- several seeds
def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and sample standard deviation (ddof=1; 0 for one seed) per split and metric."""
    finished = [r for r in results if r.get("status") == "finished"]
    out: dict[str, Any] = {"seeds": [r["seed"] for r in finished], "std": "sample (ddof=1)",
                           "metrics": {}}
    splits = dict.fromkeys(s for r in finished for s in r["metrics"])
    for split in splits:
        names = dict.fromkeys(m for r in finished for m in r["metrics"].get(split, {}))
        for metric in names:
            values = [r["metrics"][split][metric] for r in finished
                      if metric in r["metrics"].get(split, {})]
            mean = float(np.mean(values))
            std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            out["metrics"].setdefault(split, {})[metric] = {
                "mean": mean, "std": std if math.isfinite(std) else 0.0, "n": len(values)}
    out["chosen_epochs"] = [r.get("chosen_epoch") for r in finished]
    return out


def train_recipe(path: str | Path, overrides: list[str] | None = None,
                 seeds: list[int] | None = None, resume: bool = False,
                 device: str | None = None, quiet: bool = False, force: bool = False,
                 hooks: TrainHooks | None = None) -> list[dict[str, Any]]:
    """Train every seed of a recipe; writes ``runs/<recipe>/summary.json``.

    Returns one result.json dict per seed. Raises :class:`ConfigError` for invalid recipes
    or an existing run without ``resume``/``force``, :class:`DataError` for missing data,
    :class:`TrainingError` for a diverged run, ``KeyboardInterrupt`` after Ctrl-C (a
    checkpoint is saved first).
    """
    recipe = load_recipe(path, overrides)
    results = [run_seed(recipe, seed, resume=resume, force=force, device=device,
                        show_progress=not quiet, hooks=hooks)
               for seed in (seeds or recipe.seeds)]
    recipe_dir = paths.runs_dir() / recipe.name
    if all("status" in r for r in results):
        io.write_json(recipe_dir / "summary.json",
                      {"recipe": recipe.name, **summarise(results)})
    return results
