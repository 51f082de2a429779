"""From a recipe file to ``runs/<recipe>/seed-<n>/``: checks, then per seed plan the folder
(fresh, ``--force``, ``--resume`` or done), train, and score every split with the dev-chosen
checkpoint."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pairrepro import paths
from pairrepro.config import Recipe, load_recipe, parse_override
from pairrepro.device import (
    init_distributed,
    leave_process_group,
    resolve_precision,
    seed_everything,
    set_threads,
)
from pairrepro.errors import ConfigError, NothingToRunError
from pairrepro.runs import RunFolder, checkpoints, config_differences
from pairrepro.train.lifecycle import SeedRun, WallTime
from pairrepro.train.loop import Trainer, TrainHooks, score_splits, sigterm_as_interrupt
from pairrepro.train.provenance import build_manifest
from pairrepro.train.setup import build_recipe_model, check_prerequisites, load_task_data

# keys that may change between a run and its --resume (extending training, moving device)
RESUMABLE_CHANGES = frozenset({"train.epochs", "train.device"})


@dataclass(frozen=True)
class Request:
    """What the command asked of every seed (``explicit``: the recipe keys it set itself)."""

    resume: bool = False
    force: bool = False
    explicit: frozenset[str] = frozenset()
    names_device: bool = False
    threads: int | None = None


@dataclass(frozen=True)
class Plan:
    """``fresh``, ``replace`` (``--force``), ``resume`` (with the run's own settings), ``done``."""

    action: str
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)  # recipe keys by section
    threads: int | None = None  # the torch threads the run trained with
    warnings: tuple[str, ...] = ()  # what this command asked that the resume does not do


def _plan(folder: RunFolder, recipe: Recipe, request: Request, device_t: torch.device,
          world_size: int) -> Plan:
    """What to do with a run folder (deciding only: nothing changes on disk)."""
    if not folder.exists():  # a resume of several seeds starts those never started
        return Plan("fresh", warnings=(f"--resume: {folder.path} held no run to continue: "
                                       "this seed was started",) if request.resume else ())
    if request.force:
        return Plan("replace")  # even a damaged result.json: it is not read
    result = folder.read_result()  # damaged: DamagedRunError (exit 3) naming the file
    status = result.get("status", "unknown")
    has_checkpoint = folder.checkpoint("last").is_file()
    if not request.resume:
        what = "a finished run" if status == "finished" else f"a run with status {status!r}"
        hint = ("pass --resume to continue it from its last checkpoint"
                if status != "finished" and has_checkpoint  # nothing to throw away: continue it
                else "pass --resume to continue it (or keep it), or --force to delete it and "
                     "train again")
        raise ConfigError(f"{folder.path} already holds {what}", hint=hint)
    old = folder.read_config()
    # the seed list and the prose may change; what the run computes may not
    changed = sorted(config_differences(old, recipe.to_dict(), also_ignore=RESUMABLE_CHANGES))
    if changed:
        raise ConfigError(f"--resume: the recipe changed since {folder.path} started "
                          f"({', '.join(changed)})",
                          hint="undo the change, or pass --force to start over")
    if status == "finished":
        # --resume --set train.epochs=N (more than the run had): train the extra epochs
        done, asked = old.get("train", {}).get("epochs"), recipe.train.epochs
        if not isinstance(done, int) or asked == done:
            return Plan("done")
        if asked < done:
            return Plan("done", warnings=(
                f"--resume: {folder.path} finished {done} epochs; train.epochs={asked} asks "
                f"for fewer, so nothing was trained and its {done}-epoch result is shown (to "
                f"train {asked} epochs from scratch, use --force instead of --resume)",))
        if not has_checkpoint:
            return Plan("done", warnings=(
                f"--resume: {folder.path} cannot train on to {asked} epochs: its checkpoint "
                f"{folder.checkpoint('last')} is missing; its {done}-epoch result is shown "
                "(--force trains it again)",))
    elif not has_checkpoint:
        return Plan("fresh", warnings=(f"--resume: {folder.path} has no checkpoint to "
                                       "continue from: the run was started again",))
    return _continuation(folder, old, recipe, request, device_t, world_size)


