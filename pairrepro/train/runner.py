"""From a recipe file to ``runs/<recipe>/seed-<n>/``: ``train_recipe`` checks the recipe, data
and embeddings, builds the model, trains it (or fits a scorer's statistics), scores every split
once with the checkpoint chosen on dev and writes the run folder through :mod:`pairrepro.runs`.
Locks, ``--resume``, ``--force``, failures and signals: ARCHITECTURE.md, "Run directory and
result.json"; a file that cannot be written is a :class:`~pairrepro.errors.StorageError`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pairrepro import paths
from pairrepro.config import Recipe, load_recipe, parse_override
from pairrepro.data.batches import subsample
from pairrepro.data.prepared import PreparedDataset, load_prepared
from pairrepro.device import (
    DistContext,
    barrier,
    broadcast_object,
    cpu_fingerprint,
    device_name,
    init_distributed,
    leave_process_group,
    resolve_precision,
    seed_everything,
    set_threads,
)
from pairrepro.errors import (
    ConfigError,
    NothingToRunError,
    PairreproError,
    StorageError,
    TrainingError,
)
from pairrepro.models.base import PairModel, count_parameters
from pairrepro.runs import (
    RunFolder,
    check_name,
    config_differences,
    flatten_config,
    resolved_config,
    write_summary,
)
from pairrepro.train.loop import (
    Interrupted,
    Trainer,
    TrainHooks,
    predict_outputs,
    sigterm_as_interrupt,
)
from pairrepro.train.setup import (
    TaskData,
    build_recipe_model,
    check_prerequisites,
    load_task_data,
    read_run_recipe,
    recipe_task,
    resolve_split,
)

PACKAGES = ["pairrepro", "torch", "numpy", "pandas", "pyarrow", "typer", "rich", "scikit-learn"]
# keys that may change between a run and its --resume (extending training, moving device)
RESUMABLE_CHANGES = frozenset({"train.epochs", "train.device"})


def record_evaluation(run_dir: Path, split: str, variant: str, checkpoint: str,
                      metrics: dict[str, float]) -> Path:
    """Keep a re-scoring with the run: ``evals/<split>@<variant>.json`` holds the metrics and
    how they were made (checkpoint, command, commit, sha256 of the scored split's file)."""
    folder = RunFolder(Path(run_dir))
    recipe, _ = read_run_recipe(folder)
    variant = variant or recipe.data.variant
    prepared = load_prepared(recipe.data.dataset, variant or None)
    target = prepared.root / f"{resolve_split(recipe, split)}.parquet"
    return folder.write_eval(split, variant, {
        "split": split, "variant": variant, "checkpoint": checkpoint, "metrics": metrics,
        "command": _command_line(), "git": _git_info(),
        "prepared_sha256": prepared.file_sha256([target.name]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })


# --------------------------------------------------------------------------- provenance
# untracked files here change what a run does (a new reader, dataset manifest or recipe):
# they make a run "dirty"; untracked files elsewhere (notes, outputs) do not
PROVENANCE_PATHS = ("pairrepro/", "recipes/", "data_manifests/")


def _git_info(project_dir: Path | None = None) -> dict[str, Any]:
    """The commit the code is at, and whether the working tree differs from it (``dirty``):
    a modified or staged tracked file anywhere, or an untracked file under
    :data:`PROVENANCE_PATHS` (listed in ``untracked``). Not a git checkout: all None."""
    cwd = project_dir or paths.PROJECT_DIR

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True,
                              text=True, timeout=10, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        # -z: paths verbatim (no quoting); "XY path" entries, "??" = untracked
        entries = [e for e in git("status", "--porcelain", "-z",
                                  "--untracked-files=all").split("\0") if len(e) > 3]
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    changed = [e for e in entries if not e.startswith("??")]
    untracked = sorted(e[3:] for e in entries
                       if e.startswith("??") and e[3:].startswith(PROVENANCE_PATHS))
    return {"commit": commit, "dirty": bool(changed or untracked), "untracked": untracked[:50]}


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
                   precision: str, model: PairModel, dist_ctx: DistContext,
                   extra: dict[str, Any]) -> dict[str, Any]:
    """Everything needed to trust and repeat the run (updated when it finishes)."""
    return {
        "recipe": recipe.name, "recipe_source": recipe.source, "seed": seed,
        "git": _git_info(), "packages": _versions(),
        "python": platform.python_version(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "device": str(device), "device_name": device_name(device),
        "cpu": cpu_fingerprint(),
        "cpu_threads": torch.get_num_threads(),
        "world_size": dist_ctx.world_size,
        "precision": precision,
        "deterministic": recipe.train.deterministic,
        "dataset": recipe.data.dataset, "variant": recipe.data.variant,
        "prepared_dir": str(prepared.root),
        "prepared_sha256": prepared.file_sha256(),
        "parameters": count_parameters(model),
        "command": _command_line(),
        **extra,
    }


# --------------------------------------------------------------------------- one seed
@dataclass(frozen=True)
class Request:
    """What the command asked of every seed: ``resume``, ``force``, the recipe keys it set
    itself (``--set``, ``--precision``), whether it named a device, and ``--threads``."""

    resume: bool = False
    force: bool = False
    explicit: frozenset[str] = frozenset()
    names_device: bool = False
    threads: int | None = None


@dataclass(frozen=True)
class Plan:
    """What to do with a seed's folder: ``fresh``, ``replace`` (``--force``), ``resume`` or
    ``done``; a resume also carries the run's own settings it continues with."""

    action: str
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)  # recipe keys by section
    threads: int | None = None  # the torch threads the run trained with
    warnings: tuple[str, ...] = ()  # what this command asked that the resume does not do


def _plan(folder: RunFolder, recipe: Recipe, request: Request, device_t: torch.device,
          world_size: int) -> Plan:
    """What to do with an existing run folder, deciding only (nothing changes on disk until
    the recipe, the data and the model are known to be good)."""
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
        if status != "finished" and has_checkpoint:  # nothing to throw away: continue it
            hint = "pass --resume to continue it from its last checkpoint"
        else:
            hint = ("pass --resume to continue it (or keep it), or --force to delete it and "
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
        old_epochs = old.get("train", {}).get("epochs")
        more = isinstance(old_epochs, int) and recipe.train.epochs > old_epochs
        if not (more and has_checkpoint):
            return Plan("done")
    elif not has_checkpoint:
        return Plan("fresh", warnings=(f"--resume: {folder.path} has no checkpoint to "
                                       "continue from: the run was started again",))
    return _continuation(folder, old, recipe, request, device_t, world_size)


# recipe keys that change how a run computes, not what it is (config_differences ignores
# them): a resume takes the run's own, so that it equals the run never stopped
KEPT_ON_RESUME = ("train.precision", "train.checkpoint_minutes")


def _continuation(folder: RunFolder, old_config: dict[str, Any], recipe: Recipe,
                  request: Request, device_t: torch.device, world_size: int) -> Plan:
    """A resume continues the run as it started: with the precision and checkpoint timing of
    its config.toml and the threads of its manifest. A key this command sets to another value
    is refused, naming both; so are another device type (unless named: a deliberate move),
    another precision, and another number of DDP ranks. ``--threads`` is not used (a
    warning says so): the pool launcher passes it to every run it starts or continues."""
    old, new = flatten_config(resolved_config(old_config)), flatten_config(recipe.to_dict())
    kept: dict[str, dict[str, Any]] = {}
    for key in KEPT_ON_RESUME:
        if key not in old or old[key] == new.get(key):
            continue
        if key in request.explicit:
            raise ConfigError(f"--resume: {folder.path} was started with {key} = {old[key]!r}"
                              f"; this command sets {new.get(key)!r}", hint=_KEEP_HINT)
        section, name = key.split(".", 1)
        kept.setdefault(section, {})[name] = old[key]
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


def _decide(folder: RunFolder, recipe: Recipe, request: Request, device_t: torch.device,
            dist_ctx: DistContext, stack: contextlib.ExitStack) -> Plan:
    """Rank 0 locks the folder (held until ``stack`` closes, i.e. for the whole run) and
    plans; every rank gets the plan, or raises rank 0's error (none may hang waiting)."""
    error: PairreproError | None = None
    plan = Plan("")
    if dist_ctx.is_main:
        try:
            stack.enter_context(folder.lock())
            plan = _plan(folder, recipe, request, device_t, dist_ctx.world_size)
        except PairreproError as exc:
            error = exc
    shared = None if error is None else (type(error), error.message, error.hint)
    plan, problem = broadcast_object((plan, shared), dist_ctx)
    if error is not None:
        raise error
    if problem is not None:
        raise problem[0](problem[1], hint=problem[2])
    return plan


def run_seed(recipe: Recipe, seed: int, folder: RunFolder, request: Request = Request(),
             device: str | None = None, show_progress: bool = True,
             hooks: TrainHooks | None = None) -> dict[str, Any]:
    """Train and score one seed of ``recipe`` in ``folder``; returns its result.json
    content (``{"recipe", "seed"}`` only on DDP ranks other than 0), with ``warnings`` when
    the command asked for something it did not do."""
    device_t, dist_ctx = init_distributed(device or recipe.train.device)
    precision = resolve_precision(recipe.train.precision, device_t)
    with contextlib.ExitStack() as stack:
        plan = _decide(folder, recipe, request, device_t, dist_ctx, stack)
        notes = list(plan.warnings)
        if plan.action == "done":
            result = folder.read_result()
            note = _ignored_resume(folder, recipe) if request.resume else ""
            notes += [note] if note else []
        else:
            if plan.kept:
                recipe = recipe.with_changes(**plan.kept)
                precision = resolve_precision(recipe.train.precision, device_t)
            if plan.threads and plan.threads != torch.get_num_threads():
                stack.callback(set_threads, torch.get_num_threads())  # the next seed's
                set_threads(plan.threads)
            stack.enter_context(sigterm_as_interrupt())
            result = _train_seed(recipe, seed, folder, plan.action, device_t, precision,
                                 dist_ctx, show_progress, hooks)
        # not written to result.json: they are about this request, not about the run
        return {**result, "warnings": notes} if notes else result


def _ignored_resume(folder: RunFolder, recipe: Recipe) -> str:
    """Why ``--resume`` of a finished run trained nothing although ``train.epochs`` asked
    for a different length ("" when it asked for what the run has)."""
    old = folder.read_config().get("train", {}).get("epochs")
    asked = recipe.train.epochs
    if not isinstance(old, int) or asked == old:
        return ""
    if asked < old:
        return (f"--resume: {folder.path} finished {old} epochs; train.epochs={asked} asks for "
                f"fewer, so nothing was trained and its {old}-epoch result is shown (to train "
                f"{asked} epochs from scratch, use --force instead of --resume)")
    return (f"--resume: {folder.path} cannot train on to {asked} epochs: its checkpoint "
            f"{folder.checkpoint('last')} is missing; its {old}-epoch result is shown (--force "
            "trains it again)")


def _train_seed(recipe: Recipe, seed: int, folder: RunFolder, action: str,
                device_t: torch.device, precision: str, dist_ctx: DistContext,
                show_progress: bool, hooks: TrainHooks | None) -> dict[str, Any]:
    started = time.perf_counter()
    # every rank seeds alike: identical initial weights and identical epoch orders
    seed_everything(seed, recipe.train.deterministic)
    prepared, data = load_task_data(recipe, seed)
    timed = WallTime()
    if action == "resume":  # the checkpoint was trained on the data the manifest names
        before = folder.read_manifest()
        prepared.check_files(before.get("prepared_sha256", {}), str(folder.manifest_path))
        timed = WallTime.after(before)
    model, emb_info = build_recipe_model(recipe, prepared, data.num_classes, seed)
    if model.needs_training and prepared.stats.get("lexical_only"):
        raise ConfigError(
            f"{recipe.source}: [data] variant: {recipe.data.variant!r} of "
            f"{recipe.data.dataset} is for lexical scorers only: "
            f"{prepared.stats.get('description', '')}",
            hint=f"a model trained on {recipe.data.train_split!r} needs a variant whose splits "
                 "are tokenised alike (for TrecQA: clean or raw)")
    if not model.needs_training:  # "auto" on CUDA: nothing runs in bf16, the record says so
        precision = "fp32"
    manifest = build_manifest(recipe, seed, prepared, device_t, precision, model, dist_ctx,
                              {**emb_info, "no_positive": data.no_positive,
                               "train_pairs": len(data.train)})
    # the recipe, the data and the model are good: only now does the folder change
    aside = {"kept": action == "replace" and dist_ctx.is_main}

    def drop_replaced() -> None:  # the new run has a checkpoint: the old one may go
        if aside["kept"]:
            folder.drop_aside()
            aside["kept"] = False

    trainer: Trainer | None = None
    chosen_epoch = 0
    try:
        if dist_ctx.is_main:
            if action == "replace":
                folder.move_aside()
            # first: a seed folder without result.json lost it (runs.read_run: damaged).
            # pid + host: a crash (kill -9, OOM, power) leaves "running" behind; a report
            # checks whether this process still exists (runs.read_run: "stale")
            folder.write_result(recipe.name, seed, "running", recipe.select_metric)
            folder.write_config(recipe.to_toml())
            folder.write_manifest(manifest)
        barrier(dist_ctx)
        if model.needs_training:
            trainer = Trainer(recipe, model, data, folder, seed, device_t, dist_ctx,
                              show_progress, hooks, on_checkpoint=drop_replaced,
                              precision=precision)
            resume_state = None
            if action == "resume":
                resume_state = folder.load_checkpoint("last")
            state = trainer.fit(resume_state)
            chosen_epoch = state.best_epoch
            if chosen_epoch == 0:
                raise TrainingError(f"{recipe.source}: no epoch was trained",
                                    hint="[train] epochs must be >= 1")
            barrier(dist_ctx)  # rank 0 writes best.pt; the other ranks read it only after
            best = folder.load_checkpoint("best")
            model.load_state_dict(best["model"])
        else:
            model.fit_statistics(data.train.left, data.train.right, data.train.labels)
            model.to(device_t)
            if dist_ctx.is_main:
                folder.save_checkpoint("best", {"model": model.state_dict(), "epoch": 0,
                                                "dev": {}})
                drop_replaced()
        metrics = _score_once(recipe, model, data, folder, device_t, dist_ctx, seed)
    except BaseException as exc:
        if dist_ctx.is_main:
            _record_failure(folder, recipe, seed, exc, restore=aside["kept"],
                            manifest={**manifest,
                                      **timed.fields(time.perf_counter() - started)})
        if isinstance(exc, Interrupted):
            raise KeyboardInterrupt(str(exc)) from None
        raise

    wall = time.perf_counter() - started
    history = trainer.state.history if trainer else []
    train_time = sum(h["train_time_s"] for h in history)
    train_items = sum(h["train_pairs"] for h in history)
    manifest.update({"chosen_epoch": chosen_epoch, "epochs_run": len(history),
                     **timed.fields(wall), "train_time_s": round(train_time, 3),
                     "pairs_per_s": round(train_items / train_time, 1) if train_time else None,
                     "resumed": action == "resume"})
    result: dict[str, Any] = {"recipe": recipe.name, "seed": seed}
    if dist_ctx.is_main:
        folder.write_manifest(manifest)
        result = folder.write_result(recipe.name, seed, "finished", recipe.select_metric,
                                     chosen_epoch, metrics)
    barrier(dist_ctx)
    return result


@dataclass(frozen=True)
class WallTime:
    """The wall time of the segments of a run before this one: an interrupted segment records
    its own in the manifest, and ``--resume`` adds the next segment to it."""

    earlier_s: float = 0.0
    segments: int = 0  # earlier segments
    untimed: bool = False  # an earlier segment recorded no wall time (before this rule)

    @classmethod
    def after(cls, manifest: dict[str, Any]) -> WallTime:
        """The earlier segments, as an interrupted run's ``manifest`` records them."""
        if "wall_time_s" not in manifest:
            return cls(0.0, 1, True)
        return cls(float(manifest["wall_time_s"]), int(manifest.get("segments", 1)),
                   bool(manifest.get("wall_time_untimed", False)))

    def fields(self, segment_s: float) -> dict[str, Any]:
        """The manifest keys for the run so far: ``wall_time_s`` over every timed segment,
        ``segments``, and ``wall_time_untimed`` when an earlier segment is missing from it."""
        fields: dict[str, Any] = {"wall_time_s": round(self.earlier_s + segment_s, 3),
                                  "segments": self.segments + 1}
        if self.untimed:
            fields["wall_time_untimed"] = True
        return fields


def _record_failure(folder: RunFolder, recipe: Recipe, seed: int, exc: BaseException,
                    restore: bool, manifest: dict[str, Any]) -> None:
    """Leave the folder saying what happened, never ``running``: the run ``--force`` replaced
    is put back if the new one has no checkpoint yet; else ``manifest`` (with the segment's
    wall time) is written and the status is ``interrupted`` (Ctrl-C, SIGTERM) or ``failed``.
    Quiet when even that cannot be written: the original error is what the user needs."""
    if restore:
        with contextlib.suppress(StorageError):
            folder.restore_aside()
        return
    with contextlib.suppress(StorageError):
        folder.write_manifest(manifest)
    with contextlib.suppress(StorageError):
        if isinstance(exc, Interrupted | KeyboardInterrupt):
            folder.write_result(recipe.name, seed, "interrupted", recipe.select_metric,
                                message=str(exc) or "interrupted")
        else:
            error = str(exc) if isinstance(exc, PairreproError) else (
                f"{type(exc).__name__}: {exc}")
            folder.write_result(recipe.name, seed, "failed", recipe.select_metric,
                                error=error)


def _score_once(recipe: Recipe, model: PairModel, data: TaskData, folder: RunFolder,
                device: torch.device, dist_ctx: DistContext, seed: int
                ) -> dict[str, dict[str, float]]:
    """Score train (whole, or ``score_train_pairs`` of it in whole groups), dev and every test
    split ONCE with the chosen weights; save predictions."""
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


# --------------------------------------------------------------------------- several seeds
def _nothing_to_resume(runs_dir: Path, recipe: str, seeds: list[int]) -> NothingToRunError:
    """``--resume`` where no seed has a run: an error, never a silent start from scratch (a
    resume command pasted into a shell whose ``PAIRREPRO_RUNS`` differs)."""
    setting = os.environ.get("PAIRREPRO_RUNS")
    where = f"set to {setting}" if setting else f"unset: ./{paths.DEFAULT_RUNS}"
    return NothingToRunError(
        f"--resume: no run of {recipe} (seed {', '.join(map(str, seeds))}) to continue in "
        f"{(runs_dir / recipe).absolute()}",
        hint=f"runs are looked for in $PAIRREPRO_RUNS ({where}): set it to the folder the "
             "run was started in, or leave out --resume to start a new run")


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
                 hooks: TrainHooks | None = None, runs_dir: Path | None = None,
                 threads: int | None = None) -> list[dict[str, Any]]:
    """Train every seed of a recipe into ``runs_dir`` (default: ``paths.runs_dir()``);
    writes ``<runs_dir>/<recipe>/summary.json``. ``resume`` continues the seeds that have a
    run (each as it started: :func:`_continuation`) and starts the others; none having one
    is a :class:`NothingToRunError` (exit 7). ``threads``: what ``--threads`` asked (the caller
    has set the process's threads), for the warning when a resume does not use it.

    Returns one result.json dict per seed. Raises :class:`ConfigError` for invalid recipes
    or recipe names, an existing run without ``resume``/``force``, a resume this command
    would change (:func:`_continuation`) and a folder another
    process holds (:class:`~pairrepro.runs.RunLockedError`), :class:`DataError`
    for missing data and a damaged run folder, :class:`TrainingError` for a diverged run,
    :class:`~pairrepro.errors.StorageError` when a file cannot be written,
    ``KeyboardInterrupt`` after Ctrl-C or SIGTERM (a checkpoint is saved first).
    """
    recipe = load_recipe(path, overrides)
    # the name becomes a folder: checked (and every seed's path built) before any write
    check_name(recipe.name, "recipe", recipe.source)
    runs_dir = runs_dir or paths.runs_dir()
    seeds = seeds or recipe.seeds
    folders = [RunFolder.of(runs_dir, recipe.name, seed) for seed in seeds]
    if resume and not force and not any(folder.exists() for folder in folders):
        raise _nothing_to_resume(runs_dir, recipe.name, seeds)
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
        write_summary(folders[0].recipe_dir, {"recipe": recipe.name, **summarise(results)})
    return results
