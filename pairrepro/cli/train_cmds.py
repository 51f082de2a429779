"""CLI commands of the train area: ``train``, ``eval`` and ``demo``."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from pairrepro import paths
from pairrepro.cli.common import (
    STATE,
    add_command,
    console,
    emit_json,
    err_console,
    info,
    parse_seeds,
    show_progress,
)
from pairrepro.errors import ConfigError
from pairrepro.train.run_folder import seed_folders

SPLIT_ORDER = ("train", "dev")


def resolve_recipe(recipe: str) -> Path:
    """A recipe path, or a bare name looked up in the recipes folder."""
    path = Path(recipe)
    if path.is_file():
        return path
    candidate = paths.recipes_dir() / (recipe if recipe.endswith(".toml") else f"{recipe}.toml")
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in paths.recipes_dir().glob("*.toml"))
    raise ConfigError(f"recipe {recipe!r} not found",
                      hint=f"give a path or one of: {', '.join(known) or '(no recipes)'}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) <= 1 else f"{value:g}"
    return str(value)


def metrics_table(title: str, rows: list[tuple[str, str, dict[str, float]]]) -> Table:
    """A rich table: one row per (run, split), one column per metric."""
    names = list(dict.fromkeys(m for _, _, metrics in rows for m in metrics))
    table = Table(title=title)
    table.add_column("run", no_wrap=True)
    table.add_column("split", no_wrap=True)
    for name in names:
        table.add_column(name, justify="right")
    for run, split, metrics in rows:
        table.add_row(run, split, *(_fmt(metrics.get(n, "")) for n in names))
    return table


def _result_rows(results: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, float]]]:
    rows = []
    for r in results:
        splits = sorted(r.get("metrics", {}), key=lambda s: (s not in SPLIT_ORDER,
                                                            SPLIT_ORDER.index(s)
                                                            if s in SPLIT_ORDER else 0, s))
        for split in splits:
            rows.append((f"seed {r['seed']} (ep {r.get('chosen_epoch')})", split,
                         r["metrics"][split]))
    return rows


def resume_command(recipe: str, overrides: list[str], seeds: str, device: str | None) -> str:
    """The command that continues an interrupted ``train``: the same recipe, seeds,
    overrides and device, plus ``--resume`` (never ``--force``: the checkpoint is kept)."""
    words = ["pairrepro", "train", recipe]
    if seeds.strip():
        words += ["--seeds", seeds]
    for override in overrides:
        words += ["--set", override]
    if device:
        words += ["--device", device]
    return shlex.join([*words, "--resume"])


def _run_dirs(run: str, ensemble: bool) -> list[Path]:
    """RUN may be a seed folder, a recipe's run folder, or a recipe name under runs/."""
    path = Path(run)
    if not path.exists():
        path = paths.runs_dir() / run
    folders = seed_folders(path)
    if ensemble and folders and folders[0].path == path:  # a seed folder itself
        raise ConfigError(f"--ensemble needs the recipe's run folder, not the seed folder "
                          f"{path}", hint=f"pass {path.parent}")
    if not folders:
        raise ConfigError(f"{run}: no run found",
                          hint="pass runs/<recipe>/seed-<n>, runs/<recipe> or a recipe name")
    return [folder.path for folder in folders]


