"""CLI commands of the data area: ``fetch``, ``datasets``, ``preprocess``, ``embeddings train``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
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
from pairrepro.data.fetch import fetch_from
from pairrepro.data.fetch_record import FetchReport, fetch_status
from pairrepro.data.manifests import Manifest, available_datasets, load_manifest, ready_variants

FETCH_HELP = """Fetch a dataset's published files into $PAIRREPRO_HOME/raw/NAME/.

Sources, in order: --from PATH, the mirror (--mirror DIR, else $PAIRREPRO_MIRROR,
else `mirror` in ~/.config/pairrepro/config.toml; laid out DIR/NAME/FILE), then the
official and alternative URLs. Every file is
checked against its sha256; downloads resume after a cut connection. A dataset
only partly available is fetched as far as it goes and the missing splits are named.

Examples:

  pairrepro fetch synthetic                        (generated, no download)

  pairrepro fetch snli --mirror /data/mirror

  pairrepro fetch yahoo --from ~/Downloads/manner.xml.gz

  pairrepro fetch trecqa --force

  pairrepro fetch trecqa --verify                  (re-hash what is already here)

  pairrepro fetch snli --source hub                (Hugging Face hub: stanfordnlp/snli)

With --source hub the manifest's \\[hub] dataset is loaded with the `datasets` library
(HF_DATASETS_OFFLINE and the Hugging Face cache apply; --from DIR: a local copy of the hub
repository) and written as raw/NAME/hub/*.parquet for `preprocess NAME --variant hub`.
"""

DATASETS_HELP = """List every dataset: task, splits with expected sizes, licence,
whether it is public, and what is fetched / prepared locally.

Examples:

  pairrepro datasets

  pairrepro --json datasets
"""


TRAIN_HELP = """Train skip-gram word2vec vectors on a prepared dataset's own text.

The MV-LSTM paper initialises its QA models with 50-d SkipGram vectors trained on the
whole Yahoo QA data. This trains them with gensim (optional: pip install 'pairrepro[w2v]')
on every distinct question and answer of every split of the prepared variant, tokenised as
the models see them, and writes a GloVe-format text file, by default where recipes that use
a dataset's own vectors read it: word2vec/<dataset>-<variant>-sg-<dim>d.txt in the current
folder (\\[embeddings] source = "glove-file", path = "<the file>"; run it from the project
folder). Window, min-count and epochs are not given in the paper (defaults: 5, 1, 5).

Examples:

  pairrepro embeddings train --dataset yahoo --variant mvlstm --dim 50

  pairrepro embeddings train --dataset yahoo --variant mvlstm --out w2v-50d.txt --epochs 10
"""


def _short_licence(text: str, width: int = 22) -> str:
    head = text.split(" (")[0].split(";")[0].split(". ")[0].strip()
    return head if len(head) <= width else head[: width - 1] + "…"


def _expected_splits(manifest: Manifest) -> dict[str, dict[str, int]]:
    """Split -> expected counts of the default variant (file-level splits if none)."""
    if manifest.variants:
        return {name: dict(split.expected)
                for name, split in manifest.variant(None).splits.items()}
    return {split: {} for spec in manifest.files for split in spec.splits}


def _prepared_variants(manifest: Manifest) -> list[str]:
    from pairrepro.data.prepared import is_prepared  # numpy and pandas: only where needed

    done = [v or "(default)" for v in [*manifest.variants] or [""] if is_prepared(manifest.name, v)]
    if manifest.variants and is_prepared(manifest.name):
        done.append("(default)")
    return done


def dataset_rows() -> list[dict[str, Any]]:
    """One row per dataset, as printed by ``pairrepro datasets`` (and its --json)."""
    rows = []
    for name in available_datasets():
        manifest = load_manifest(name)
        status = fetch_status(name)
        rows.append({
            "name": name, "title": manifest.title, "task": manifest.task,
            "splits": _expected_splits(manifest), "variants": list(manifest.variants),
            "licence": manifest.licence, "public": manifest.public,
            "homepage": manifest.homepage,
            **{key: status[key] for key in ("fetched", "splits_present", "splits_missing")},
            "prepared": _prepared_variants(manifest),
        })
    return rows


def _format_splits(splits: dict[str, dict[str, int]]) -> str:
    parts = []
    for split, expected in splits.items():
        if "pairs" in expected:
            parts.append(f"{split} {expected['pairs']:,}")
        elif expected:
            key, value = next(iter(expected.items()))
            parts.append(f"{split} {value:,} {key}")
        else:
            parts.append(split)
    return "\n".join(parts) or "-"


def describe_source(source: str) -> str:
    """A fetch record's source (``mirror:PATH``, ``hub:ID@REV``, a URL) as a phrase."""
    kind, _, rest = source.partition(":")
    words = {"from": "from", "mirror": "from the mirror", "hub": "from the hub",
             "hub-folder": "from the hub-layout folder", "archive": "extracted from"}
    if kind in words and rest and not rest.startswith("//"):
        return f"{words[kind]} {rest}"
    return f"from {source}"


def _print_report(report: FetchReport) -> None:
    for result in report.files:
        check = ("sha256 ok" if result.verified else "[yellow]unverified[/]: no pinned sha256; "
                 f"recorded {result.sha256[:16]}…")
        said = {"fetched": f"{check}; {describe_source(result.source)}", "generated": "generated",
                "present": "already here" + ("" if result.verified else f"; {check}")}
        if result.status in said:
            info(f"  [green]✓[/] {result.path}  ({said[result.status]})")
        elif result.status == "missing" and result.splits:
            info(f"  [yellow]✗[/] {result.path}  ({result.error or 'not available'})")
    for warning in report.warnings:
        info(f"[yellow]warning:[/] {warning}")
    for variant, splits in report.variants_missing.items():
        for split, files in splits.items():
            info(f"  variant {variant}, split {split}: missing {', '.join(files)}")
    if report.splits_missing or report.splits_unreadable:
        missing = [*report.splits_missing,  # a split with no file is not named twice
                   *(f"{s} (no variant can read it)" for s in report.splits_unreadable
                     if s not in report.splits_missing)]
        info(f"[yellow]{report.dataset}: partly available[/]: splits present "
             f"{', '.join(report.splits_present) or '-'}; missing "
             f"{', '.join(missing)} (later steps use the splits present; "
             "give the missing files with --from PATH or --mirror DIR)")
    elif not default_variant_hint(report.dataset):
        info(f"[green]{report.dataset}: complete[/] in {report.raw_dir}")


def default_variant_hint(name: str) -> bool:
    """Say which variant ``preprocess`` can write whole when the default one lacks files;
    ``True`` when it said so."""
    manifest = load_manifest(name)
    ready = ready_variants(manifest) if manifest.variants else []
    default = manifest.variant(None).name if ready else ""
    if not ready or default in ready:
        return False
    info(f"[yellow]the default variant {default!r} lacks files[/]; every split of "
         f"variant {', '.join(ready)} is here: pairrepro preprocess {name} --variant {ready[0]}")
    return True


def fetch_cmd(
    name: str = typer.Argument(..., help="Dataset name (see `pairrepro datasets`)."),
    mirror: Path | None = typer.Option(
        None, "--mirror", metavar="DIR",
        help="Local mirror folder laid out DIR/NAME/FILE (default: $PAIRREPRO_MIRROR, else "
             "mirror in ~/.config/pairrepro/config.toml)."),
    from_path: Path | None = typer.Option(
        None, "--from", metavar="PATH",
        help="A file or folder you obtained yourself (licence-gated data)."),
    force: bool = typer.Option(False, "--force", help="Fetch again even if present."),
    verify: bool = typer.Option(
        False, "--verify",
        help="Hash every file already here again (a pinned file that changed: exit 5)."),
    source: str = typer.Option(
        "files", "--source", metavar="files|hub",
        help="files: the published files (--from, mirror, URLs); hub: the manifest's "
             "Hugging Face hub dataset."),
) -> None:
    info(f"fetching [bold]{name}[/] into {paths.raw_dir(name)}"
         + (" from the Hugging Face hub" if source == "hub" else ""))
    report = fetch_from(name, source, mirror=mirror, from_path=from_path, force=force,
                        progress=show_progress(), verify=verify)
    if STATE.json:
        emit_json(report.to_json())
    else:
        _print_report(report)


def datasets_cmd() -> None:
    rows = dataset_rows()
    if STATE.json:
        emit_json(rows)
        return
    table = Table(title="pairrepro datasets", show_lines=False)
    for column in ("name", "task", "splits (pairs)"):  # short values: never wrapped
        table.add_column(column, no_wrap=True)
    for column in ("licence", "fetched", "prepared"):
        table.add_column(column, overflow="fold", ratio=1)
    for row in rows:
        fetched = ("-" if not row["fetched"] else "yes" if not row["splits_missing"] else
                   "partial, no\n" + "\n".join(row["splits_missing"]))
        task = "classif." if row["task"] == "classification" else row["task"]
        licence = ("" if row["public"] else "[yellow]not public[/]: ") + _short_licence(
            row["licence"])
        table.add_row(row["name"], task, _format_splits(row["splits"]), licence,
                      fetched, ", ".join(row["prepared"]) or "-")
    if not STATE.quiet:
        console.print(table)


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
        default_variant_hint(name)
    if stats["malformed_count"]:
        info(f"[yellow]{stats['malformed_count']} malformed row(s)[/], e.g.:")
        for row in stats["malformed"][:5]:
            info(f"  {row['file']} line {row['line']}: {row['reason']}")
        info("  (all listed in stats.json; --strict turns them into an error)")
    info(f"done in {stats['seconds']:.1f} s")


def train_embeddings(
    dataset: str = typer.Option(..., "--dataset", "-d", help="Prepared dataset name."),
    variant: str = typer.Option("", "--variant", "-v", help="Dataset variant."),
    dim: int = typer.Option(50, "--dim", help="Vector size."),
    window: int = typer.Option(5, "--window", help="Context window."),
    min_count: int = typer.Option(1, "--min-count", help="Ignore rarer words."),
    epochs: int = typer.Option(5, "--epochs", help="Passes over the text."),
    seed: int = typer.Option(1, "--seed", min=0, max=MAX_SEED, help="Random seed."),
    workers: int = typer.Option(1, "--workers", help="Threads (1 = reproducible)."),
    out: Path | None = typer.Option(
        None, "--out", "-o",
        help="Output file (default: word2vec/<dataset>-<variant>-sg-<dim>d.txt, where "
        "recipes read a dataset's own vectors)."),
) -> None:
    from pairrepro.data.embeddings import trained_vectors_path
    from pairrepro.data.prepared import load_prepared
    from pairrepro.data.word2vec import corpus_sentences, train_skipgram, write_glove_text

    sentences = corpus_sentences(load_prepared(dataset, variant or None))
    words, vectors = train_skipgram(sentences, dim=dim, window=window, min_count=min_count,
                                    epochs=epochs, seed=seed, workers=workers)
    target = out or trained_vectors_path(dataset, variant, dim)
    write_glove_text(target, words, vectors)
    if STATE.json:
        emit_json({"path": str(target), "words": len(words), "dim": dim,
                   "sentences": len(sentences)})
    else:
        # flags, not TOML: what a user types next is a command line
        info(f"wrote {len(words)} vectors of {dim} dims from {len(sentences)} texts to "
             f"{target}\nuse them: pairrepro train RECIPE --set embeddings.source=glove-file "
             f"--set embeddings.path={target} --set embeddings.dim={dim}")


def register(app: typer.Typer) -> None:
    add_command(app, "fetch", fetch_cmd, help=FETCH_HELP)
    add_command(app, "datasets", datasets_cmd, help=DATASETS_HELP)
    add_command(app, "preprocess", preprocess)
    group = typer.Typer(help="Word embeddings: train word2vec on a prepared dataset.",
                        no_args_is_help=True)
    add_command(group, "train", train_embeddings, help=TRAIN_HELP)
    app.add_typer(group, name="embeddings")