# recipe keys that change how a run computes, not what it is (the variant rule ignores them):
# a resume takes the run's own, so that it equals the run never stopped
KEPT_ON_RESUME = ("train.precision", "train.checkpoint_minutes")


def _continuation(folder: RunFolder, old_config: dict[str, Any], recipe: Recipe,
                  request: Request, device_t: torch.device, world_size: int) -> Plan:
    """A resume keeps the run's precision, checkpoint timing and threads; a command setting
    another value, device type (unless named) or number of ranks is refused."""
    kept: dict[str, dict[str, Any]] = {}
    changes = config_differences(old_config, recipe.to_dict(), only=KEPT_ON_RESUME)
    for key, (mine, asked) in changes.items():
        if mine is None:  # a run that did not record it
            continue
        if key in request.explicit:
            raise ConfigError(f"--resume: {folder.path} was started with {key} = {mine!r}"
                              f"; this command sets {asked!r}", hint=_KEEP_HINT)
        section, name = key.split(".", 1)
        kept.setdefault(section, {})[name] = mine
    manifest = folder.read_manifest()
    device = str(manifest.get("device") or device_t)
    if not request.names_device and device.split(":")[0] != device_t.type:
        raise ConfigError(f"--resume: {folder.path} trained on {device}; this command would "
                          f"continue it on {device_t}",
                          hint=f"pass --device {device.split(':')[0]} (naming another device "
                               "moves the run on purpose)")
    precision = resolve_precision(kept.get("train", {}).get("precision",
                                                            recipe.train.precision), device_t)
    for what, mine, now in (("precision", manifest.get("precision"), precision),
                            ("world_size", manifest.get("world_size"), world_size)):
        if mine is not None and mine != now:
            raise ConfigError(f"--resume: {folder.path} trained with {what} {mine}; this "
                              f"command would continue it with {now}", hint=_KEEP_HINT)
    threads = manifest.get("cpu_threads")
    threads = threads if isinstance(threads, int) and threads >= 1 else None
    warnings = ((f"--resume: --threads {request.threads} not used: {folder.path} continues "
                 f"with the {threads} thread(s) it trained with, so that it equals a run "
                 f"never stopped (--force starts it over)",)
                if request.threads and threads and request.threads != threads else ())
    return Plan("resume", kept, threads, warnings)


_KEEP_HINT = ("leave it out: a resume continues a run as it started; or pass --force to "
              "start the run over")


