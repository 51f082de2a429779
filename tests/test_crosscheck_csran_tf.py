"""The authors'-code cross-check (crosscheck/csran_tf/). Without TensorFlow: its committed runs
read as pairrepro runs, their result.json agrees with their predictions re-scored by
pairrepro.metrics, they score the very pairs of the reference runs results/csran_trecqa, they
name the patch committed beside them, its README's results are compare.py's output, and the
patch applier stops on a text it does not find exactly. With TensorFlow (skipped in CI): the
CuDNN replacement computes Keras's LSTM with the same weights, and is initialised as the
contrib layer was."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from pairrepro import paths
from pairrepro.metrics import ranking_metrics
from pairrepro.runs import find_runs, read_predictions

CROSSCHECK = paths.PROJECT_DIR / "crosscheck" / "csran_tf"
REFERENCE = paths.PROJECT_DIR / "results" / "csran_trecqa"
SEEDS = [1, 2, 3]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"crosscheck_{name}", CROSSCHECK / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _load("run")


def test_the_committed_runs_read_as_finished_pairrepro_runs_of_each_seed() -> None:
    runs = find_runs(CROSSCHECK, "results")
    assert [r.seed for r in runs] == SEEDS
    for info in runs:
        assert info.status == "finished", info.problem
        assert info.recipe == run.RUN_NAME
        assert info.chosen_epoch == info.manifest["chosen_epoch"]
        lines = info.folder.read_metrics()
        assert [line["epoch"] for line in lines] == [1, 2, 3, 4]
        chosen = max(lines, key=lambda line: (line["dev"]["map"], -line["epoch"]))
        assert chosen["epoch"] == info.chosen_epoch == lines[-1]["best_epoch"]
        assert info.metrics["dev"] == chosen["dev"]


@pytest.mark.parametrize("seed", SEEDS)
def test_result_json_is_its_predictions_rescored_by_pairrepro_metrics(seed: int) -> None:
    info = next(r for r in find_runs(CROSSCHECK, "results") if r.seed == seed)
    for split in ("dev", "test"):
        frame = read_predictions(info.folder, split)
        again = ranking_metrics(frame["group_id"].tolist(), frame["label"].to_numpy(),
                                frame["score"].to_numpy(), pair_ids=frame["pair_id"].tolist(),
                                no_positive=info.manifest["no_positive"])
        assert again == pytest.approx(info.metrics[split], abs=1e-12)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_predictions_are_the_reference_runs_pairs_with_ids_labels_and_scores_only(split: str
                                                                                  ) -> None:
    reference = pd.read_parquet(REFERENCE / "seed-1" / "predictions" / f"{split}.parquet")
    for seed in SEEDS:
        frame = pd.read_parquet(CROSSCHECK / "results" / f"seed-{seed}" / "predictions"
                                / f"{split}.parquet")
        assert list(frame.columns) == list(reference.columns) == [
            "pair_id", "group_id", "label", "score"]
        assert dict(frame.dtypes) == dict(reference.dtypes)
        for column in ("pair_id", "group_id", "label"):
            assert frame[column].tolist() == reference[column].tolist()
        assert np.isfinite(frame["score"]).all()


def test_the_runs_name_the_pinned_commit_and_the_committed_patch() -> None:
    for info in find_runs(CROSSCHECK, "results"):
        manifest = info.manifest
        assert manifest["authors_code"]["commit"] == run.AUTHORS_COMMIT
        assert manifest["patch"]["sha256"] == run.sha256(run.PATCH)
        assert manifest["patch"]["cudnn_compat_sha256"] == run.sha256(
            CROSSCHECK / "cudnn_compat.py")
        assert manifest["author_flags"] == run.AUTHOR_FLAGS
        assert manifest["threads"] == {"intra_op": 1, "inter_op": 1}
        reference = json.loads((REFERENCE / "seed-1" / "manifest.json").read_text())
        assert manifest["prepared_sha256"] == {
            k: v for k, v in reference["prepared_sha256"].items() if k in manifest[
                "prepared_sha256"]}
        assert manifest["inputs"]["embedding_oov"] == reference["embedding_oov"]


def test_every_substitution_says_why() -> None:
    entries = run.load_patch()
    assert entries
    assert all(len(entry["why"].split()) >= 10 for entry in entries)


def _git_repo(folder: Path, text: str) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    folder.mkdir()
    git("init", "-q")
    (folder / "model.py").write_text(text)
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    return git("rev-parse", "HEAD")


@pytest.mark.parametrize(("text", "ok"), [("x = a\ny = a\n", True), ("x = a\n", False),
                                          ("x = b\n", False)])
def test_a_substitution_applies_only_where_its_text_occurs_exactly_count_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, ok: bool) -> None:
    commit = _git_repo(tmp_path / "repo", text)
    patch = tmp_path / "patch.toml"
    patch.write_text('[[substitution]]\nfiles = ["model.py"]\nold = "= a"\nnew = "= c"\n'
                     'count = 2\nwhy = "a test"\n')
    monkeypatch.setattr(run, "PATCH", patch)
    monkeypatch.setattr(run, "AUTHORS_COMMIT", commit)
    gitdir = run.git_dir(tmp_path / "repo", tmp_path)
    if ok:
        originals = run.patched_tree(gitdir, tmp_path / "tree")
        assert originals == {"model.py": text}
        assert (tmp_path / "tree" / "model.py").read_text() == "x = c\ny = c\n"
    else:
        with pytest.raises(run.CrosscheckError, match="substitution 1 expects 2"):
            run.patched_tree(gitdir, tmp_path / "tree")


def test_a_source_without_the_pinned_commit_is_refused(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _git_repo(tmp_path / "repo", "x = 1\n")
    monkeypatch.setattr(run, "AUTHORS_COMMIT", "0" * 40)
    with pytest.raises(run.CrosscheckError, match="does not hold commit"):
        run.git_dir(tmp_path / "repo", tmp_path)


def test_the_readme_results_are_compare_py_output() -> None:
    """README.md's Results section is what compare.py prints from the committed runs (the
    seeds' numbers, and the intervals and paired tests against results/csran_trecqa)."""
    compare = _load("compare")
    assert [r.seed for r in compare.crosscheck_runs()] == SEEDS
    assert compare.table() in (CROSSCHECK / "README.md").read_text()


