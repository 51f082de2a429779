"""Run folders seen from outside the trainer: :func:`read_run` (never raises: a damaged folder
is status ``damaged``), saved predictions, a run's config against a recipe's (the *variant*
rule, :func:`config_differences`), the command that continues a stopped run, and the compact
copy of a finished run into ``results/``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import PairreproError
from pairrepro.runs.folder import CONFIG, REPAIR, DamagedRunError, RunFolder, writing

# the splits a reference run keeps no predictions of (train predictions are a fit diagnostic,
# large, and no table reads them)
COMPACT_SKIP = ("train",)


@dataclass
class RunInfo:
    """What a report needs of one seed folder (never raises on a damaged folder)."""

    recipe: str
    seed: int
    path: str
    # finished | running | interrupted | failed | damaged | unknown (no such folder) | stale
    # (result.json says running but its process is gone from this host)
    status: str
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    chosen_epoch: int | None = None
    commit: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    problem: str = ""  # damaged: which file and why

    def value(self, metric: str) -> float | None:
        """``"<split>.<metric>"`` of a finished run, or None."""
        split, name = metric.split(".", 1)
        value = self.metrics.get(split, {}).get(name)
        return float(value) if isinstance(value, int | float) else None

    @property
    def folder(self) -> RunFolder:
        return RunFolder(Path(self.path))


def process_gone(result: dict[str, Any]) -> bool:
    """True when ``result.json`` names a process on this host that no longer exists."""
    pid, host = result.get("pid"), result.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, owned by another user
    return False


def read_run(seed_dir: Path) -> RunInfo:
    """A seed folder's record; a damaged or incomplete one has status ``damaged`` and a
    ``problem`` naming the file."""
    folder = RunFolder(seed_dir)
    info = RunInfo(recipe=seed_dir.parent.name, seed=folder.seed, path=str(seed_dir),
                   status="unknown")
    try:
        result = folder.read_result()
        info.manifest = folder.read_manifest()
        info.config = folder.read_config()
    except DamagedRunError as exc:
        info.status, info.problem = "damaged", exc.message
        return info
    if not seed_dir.is_dir():
        return info  # no run here: "unknown"
    # result.json is a run's first file (train.lifecycle.SeedRun.start): a folder without it lost it
    problem = (f"{folder.result_path}: missing (a seed folder holds one from its start)"
               if not result else "")
    if result and result["status"] == "finished":
        problem = "; ".join(_missing_parts(folder, result, info.manifest))
    problem = problem or _identity_problem(folder, result, info.manifest, info.config)
    if problem:
        info.status, info.problem = "damaged", problem
        return info
    info.status = str(result["status"])
    if info.status == "running" and process_gone(result):
        info.status = "stale"
    info.metrics = result.get("metrics") or {}
    info.chosen_epoch = result.get("chosen_epoch")
    info.recipe = str(result.get("recipe", info.recipe))
    git = info.manifest.get("git")
    info.commit = str(git.get("commit") or "") if isinstance(git, dict) else ""
    return info


def _identity_problem(folder: RunFolder, result: dict[str, Any], manifest: dict[str, Any],
                      config: dict[str, Any]) -> str:
    """Where ``result.json``/``manifest.json`` name another recipe or seed than the folder (the
    recipe where a ``config.toml`` marks a pairrepro run), or other data than ``config.toml``."""
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    named = {"recipe": folder.recipe_dir.name if folder.config_path.is_file() else None,
             "seed": folder.seed, "dataset": data.get("dataset"), "variant": data.get("variant")}
    wrong = [f"{path.name} {key} {record[key]!r}" for path, record in (
        (folder.result_path, result), (folder.manifest_path, manifest))
        for key, want in named.items() if want is not None and record.get(key, want) != want]
    return "" if not wrong else (
        f"{folder.path}: the folder holds recipe {folder.recipe_dir.name}, seed {folder.seed} of "
        f"{named['dataset']}/{named['variant']}, but {', '.join(wrong)}: a run copied under "
        "another name is not that run; move it to <recipe>/seed-<n> as its files say, or "
        "restore them")


def _missing_parts(folder: RunFolder, result: dict[str, Any], manifest: dict[str, Any]
                   ) -> list[str]:
    """What a trainer-finished run lacks: a ``metrics.jsonl`` line per epoch run, and the
    predictions of each split it has metrics of (but :data:`COMPACT_SKIP`)."""
    epochs = manifest.get("epochs_run")
    if not isinstance(epochs, int) or isinstance(epochs, bool):
        return []
    missing = [f"{folder.predictions(split)}: missing (result.json records {split} metrics)"
               for split in result.get("metrics", {})
               if split not in COMPACT_SKIP and not folder.predictions(split).is_file()]
    try:
        lines = len(folder.read_metrics())
    except DamagedRunError as exc:
        return [*missing, exc.message]
    if lines != epochs:
        missing.append(f"{folder.metrics_path}: {lines} epoch line(s) where manifest.json "
                       f"records {epochs} epoch(s) run")
    return missing


def find_runs(runs_dir: Path, recipe: str) -> list[RunInfo]:
    """Every ``runs_dir/<recipe>/seed-*`` folder, sorted by seed."""
    runs = [read_run(d) for d in (runs_dir / recipe).glob("seed-*") if d.is_dir()]
    return sorted(runs, key=lambda r: r.seed)


def all_runs(runs_dir: Path) -> list[RunInfo]:
    """Every seed folder under ``runs_dir``, by recipe then seed."""
    return [run for d in sorted(runs_dir.glob("*")) if d.is_dir()  # none when no runs_dir
            for run in find_runs(runs_dir, d.name)]


def seed_folders(target: Path) -> list[RunFolder]:
    """A seed folder itself, or every seed folder (with a config) of a recipe's folder."""
    if (target / CONFIG).is_file():
        return [RunFolder(target)]
    folders = [RunFolder(p) for p in target.glob("seed-*") if (p / CONFIG).is_file()]
    return sorted(folders, key=lambda f: f.seed)


