"""CLI commands of the train area: ``train``, ``eval`` and ``preflight``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Column, Table

from pairrepro import paths
from pairrepro.cli.common import (
    MAX_SEED,
    STATE,
    add_command,
    console,
    emit_json,
    err_console,
    info,
    parse_seeds,
    show_progress,
)
from pairrepro.config import PRECISIONS, Recipe, load_recipe
from pairrepro.errors import ConfigError, DataError, PreflightError
from pairrepro.fileio import write_json
from pairrepro.report.analyses.evidence import rescore
from pairrepro.runs import (
    DamagedRunError,
    RunFolder,
    prediction_keys,
    read_run,
    resume_command,
    seed_folders,
    train_words,
)
from pairrepro.train.watch import TENSORBOARD_EVERY, TensorBoardLog, check_available

SPLIT_ORDER = ("train", "dev")
STATUS_STYLE = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "n/a": "[dim]n/a[/]"}


def resolve_recipe(recipe: str) -> Path:
    """A recipe path, or a bare name looked up in the recipes folder."""
    path = Path(recipe)
    if path.is_file():
        return path
    if found := (known := paths.toml_files(paths.recipes_dir())).get(recipe.removesuffix(".toml")):
        return found
    raise ConfigError(f"recipe {recipe!r} not found",
                      hint=f"give a path or one of: {', '.join(sorted(known)) or '(no recipes)'}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) <= 1 else f"{value:g}"
    return str(value)


def metrics_table(title: str, rows: list[tuple[str, str, dict[str, float]]]) -> Table:
    """A rich table: one row per (run, split), one column per metric."""
    names = list(dict.fromkeys(m for _, _, metrics in rows for m in metrics))
    table = Table(Column("run", no_wrap=True), Column("split", no_wrap=True),
                  *(Column(n, justify="right", overflow="fold") for n in names),  # never cut
                  title=title)
    for run, split, metrics in rows:
        table.add_row(run, split, *(_fmt(metrics.get(n, "")) for n in names))
    return table


def _result_rows(results: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, float]]]:
    """One row per seed and split: train, dev, then the others by name."""
    rank = {split: i for i, split in enumerate(SPLIT_ORDER)}
    return [(f"seed {r['seed']} (ep {r.get('chosen_epoch')})", split, r["metrics"][split])
            for r in results for split in sorted(r.get("metrics", {}),
                                                 key=lambda s: (rank.get(s, len(rank)), s))]


def _train_in_ranks(recipe: Recipe, words: list[str], nproc: int) -> None:
    """``train`` (``words``, the command line) as ``nproc`` DDP ranks; missing data or
    embeddings are reported once, before any rank starts."""
    from pairrepro.device import launch_ranks
    from pairrepro.train.setup import check_prerequisites

    check_prerequisites(recipe)
    global_flags = [*(["--quiet"] if STATE.quiet else []), *(["--json"] if STATE.json else [])]
    failed = launch_ranks(nproc, [*global_flags, *words[1:]])
    if failed is None:
        return
    if failed.message is not None:  # no rank printed it: rank 0 did not fail this way
        if STATE.json:
            emit_json({"error": failed.message, "rank": failed.rank,
                       "exit_code": failed.exit_code})
        else:
            err_console.print(f"[bold red]error:[/] rank {failed.rank}: "
                              f"{escape(failed.message)}", markup=True, highlight=False)
    elif not STATE.json:  # rank 0's JSON error is the whole output
        err_console.print(f"[dim]{nproc} ranks: rank {failed.rank} exited with code "
                          f"{failed.exit_code}[/]", highlight=False)
    raise typer.Exit(failed.exit_code)


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
    precision: str | None = typer.Option(
        None, "--precision", metavar="|".join(PRECISIONS),
        help="Shortcut for --set train.precision=P: bf16 autocasts the training forward pass "
        "(on CUDA, and on CPUs with AMX or AVX512-BF16 units; refused on others); scores "
        "are fp32 either way. Not a variant: verify compares it by interval."),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print the resolved recipe (extends and --set "
        "applied) as TOML and exit without training."),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="CPU threads for torch (default: the machine's cores "
        "divided by the runs sharing it: torchrun's processes on this node, else 1 run). "
        "Recorded in manifest.json as cpu_threads."),
    nproc_per_node: int = typer.Option(
        1, "--nproc-per-node", min=1, help="Train as N DistributedDataParallel processes on "
        "this machine (one per GPU), as torchrun --standalone --nproc-per-node N does; a "
        "missing recipe, data or embeddings is reported once, before any starts."),
    tensorboard: bool = typer.Option(
        False, "--tensorboard", help="Log loss, dev metrics, learning rate and pairs/s for "
        "TensorBoard in the run folder (tensorboard/), per epoch and every "
        "--tensorboard-every steps: watch with tensorboard --logdir $PAIRREPRO_RUNS. Needs "
        "the tensorboard package (pip install tensorboard); never changes the run."),
    tensorboard_every: int = typer.Option(
        TENSORBOARD_EVERY, "--tensorboard-every", min=1, metavar="N",
        help="Optimiser steps between two --tensorboard step points."),
) -> None:
    """Train a recipe into runs/<recipe>/seed-<n>/ and print its metrics.

    Examples:

      pairrepro train recipes/bilstm_max_synthetic.toml

      pairrepro train recipes/mv_lstm_tensor.toml --seeds 1,2,3 --set model.hidden=100

      pairrepro train bilstm_max_synthetic --resume      (after Ctrl-C)

      pairrepro train mv_lstm_tensor --threads 1      (two runs side by side on 2 cores)

      pairrepro train recipes/csran.toml --nproc-per-node 4      (4 GPUs)

      pairrepro train bilstm_max_synthetic --tensorboard      (tensorboard --logdir runs)
    """
    overrides = (list(set_) + ([f"train.epochs={max_epochs}"] if max_epochs else [])
                 + ([f'train.precision="{precision}"'] if precision else []))
    path = resolve_recipe(recipe)
    seed_list = parse_seeds(seeds)  # before anything runs or is written
    resolved = load_recipe(path, overrides)
    from pairrepro.train.setup import check_model

    check_model(resolved)  # what building the model would reject, --print-config rejects too
    watch = TensorBoardLog(tensorboard_every) if tensorboard and not print_config else None
    if watch is not None:
        check_available()  # before anything runs: how to install it
    watching = ["--tensorboard", "--tensorboard-every", str(tensorboard_every)] if watch else []
    if print_config:
        if STATE.json:
            emit_json(resolved.to_dict())
        else:  # plain echo: rich reads "[recipe]" as markup and wraps long lines
            typer.echo(resolved.to_toml(), nl=False)
        return
    # under torchrun (WORLD_SIZE set) this process is a rank already
    if nproc_per_node > 1 and "WORLD_SIZE" not in os.environ:
        flags = [*(["--resume"] if resume else []), *(["--force"] if force else []),
                 *(["--threads", str(threads)] if threads else []), *watching]
        _train_in_ranks(resolved, train_words(str(path), overrides, seeds, device, *flags),
                        nproc_per_node)
        return
    from pairrepro.device import default_threads, set_threads
    from pairrepro.train.runner import train_recipe

    # torchrun starts LOCAL_WORLD_SIZE processes on this node: they share its cores
    set_threads(threads or default_threads(int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    try:
        results = train_recipe(path, overrides, seed_list, resume=resume,
                               device=device, quiet=not show_progress(), force=force,
                               runs_dir=paths.runs_dir(), threads=threads,
                               hooks=watch.hooks() if watch is not None else None)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: a checkpoint was saved
        again = resume_command(recipe, seeds, overrides, device, paths.runs_dir(), watching)
        err_console.print(f"[yellow]{escape(str(exc) or 'interrupted')}[/]\n  continue "
                          f"with: {escape(again)}", markup=True, highlight=False)
        raise typer.Exit(130) from None
    if not results or "status" not in results[0]:
        return  # a non-zero DDP rank: rank 0 reports
    _print_results(results)


def _print_results(results: list[dict[str, Any]]) -> None:
    """JSON, a table (and the mean over seeds), or with --quiet one line per seed."""
    from pairrepro.train.runner import summarise

    if STATE.json:  # a result's "warnings" say what was asked and not done
        emit_json(results)
        return
    for r in results:  # even with --quiet: a request was not carried out
        for warning in r.get("warnings", []):
            err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if not STATE.quiet:
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
            console.print(f"seed {r['seed']}: {metric} " + " ".join(
                f"{split}={_fmt(v.get(metric))}" for split, v in r["metrics"].items()))


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
    """Re-score a run from its checkpoint and print the metrics (--json for scripts). A run
    without checkpoints (a reference run under results/) is scored from its saved predictions.

    Examples:

      pairrepro eval runs/bilstm_max_synthetic/seed-1

      pairrepro eval runs/cin --ensemble --split test

      pairrepro --json eval bilstm_max_synthetic --split dev --checkpoint last

      pairrepro eval runs/csran_trecqa --variant raw --split test --save
    """
    from pairrepro.train.provenance import evaluate_ensemble, evaluate_run, record_evaluation

    if ensemble and (variant or save):
        raise ConfigError("--ensemble cannot be combined with --variant or --save")
    dirs = _run_dirs(run, ensemble)
    source: dict[str, str] = {"source": "checkpoint", "checkpoint": checkpoint}
    if any(_predictions_only(d) for d in dirs):
        rows = [(f"{d.parent.name}/{d.name}", split,
                 _score_saved_predictions(d, split, checkpoint, ensemble, variant, save))
                for d in dirs]
        source = {"source": "predictions"}
    elif ensemble:
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
        emit_json([{"run": r, "split": s, **source, "metrics": m} for r, s, m in rows])
    elif source["source"] == "predictions":
        console.print(metrics_table(f"{split} (saved predictions of the best checkpoint)", rows))
    else:
        console.print(metrics_table(f"{rows[0][1]} ({checkpoint} checkpoint)", rows))


def _predictions_only(run_dir: Path) -> bool:
    """A run with saved predictions but no checkpoint (a reference run under results/)."""
    folder = RunFolder(run_dir)
    return (not any(folder.checkpoint(c).is_file() for c in ("best", "last"))
            and bool(prediction_keys(folder)))


def _score_saved_predictions(run_dir: Path, split: str, checkpoint: str, ensemble: bool,
                             variant: str, save: bool) -> dict[str, float]:
    """``split``'s metrics from the run's saved predictions, or an error saying why not."""
    why = f"{run_dir} keeps no checkpoint, only the predictions of its best one"
    retrain = (f"train the recipe for a run with checkpoints (pairrepro train "
               f"{run_dir.parent.name} --seeds {RunFolder(run_dir).seed})")
    for wanted, flag in ((ensemble, "--ensemble"), (bool(variant), "--variant"),
                         (save, "--save"), (checkpoint != "best", f"--checkpoint {checkpoint}")):
        if wanted:
            raise ConfigError(f"{flag} needs the run's model: {why}",
                              hint=f"drop {flag.split()[0]}, or {retrain}")
    run_info = read_run(run_dir)
    if run_info.status == "damaged":
        raise DamagedRunError(run_info.problem, hint="restore the run's files, or " + retrain)
    scored = rescore(run_info)
    if split not in scored:
        have = ", ".join(sorted(scored)) or "none"
        raise DataError(f"{run_dir}: no saved predictions of split {split!r}, and {why}",
                        hint=f"splits it can score: {have} (--split NAME); or {retrain}")
    return scored[split]


def _check_table(result: Any) -> Table:
    table = Table("check", "result", "detail", title=f"preflight {result.recipe}",
                  title_justify="left")
    for check in result.checks:
        table.add_row(check.name, STATUS_STYLE[check.status], escape(check.detail))
    gflop = f"{result.flops_per_pair / 1e9:.3f} GFLOP/pair" if result.flops_per_pair else "-"
    speed = f"{result.pairs_per_s:.1f} pairs/s" if result.pairs_per_s else "-"
    table.add_row("measured", "", escape(
        f"{speed} ({result.steps} step(s) of {result.pairs_per_step} pairs on "
        f"{result.device_name}, {result.threads} thread(s)); peak {result.peak_mb or 0:.0f} MB; "
        f"{gflop}"))
    for what, note in (("data", result.data.get("stand_in")),
                       ("embeddings", result.embeddings.get("stand_in"))):
        if note:
            table.add_row(what, "[yellow]stand-in[/]", escape(note))
    return table


def preflight(
    recipes: list[str] = typer.Argument(..., help="Recipe file(s) or name(s)."),
    set_: list[str] = typer.Option(
        [], "--set", help="Override a recipe key: section.key=value (repeatable)."),
    steps: int | None = typer.Option(
        None, "--steps", min=1,
        help="Optimiser steps on the fixed batch (default: the preflight's DEFAULT_STEPS, 10)."),
    budget: float = typer.Option(300.0, "--budget", min=0.0,
                                 help="Stop stepping after this many seconds (at least one "
                                      "step runs)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    threads: int | None = typer.Option(None, "--threads", min=1,
                                       help="CPU threads for torch (default: torch's)."),
    seed: int = typer.Option(1, "--seed", min=0, max=MAX_SEED,
                            help="Seed of the weights and the batch."),
    stand_in: bool = typer.Option(False, "--stand-in", help="Time a recipe whose dataset is "
                                  "not prepared on random words at its typical lengths."),
    out: Path | None = typer.Option(None, "--out", "-o", help="The record's path (one "
                                    "recipe; default <runs>/preflight/<recipe>.json)."),
    out_dir: Path | None = typer.Option(None, "--out-dir", help="Write <DIR>/<recipe>.json "
                                        "for each recipe (bench/preflight: the plan's "
                                        "figures)."),
) -> None:
    """Run a recipe's model at its full size for a few steps on one batch: check it trains.

    Checks: the loss falls; no NaN/inf; every trainable tensor gets a non-zero gradient;
    pretrained rows without data keep their norm; outputs vary across the batch; padding
    does not change the output. Measures pairs/s, peak memory and FLOPs per pair on this
    device. Without the training split, the dev split stands in (and says so).

    Exit code 0: every check passed; {preflight}: a check failed (named); {data}: no data.

    Examples:

      pairrepro preflight recipes/cin.toml --set embeddings.source=glove-6b-50d
      --set embeddings.dim=50

      pairrepro preflight csran_trecqa --steps 3 --threads 1 --out-dir bench/preflight

      pairrepro preflight mv_lstm_tensor --stand-in --steps 2 --json
    """
    import torch

    from pairrepro.device import resolve_device
    from pairrepro.train.preflight import run_preflight

    if out is not None and len(recipes) > 1:
        raise ConfigError("--out names one file: with several recipes use --out-dir DIR")
    if threads:
        torch.set_num_threads(threads)
    device_t = resolve_device(device)
    results = []
    for name in recipes:
        recipe = load_recipe(resolve_recipe(name), list(set_))
        # steps=None leaves the preflight module's own default in force (one owner)
        steps_kw = {} if steps is None else {"steps": steps}
        result = run_preflight(recipe, list(set_), **steps_kw, budget_s=budget,
                               device=device_t, seed=seed, stand_in=stand_in,
                               show_progress=show_progress())
        # by default into the (ignored) runs folder: never a stray file in the project
        target = out or (out_dir or paths.runs_dir() / "preflight") / f"{recipe.name}.json"
        write_json(target, result.to_json())
        results.append(result)
        if not STATE.json:
            console.print(_check_table(result))
        info(f"wrote {target}")
    if STATE.json:
        emit_json([r.to_json() for r in results] if len(results) > 1 else results[0].to_json())
    failed = [r for r in results if r.failed]
    if len(failed) == 1:
        failed[0].raise_if_failed()
    elif failed:
        raise PreflightError("preflight failed for " + "; ".join(
            f"{r.recipe} ({', '.join(r.failed)})" for r in failed),
            hint="see the tables above (or the JSON files) for each check's detail")


def register(app: typer.Typer) -> None:
    add_command(app, "train", train)
    add_command(app, "eval", evaluate)
    # the exit codes of the help come from the errors themselves (errors.py's table)
    text = (preflight.__doc__ or "").format(preflight=PreflightError.exit_code,
                                            data=DataError.exit_code)
    add_command(app, "preflight", preflight, help=text)