def test_the_claim_is_the_difference_interval_with_an_equivalence_verdict() -> None:
    """No "same" without a margin: each line gives the difference's two-level interval, the
    two one-sided tests against the gap ladder's margin, and what the design can detect; the
    verdict follows the 90% interval printed beside it."""
    import re

    from pairrepro.report.analyses.ladders import load_ladder

    margin = next(c.margin for c in load_ladder("csran_trecqa").crosschecks)
    lines = [x for x in _load("compare").table().splitlines() if x.startswith("* test.")]
    assert len(lines) == 2
    for line in lines:
        found = re.search(r"difference ([+-]\d\.\d+) \[~?[+-]\d\.\d+, ~?[+-]\d\.\d+\], "
                          r"two-level bootstrap p = \d\.\d+; equivalence within "
                          rf"±{margin:.3f}: (shown|not shown|undecided) \(90% interval "
                          r"\[~?([+-]\d\.\d+), ~?([+-]\d\.\d+)\]\); the design detects about "
                          r"±\d\.\d+", line)
        assert found, line
        inside = -margin < float(found[3]) and float(found[4]) < margin
        assert found[2] == "undecided" or (found[2] == "shown") == inside
    readme = (CROSSCHECK / "README.md").read_text()
    assert "reach the same test MAP" not in readme


def test_the_readme_says_the_authors_dropout_mask_is_shared_across_the_batch() -> None:
    """The authors' variational LSTM dropout (tylib/lib/func.py at the pinned commit) drops a
    ``[1, batch, input]`` tensor of ones with noise_shape ``[1, 1, input]``: one mask for the
    whole batch and every position, not one per sequence."""
    row = next(x for x in (CROSSCHECK / "README.md").read_text().splitlines()
               if x.startswith("| dropout"))
    assert "one mask per sequence" not in row
    assert "shared by every position and every sequence of the batch" in row


