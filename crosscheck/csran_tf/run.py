"""Step 2 of the cross-check (run with a Python that has TensorFlow): train the authors' own CSRAN
code on the inputs ``export.py`` wrote and write a run folder pairrepro can read.

``train`` takes the authors' repository (``--source``: a checkout or a bare git folder; without
it, a bare clone from GitHub is made under ``--cache``, by default ``crosscheck/`` under
pairrepro's data home, ``$PAIRREPRO_HOME``), extracts the pinned commit into a
temporary folder, applies ``patch.toml`` (the CuDNN and tf.contrib replacements and Python 3 /
tf.compat.v1 shims, nothing else), builds their ``tf_models.model.Model`` from their own
argument parser with :data:`AUTHOR_FLAGS`, and trains it on one core: pairrepro's batches of
each epoch, the epoch chosen on dev MAP, test scored once with that epoch's weights. Scores
are the class-1 log-odds (``z1 - z0``), as pairrepro's pointwise ranking writes them.
``diff`` prints the patch as a unified diff of the files it touches.

    PYTHONPATH=. TFPY crosscheck/csran_tf/run.py train --inputs /tmp/csran_tf/inputs-seed-1.npz \\
        --source DIR --out crosscheck/csran_tf/results/seed-1
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import importlib.util
import io
import itertools
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent.parent
PATCH = HERE / "patch.toml"
AUTHORS_REPO = "https://github.com/vanzytay/EMNLP2018_NLI"
AUTHORS_COMMIT = "39ba094bc24995e00bc3505585b5b627434b44de"  # master, 2018-11-15
RUN_NAME = "csran_tf_crosscheck"  # result.json "recipe": how pairrepro's reports name the runs
THREADS = 1  # TensorFlow's intra- and inter-op pools
SPLITS = ("train", "dev", "test")

# The authors' own flags (parser.py), for their logged CSRAN run's model (readme.md,
# saved_logs/csran.txt) at the sizes of pairrepro's CPU recipe recipes/csran_trecqa.toml.
AUTHOR_FLAGS = [
    "--rnn_type", "SOFT_HP_CHAR_CAFE_RESFM_HIGH_LSTM",  # the logged run's CSRAN
    "--char_enc", "RNN", "--char_max", "16", "--char_emb_size", "20",
    "--opt", "Adam", "--lr", "1E-3", "--l2_reg", "1E-8", "--clip_norm", "5",
    "--decay_lr", "0.96", "--decay_steps", "1280",  # the logged 0.96 per 10 x 128 steps
    "--rnn_layers", "3", "--aggr_layers", "2", "--num_dense", "2", "--translate_proj", "1",
    "--dropout", "0.8", "--rnn_dropout", "0.8",  # keep probabilities (pairrepro: dropout 0.2)
    "--factor", "32",  # FM factors: the logged run's 32 (its args print 10; the FMs are 32)
    # the CPU recipe: hidden 64, output 100, char Bi-LSTM 32 (16 a direction), 2 highway
    # projection layers, fixed 50-d vectors, max_len 40, batch 64, 4 epochs, exact match on
    "--rnn_size", "64", "--hdim", "100", "--cnn_size", "16", "--num_proj", "2",
    "--emb_size", "50", "--pretrained", "1", "--trainable", "0",
    "--qmax", "40", "--amax", "40", "--batch-size", "64", "--epochs", "4",
    "--local_feats", "1", "--use_pos", "0",
    "--dataset", "TrecQA", "--num_class", "2",
]
# the order prepare_set() in their train_acc.py registers the inputs (label last)
INPUT_ORDER = ("q1_inputs", "q1_len", "q2_inputs", "q2_len", "c1_inputs", "c2_inputs",
               "f1_inputs", "f2_inputs")


class CrosscheckError(Exception):
    """A problem the user can fix; main() prints it without a traceback (exit 2)."""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- the authors' code
def git(*args: str, cwd: Path | None = None) -> bytes:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True,
                              timeout=600).stdout
    except subprocess.CalledProcessError as exc:
        raise CrosscheckError(f"git {' '.join(args)}: {exc.stderr.decode().strip()}") from None


def git_dir(source: Path | None, cache: Path) -> Path:
    """The git folder holding the authors' history: ``source`` (a checkout or a bare
    repository), else a bare clone of :data:`AUTHORS_REPO` kept in ``cache``."""
    if source is None:
        source = cache / "EMNLP2018_NLI.git"
        if not source.exists():
            source.parent.mkdir(parents=True, exist_ok=True)
            git("clone", "--bare", AUTHORS_REPO, str(source))
    if not source.is_dir():
        raise CrosscheckError(f"--source {source}: no such folder")
    try:
        found = Path(git("-C", str(source), "rev-parse", "--absolute-git-dir").decode().strip())
    except CrosscheckError:
        raise CrosscheckError(f"--source {source}: not a git checkout or repository (give the "
                              f"authors' repository, {AUTHORS_REPO})") from None
    try:
        git(f"--git-dir={found}", "cat-file", "-e", f"{AUTHORS_COMMIT}^{{commit}}")
    except CrosscheckError:
        raise CrosscheckError(f"{source} does not hold commit {AUTHORS_COMMIT}: fetch it "
                              f"(git -C {source} fetch {AUTHORS_REPO})") from None
    return found


def load_patch() -> list[dict[str, Any]]:
    with PATCH.open("rb") as f:
        entries = tomllib.load(f).get("substitution", [])
    for n, entry in enumerate(entries, 1):
        missing = {"files", "old", "new", "count", "why"} - set(entry)
        if missing:
            raise CrosscheckError(f"{PATCH}: substitution {n} lacks {sorted(missing)}")
    return entries


def patched_tree(gitdir: Path, dest: Path) -> dict[str, str]:
    """Extract the pinned commit into ``dest`` and apply :data:`PATCH`; returns the original
    text of every file it changed. A substitution whose ``old`` text is not found exactly
    ``count`` times in a file stops the run, naming both."""
    archive = git(f"--git-dir={gitdir}", "archive", "--format=tar", AUTHORS_COMMIT)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    originals: dict[str, str] = {}
    for n, entry in enumerate(load_patch(), 1):
        for name in entry["files"]:
            path = dest / name
            text = path.read_text(encoding="utf-8")
            originals.setdefault(name, text)
            found = text.count(entry["old"])
            if found != entry["count"]:
                raise CrosscheckError(f"{PATCH}: substitution {n} expects {entry['count']} "
                                      f"of {entry['old']!r} in {name}, found {found}")
            path.write_text(text.replace(entry["old"], entry["new"]), encoding="utf-8")
    return originals


def print_diff(tree: Path, originals: dict[str, str]) -> None:
    for name, before in sorted(originals.items()):
        after = (tree / name).read_text(encoding="utf-8")
        sys.stdout.writelines(difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True),
            f"a/{name}", f"b/{name}", n=1))


# --------------------------------------------------------------------------- the inputs
@dataclass
class Split:
    """One split as the authors' feed takes it: ids cut at max_len and padded to it."""

    q1: np.ndarray  # [N, max_len] word ids, 0 = padding
    len1: np.ndarray
    q2: np.ndarray
    len2: np.ndarray
    em1: np.ndarray  # [N, max_len] exact-match feature
    em2: np.ndarray
    labels: np.ndarray
    pair_ids: np.ndarray
    group_ids: np.ndarray


