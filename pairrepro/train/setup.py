"""From a recipe to what training and scoring need: encoded data, a built and initialised model,
a run's model rebuilt from its folder (imports none of loop, provenance, runner)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pairrepro import paths
from pairrepro.config import Initializer, OptimSection, Recipe, recipe_from_dict
from pairrepro.data.batches import EncodedSplit, subsample
from pairrepro.data.prepared import PAD, UNK, PreparedDataset, load_prepared, prepare_steps
from pairrepro.device import resolve_device
from pairrepro.errors import ConfigError, DataError, PairreproError
from pairrepro.models import ModelContext, PairModel, build_model
from pairrepro.models.base import embedding_parameter_ids, get_model_class
from pairrepro.runs import RunFolder, load_checkpoint
from pairrepro.tasks import Task, task_for


@dataclass
class TaskData:
    """The encoded splits a run uses and how to score them."""

    splits: dict[str, EncodedSplit]
    train_split: str
    dev_split: str
    test_splits: list[str]
    num_classes: int
    no_positive: str = "skip"

    @property
    def train(self) -> EncodedSplit:
        return self.splits[self.train_split]

    @property
    def dev(self) -> EncodedSplit:
        return self.splits[self.dev_split]


def recipe_task(recipe: Recipe) -> Task:
    return task_for(recipe.task.type, recipe.task.loss)


def _no_positive_mode(recipe: Recipe, prepared: PreparedDataset) -> str:
    """How queries without a relevant candidate count: the variant says (stats or manifest)."""
    mode = prepared.stats.get("no_positive")
    if mode is None:
        from pairrepro.data.manifests import load_manifest

        with contextlib.suppress(PairreproError):  # no manifest (tests): the default
            variant = load_manifest(recipe.data.dataset).variant(recipe.data.variant or None)
            mode = variant.options.no_positive
    return str(mode or "skip")


def check_prerequisites(recipe: Recipe) -> None:
    """An unknown dataset is a :class:`ConfigError`; everything else missing is ONE
    :class:`DataError` listing every step to take, in order."""
    from pairrepro.data.embeddings import missing_vectors, other_vectors
    from pairrepro.data.manifests import available_datasets

    d, emb = recipe.data, recipe.embeddings
    known = available_datasets() if paths.manifests_dir().is_dir() else []
    if known and d.dataset not in known:
        raise ConfigError(f"{recipe.where('data', 'dataset')}: [data] dataset: unknown "
                          f"dataset {d.dataset!r}",
                          hint=f"known datasets: {', '.join(known)}")
    steps = prepare_steps(d.dataset, d.variant)
    vectors = missing_vectors(emb.source, emb.path, emb.dim, d.dataset, d.variant)
    if vectors is not None:
        steps.append(vectors)
    if not steps:
        return
    lines = [f"  {number}. {step.missing}\n     {step.command}"
             for number, step in enumerate(steps, 1)]
    what = ("one thing that is not here yet:" if len(steps) == 1 else
            f"{len(steps)} things that are not here yet, in this order:")
    raise DataError(f"{recipe.source} needs {what}\n" + "\n".join(lines),
                    hint=(f"instead of step {len(steps)}, {other_vectors(emb.dim)}"
                          if vectors is not None and emb.source == "glove-file" else None))


def load_task_data(recipe: Recipe, seed: int, splits: list[str] | None = None,
                   prepared: PreparedDataset | None = None) -> tuple[PreparedDataset, TaskData]:
    task = recipe_task(recipe)
    prepared = prepared or load_prepared(recipe.data.dataset, recipe.data.variant or None)
    d = recipe.data
    wanted = splits or [d.train_split, d.dev_split, *d.test_splits]
    encoded = {name: EncodedSplit.from_frame(prepared.split(name), d.max_len, name,
                                             d.max_len_right)
               for name in dict.fromkeys(wanted)}
    # train-unseen words stay themselves where something can use them: pretrained vectors,
    # or a scorer without parameters (BM25 matches a test-only word of the question in an
    # answer); a model learning random embeddings could not train them, so they become <unk>
    trained = True  # an unknown model is reported when it is built
    with contextlib.suppress(ConfigError):
        trained = get_model_class(recipe.model.name).needs_training
    keep_unseen = recipe.embeddings.source != "random" or not trained
    rare = prepared.rare_token_map(d.min_count, keep_unseen=keep_unseen)
    if rare is not None:
        for split in encoded.values():
            split.left = [rare[ids] for ids in split.left]
            split.right = [rare[ids] for ids in split.right]
    if d.train_split in encoded:
        encoded[d.train_split] = subsample(encoded[d.train_split], d.max_train_pairs, seed,
                                           by_group=task.by_group)
    num_classes = task.num_classes(
        prepared.stats.get("label_map") or None,
        int(max(int(s.labels.max(initial=0)) for s in encoded.values())))
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

        matrix, oov = build_embedding_matrix(prepared.vocab, emb.source, emb.path, emb.dim, seed,
                                             emb.oov_init, emb.pca_dim, emb.randomise)
        pretrained = torch.as_tensor(np.asarray(matrix), dtype=torch.float32)
        info["embedding_oov"] = int(oov)
        info["embedding_rows"] = len(prepared.vocab)
    ctx = ModelContext(vocab_size=len(prepared.vocab), embed_dim=emb.pca_dim or emb.dim,
                       num_outputs=recipe_task(recipe).num_outputs(num_classes),
                       pretrained=pretrained, trainable_embeddings=emb.trainable,
                       vocab=prepared.vocab)
    model = _recipe_model(recipe, ctx)
    initialise(model, recipe.optim, keep_embeddings=emb.source != "random")
    return model, info


def check_model(recipe: Recipe) -> None:
    """Raise what building ``recipe``'s model would, without its data (a stand-in
    vocabulary: padding, unknown and one word)."""
    task = recipe_task(recipe)
    vocab = (PAD, UNK, "word")
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=recipe.embeddings.dim,
                       num_outputs=task.num_outputs(task.num_classes(None, max_label=1)),
                       trainable_embeddings=recipe.embeddings.trainable, vocab=vocab)
    with torch.random.fork_rng(devices=[]):  # the weights it draws are thrown away
        _recipe_model(recipe, ctx)


def _recipe_model(recipe: Recipe, ctx: ModelContext) -> PairModel:
    """``recipe``'s model on ``ctx``; errors name the file or ``--set`` and ``[model]`` key."""
    name = recipe.model.name
    try:
        trained = get_model_class(name).needs_training
    except ConfigError as exc:  # an unknown name: the known ones are the hint
        raise ConfigError(f"{recipe.where('model', 'name')}: [model] name: {exc.message}",
                          hint=exc.hint) from None
    if recipe.train.precision == "bf16" and not trained:
        raise ConfigError(
            f"{recipe.where('train', 'precision')}: [train] precision: 'bf16': model {name!r} "
            "is not trained (its scores are computed once, in full precision), so bf16 "
            "would change nothing but the record", hint="leave precision at 'auto' or 'fp32'")
    try:
        return build_model(name, ctx, recipe.model.hparams)
    except ConfigError as exc:
        # check_hparam_keys' messages start with the key
        key = exc.message.split(":", 1)[0]
        where = recipe.where("model", key) if key in recipe.model.hparams else \
            recipe.where("model")
        raise ConfigError(f"{where}: [model] {exc.message}", hint=exc.hint) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{recipe.where('model')}: [model] {name}: {exc}") from None