def test_train_names_the_inputs_given_and_a_missing_tensorflow(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`train --inputs /nonexistent.npz` was a traceback naming a .json file never given,
    with no word that TensorFlow was missing."""
    given = tmp_path / "nonexistent.npz"
    assert run.main(["train", "--inputs", str(given), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert f"{given}: no such file" in error and ".json" not in error, error
    tensorflow = importlib.util.find_spec("tensorflow") is not None
    assert ("TensorFlow is not installed" in error) is not tensorflow, error
    assert not (tmp_path / "out").exists()


def test_diff_keeps_its_clone_under_pairrepro_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run.py diff` cloned into ~/.cache/pairrepro whatever PAIRREPRO_HOME said."""
    used: list[Path] = []

    def no_clone(source: Path | None, cache: Path) -> Path:
        used.append(cache)
        raise run.CrosscheckError("no network in a test")

    monkeypatch.setenv("PAIRREPRO_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(run, "git_dir", no_clone)
    assert run.main(["diff"]) == 2
    assert used == [tmp_path / "home" / "crosscheck"]


def test_compare_refuses_an_unknown_option() -> None:
    """`compare.py --bogus` printed the table with exit 0."""
    out = subprocess.run([sys.executable, str(CROSSCHECK / "compare.py"), "--bogus"],
                         capture_output=True, text=True, cwd=paths.PROJECT_DIR, check=False,
                         env={**os.environ, "PYTHONPATH": str(paths.PROJECT_DIR)})
    assert out.returncode == 2 and "--bogus" in out.stderr, out.stderr


# ----------------------------------------------------------------- with TensorFlow only
def _lstm_outputs(inputs: np.ndarray, units: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """cudnn_compat.CudnnLSTM's outputs ``[T, B, u]`` and its opaque kernel after init."""
    import tensorflow.compat.v1 as tf

    compat = _load("cudnn_compat")
    with tf.Graph().as_default() as graph:
        graph.seed = seed
        lstm = compat.CudnnLSTM(1, units, kernel_initializer=tf.glorot_uniform_initializer())
        zeros = tf.zeros([1, inputs.shape[1], units])
        outputs, _ = lstm(tf.constant(inputs), initial_state=(zeros, zeros))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            # both bias halves made non-zero, so that the test sees them summed
            kernel = sess.run(lstm.kernel)
            kernel[-8 * units:] = np.random.default_rng(seed).normal(size=8 * units)
            lstm.kernel.load(kernel, sess)
            return sess.run(outputs), kernel


def test_the_cudnn_replacement_computes_keras_lstm_with_the_same_weights() -> None:
    pytest.importorskip("tensorflow", reason="TensorFlow is an optional extra (crosscheck)")
    import keras

    steps, batch, size, units = 7, 3, 5, 4
    inputs = np.random.default_rng(0).normal(size=(steps, batch, size)).astype(np.float32)
    ours, kernel = _lstm_outputs(inputs, units, seed=3)
    w_len, r_len = 4 * units * size, 4 * units * units
    w = kernel[:w_len].reshape(4 * units, size).T  # gate blocks i, f, g, o
    r = kernel[w_len:w_len + r_len].reshape(4 * units, units).T
    b = kernel[w_len + r_len:].reshape(2, 4 * units).sum(axis=0)
    layer = keras.layers.LSTM(units, return_sequences=True, unit_forget_bias=False)
    layer.build((batch, steps, size))
    layer.set_weights([w, r, b])
    theirs = np.asarray(layer(np.transpose(inputs, (1, 0, 2)))).transpose(1, 0, 2)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_the_cudnn_replacement_is_initialised_per_canonical_matrix() -> None:
    pytest.importorskip("tensorflow", reason="TensorFlow is an optional extra (crosscheck)")
    size, units = 30, 10
    _, kernel = _lstm_outputs(np.zeros((2, 2, size), np.float32), units, seed=1)
    # _lstm_outputs overwrote the biases; the weights are as initialised
    w = kernel[:4 * units * size]
    r = kernel[4 * units * size: 4 * units * (size + units)]
    assert len(kernel) == 4 * units * (size + units) + 8 * units
    # glorot-uniform per [units, size] and [units, units] matrix: each block's own limit
    assert np.abs(w).max() <= np.sqrt(6 / (units + size))
    assert np.abs(r).max() <= np.sqrt(6 / (2 * units))
    assert np.abs(r).max() > np.sqrt(6 / (units + size))  # not the input blocks' limit
