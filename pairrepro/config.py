"""Recipes: TOML files validated into a typed schema, with ``extends`` (docs/recipes.md) and
``--set`` overrides; errors name the file or the ``--set`` flag and ``[section] key``."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field

from pairrepro.data.embeddings import EmbeddingSource, OovInit
from pairrepro.errors import ConfigError
from pairrepro.fileio import dumps_toml, read_toml
from pairrepro.schema import Schema, validate
from pairrepro.tasks import CLASSIFICATION, LOSSES, TASK_TYPES, task_for

# value ranges, named once (every float must be finite: TOML can spell nan and inf)
Count = Annotated[int, Field(ge=0)]  # 0 means "none" / "all" / "off", as documented per key
Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: The largest seed: numpy's generators take seeds in 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1


def _distinct(seeds: list[int]) -> list[int]:
    twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if twice:  # each seed has one run folder: the second would find the first's run
        raise ValueError(f"seed {', '.join(map(str, twice))} is given twice")
    return seeds


Seeds = Annotated[list[Annotated[int, Field(ge=0, le=MAX_SEED)]], Field(min_length=1),
                  AfterValidator(_distinct)]


class TableRow(Schema):
    """One published table row a recipe reproduces (``row`` is the label as printed)."""

    paper: str
    table: Positive
    row: str


class RecipeSection(Schema):
    description: str = ""
    change: list[str] = Field(default_factory=list)
    paper: str = ""
    seeds: Seeds = Field(default_factory=lambda: [1])
    reproduces: list[TableRow] = Field(default_factory=list)
    # rows added under a paper table as a comparison run (a model the table does not have)
    compares: list[TableRow] = Field(default_factory=list)


class DataSection(Schema):
    dataset: Annotated[str, Field(min_length=1)]
    variant: str = ""
    train_split: str = "train"
    dev_split: str = "dev"
    test_splits: list[str] = Field(default_factory=lambda: ["test"])
    max_len: Count = 0  # 0 = no truncation (applied when batching)
    max_len_right: Annotated[int, Field(ge=-1)] = -1  # -1: max_len's
    min_count: Count = 1  # rarer train tokens (and unseen ones, with random vectors) -> <unk>
    max_train_pairs: Count = 0  # 0 = all; >0 subsamples (seeded) for quick runs


# the recipe's choice lists, stated once: the implementing modules key on them (test_choices)
OptimiserName = Literal["adagrad", "adam", "adamw", "sgd", "adadelta", "rmsprop"]  # train.loop
L2Scope = Literal["all", "weights", "lazy"]  # train.loop.L2Penalty
Initializer = Literal["default", "uniform", "xavier", "zeros"]  # train.setup


class EmbeddingsSection(Schema):
    source: EmbeddingSource = "random"
    path: str = ""
    dim: Positive = 50
    trainable: bool = True
    oov_init: OovInit = "glove_stats"
    pca_dim: Count = 0  # 0 = the vectors as they are; n < dim: their first n principal components
    randomise: bool = False  # every found word's row drawn as oov_init draws missing ones


class ModelSection(Schema):
    """``[model]``: ``name`` and the free hyper-parameters (the TOML table is flat)."""

    name: Annotated[str, Field(min_length=1)]
    hparams: dict[str, Any] = Field(default_factory=dict)


class TaskSection(Schema):
    # the choices are pairrepro.tasks' own (one list of task types and losses)
    type: Literal[TASK_TYPES] = CLASSIFICATION.type  # type: ignore[valid-type]
    loss: Literal[LOSSES] = CLASSIFICATION.loss  # type: ignore[valid-type]
    margin: NonNegative = 1.0
    negatives: Positive = 1  # sampled negatives per positive for the hinge loss
    max_negatives_per_query: Count = 0  # pointwise, per query and epoch (0 = all)


Precision = Literal["auto", "fp32", "bf16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression ({exc})") from None
    return pattern


class InitRule(Schema):
    """``{pattern, init}``: parameters whose name (``re.search``) matches get ``init``."""

    pattern: Annotated[str, Field(min_length=1), AfterValidator(_check_regex)]
    init: Initializer


class OptimSection(Schema):
    name: OptimiserName = "adam"
    lr: PositiveFloat = 1e-3
    l2: NonNegative = 0.0  # coefficient of 0.5 * ||theta||^2 added to the loss
    l2_scope: L2Scope = "all"
    l2_scope_why: str = ""  # the reason _check_l2_scope asks for
    weight_decay: NonNegative = 0.0  # the optimiser's own decoupled/added decay
    clip_norm: NonNegative = 0.0  # 0 = no clipping
    lr_decay: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 1.0  # per epoch
    init: Initializer = "default"
    init_rules: list[InitRule] = Field(default_factory=list)
    init_range: PositiveFloat = 0.1
    lstm_orthogonal: bool = False


class TrainSection(Schema):
    epochs: Positive = 10
    batch_size: Positive = 32
    eval_batch_size: Positive = 256
    patience: Count = 0  # 0 = no early stopping
    select_metric: str = ""  # empty: accuracy for classification, map for ranking
    checkpoint_every: Count = 0  # also checkpoint every N steps inside an epoch (0 = per epoch)
    checkpoint_minutes: NonNegative = 10.0  # and after this many minutes of training (0 = off)
    precision: Precision = "auto"
    compile: bool = False  # torch.compile the training forward (verify compares by interval)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    deterministic: bool = True
    # the chosen checkpoint scored on train at the end: 0 = every pair, n = a seeded subsample
    score_train_pairs: Count = 0


class Recipe(Schema):
    """A validated recipe (``name``: file stem, ``source``: file, ``overrides``: ``--set``s)."""

    name: str
    source: str
    overrides: tuple[str, ...] = ()
    recipe: RecipeSection = RecipeSection()
    data: DataSection
    embeddings: EmbeddingsSection = EmbeddingsSection()
    model: ModelSection
    task: TaskSection = TaskSection()
    optim: OptimSection = OptimSection()
    train: TrainSection = TrainSection()

    @property
    def seeds(self) -> list[int]:
        return self.recipe.seeds

    @property
    def select_metric(self) -> str:
        """``[train] select_metric``, else the task's (accuracy, or map for ranking)."""
        return (self.train.select_metric
                or task_for(self.task.type, self.task.loss).default_select_metric)

    def where(self, section: str, key: str = "") -> str:
        """Where ``[section] key`` was set, for an error: its ``--set``, else the file."""
        flags = set_origins(list(self.overrides))
        if key:
            return flags.get((section, key), self.source)
        mine = [flag for path, flag in flags.items() if path[0] == section]
        return f"{self.source} with {', '.join(mine)}" if mine else self.source

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe as the TOML-shaped dict it came from (model flattened)."""
        out = self.model_dump(exclude={"name", "source", "overrides"})
        out["model"] = {"name": self.model.name, **self.model.hparams}
        return out

    def to_toml(self) -> str:
        """The resolved recipe as TOML text (saved as ``config.toml`` with every run)."""
        return dumps_toml(self.to_dict())

    def with_changes(self, **sections: dict[str, Any]) -> Recipe:
        """A copy with some keys changed (``data={"variant": "raw"}``), validated again."""
        return recipe_from_dict(merge_tables(self.to_dict(), sections), self.name, self.source,
                                list(self.overrides))


SECTIONS: tuple[str, ...] = tuple(key for key in Recipe.model_fields
                                  if key not in ("name", "source", "overrides"))
# [recipe] keys that say what one file is, never inherited (``change``: :func:`_recipe_prose`)
OWN_KEYS = ("paper", "reproduces", "compares", "change")


def recipe_from_dict(raw: dict[str, Any], name: str, source: str,
                     overrides: list[str] | None = None) -> Recipe:
    """Validate a TOML-shaped dict (``extends`` resolved, ``overrides`` applied)."""
    if unknown := sorted(set(raw) - set(SECTIONS)):
        raise ConfigError(f"{source}: unknown section [{unknown[0]}]",
                          hint=f"allowed sections: {', '.join(f'[{s}]' for s in SECTIONS)}")
    # absent sections are empty tables, so a missing required key is named as [data] dataset
    tables: dict[str, Any] = {section: raw.get(section, {}) for section in SECTIONS}
    model = tables["model"]
    if isinstance(model, dict):  # flat in TOML: name + free hyper-parameters
        tables["model"] = {**({"name": model["name"]} if "name" in model else {}),
                           "hparams": {k: v for k, v in model.items() if k != "name"}}
    overrides = list(overrides or [])
    recipe = validate(Recipe, {"name": name, "source": source, "overrides": tuple(overrides),
                               **tables}, source, set_elsewhere=set_origins(overrides))
    _check_task(recipe)
    _check_l2_scope(recipe)
    emb = recipe.embeddings
    for wrong, key, problem, hint in (
            (emb.source == "glove-file" and not emb.path, "path",
             "required when source = 'glove-file'", None),
            (emb.pca_dim and (emb.source == "random" or emb.pca_dim >= emb.dim), "pca_dim",
             f"{emb.pca_dim} must be below dim ({emb.dim}) of pretrained vectors (source "
             f"{emb.source!r})", "pca_dim = 0 keeps the vectors as they are"),
            (emb.randomise and emb.source == "random", "randomise",
             "source 'random' has no vectors to randomise",
             "randomise pretrained vectors, or drop the key"),
            (emb.source == "glove-6b-50d" and emb.dim != 50, "dim",
             f"glove-6b-50d vectors have 50 dimensions, got {emb.dim}", None)):
        if wrong:
            raise ConfigError(f"{recipe.where('embeddings', key)}: [embeddings] {key}: {problem}",
                              hint=hint)
    return recipe


def _check_task(recipe: Recipe) -> None:
    """``[task]`` type and loss fit, and keys the task does not use keep their defaults."""
    try:
        task = task_for(recipe.task.type, recipe.task.loss)
    except ConfigError as exc:
        raise ConfigError(f"{recipe.where('task')}: {exc.message}", hint=exc.hint) from None
    for key, field in TaskSection.model_fields.items():
        if key in ("type", "loss") or key in task.recipe_keys:
            continue
        value = getattr(recipe.task, key)
        if value != field.default:
            uses = ", ".join(sorted(task.recipe_keys)) or "none besides type and loss"
            raise ConfigError(f"{recipe.where('task', key)}: [task] {key}: {value!r}: the "
                              f"{task.type}/{task.loss} task does not use it; leave it at its "
                              f"default {field.default!r}",
                              hint=f"[task] keys this task uses: {uses}")


# optimisers that rescale each coordinate's step by its own gradient history: all but SGD
ADAPTIVE_OPTIMISERS = frozenset(get_args(OptimiserName)) - {"sgd"}


def _check_l2_scope(recipe: Recipe) -> None:
    """A dense L2 on fine-tuned pretrained vectors under an adaptive optimiser needs
    ``l2_scope_why`` (docs/internals.md, "L2 scope")."""
    emb, optim = recipe.embeddings, recipe.optim
    if (optim.l2 > 0 and optim.l2_scope == "all" and not optim.l2_scope_why.strip()
            and emb.trainable and emb.source != "random"
            and optim.name in ADAPTIVE_OPTIMISERS):
        raise ConfigError(
            f"{recipe.where('optim')}: [optim] l2_scope: 'all' with fine-tuned {emb.source} "
            f"vectors under {optim.name}: the L2 term alone shrinks every word row no batch "
            "uses, by a fraction of the learning rate at each step",
            hint='use l2_scope = "lazy" (only the rows of the batch\'s words) or "weights" '
                 '(no embedding tables, no biases), or say why in [optim] l2_scope_why')


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


def set_origins(overrides: list[str]) -> dict[tuple[str, ...], str]:
    """``{(section, key): "--set section.key=value"}``: where an error about a key points."""
    return {tuple(parse_override(text)[0][:2]): f"--set {text}" for text in overrides}


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for text in overrides:
        try:  # config.toml is UTF-8: bytes that are not (kept by Python as surrogates) cannot go in
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"override {text!r}: not valid UTF-8 text",
                              hint="pass the value in UTF-8 (check the shell's locale)") from None
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {part!r} is not a table")
        node[path[-1]] = value
    return out


def merge_tables(base: dict[str, Any], delta: dict[str, Any], source: str = "",
                 table: str = "") -> dict[str, Any]:
    """``delta`` merged into a copy of ``base``: tables key by key, other values replace."""
    out = copy.deepcopy(base)
    for key, value in delta.items():
        dotted = f"{table}.{key}" if table else key
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_tables(out[key], value, source, dotted)
            continue
        if key in out and isinstance(value, dict) != isinstance(out[key], dict):
            here, there = ("a table" if isinstance(v, dict) else f"the value {v!r}"
                           for v in (value, out[key]))
            raise ConfigError(
                f"{source or 'recipe'}: {dotted}: {here} here, but {there} in the recipe it "
                "extends", hint=f"give {dotted} as {there} (tables merge key by key, values "
                                "replace values), or drop extends")
        out[key] = copy.deepcopy(value)
    return out


def read_recipe_file(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A recipe file as a TOML-shaped dict, its ``extends`` chain merged in (not validated)."""
    raw = read_toml(path)
    base_name = raw.pop("extends", None)
    if base_name is None:
        own = raw.get("recipe")
        if isinstance(own, dict) and isinstance(own.get("change"), str):
            # a resolved config.toml holds the chain as a list; a line has no base to change
            raise ConfigError(f"{path}: [recipe] change: a recipe that extends none changes "
                              "nothing", hint="say what it is in [recipe] description")
        return raw
    if not isinstance(base_name, str) or not base_name.endswith(".toml"):
        raise ConfigError(f"{path}: extends: {base_name!r}: expected a recipe file name "
                          "such as \"csran_trecqa.toml\" (relative to this recipe's folder)")
    base = (path.parent / base_name).resolve()
    if Path(base_name).name != base_name or base.parent != path.parent.resolve():
        # a base elsewhere (or a link to one) is a file the recipe's commit need not hold
        raise ConfigError(f"{path}: extends: {base_name!r}: a recipe extends a file in its "
                          f"own folder ({path.parent}), and this is {base}",
                          hint="extends names a recipe file beside this one, e.g. extends = "
                               "\"csran_trecqa.toml\": copy the base recipe into this folder")
    seen = (*chain, path.resolve())
    if base in seen:
        cycle = " -> ".join(p.name for p in (*seen[seen.index(base):], base))
        raise ConfigError(f"{path}: extends: a cycle: {cycle}",
                          hint="a recipe cannot extend itself, directly or through others")
    if not base.is_file():
        raise ConfigError(f"{path}: extends: {base_name!r}: no such file {base}",
                          hint="extends names a recipe in the same folder, e.g. "
                               "extends = \"csran_trecqa.toml\"")
    inherited = read_recipe_file(base, seen)
    section = inherited.get("recipe")
    if isinstance(section, dict):  # what the base *is* does not carry over
        inherited["recipe"] = {k: v for k, v in section.items() if k not in OWN_KEYS}
    own = raw.get("recipe", {})
    if isinstance(own, dict):  # else merge_tables names the conflict
        if "description" not in own and _dataset(raw) not in (None, _dataset(inherited)):
            raise ConfigError(f"{path}: [recipe] description: on {_dataset(raw)!r}, not "
                              f"{base_name}'s {_dataset(inherited)!r}: a description (naming "
                              "its data) is not inherited across datasets",
                              hint="say what this recipe is, on its dataset, in description")
        chain = section.get("change") if isinstance(section, dict) else None
        raw["recipe"] = {**own, "change": _recipe_prose(path, own, raw, chain)}
    return merge_tables(inherited, raw, str(path))