def _classification(columns: Any) -> bool:
    """Whether a predictions split with these columns classifies pairs: one question per
    pair, so its ``group_id`` is its ``pair_id`` and a compact copy leaves it out."""
    return {"pair_id", "prediction"} <= set(columns)


def read_predictions(folder: RunFolder, key: str) -> Any:
    """``predictions/<key>.parquet`` as a DataFrame, or None when absent; a compact copy's
    classification split (it has ``prediction``), saved without ``group_id``, gets it back as
    ``pair_id``. A ranking split without ``group_id`` stays damaged, so it cannot be scored."""
    import pandas as pd

    path = folder.predictions(key)
    if not path.is_file():
        return None
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise DamagedRunError(f"{path}: not a readable parquet file ({exc})",
                              hint=REPAIR) from None
    if _classification(frame.columns) and "group_id" not in frame.columns:
        frame.insert(1, "group_id", frame["pair_id"])
    return frame


def prediction_keys(folder: RunFolder) -> list[str]:
    return sorted(p.stem for p in folder.predictions_dir.glob("*.parquet"))


# keys that change where or how fast a run is made, or its bookkeeping, not what it computes
# (precision and compiling move only the last bits: `verify` compares such runs by interval)
IGNORED_DIFFERENCES = frozenset({
    "train.device", "train.threads", "train.precision", "train.compile",
    "train.checkpoint_minutes", "optim.l2_scope_why",
    "recipe.description", "recipe.change", "recipe.paper", "recipe.reproduces",
    "recipe.compares", "recipe.seeds",
})


