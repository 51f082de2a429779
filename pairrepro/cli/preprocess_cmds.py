"""``pairrepro preprocess``: raw files -> tokenised splits, vocabulary, statistics."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from pairrepro.cli.common import STATE, add_command, console, emit_json, info, show_progress


def _summary_table(stats: dict[str, Any]) -> Table:
    """One row per split: the columns of CIN's Table 1 plus the malformed-row count."""
    table = Table(title=f"{stats['dataset']} ({stats['variant']}): {stats['prepared_dir']}")
    for column in ("split", "pairs", "groups", "labels", "avg len L/R", "max len L/R",
                   "malformed"):
        table.add_column(column, justify="left" if column in ("split", "labels") else "right")
    for name, split in stats["splits"].items():
        table.add_row(
            name, f"{split['pairs']:,}", f"{split['groups']:,}",
            " ".join(f"{k}:{v:,}" for k, v in split["labels"].items()),
            f"{split['avg_len_left']:.1f}/{split['avg_len_right']:.1f}",
            f"{split['max_len_left']}/{split['max_len_right']}",
            f"{split['malformed']:,}",
        )
    return table


def preprocess(
    name: str = typer.Argument(..., help="Dataset name (see `pairrepro datasets`)."),
    variant: str = typer.Option(None, "--variant", "-v",
                                help="Dataset variant (default: the manifest's default)."),
    strict: bool = typer.Option(False, "--strict",
                                help="Fail if any row is malformed (naming file and line) "
                                     "instead of reporting it."),
) -> None:
    """Tokenise a fetched dataset, build its vocabulary and write the prepared folder.

    Splits whose raw files are missing are skipped and listed (--json: the statistics).
    Example: pairrepro preprocess trecqa --variant clean
    """
    from pairrepro.data.preprocess import prepare_dataset

    stats = prepare_dataset(name, variant, strict=strict, progress=show_progress())
    if STATE.json:
        emit_json(stats)
        return
    if not STATE.quiet:
        console.print(_summary_table(stats))
    seen = (f"{stats['train_vocab_size'] - 2:,} seen in split {stats['vocab_split']!r}"
            if stats["vocab_split"] else "no train split present")
    info(f"vocabulary: {stats['vocab_size']:,} tokens ({seen}); tokenisation: "
         f"{stats['tokenisation']['tokenizer']}, lowercase={stats['tokenisation']['lowercase']}")
    for split, summary in stats["splits"].items():
        for rule, count in summary["dropped"].items():
            info(f"{split}: dropped {count:,} by rule: {rule}")
    for split, files in stats["missing_splits"].items():
        info(f"[yellow]skipped split {split!r}[/]: missing {', '.join(files)} "
             f"(pairrepro fetch {name})")
    if stats["missing_splits"]:
        from pairrepro.cli.data_cmds import default_variant_hint

        default_variant_hint(name)
    if stats["malformed_count"]:
        info(f"[yellow]{stats['malformed_count']} malformed row(s)[/], e.g.:")
        for row in stats["malformed"][:5]:
            info(f"  {row['file']} line {row['line']}: {row['reason']}")
        info("  (all listed in stats.json; --strict turns them into an error)")
    info(f"done in {stats['seconds']:.1f} s")


def register(app: typer.Typer) -> None:
    add_command(app, "preprocess", preprocess)