def train(
    recipe: str = typer.Argument(..., help="Recipe file (recipes/<name>.toml) or name."),
    set_: list[str] = typer.Option(
        [], "--set", help="Override a recipe key: section.key=value (repeatable)."),
    seeds: str = typer.Option("", "--seeds", help="Seeds to run, e.g. 1,2,3 "
                              "(default: the recipe's)."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue an interrupted run from its last checkpoint."),
    force: bool = typer.Option(False, "--force", help="Delete an existing run and retrain."),
    device: str | None = typer.Option(None, "--device", help="cpu, cuda or cuda:N "
                                      "(default: the recipe's, auto)."),
    max_epochs: int | None = typer.Option(None, "--max-epochs", min=1,
                                          help="Shortcut for --set train.epochs=N."),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print the resolved recipe (extends and --set "
        "applied) as TOML and exit without training."),
) -> None:
    """Train a recipe into runs/<recipe>/seed-<n>/ and print its metrics.

    Examples:

      pairrepro train recipes/bilstm_max_synthetic.toml

      pairrepro train recipes/mv_lstm_tensor.toml --seeds 1,2,3 --set model.hidden=100

      pairrepro train bilstm_max_synthetic --resume      (after Ctrl-C)

      torchrun --nproc-per-node 4 $(which pairrepro) train recipes/csran_snli.toml
    """
    overrides = list(set_) + ([f"train.epochs={max_epochs}"] if max_epochs else [])
    path = resolve_recipe(recipe)
    if print_config:  # before importing the trainer: printing a recipe needs no torch
        from pairrepro.config import load_recipe

        resolved = load_recipe(path, overrides)
        if STATE.json:
            emit_json(resolved.to_dict())
        else:  # plain echo: rich reads "[recipe]" as markup and wraps long lines
            typer.echo(resolved.to_toml(), nl=False)
        return
    from pairrepro.train.runner import summarise, train_recipe

    try:
        results = train_recipe(path, overrides, parse_seeds(seeds), resume=resume,
                               device=device, quiet=not show_progress(), force=force,
                               runs_dir=paths.runs_dir())
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: a checkpoint was saved
        again = resume_command(recipe, overrides, seeds, device)
        err_console.print(f"[yellow]{escape(str(exc) or 'interrupted')}[/]\n  continue "
                          f"with: {escape(again)}", markup=True, highlight=False)
        raise typer.Exit(130) from None
    if not results or "status" not in results[0]:
        return  # a non-zero DDP rank: rank 0 reports
    if STATE.json:
        emit_json(results)
    elif not STATE.quiet:
        console.print(metrics_table(results[0]["recipe"], _result_rows(results)))
        if len(results) > 1:
            summary = summarise(results)["metrics"]
            metric = results[0]["select_metric"]
            console.print(f"mean ± std over {len(results)} seeds ({metric}): " + ", ".join(
                f"{split} {v[metric]['mean']:.4f} ± {v[metric]['std']:.4f}"
                for split, v in summary.items() if metric in v))
    else:
        for r in results:
            metric = r["select_metric"]
            tests = {k: v.get(metric) for k, v in r["metrics"].items()}
            console.print(f"seed {r['seed']}: {metric} " +
                          " ".join(f"{k}={_fmt(v)}" for k, v in tests.items()))


def evaluate(
    run: str = typer.Argument(..., help="runs/<recipe>/seed-<n>, runs/<recipe>, or a "
                              "recipe name under runs/."),
    split: str = typer.Option("test", "--split", help="Split to score (train, dev, test, "
                              "test_5, ...)."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best (chosen on dev) or "
                                   "last."),
    ensemble: bool = typer.Option(False, "--ensemble", help="Average the class "
                                  "probabilities of every seed of the recipe."),
    variant: str = typer.Option("", "--variant", help="Score the split of another "
                                "prepared variant of the run's dataset (tokenised alike), "
                                "e.g. a TrecQA clean run on raw DEV/TEST."),
    save: bool = typer.Option(False, "--save", help="Keep the result in the run folder: "
                              "evals/<split>@<variant>.json (shown by report runs)."),
) -> None:
    """Re-score a run from its checkpoint and print the metrics (--json for scripts).

    Examples:

      pairrepro eval runs/bilstm_max_synthetic/seed-1

      pairrepro eval runs/cin_snli --ensemble --split test

      pairrepro --json eval bilstm_max_synthetic --split dev --checkpoint last

      pairrepro eval runs/csran_trecqa --variant raw --split test --save
    """
    from pairrepro.train.evaluate import evaluate_ensemble, evaluate_run
    from pairrepro.train.runner import record_evaluation

    if ensemble and (variant or save):
        raise ConfigError("--ensemble cannot be combined with --variant or --save")
    dirs = _run_dirs(run, ensemble)
    if ensemble:
        rows = [(f"ensemble of {len(dirs)}", split,
                 evaluate_ensemble(dirs, split, checkpoint))]
    else:
        label = f"{split}@{variant}" if variant else split  # in the table and the JSON
        rows = [(f"{d.parent.name}/{d.name}", label,
                 evaluate_run(d, split, checkpoint, variant)) for d in dirs]
        if save:
            for d, (_, _, metrics) in zip(dirs, rows, strict=True):
                info(f"saved {record_evaluation(d, split, variant, checkpoint, metrics)}")
    if STATE.json:
        emit_json([{"run": r, "split": s, "checkpoint": checkpoint, "metrics": m}
                   for r, s, m in rows])
    else:
        console.print(metrics_table(f"{rows[0][1]} ({checkpoint} checkpoint)", rows))


def demo(
    seed: int = typer.Option(1, "--seed", help="Training seed."),
    epochs: int | None = typer.Option(None, "--epochs", min=1,
                                      help="Override the recipe's epochs."),
    threads: int = typer.Option(1, "--threads", min=1,
                                help="CPU threads for torch (a model this small runs "
                                "fastest on one; more threads only contend)."),
) -> None:
    """Fetch the synthetic data, preprocess it, train BiLSTM-max and evaluate it.

    Runs in a few minutes on a CPU and shows every stage of the pipeline. It retrains
    runs/bilstm_max_synthetic/seed-<seed> (replacing an earlier demo run).

    Example:

      pairrepro demo
    """
    import pandas as pd
    import torch

    from pairrepro.data.fetch import fetch_dataset
    from pairrepro.data.prepare import prepare_dataset
    from pairrepro.train.evaluate import evaluate_run
    from pairrepro.train.run_folder import RunFolder
    from pairrepro.train.runner import train_recipe

    torch.set_num_threads(threads)
    recipe = paths.recipes_dir() / "bilstm_max_synthetic.toml"
    info("[bold]1/4[/] pairrepro fetch synthetic")
    fetch_dataset("synthetic", progress=show_progress())
    info("[bold]2/4[/] pairrepro preprocess synthetic --variant nli")
    prepare_dataset("synthetic", "nli", progress=show_progress())
    runs_dir = paths.runs_dir()
    folder = RunFolder.of(runs_dir, recipe.stem, seed)
    run_dir = folder.path
    info(f"[bold]3/4[/] pairrepro train {recipe.name} --seeds {seed} --force "
         f"(writes {run_dir})")
    overrides = [f"train.epochs={epochs}"] if epochs else []
    (result,) = train_recipe(recipe, overrides, [seed], force=True,
                             quiet=not show_progress(), runs_dir=runs_dir)
    info(f"[bold]4/4[/] pairrepro eval {run_dir}")
    test = evaluate_run(run_dir, "test", "best")
    rows = []
    for split in ("train", "dev", "test"):
        labels = pd.read_parquet(folder.predictions(split))["label"]
        majority = float(labels.value_counts(normalize=True).max())
        accuracy = test["accuracy"] if split == "test" else result["metrics"][split][
            "accuracy"]
        rows.append({"split": split, "accuracy": accuracy, "majority_class": majority,
                     "uniform_chance": 1 / 3})
    if STATE.json:
        emit_json({"run": str(run_dir), "chosen_epoch": result["chosen_epoch"],
                   "results": rows})
        return
    table = Table(title=f"BiLSTM-max on synthetic NLI (seed {seed}, epoch "
                        f"{result['chosen_epoch']} chosen on dev)")
    for col in ("split", "accuracy", "majority class", "uniform chance"):
        table.add_column(col, justify="left" if col == "split" else "right")
    for row in rows:
        table.add_row(row["split"], f"{row['accuracy']:.3f}", f"{row['majority_class']:.3f}",
                      f"{row['uniform_chance']:.3f}")
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the main app."""
    add_command(app, "train", train)
    add_command(app, "eval", evaluate)
    add_command(app, "demo", demo)