def unflatten(flat: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """The arrays export.py's ``ragged`` flattened."""
    return [flat[a:b] for a, b in itertools.pairwise(offsets)]


def char_table(vocab: np.ndarray, char_max: int) -> tuple[np.ndarray, int]:
    """``[V, char_max]`` character ids of each vocabulary word (first ``char_max`` characters,
    0-padded, as their ``pad_to_max``; the padding word has none) and the number of ids."""
    chars = sorted({c for word in vocab[1:] for c in word})
    index = {c: i for i, c in enumerate(chars, 1)}
    table = np.zeros((len(vocab), char_max), dtype=np.int32)
    for w, word in enumerate(vocab[1:], 1):
        ids = [index[c] for c in word[:char_max]]
        table[w, :len(ids)] = ids
    return table, len(chars) + 1


def stem_ids(vocab: np.ndarray) -> np.ndarray:
    """One id per distinct lower-cased Porter stem (NLTK), per vocabulary word: the authors'
    ``exact_match_feats(stem=True, lower=True)`` compares these."""
    from nltk.stem.porter import PorterStemmer

    stemmer = PorterStemmer()
    stems = [stemmer.stem(word.lower()) for word in vocab]
    return pd.factorize(pd.Series(stems))[0].astype(np.int64)


def load_split(data: Any, name: str, max_len: int, stems: np.ndarray) -> Split:
    """A split of the inputs file. The exact-match feature follows the authors'
    ``prep/utilities.py``: it is computed on the whole texts, then cut with them; a question
    word is 1 when its stem occurs in the answer; every answer word is 1, as their loop
    appends 1 on both branches."""
    texts = {}
    for side in ("left", "right"):
        texts[side] = unflatten(data[f"{name}_{side}"], data[f"{name}_{side}_offsets"])
    empty = [i for i, (a, b) in enumerate(zip(texts["left"], texts["right"], strict=True))
             if not len(a) or not len(b)]
    if empty:
        raise CrosscheckError(f"{name}: pair {data[f'{name}_pair_ids'][empty[0]]} has an empty "
                              f"text, which the authors' feed drops ({len(empty)} such pairs)")
    n = len(texts["left"])
    ids = {side: np.zeros((n, max_len), dtype=np.int32) for side in texts}
    em = {side: np.zeros((n, max_len), dtype=np.float32) for side in texts}
    for i, (a, b) in enumerate(zip(texts["left"], texts["right"], strict=True)):
        ids["left"][i, :min(len(a), max_len)] = a[:max_len]
        ids["right"][i, :min(len(b), max_len)] = b[:max_len]
        em["left"][i, :min(len(a), max_len)] = np.isin(stems[a], stems[b])[:max_len]
        em["right"][i, :min(len(b), max_len)] = 1.0
    lengths = {side: np.minimum([len(t) for t in texts[side]], max_len) for side in texts}
    return Split(ids["left"], lengths["left"], ids["right"], lengths["right"], em["left"],
                 em["right"], data[f"{name}_labels"], data[f"{name}_pair_ids"],
                 data[f"{name}_group_ids"])


def feed_rows(split: Split, rows: np.ndarray, chars: np.ndarray) -> list[tuple[Any, ...]]:
    """The pairs at ``rows`` as the tuples their ``get_feed_dict`` takes (INPUT_ORDER, label)."""
    c1 = chars[split.q1[rows]].reshape(len(rows), -1)
    c2 = chars[split.q2[rows]].reshape(len(rows), -1)
    return list(zip(split.q1[rows], split.len1[rows], split.q2[rows], split.len2[rows], c1, c2,
                    split.em1[rows][..., None], split.em2[rows][..., None],
                    split.labels[rows], strict=True))


def epoch_batches(data: Any, epoch: int) -> list[np.ndarray]:
    """pairrepro's batches of epoch ``epoch`` (0-based): rows of the train split."""
    return unflatten(data[f"epoch{epoch}_rows"], data[f"epoch{epoch}_offsets"])


# --------------------------------------------------------------------------- TensorFlow
@dataclass
class Session:
    """The authors' model in a one-thread session, with what the loop needs of it."""

    tf: Any
    mdl: Any
    sess: Any
    set_train: Any
    set_eval: Any
    chars: np.ndarray


def author_args(tree: Path, seed: int) -> Any:
    """Import the patched code (TensorFlow 1 behaviour) and parse :data:`AUTHOR_FLAGS` with
    their own parser."""
    import tensorflow as tf2

    tf2.compat.v1.disable_v2_behavior()
    tf2.config.experimental.enable_op_determinism()
    sys.path[:0] = [str(tree), str(HERE)]
    from parser import build_parser  # the authors' parser.py

    return build_parser().parse_args([*AUTHOR_FLAGS, "--seed", str(seed)])


def build_session(args: Any, data: Any, seed: int, chars: np.ndarray, n_chars: int) -> Session:
    """Their ``Model`` under a graph seeded before any op exists, in a one-thread session,
    with the fixed vectors loaded."""
    import tensorflow.compat.v1 as tf
    from tf_models.model import Model

    class SeededModel(Model):  # their code sets a graph seed only after building
        def build_graph(self) -> None:
            self.graph.seed = seed
            super().build_graph()

    with contextlib.redirect_stdout(sys.stderr):  # their prints: keep stdout for results
        mdl = SeededModel(len(data["vocab"]), args, char_vocab=n_chars)
    for position, name in enumerate(INPUT_ORDER):
        mdl.register_index_map(position, name)
    config = tf.ConfigProto(intra_op_parallelism_threads=THREADS,
                            inter_op_parallelism_threads=THREADS)
    sess = tf.Session(graph=mdl.graph, config=config)
    with mdl.graph.as_default():
        sess.run(tf.global_variables_initializer())
        sess.run(mdl.embeddings_init, {mdl.emb_placeholder: data["embeddings"]})
        set_train = tf.assign(mdl.is_train, True)
        set_eval = tf.assign(mdl.is_train, False)
    mdl.graph.finalize()
    return Session(tf, mdl, sess, set_train, set_eval, chars)


def train_epoch(s: Session, train: Split, batches: list[np.ndarray], max_batches: int
                ) -> dict[str, float]:
    s.sess.run(s.set_train)
    losses, correct, pairs = [], 0.0, 0
    start = time.perf_counter()
    for rows in batches[:max_batches or None]:
        feed = s.mdl.get_feed_dict(feed_rows(train, rows, s.chars), mode="training")
        _, loss, accuracy = s.sess.run([s.mdl.train_op, s.mdl.cost, s.mdl.accuracy], feed)
        losses.append(float(loss))
        correct += float(accuracy) * len(rows)
        pairs += len(rows)
    seconds = time.perf_counter() - start
    return {"train_loss": float(np.mean(losses)), "train_running_accuracy": correct / pairs,
            "train_pairs": pairs, "steps": len(losses), "train_time_s": seconds,
            "pairs_per_s": pairs / seconds}


def score(s: Session, split: Split, batch_size: int) -> np.ndarray:
    """Class-1 log-odds of every pair, in the split's order and batches of ``batch_size``, as
    their ``evaluate`` batches (their LSTMs run over padding, so a batch's width counts)."""
    s.sess.run(s.set_eval)
    out = []
    for start in range(0, len(split.labels), batch_size):
        rows = np.arange(start, min(start + batch_size, len(split.labels)))
        feed = s.mdl.get_feed_dict(feed_rows(split, rows, s.chars), mode="testing")
        logits = s.sess.run(s.mdl.output_pos, feed).astype(np.float64)
        out.append(logits[:, 1] - logits[:, 0])
    return np.concatenate(out)


def snapshot(s: Session) -> list[np.ndarray]:
    """The trainable weights' values (the fixed vectors never change)."""
    return s.sess.run(s.mdl.graph.get_collection(s.tf.GraphKeys.TRAINABLE_VARIABLES))


def restore(s: Session, values: list[np.ndarray]) -> None:
    variables = s.mdl.graph.get_collection(s.tf.GraphKeys.TRAINABLE_VARIABLES)
    for variable, value in zip(variables, values, strict=True):
        variable.load(value, s.sess)


# --------------------------------------------------------------------------- the run folder
def cpu_record() -> dict[str, Any]:
    """The CPU's model name and the vector units TensorFlow's kernels may pick."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {"model": fields.get("model name", platform.processor()),
            "machine": platform.machine(),
            "isa": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "fma"})}


def git_state() -> dict[str, Any]:
    """The pairrepro commit this script ran from, and whether tracked files differ from it."""
    try:
        commit = git("rev-parse", "HEAD", cwd=PROJECT).decode().strip()
        changed = git("status", "--porcelain", "--untracked-files=no", cwd=PROJECT).decode()
    except (CrosscheckError, OSError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(changed.strip())}


def learning_rate(args: Any, step: int) -> float:
    """Their schedule: ``lr * decay_lr ** (step // decay_steps)`` (staircase)."""
    return float(args.learn_rate * args.decay_lr ** (step // int(args.decay_steps)))


def predictions(split: Split, scores: np.ndarray) -> pd.DataFrame:
    """pairrepro's compact prediction columns: ids, gold label, score; never any text."""
    return pd.DataFrame({"pair_id": split.pair_ids.astype(str),
                         "group_id": split.group_ids.astype(str),
                         "label": split.labels.astype(np.int64), "score": scores})


def metrics_of(split: Split, scores: np.ndarray, no_positive: str) -> dict[str, float]:
    from pairrepro.metrics import ranking_metrics

    return ranking_metrics(list(split.group_ids), split.labels, scores,
                           pair_ids=list(split.pair_ids), no_positive=no_positive)


def manifest(opts: argparse.Namespace, meta: dict[str, Any], args: Any,
             history: list[dict[str, Any]], originals: dict[str, str]) -> dict[str, Any]:
    import nltk
    import tensorflow as tf2

    train_time = sum(h["train_time_s"] for h in history)
    pairs = sum(h["train_pairs"] for h in history)
    return {
        "kind": "crosscheck: the authors' TensorFlow CSRAN on pairrepro's inputs",
        "authors_code": {"repository": AUTHORS_REPO, "commit": AUTHORS_COMMIT,
                         "files_patched": sorted(originals)},
        "patch": {"file": str(PATCH.relative_to(PROJECT)), "sha256": sha256(PATCH),
                  "cudnn_compat_sha256": sha256(HERE / "cudnn_compat.py")},
        "author_flags": AUTHOR_FLAGS,
        "settings": {k: getattr(args, k) for k in (
            "rnn_type", "rnn_size", "hdim", "cnn_size", "char_max", "char_emb_size",
            "rnn_layers", "aggr_layers", "num_dense", "num_proj", "factor", "dropout",
            "rnn_dropout", "learn_rate", "decay_lr", "decay_steps", "l2_reg", "clip_norm",
            "batch_size", "qmax", "amax", "clip_sent", "var_drop", "local_feats", "use_pos",
            "init_type", "emb_size", "trainable")},
        "seed": meta["seed"], "threads": {"intra_op": THREADS, "inter_op": THREADS},
        "device": "cpu", "cpu_threads": THREADS,  # the names pairrepro's run table reads
        "epochs_run": len(history), "max_batches": opts.max_batches,
        "train_pairs": pairs, "train_time_s": round(train_time, 3),
        "pairs_per_s": round(pairs / train_time, 1),
        "cpu": cpu_record(), "python": platform.python_version(),
        "packages": {"tensorflow": tf2.__version__, "numpy": np.__version__,
                     "pandas": pd.__version__, "nltk": nltk.__version__},
        # a folder outside the checkout is named by its last part: a record names no machine's
        "git": git_state(), "command": " ".join(Path(a).name if Path(a).is_absolute() else a
                                                for a in [sys.executable, *sys.argv]),
        "dataset": meta["dataset"], "variant": meta["variant"],
        "no_positive": meta["no_positive"], "prepared_dir": meta["prepared_dir"],
        "prepared_sha256": meta["prepared_sha256"],
        "inputs": {"file": opts.inputs.name, "sha256": sha256(opts.inputs), **meta},
    }


def fit(s: Session, args: Any, data: Any, splits: dict[str, Split], opts: argparse.Namespace,
        folder: Any, no_positive: str) -> tuple[list[dict[str, Any]], int, np.ndarray]:
    """Train the epochs, choosing on dev MAP (the first best, as pairrepro); leaves the chosen
    epoch's weights in the session. Returns the history, the chosen epoch, its dev scores."""
    history: list[dict[str, Any]] = []
    best_value, best_epoch, best_weights, best_dev = -np.inf, 0, None, None
    for epoch in range(1, opts.epochs + 1):
        lr = learning_rate(args, int(s.sess.run(s.mdl.global_step)))
        line = train_epoch(s, splits["train"], epoch_batches(data, epoch - 1), opts.max_batches)
        tic = time.perf_counter()
        dev_scores = score(s, splits["dev"], args.batch_size)
        line["dev_time_s"] = time.perf_counter() - tic
        dev = metrics_of(splits["dev"], dev_scores, no_positive)
        if best_epoch == 0 or dev["map"] > best_value:
            best_value, best_epoch, best_dev = dev["map"], epoch, dev_scores
            best_weights = snapshot(s)
        history.append({"epoch": epoch, "best_epoch": best_epoch, "dev": dev, "lr": lr, **line})
        folder.write_metrics(history)
        print(f"epoch {epoch}: loss {line['train_loss']:.4f}, dev MAP {dev['map']:.4f}, "
              f"{line['pairs_per_s']:.1f} pairs/s", flush=True)
    restore(s, best_weights)
    return history, best_epoch, best_dev


def check_ready(inputs: Path) -> None:
    """Every reason ``train`` cannot start, named at once: the inputs export.py writes (the
    ``.npz`` and its ``.json`` beside it) and TensorFlow in this Python."""
    problems = [f"{inputs}: no such file (export.py writes it)" if not inputs.is_file() else
                f"{inputs.with_suffix('.json')}: no such file (export.py writes it beside "
                f"{inputs.name})" if not inputs.with_suffix(".json").is_file() else ""]
    if importlib.util.find_spec("tensorflow") is None:
        problems.append(f"TensorFlow is not installed in {sys.executable} (pip install -e "
                        "'.[crosscheck]', or a separate environment: README.md)")
    if found := [p for p in problems if p]:
        raise CrosscheckError("; ".join(found))


def train(opts: argparse.Namespace) -> int:
    from pairrepro.runs import RunFolder

    check_ready(opts.inputs)
    start = time.perf_counter()
    meta = json.loads(opts.inputs.with_suffix(".json").read_text())
    data = np.load(opts.inputs)
    seed, no_positive = int(meta["seed"]), str(meta["no_positive"])
    opts.epochs = opts.epochs or int(meta["epochs"])
    folder = RunFolder(opts.out)
    if folder.read_result().get("status") == "finished" and not opts.force:
        raise CrosscheckError(f"{opts.out} holds a finished run; --force replaces it")
    with tempfile.TemporaryDirectory(prefix="csran_tf_") as tmp:
        originals = patched_tree(git_dir(opts.source, opts.cache), Path(tmp))
        args = author_args(Path(tmp), seed)
        if not (args.qmax == args.amax == meta["max_len"]):
            raise CrosscheckError(f"AUTHOR_FLAGS cut texts at {args.qmax}/{args.amax} but the "
                                  f"inputs at max_len {meta['max_len']}")
        chars, n_chars = char_table(data["vocab"], args.char_max)
        stems = stem_ids(data["vocab"])
        splits = {n: load_split(data, n, meta["max_len"], stems) for n in SPLITS}
        s = build_session(args, data, seed, chars, n_chars)
        folder.path.mkdir(parents=True, exist_ok=True)
        folder.write_result(RUN_NAME, seed, "running", "map")
        try:
            history, chosen, dev_scores = fit(s, args, data, splits, opts, folder, no_positive)
            test_scores = score(s, splits["test"], args.batch_size)
        except BaseException as exc:
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            folder.write_result(RUN_NAME, seed, status, "map", error=repr(exc))
            raise
        record = manifest(opts, meta, args, history, originals)
    for name, scores in (("dev", dev_scores), ("test", test_scores)):
        folder.write_predictions(name, predictions(splits[name], scores))
    metrics = {"dev": metrics_of(splits["dev"], dev_scores, no_positive),
               "test": metrics_of(splits["test"], test_scores, no_positive)}
    folder.write_manifest({**record, "chosen_epoch": chosen,
                           "wall_time_s": round(time.perf_counter() - start, 3)})
    folder.write_result(RUN_NAME, seed, "finished", "map", chosen, metrics)
    print(f"seed {seed}: epoch {chosen}, dev MAP {metrics['dev']['map']:.4f}, "
          f"test MAP {metrics['test']['map']:.4f} MRR {metrics['test']['mrr']:.4f}")
    return 0


def diff(opts: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="csran_tf_") as tmp:
        print_diff(Path(tmp), patched_tree(git_dir(opts.source, opts.cache), Path(tmp)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("train", "diff"):
        p = sub.add_parser(name)
        p.add_argument("--source", type=Path, help="the authors' repository: a checkout or "
                       "a bare git folder (default: clone it from GitHub into --cache)")
        p.add_argument("--cache", type=Path, help="where the clone is kept (default: "
                       "crosscheck/ under $PAIRREPRO_HOME, else ~/.cache/pairrepro)")
    p = sub.choices["train"]
    p.add_argument("--inputs", type=Path, required=True, help="export.py's .npz file")
    p.add_argument("--out", type=Path, required=True, help="the run folder to write")
    p.add_argument("--epochs", type=int, default=0, help="default: the recipe's")
    p.add_argument("--max-batches", type=int, default=0,
                   help="train at most this many batches an epoch (a smoke test; 0 = all)")
    p.add_argument("--force", action="store_true", help="replace a finished run")
    opts = parser.parse_args(argv)
    sys.path.insert(0, str(PROJECT))  # pairrepro's metrics, run-folder writers and paths
    from pairrepro import paths

    opts.cache = opts.cache or paths.home() / "crosscheck"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        return train(opts) if opts.command == "train" else diff(opts)
    except CrosscheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `run.py diff | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