def initializer_for(name: str, cfg: OptimSection) -> Initializer:
    """The first ``init_rules`` match for parameter ``name`` (``re.search``), else ``init``."""
    for rule in cfg.init_rules:
        if re.search(rule.pattern, name):
            return rule.init
    return cfg.init


# keyed by the recipe's choices (config.Initializer); "default" keeps the layers' own init
INITIALIZERS: dict[Initializer, Callable[[torch.Tensor, float], object]] = {
    "default": lambda param, init_range: None,
    "uniform": lambda param, init_range: param.uniform_(-init_range, init_range),
    "xavier": lambda param, init_range: (nn.init.xavier_uniform_(param) if param.dim() >= 2
                                         else param.zero_()),  # biases: zero
    "zeros": lambda param, init_range: param.zero_(),
}


def initialise(model: nn.Module, cfg: OptimSection, keep_embeddings: bool) -> None:
    """Apply :func:`initializer_for` to each parameter, except embedding tables under
    ``keep_embeddings`` and a module's ``documented_init``; then ``lstm_orthogonal``."""
    embedding_params = embedding_parameter_ids(model)
    documented = {id(module.get_parameter(name)) for module in model.modules()
                  for name in getattr(module, "documented_init", ())}
    names = {id(param): name for name, param in model.named_parameters()}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if keep_embeddings and id(param) in embedding_params:
                continue
            # a documented init is drawn into a scratch copy, so the random stream, and with
            # it every other parameter's initial value, is what it would be without it
            target = param.detach().clone() if id(param) in documented else param
            INITIALIZERS[initializer_for(name, cfg)](target, cfg.init_range)
        for module in model.modules():
            # re-zero the padding row that a global init overwrote
            if (isinstance(module, nn.Embedding) and module.padding_idx is not None
                    and not keep_embeddings
                    and initializer_for(names.get(id(module.weight), ""), cfg) != "default"):
                module.weight[module.padding_idx].zero_()
        if cfg.lstm_orthogonal:
            for module in model.modules():
                if isinstance(module, nn.LSTM | nn.GRU | nn.LSTMCell | nn.GRUCell):
                    for name, param in module.named_parameters():
                        if "weight_hh" in name:
                            for block in param.chunk(param.size(0) // param.size(1), dim=0):
                                nn.init.orthogonal_(block)
                # recurrences that are not nn.LSTM (the DF-LSTM grid) expose their own hook
                hook = getattr(module, "orthogonal_recurrent_", None)
                if callable(hook):
                    hook()


def resolve_split(recipe: Recipe, split: str) -> str:
    """Result-file split keys ``train``/``dev`` -> the recipe's split names."""
    return {"train": recipe.data.train_split, "dev": recipe.data.dev_split}.get(split, split)


def read_run_recipe(folder: RunFolder) -> tuple[Recipe, int]:
    """A run's resolved recipe (``config.toml``) and seed (``result.json``)."""
    if not folder.config_path.is_file():
        raise ConfigError(f"{folder.path} is not a run directory (no config.toml)",
                          hint="pass runs/<recipe>/seed-<n>")
    raw = folder.read_config()
    result = folder.read_result()
    recipe = recipe_from_dict(raw, name=result.get("recipe", folder.recipe_dir.name),
                              source=str(folder.config_path))
    return recipe, int(result.get("seed", recipe.seeds[0]))


def load_run_model(run_dir: Path, checkpoint: str, splits: list[str], variant: str = ""
                   ) -> tuple[Recipe, PairModel, TaskData, torch.device]:
    """Rebuild a run's model from ``config.toml`` and a checkpoint; with ``variant`` the
    ``splits`` come from that variant in the run's vocabulary (the train split stays)."""
    folder = RunFolder(Path(run_dir))
    recipe, seed = read_run_recipe(folder)
    splits = [resolve_split(recipe, s) for s in splits]
    device = resolve_device("auto")  # re-scoring runs wherever this machine can
    train_split = recipe.data.train_split
    wanted = list(dict.fromkeys([train_split, *splits]))
    prepared = load_prepared(recipe.data.dataset, recipe.data.variant or None)
    # the weights belong to the data the run was trained on: the same bytes, or exit 3
    prepared.check_files(folder.read_manifest().get("prepared_sha256", {}),
                         str(folder.manifest_path))
    scored, data_recipe = prepared, recipe
    if variant and variant != recipe.data.variant:
        source = load_prepared(recipe.data.dataset, variant)
        scored = prepared.with_splits_from(source, [s for s in splits if s != train_split])
        # scored as that variant says (its no-positive rule)
        data_recipe = recipe.with_changes(data={"variant": variant})
    _, data = load_task_data(data_recipe, seed, wanted, prepared=scored)
    model, _ = build_recipe_model(recipe, prepared, data.num_classes, seed,
                                  with_embeddings=False)
    if not model.needs_training:
        model.fit_statistics(data.train.left, data.train.right, data.train.labels)
    result = folder.read_result()  # best.pt is the checkpoint a finished run chose
    best = checkpoint == "best" and result.get("status") == "finished"
    state = load_checkpoint(folder.checkpoint(checkpoint), result if best else None)
    model.load_state_dict(state["model"])
    return recipe, model.to(device), data, device
