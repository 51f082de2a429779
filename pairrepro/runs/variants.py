"""A run's config against a recipe's: the *variant* rule (:func:`config_differences`), the
``--set`` values and the command that continue a stopped run with the config it started with,
and the compact copy of a finished run into ``results/`` (:func:`copy_compact`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import PairreproError
from pairrepro.runs.folder import (
    CONFIG,
    EVALS,
    MANIFEST,
    METRICS,
    PREDICTIONS,
    RESULT,
    RunFolder,
    writing,
)
from pairrepro.runs.index import COMPACT_SKIP, RunInfo, prediction_keys, read_predictions

# keys that change where or how fast a run is made, or its bookkeeping, not what it computes
# (precision moves only the last bits: `verify` compares such runs through intervals)
IGNORED_DIFFERENCES = frozenset({
    "train.device", "train.threads", "train.precision", "train.checkpoint_minutes",
    "optim.l2_scope_why",
    "recipe.description", "recipe.change", "recipe.paper", "recipe.reproduces",
    "recipe.compares", "recipe.seeds",
})


def flatten_config(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as flat ``section.key`` names (``{"train": {"epochs": 4}}`` ->
    ``{"train.epochs": 4}``); lists stay values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_config(value, f"{name}."))
        else:
            out[name] = value
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
                       also_ignore: frozenset[str] = frozenset()
                       ) -> dict[str, tuple[Any, Any]]:
    """The variant rule: ``{"section.key": (run value, recipe value)}`` where the resolved
    configs differ (``None``: absent), but :data:`IGNORED_DIFFERENCES` and ``also_ignore``."""
    if not run_config:  # a folder that recorded no config.toml: nothing to compare
        return {}
    run = flatten_config(resolved_config(run_config))
    recipe = flatten_config(resolved_config(recipe_config))
    ignored = IGNORED_DIFFERENCES | also_ignore
    return {key: (run.get(key), recipe.get(key)) for key in sorted(set(run) | set(recipe))
            if key not in ignored and run.get(key) != recipe.get(key)}


def train_words(recipe: str, overrides: Sequence[str], seeds: str, device: str | None,
                *flags: str) -> list[str]:
    """``pairrepro train`` with this recipe, seeds, overrides, device and ``flags``."""
    words = ["pairrepro", "train", recipe]
    if seeds.strip():
        words += ["--seeds", seeds]
    for override in overrides:
        words += ["--set", override]
    if device:
        words += ["--device", device]
    return [*words, *flags]


def resume_command(recipe: str, seeds: str, overrides: Sequence[str] = (),
                   device: str | None = None, runs_dir: Path | None = None) -> str:
    """The command that continues a stopped ``train`` with ``--resume`` (an absolute
    ``PAIRREPRO_RUNS`` when ``runs_dir`` is not ``./runs``)."""
    command = shlex.join(train_words(recipe, overrides, seeds, device, "--resume"))
    if runs_dir is None or runs_dir.resolve() == Path(paths.DEFAULT_RUNS).resolve():
        return command
    return f"PAIRREPRO_RUNS={shlex.quote(str(runs_dir.absolute()))} {command}"


def resume_overrides(run: RunInfo) -> list[str]:
    """``--set`` values for the keys where ``run``'s config differs from its recipe file."""
    from pairrepro.config import load_recipe  # the schema; config imports nothing here

    try:
        recipe = load_recipe(paths.recipes_dir() / f"{run.recipe}.toml").to_dict()
    except PairreproError:
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
    """The compact copy's files, written into ``staging``."""
    for name in (CONFIG, MANIFEST, METRICS, RESULT):
        if (source.path / name).is_file():
            shutil.copyfile(source.path / name, staging / name)
    if (source.path / EVALS).is_dir():
        shutil.copytree(source.path / EVALS, staging / EVALS)
    (staging / PREDICTIONS).mkdir()
    for key in prediction_keys(source):
        if key in COMPACT_SKIP:
            continue
        frame = read_predictions(source, key)
        keep = [c for c in COMPACT_COLUMNS if c in frame.columns]
        if "group_id" in keep and frame["group_id"].equals(frame["pair_id"]):
            keep.remove("group_id")  # a classification split: read_predictions restores it
        # pair ids are unique strings that share prefixes: delta-coded, not a dictionary
        frame[keep].to_parquet(staging / PREDICTIONS / f"{key}.parquet", index=False,
                               compression="zstd",
                               use_dictionary=[c for c in keep if c != "pair_id"],
                               column_encoding={"pair_id": "DELTA_BYTE_ARRAY"})


def copy_compact(source: RunFolder, dest: RunFolder) -> list[Path]:
    """Copy a finished run into ``dest`` without checkpoints, predictions cut to
    :data:`COMPACT_COLUMNS`; an interruption leaves the old copy or the new one."""
    staging = dest.path.parent / f".{dest.path.name}.incoming"
    aside = put_back_aside(dest)
    try:
        with writing(staging):
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            _write_compact(source, staging)
            if dest.path.exists():
                os.replace(dest.path, aside)
            os.replace(staging, dest.path)
    except BaseException:
        put_back_aside(dest)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    return sorted(p for p in dest.path.rglob("*") if p.is_file())