def _dataset(raw: dict[str, Any]) -> Any:
    return data.get("dataset") if isinstance(data := raw.get("data"), dict) else None


def _recipe_prose(path: Path, own: dict[str, Any], raw: dict[str, Any], changes: Any
                  ) -> list[str]:
    """The ``change`` chain of a file that extends, base first, as ``"<recipe>: <line>"``: its
    base's chain (none when it has its own ``description``) and its line, else the keys it sets."""
    line = own.get("change")
    if line is not None and (not isinstance(line, str) or not line.strip()):
        raise ConfigError(f"{path}: [recipe] change: {line!r}: expected one line of text "
                          "saying what this recipe changes in the one it extends")
    if line is None and "description" not in own:
        keys = [f"{section}.{key}" for section, table in raw.items()
                if isinstance(table, dict) and section != "recipe" for key in table]
        line = f"sets {', '.join(keys)}" if keys else "changes nothing"
    # a recipe that describes itself whole starts the chain
    chain = list(changes) if isinstance(changes, list) and "description" not in own else []
    return chain + ([f"{path.stem}: {line.strip()}"] if line is not None else [])


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> Recipe:
    """A recipe file, its ``extends`` chain merged, ``--set`` overrides applied, validated."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"recipe {p} not found", hint="recipes live in recipes/*.toml")
    raw = apply_overrides(read_recipe_file(p), overrides or [])
    return recipe_from_dict(raw, name=p.stem, source=str(p), overrides=overrides)
