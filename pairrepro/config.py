"""Recipes: TOML files validated into a typed schema, with ``--set`` overrides.

A recipe is data. Errors name the file, the key and what is allowed::

    recipes/x.toml: [optim] lr: expected a number, got 'fast'

Layout (every section but ``[model]`` has a fixed set of keys; ``[model]``
holds ``name`` plus the model's own hyper-parameters, checked against the
model's constructor when the model is built)::

    [recipe]      description, paper, seeds, reproduces = [{paper, table, row}],
                  compares = [{paper, table, row}]
    [data]        dataset, variant, train_split, dev_split, test_splits,
                  max_len, min_count, max_train_pairs
    [embeddings]  source ("random" | "glove-6b-50d" | "glove-file"), path, dim, trainable
    [model]       name + hyper-parameters
    [task]        type ("classification" | "ranking"), loss, margin, negatives,
                  max_negatives_per_query
    [optim]       name, lr, l2, weight_decay, clip_norm, lr_decay, init, init_range,
                  lstm_orthogonal
    [train]       epochs, batch_size, eval_batch_size, patience, select_metric,
                  checkpoint_every, device, deterministic, score_train_pairs
"""

from __future__ import annotations

import copy
import tomllib
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from pairrepro.errors import ConfigError
from pairrepro.io import read_toml


@dataclass
class TableRow:
    """One published table row a recipe reproduces (``row`` is the label as printed)."""

    paper: str
    table: int
    row: str


@dataclass
class RecipeSection:
    description: str = ""
    paper: str = ""
    seeds: list[int] = field(default_factory=lambda: [1])
    reproduces: list[TableRow] = field(default_factory=list)
    # rows this recipe adds under a paper table as a comparison run here (a model the table
    # does not have); ``row`` is the label to print
    compares: list[TableRow] = field(default_factory=list)


@dataclass
class DataSection:
    dataset: str = ""
    variant: str = ""
    train_split: str = "train"
    dev_split: str = "dev"
    test_splits: list[str] = field(default_factory=lambda: ["test"])
    max_len: int = 0  # 0 = no truncation (applied when batching)
    # tokens seen fewer times in train -> <unk>; train-unseen tokens too with random embeddings
    min_count: int = 1
    max_train_pairs: int = 0  # 0 = all; >0 subsamples (seeded) for quick runs


@dataclass
class EmbeddingsSection:
    source: Literal["random", "glove-6b-50d", "glove-file"] = "random"
    path: str = ""
    dim: int = 50
    trainable: bool = True


@dataclass
class ModelSection:
    name: str = ""
    hparams: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskSection:
    type: Literal["classification", "ranking"] = "classification"
    loss: Literal["cross_entropy", "hinge", "pointwise"] = "cross_entropy"
    margin: float = 1.0
    negatives: int = 1  # sampled negatives per positive for the hinge loss
    # pointwise ranking: each epoch, every training query keeps all its positives and a
    # fresh seeded sample of at most this many of its negatives (0 = all of them)
    max_negatives_per_query: int = 0


@dataclass
class OptimSection:
    name: Literal["adagrad", "adam", "adamw", "sgd", "adadelta", "rmsprop"] = "adam"
    lr: float = 1e-3
    l2: float = 0.0  # coefficient of 0.5 * ||theta||^2 added to the loss
    weight_decay: float = 0.0  # the optimiser's own decoupled/added decay
    clip_norm: float = 0.0  # 0 = no clipping
    lr_decay: float = 1.0  # multiplied into the learning rate after every epoch
    init: Literal["default", "uniform", "xavier"] = "default"
    init_range: float = 0.1
    lstm_orthogonal: bool = False


@dataclass
class TrainSection:
    epochs: int = 10
    batch_size: int = 32
    eval_batch_size: int = 256
    patience: int = 0  # 0 = no early stopping
    select_metric: str = ""  # empty: accuracy for classification, map for ranking
    checkpoint_every: int = 0  # also checkpoint every N steps inside an epoch (0 = per epoch)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    deterministic: bool = True
    # the chosen checkpoint is scored on the train split once at the end (a diagnostic of
    # fit): 0 = every pair, >0 = a seeded subsample of about that many (whole groups)
    score_train_pairs: int = 0


@dataclass
class Recipe:
    """A validated recipe. ``name`` is the file stem; ``source`` the file it came from."""

    name: str
    source: str
    recipe: RecipeSection
    data: DataSection
    embeddings: EmbeddingsSection
    model: ModelSection
    task: TaskSection
    optim: OptimSection
    train: TrainSection

    @property
    def seeds(self) -> list[int]:
        return self.recipe.seeds

    @property
    def select_metric(self) -> str:
        if self.train.select_metric:
            return self.train.select_metric
        return "accuracy" if self.task.type == "classification" else "map"

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe as the TOML-shaped dict it came from (model flattened)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("name", "source"):
                continue
            value = asdict(getattr(self, f.name))
            if f.name == "model":
                value = {"name": value["name"], **value["hparams"]}
            out[f.name] = value
        return out

    def to_toml(self) -> str:
        """The resolved recipe as TOML text (saved as ``config.toml`` with every run)."""
        return dumps_toml(self.to_dict())