def flatten_config(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as flat ``section.key`` names (``{"train": {"epochs": 4}}`` ->
    ``{"train.epochs": 4}``); lists stay values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def resolved_config(config: dict[str, Any]) -> dict[str, Any]:
    """A run's config through today's schema (a key added since takes its default); one the
    schema cannot read as it is."""
    from pairrepro.config import recipe_from_dict  # the schema; config imports nothing here

    try:
        return recipe_from_dict(config, name="run", source=CONFIG).to_dict()
    except PairreproError:
        return config


def config_differences(run_config: dict[str, Any], recipe_config: dict[str, Any],
                       also_ignore: frozenset[str] = frozenset(), only: Sequence[str] = ()
                       ) -> dict[str, tuple[Any, Any]]:
    """The variant rule: ``{"section.key": (run value, recipe value)}`` where the resolved
    configs differ (``None``: absent), but :data:`IGNORED_DIFFERENCES` and ``also_ignore``;
    with ``only``, those keys alone, ignored or not."""
    if not run_config:  # a folder that recorded no config.toml: nothing to compare
        return {}
    run = flatten_config(resolved_config(run_config))
    recipe = flatten_config(resolved_config(recipe_config))
    ignored = IGNORED_DIFFERENCES | also_ignore
    keys = only or [key for key in sorted(set(run) | set(recipe)) if key not in ignored]
    return {key: (run.get(key), recipe.get(key)) for key in keys
            if run.get(key) != recipe.get(key)}


def train_words(recipe: str, overrides: Sequence[str], seeds: str, device: str | None,
                *flags: str) -> list[str]:
    return ["pairrepro", "train", recipe, *(["--seeds", seeds] if seeds.strip() else []),
            *(word for override in overrides for word in ("--set", override)),
            *(["--device", device] if device else []), *flags]


def resume_command(recipe: str, seeds: str, overrides: Sequence[str] = (),
                   device: str | None = None, runs_dir: Path | None = None,
                   flags: Sequence[str] = ()) -> str:
    """The command that continues a stopped ``train`` with ``--resume`` and its ``flags`` (an
    absolute ``PAIRREPRO_RUNS`` when ``runs_dir`` is not ``./runs``)."""
    command = shlex.join(train_words(recipe, overrides, seeds, device, "--resume", *flags))
    if runs_dir is None or runs_dir.resolve() == Path(paths.DEFAULT_RUNS).resolve():
        return command
    return f"PAIRREPRO_RUNS={shlex.quote(str(runs_dir.absolute()))} {command}"


def resume_overrides(run: RunInfo) -> list[str]:
    """``--set`` values for the keys where ``run``'s config differs from its recipe file."""
    from pairrepro.config import load_recipe  # the schema; config imports nothing here

    try:
        recipe = load_recipe(paths.toml_files(paths.recipes_dir())[run.recipe]).to_dict()
    except (PairreproError, KeyError):  # a recipe gone or broken since: no --set to repeat
        recipe = {}
    return [f"{key}={json.dumps(mine)}"
            for key, (mine, _) in config_differences(run.config, recipe).items()
            if mine is not None]


# the columns a reference run keeps: what metrics, intervals and paired tests need (ids,
# gold label, the ranking score or the predicted class); never the text of a pair
COMPACT_COLUMNS = ("pair_id", "group_id", "label", "score", "prediction")


def put_back_aside(dest: RunFolder) -> Path:
    """Finish an interrupted :func:`copy_compact`: its aside folder is put back when none is
    in place, else removed."""
    aside = dest.aside_path
    if aside.is_dir():
        with writing(dest.path):
            if dest.path.exists():  # killed after the new one moved in: the old one is done
                shutil.rmtree(aside)
            else:
                os.replace(aside, dest.path)
    return aside


def _write_compact(source: RunFolder, staging: Path) -> None:
    target = RunFolder(staging)
    for path in (source.config_path, source.manifest_path, source.metrics_path,
                 source.result_path):
        if path.is_file():
            shutil.copyfile(path, staging / path.name)
    if source.evals_dir.is_dir():
        shutil.copytree(source.evals_dir, target.evals_dir)
    target.predictions_dir.mkdir()
    for key in sorted(set(prediction_keys(source)) - set(COMPACT_SKIP)):
        frame = read_predictions(source, key)
        keep = [c for c in COMPACT_COLUMNS if c in frame.columns]
        if ("group_id" in keep and _classification(keep)
                and frame["group_id"].equals(frame["pair_id"])):
            keep.remove("group_id")  # read_predictions restores it
        # pair ids are unique strings that share prefixes: delta-coded, not a dictionary
        frame[keep].to_parquet(target.predictions(key), index=False, compression="zstd",
                               use_dictionary=[c for c in keep if c != "pair_id"],
                               column_encoding={"pair_id": "DELTA_BYTE_ARRAY"})


def copy_compact(source: RunFolder, dest: RunFolder, extra: dict[str, str] | None = None
                 ) -> list[Path]:
    """Copy a finished run into ``dest`` without checkpoints, predictions cut to
    :data:`COMPACT_COLUMNS`, with the ``extra`` files (name -> text) beside it; an
    interruption leaves the old copy or the new one."""
    staging = dest.path.parent / f".{dest.path.name}.incoming"
    aside = put_back_aside(dest)
    try:
        with writing(staging):
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            _write_compact(source, staging)
            for name, text in (extra or {}).items():
                (staging / name).write_text(text, encoding="utf-8")
            if dest.path.exists():
                os.replace(dest.path, aside)
            os.replace(staging, dest.path)
    except BaseException:
        put_back_aside(dest)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    return sorted(p for p in dest.path.rglob("*") if p.is_file())