def run_seed(recipe: Recipe, seed: int, folder: RunFolder, request: Request = Request(),
             device: str | None = None, show_progress: bool = True,
             hooks: TrainHooks | None = None) -> dict[str, Any]:
    """Train and score one seed; its result.json content, with ``warnings`` when the
    command asked for something it did not do."""
    device_t, dist_ctx = init_distributed(device or recipe.train.device)
    precision = resolve_precision(recipe.train.precision, device_t)  # before any lock
    with SeedRun(folder, recipe, seed, dist_ctx) as run:
        plan = run.decide(lambda: _plan(folder, recipe, request, device_t,
                                        dist_ctx.world_size), Plan(""))
        # not written to result.json: they are about this request, not about the run
        warnings = {"warnings": list(plan.warnings)} if plan.warnings else {}
        if plan.action == "done":
            return {**folder.read_result(), **warnings}
        if plan.kept:
            run.recipe = recipe = recipe.with_changes(**plan.kept)
            precision = resolve_precision(recipe.train.precision, device_t)
        if plan.threads and plan.threads != torch.get_num_threads():
            run.held.callback(set_threads, torch.get_num_threads())  # the next seed's
            set_threads(plan.threads)  # the run's own on resume
        run.held.enter_context(sigterm_as_interrupt())
        started = time.perf_counter()
        # every rank seeds alike: identical initial weights and identical epoch orders
        seed_everything(seed, recipe.train.deterministic)
        prepared, data = load_task_data(recipe, seed)
        timed = WallTime()
        if plan.action == "resume":  # the checkpoint was trained on the data the manifest names
            before = folder.read_manifest()
            prepared.check_files(before.get("prepared_sha256", {}), str(folder.manifest_path))
            timed = WallTime.after(before)
        model, emb_info = build_recipe_model(recipe, prepared, data.num_classes, seed)
        if model.needs_training and prepared.stats.get("lexical_only"):
            raise ConfigError(
                f"{recipe.source}: [data] variant: {recipe.data.variant!r} of "
                f"{recipe.data.dataset} is for lexical scorers only: "
                f"{prepared.stats.get('description', '')}",
                hint=f"a model trained on {recipe.data.train_split!r} needs a variant whose "
                     "splits are tokenised alike (for TrecQA: clean or raw)")
        if not model.needs_training:  # "auto" on CUDA: nothing runs in bf16, the record says so
            precision = "fp32"
        manifest = build_manifest(recipe, seed, prepared, device_t, precision, model, dist_ctx,
                                  {**emb_info, "no_positive": data.no_positive,
                                   "train_pairs": len(data.train)})
        run.start(plan.action, manifest, timed, started)  # only now does the folder change
        if model.needs_training:  # it ends holding the weights chosen on dev
            trainer = Trainer(recipe, model, data, folder, seed, device_t, dist_ctx,
                              show_progress, hooks, run.drop_replaced, precision)
            state = trainer.fit(resume=plan.action == "resume")
            chosen, history = state.best_epoch, state.history
        else:  # a scorer's statistics from the train split, kept as best.pt (epoch 0)
            model.fit_statistics(data.train.left, data.train.right, data.train.labels)
            model.to(device_t)
            if dist_ctx.is_main:
                checkpoints.save_checkpoint(folder.checkpoint("best"),
                                {"model": model.state_dict(), "epoch": 0, "dev": {}})
                run.drop_replaced()
            chosen, history = 0, []
        metrics = score_splits(recipe, model, data, folder, device_t, dist_ctx, seed)
        return {**run.finish(chosen, history, metrics), **warnings}


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and sample standard deviation (ddof=1; 0 for one seed) per split and metric."""
    finished = [r for r in results if r.get("status") == "finished"]
    out: dict[str, Any] = {"seeds": [r["seed"] for r in finished], "std": "sample (ddof=1)",
                           "metrics": {}}
    for split in dict.fromkeys(s for r in finished for s in r["metrics"]):
        for metric in dict.fromkeys(m for r in finished for m in r["metrics"].get(split, {})):
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
                 hooks: TrainHooks | None = None, runs_dir: Path | None = None,
                 threads: int | None = None) -> list[dict[str, Any]]:
    """Train every seed into ``runs_dir`` and write ``summary.json``; one result per seed.
    ``resume`` with no run to continue is a :class:`NothingToRunError`; ``threads`` (already
    set) only warns when a resume does not use it; Ctrl-C is ``KeyboardInterrupt``."""
    recipe = load_recipe(path, overrides)
    runs_dir = runs_dir or paths.runs_dir()
    seeds = seeds or recipe.seeds
    # the name becomes a folder: checked (and every seed's path built) before any write
    folders = [RunFolder.of(runs_dir, recipe.name, seed, recipe.source) for seed in seeds]
    if resume and not force and not any(folder.exists() for folder in folders):
        # never a silent start from scratch: a resume command pasted into a shell whose
        # PAIRREPRO_RUNS differs
        setting = os.environ.get("PAIRREPRO_RUNS")
        where = f"set to {setting}" if setting else f"unset: ./{paths.DEFAULT_RUNS}"
        raise NothingToRunError(
            f"--resume: no run of {recipe.name} (seed {', '.join(map(str, seeds))}) to "
            f"continue in {(runs_dir / recipe.name).absolute()}",
            hint=f"runs are looked for in $PAIRREPRO_RUNS ({where}): set it to the folder the "
                 "run was started in, or leave out --resume to start a new run")
    # the data and embeddings every seed needs, before any folder is locked or created
    check_prerequisites(recipe)
    explicit = frozenset(".".join(parse_override(text)[0]) for text in overrides or [])
    request = Request(resume, force, explicit, bool(device) or "train.device" in explicit,
                      threads)
    try:
        results = [run_seed(recipe, seed, folder, request, device, not quiet, hooks)
                   for seed, folder in zip(seeds, folders, strict=True)]
    finally:
        # a rank that exits with the process group alive aborts in gloo's threads
        # ("terminate called without an active exception") after its clean error
        leave_process_group()
    if all("status" in r for r in results):
        folders[0].write_summary({"recipe": recipe.name, **summarise(results)})
    return results