SECTIONS: dict[str, type] = {
    "recipe": RecipeSection,
    "data": DataSection,
    "embeddings": EmbeddingsSection,
    "model": ModelSection,
    "task": TaskSection,
    "optim": OptimSection,
    "train": TrainSection,
}
REQUIRED = {("data", "dataset"), ("model", "name")}
VALID_LOSSES = {"classification": {"cross_entropy"}, "ranking": {"hinge", "pointwise"}}


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (ints widen to float)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{where}: {value!r} is not allowed; choose {_type_name(tp)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r}")
        (inner,) = typing.get_args(tp)
        return [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(tp):
            try:
                return _coerce(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: {value!r} does not match {tp}")
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, bool):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if tp is TableRow:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table {{paper, table, row}}, got {value!r}")
        return _build(TableRow, value, where)
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r}")
    return value


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}", hint=f"allowed keys: {', '.join(sorted(known))}"
        )
    kwargs = {k: _coerce(v, hints[k], f"{where} {k}") for k, v in values.items()}
    missing = [f.name for f in fields(cls) if f.name not in kwargs and _has_no_default(f)]
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")
    return cls(**kwargs)


def _has_no_default(f: Any) -> bool:
    from dataclasses import MISSING

    return f.default is MISSING and f.default_factory is MISSING


def recipe_from_dict(raw: dict[str, Any], name: str, source: str) -> Recipe:
    """Validate a TOML-shaped dict into a :class:`Recipe` (errors name ``source``)."""
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise ConfigError(
            f"{source}: unknown section [{unknown[0]}]",
            hint=f"allowed sections: {', '.join(f'[{s}]' for s in SECTIONS)}",
        )
    for section, key in sorted(REQUIRED):
        if key not in raw.get(section, {}):
            raise ConfigError(f"{source}: missing key [{section}] {key}")
    built: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        values = raw.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        where = f"{source}: [{section}]"
        if cls is ModelSection:
            values = dict(values)
            model_name = values.pop("name")
            if not isinstance(model_name, str):
                raise ConfigError(f"{where} name: expected a string, got {model_name!r}")
            built[section] = ModelSection(name=model_name, hparams=values)
        else:
            built[section] = _build(cls, values, where)
    recipe = Recipe(name=name, source=source, **built)
    task = recipe.task
    if task.loss not in VALID_LOSSES[task.type]:
        raise ConfigError(
            f"{source}: [task] loss: {task.loss!r} does not fit type {task.type!r}",
            hint=f"use one of {sorted(VALID_LOSSES[task.type])}",
        )
    if recipe.embeddings.source == "glove-file" and not recipe.embeddings.path:
        raise ConfigError(f"{source}: [embeddings] path: required when source = 'glove-file'")
    if recipe.embeddings.source == "glove-6b-50d" and recipe.embeddings.dim != 50:
        raise ConfigError(
            f"{source}: [embeddings] dim: glove-6b-50d vectors have 50 dimensions, "
            f"got {recipe.embeddings.dim}"
        )
    return recipe


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``section.key=value``; the value is read as a TOML literal, else a string."""
    if "=" not in text:
        raise ConfigError(f"override {text!r}: expected section.key=value (e.g. model.hidden=100)")
    key, raw_value = text.split("=", 1)
    path = key.strip().split(".")
    if len(path) < 2 or not all(path):
        raise ConfigError(f"override {text!r}: the key must look like section.key")
    try:
        value = tomllib.loads(f"v = {raw_value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw_value.strip()
    return path, value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``raw`` with every ``section.key=value`` override applied."""
    out = copy.deepcopy(raw)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {part!r} is not a table")
        node[path[-1]] = value
    return out


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> Recipe:
    """Read, override and validate a recipe file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"recipe {p} not found", hint="recipes live in recipes/*.toml")
    raw = read_toml(p)
    raw = apply_overrides(raw, overrides or [])
    return recipe_from_dict(raw, name=p.stem, source=str(p))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if value is None:
        return '""'
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dumps_toml(data: dict[str, Any]) -> str:
    """Write a two-level dict (sections of scalars, lists and inline tables) as TOML."""
    lines: list[str] = []
    for section, values in data.items():
        if not isinstance(values, dict):
            lines.insert(0, f"{section} = {_toml_value(values)}")
            continue
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
        lines.append("")
    return "\n".join(lines)
