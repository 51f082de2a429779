"""``pairrepro preflight``: a recipe's model checked and timed before a long run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from pairrepro import paths
from pairrepro.cli.common import (
    MAX_SEED,
    STATE,
    add_command,
    console,
    emit_json,
    info,
    show_progress,
)
from pairrepro.errors import ConfigError, DataError, PreflightError
from pairrepro.fileio import write_json

STATUS_STYLE = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "n/a": "[dim]n/a[/]"}


def _check_table(result: Any) -> Table:
    table = Table("check", "result", "detail", title=f"preflight {result.recipe}",
                  title_justify="left")
    for check in result.checks:
        table.add_row(check.name, STATUS_STYLE[check.status], escape(check.detail))
    gflop = (f"{result.flops_per_pair / 1e9:.3f} GFLOP/pair" if result.flops_per_pair
             else "-")
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

    from pairrepro.cli.train_cmds import resolve_recipe
    from pairrepro.config import load_recipe
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
        folder = out_dir if out_dir is not None else paths.runs_dir() / "preflight"
        target = out or folder / f"{recipe.name}.json"
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
    # the exit codes of the help come from the errors themselves (errors.py's table)
    text = (preflight.__doc__ or "").format(preflight=PreflightError.exit_code,
                                            data=DataError.exit_code)
    add_command(app, "preflight", preflight, help=text)
