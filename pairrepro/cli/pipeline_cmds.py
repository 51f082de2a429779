"""CLI of the pipeline: ``reproduce`` (what a table needs, then the table) and ``demo``."""

from __future__ import annotations

from pathlib import Path

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
from pairrepro.cli.report_cmds import (
    FORMAT_HELP,
    GPU_HELP,
    TargetArgument,
    evaluate_tables,
    output_tables,
    print_plan,
    select_tables,
)
from pairrepro.cli.train_cmds import metrics_table
from pairrepro.errors import ConfigError, DataError, DownloadError, NothingToRunError, TrainingError
from pairrepro.launch.spec import summary_lines
from pairrepro.runs import RunFolder, read_predictions


def reproduce(
    target: TargetArgument,
    table: int | None = typer.Option(None, "--table", "-t", help="Only this table number."),
    seeds: str | None = typer.Option(None, "--seeds", help="Seeds, e.g. 1,2,3 (default: each "
                                     "recipe's own)."),
    device: str | None = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N."),
    runs: Path | None = typer.Option(None, "--runs", help="Runs folder."),
    fmt: str = typer.Option("term", "--format", "-f", help=FORMAT_HELP),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the tables to this file."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Only print the plan."),
    mirror: Path | None = typer.Option(None, "--mirror", help="Local dataset mirror folder."),
    compare: bool = typer.Option(False, "--compare", help="Also train the comparison rows "
                                 "(models run here that the paper's table does not have)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Runs (recipe × seed) trained at "
                             "the same time, each in its own process, with one live table; "
                             "with --device cuda, packed onto the GPUs as their preflight "
                             "peak memory allows (Slurm: this many to an array job's GPU)."),
    threads: int | None = typer.Option(None, "--threads", min=1, help="CPU threads per run "
                                       "(default: cores // jobs)."),
    launcher: str = typer.Option("local", "--launcher", help="local (this machine), slurm "
                                 "(one submitit array job per run) or submitit-local (the "
                                 "Slurm code path in local processes, to try a setup)."),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Slurm: wait for the jobs and "
                              "render the tables (--no-wait: submit and exit)."),
    slurm_config: Path | None = typer.Option(None, "--slurm-config", help="Slurm resources: "
                                             "a TOML file with a \\[slurm] table (partition, "
                                             "account, qos, gpus_per_node, cpus_per_task, "
                                             "mem_gb, timeout_min, ...); unset keys come from "
                                             "the recipe and its preflight record."),
    gpu: str = typer.Option("", "--gpu", help="With --dry-run: " + GPU_HELP),
) -> None:
    """Fetch, preprocess and train what a table needs, then render it.

    Finished seeds are skipped; interrupted ones resume. Rows whose data cannot be fetched
    stay marked in the table. A failed run does not stop the others: the runs that did not
    finish are listed at the end with their exit reason. Exit code 7 if nothing at all could
    run, 6 if any run failed, 130 after Ctrl-C (every running run saved a checkpoint).

    Examples:

      pairrepro reproduce csran --table 6 --seeds 1,2,3 --device cuda

      pairrepro reproduce csran --table 8 --jobs 2      (2 runs at a time, cores // 2 threads)

      pairrepro reproduce csran --table 6 --launcher slurm --slurm-config slurm.toml --no-wait

      pairrepro reproduce csran --table 6 --compare --seeds 1

      pairrepro reproduce all --table 2 --dry-run

      pairrepro reproduce all --dry-run --device cuda --gpu h100
    """
    runs_dir = runs or paths.runs_dir()
    selected = select_tables(target, table)
    seed_list = parse_seeds(seeds)
    if dry_run:
        print_plan(selected, runs_dir, seed_list, compare, gpu, device)
        return
    from pairrepro.launch.slurm import load_slurm_config
    from pairrepro.pipeline import Launch, run_tables

    launch = Launch(launcher=launcher, jobs=jobs, threads=threads, wait=wait,
                    slurm_file=load_slurm_config(slurm_config) if slurm_config else {})
    outcome = run_tables(selected, runs_dir, seed_list, device, mirror, compare,
                         progress=not STATE.quiet, notify=_notify, launch=launch)
    output_tables(evaluate_tables(selected, runs_dir), fmt, out)
    if submitted := [r for r in outcome.runs if r.status == "submitted"]:
        info(f"submitted {len(submitted)} job(s) ({', '.join(r.job_id for r in submitted)}); "
             f"logs: {runs_dir}/<recipe>/logs/; pairrepro report {target} shows their progress")
    if not outcome.ran:
        problems = "; ".join(f"{k}: {v}" for k, v in outcome.failed.items())
        raise NothingToRunError(
            f"nothing could run for {target}"
            + (f" table {table}" if table is not None else "")
            + (f" ({problems})" if problems else " (no recipe declares a row of it)"),
            hint="see the table above for the command each row needs",
        )
    if failed := outcome.failed_runs:
        for line in summary_lines(failed):
            _notify("failed", line)
        raise TrainingError(f"{len(failed)} of {len(outcome.runs)} run(s) did not finish "
                            f"(listed above)",
                            hint="fix the cause and run the same command again: finished "
                                 "seeds are skipped, interrupted ones resume")


