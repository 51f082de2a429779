"""CLI commands of the embeddings area: ``pairrepro embeddings train``."""

from __future__ import annotations

from pathlib import Path

import typer

from pairrepro.cli.common import MAX_SEED, STATE, add_command, emit_json, info

TRAIN_HELP = """Train skip-gram word2vec vectors on a prepared dataset's own text.

The MV-LSTM paper initialises its QA models with 50-d SkipGram vectors trained on the
whole Yahoo QA data. This trains them with gensim (optional: pip install 'pairrepro[w2v]')
on every distinct question and answer of every split of the prepared variant, tokenised as
the models see them, and writes a GloVe-format text file, by default where recipes that use
a dataset's own vectors read it: word2vec/<dataset>-<variant>-sg-<dim>d.txt in the current
folder ([embeddings] source = "glove-file", path = "<the file>"; run it from the project
folder). Window, min-count and epochs are not given in the paper (defaults: 5, 1, 5).

Examples:

  pairrepro embeddings train --dataset yahoo --variant mvlstm --dim 50

  pairrepro embeddings train --dataset yahoo --variant mvlstm --out w2v-50d.txt --epochs 10
"""


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

    data = load_prepared(dataset, variant or None)
    sentences = corpus_sentences(data)
    words, vectors = train_skipgram(sentences, dim=dim, window=window, min_count=min_count,
                                    epochs=epochs, seed=seed, workers=workers)
    target = out or trained_vectors_path(dataset, variant, dim)
    write_glove_text(target, words, vectors)
    summary = {"path": str(target), "words": len(words), "dim": dim,
               "sentences": len(sentences)}
    if STATE.json:
        emit_json(summary)
    else:
        # flags, not TOML: what a user types next is a command line
        info(f"wrote {len(words)} vectors of {dim} dims from {len(sentences)} texts to "
             f"{target}\nuse them: pairrepro train RECIPE --set embeddings.source=glove-file "
             f"--set embeddings.path={target} --set embeddings.dim={dim}")


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Word embeddings: train word2vec on a prepared dataset.",
                        no_args_is_help=True)
    add_command(group, "train", train_embeddings, help=TRAIN_HELP)
    app.add_typer(group, name="embeddings")