def _notify(kind: str, message: str) -> None:
    """A pipeline step as it happens (failures in red, even with --quiet)."""
    if kind == "failed":
        err_console.print(f"[red]{escape(message)}[/]", markup=True, highlight=False)
    else:
        info(message)


DEMO_DATA = ("auto", "synthetic", "trecqa")
#: The TrecQA demo's MV-LSTM: the recipe's sizes, two epochs, a smaller fit diagnostic.
DEMO_MVLSTM_OVERRIDES = ["train.epochs=2", "train.score_train_pairs=1000"]


def demo(
    seed: int = typer.Option(1, "--seed", min=0, max=MAX_SEED, help="Training seed."),
    epochs: int | None = typer.Option(None, "--epochs", min=1,
                                      help="Override the trained model's epochs."),
    threads: int = typer.Option(1, "--threads", min=1,
                                help="CPU threads for torch (a model this small runs "
                                "fastest on one; more threads only contend)."),
    data: str = typer.Option(
        "auto", "--data", metavar="auto|synthetic|trecqa",
        help="trecqa: the real thing (BM25 and a small MV-LSTM on TrecQA, then CSRAN's "
        "Table 6); synthetic: offline, built-in data; auto: TrecQA when it can be fetched "
        "(mirror or official URLs), else synthetic."),
    max_train_pairs: int | None = typer.Option(
        None, "--max-train-pairs", min=1, hidden=True,
        help="Train on a seeded sample (whole queries): the test suite's short demo."),
) -> None:
    """The pipeline end to end: fetch, preprocess, train, evaluate, report.

    With TrecQA reachable (PAIRREPRO_MIRROR or the official URLs) it trains BM25 and a small
    MV-LSTM (two epochs, one thread) into runs/demo/, re-scores the MV-LSTM's best checkpoint
    on test and renders CSRAN's Table 6: the published rows, the project's reference rows and
    yours. Offline it
    trains BiLSTM-max on the built-in synthetic NLI data (runs/bilstm_max_synthetic/seed-N,
    replaced by each demo) and reports it against the majority class and chance.

    Examples:

      pairrepro demo

      pairrepro demo --data synthetic

      pairrepro demo --data trecqa --epochs 1
    """
    import torch

    from pairrepro.data.fetch import fetch_dataset

    if data not in DEMO_DATA:
        raise ConfigError(f"--data {data!r}: expected one of {', '.join(DEMO_DATA)}")
    torch.set_num_threads(threads)
    extra = [*([f"data.max_train_pairs={max_train_pairs}"] if max_train_pairs else []),
             *([f"train.epochs={epochs}"] if epochs else [])]
    if data != "synthetic":
        info("[bold]1/5[/] pairrepro fetch trecqa")
        try:
            fetch_dataset("trecqa", progress=show_progress())
        except (DownloadError, DataError) as exc:
            if data == "trecqa":
                raise
            # the error's one-line cause (its hint would repeat how to use a mirror)
            info(f"[yellow]TrecQA cannot be fetched here[/] ({escape(exc.message)}); the "
                 "offline demo on synthetic data instead (for TrecQA from a local mirror: "
                 "PAIRREPRO_MIRROR=DIR pairrepro demo, or make demo MIRROR=DIR)")
        else:
            _demo_trecqa(seed, extra)
            return
    _demo_synthetic(seed, extra)


def _demo_trecqa(seed: int, extra: list[str]) -> None:
    """BM25 and a small MV-LSTM on TrecQA clean into runs/demo/, then CSRAN's Table 6."""
    from pairrepro.data.preprocess import prepare_dataset
    from pairrepro.train.runner import train_recipe

    runs_dir = paths.runs_dir() / "demo"
    info("[bold]2/5[/] pairrepro preprocess trecqa --variant clean")
    prepare_dataset("trecqa", "clean", progress=show_progress())
    bm25 = paths.recipes_dir() / "bm25_trecqa.toml"
    info(f"[bold]3/5[/] pairrepro train {bm25.name} --force  (BM25: statistics of the "
         f"answers, no training; writes {runs_dir})")
    results = train_recipe(bm25, [], [seed], force=True, quiet=not show_progress(),
                           runs_dir=runs_dir)
    mvlstm = paths.recipes_dir() / "mv_lstm_tensor_trecqa.toml"
    overrides = [*DEMO_MVLSTM_OVERRIDES, *extra]
    info(f"[bold]3/5[/] pairrepro train {mvlstm.name} --seeds {seed} --force "
         + " ".join(f"--set {o}" for o in overrides))
    results += train_recipe(mvlstm, overrides, [seed], force=True,
                            quiet=not show_progress(), runs_dir=runs_dir)
    _demo_eval(RunFolder.of(runs_dir, mvlstm.stem, seed).path, ("map", "mrr", "p_at_1"))
    info(f"[bold]5/5[/] pairrepro report csran --table 6 --runs {runs_dir}")
    # what `pairrepro report csran --table 6 --runs DIR` shows
    output_tables(evaluate_tables(select_tables("csran", 6), runs_dir), "term", None)
    if STATE.json:
        return
    # the table marks a run with --set overrides as a variant of its recipe: its numbers here
    console.print(metrics_table(f"your demo runs in {runs_dir} (clean TrecQA)", [
        (r["recipe"], split, {k: v for k, v in r["metrics"][split].items()
                              if k in ("map", "mrr", "p_at_1")})
        for r in results for split in ("dev", "test")]))
    info("The recipes' own runs (README.md, 'What we reproduced') train longer: "
         "pairrepro reproduce csran --table 6 --compare")


def _demo_eval(run_dir: Path, shown: tuple[str, ...]) -> dict[str, float]:
    """Step 4: the run's best checkpoint re-scored on test, as ``pairrepro eval`` does."""
    from pairrepro.train.provenance import evaluate_run

    info(f"[bold]4/5[/] pairrepro eval {run_dir} --split test")
    test = evaluate_run(run_dir, "test", "best")
    info("  test (best checkpoint): " + ", ".join(f"{k} {test[k]:.4f}" for k in shown
                                                   if k in test))
    return test


def _demo_synthetic(seed: int, overrides: list[str]) -> None:
    """BiLSTM-max on the synthetic NLI data, reported against the majority class and chance."""
    from pairrepro.data.fetch import fetch_dataset
    from pairrepro.data.preprocess import prepare_dataset
    from pairrepro.train.runner import train_recipe

    recipe = paths.recipes_dir() / "bilstm_max_synthetic.toml"
    info("[bold]1/5[/] pairrepro fetch synthetic  (generated, no download)")
    fetch_dataset("synthetic", progress=show_progress())
    info("[bold]2/5[/] pairrepro preprocess synthetic --variant nli")
    prepare_dataset("synthetic", "nli", progress=show_progress())
    folder = RunFolder.of(paths.runs_dir(), recipe.stem, seed)
    info(f"[bold]3/5[/] pairrepro train {recipe.name} --seeds {seed} --force "
         f"(writes {folder.path})")
    (result,) = train_recipe(recipe, overrides, [seed], force=True,
                             quiet=not show_progress(), runs_dir=paths.runs_dir())
    # train and dev as trained; test re-scored from the best checkpoint
    scores = {**result["metrics"], "test": _demo_eval(folder.path, ("accuracy",))}
    info("[bold]5/5[/] report: accuracy against the majority class and uniform chance")
    rows = [{"split": split, "accuracy": scores[split]["accuracy"], "uniform_chance": 1 / 3,
             "majority_class": float(read_predictions(folder, split)["label"]
                                     .value_counts(normalize=True).max())}
            for split in ("train", "dev", "test")]
    if STATE.json:
        emit_json({"run": str(folder.path), "chosen_epoch": result["chosen_epoch"],
                   "results": rows})
        return
    table = Table("split", *(Column(c, justify="right") for c in
                             ("accuracy", "majority class", "uniform chance")),
                  title=f"BiLSTM-max on synthetic NLI (seed {seed}, epoch "
                        f"{result['chosen_epoch']} chosen on dev)")
    for row in rows:
        table.add_row(row["split"], f"{row['accuracy']:.3f}", f"{row['majority_class']:.3f}",
                      f"{row['uniform_chance']:.3f}")
    console.print(table)


def register(app: typer.Typer) -> None:
    add_command(app, "reproduce", reproduce)
    add_command(app, "demo", demo)
