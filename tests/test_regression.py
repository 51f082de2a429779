"""Regression checks against the committed reference runs (results/): BM25 on clean TrecQA
must give the committed test MAP/MRR to 1e-9 (seconds), and the short recipe
mv_lstm_tensor_trecqa_short its committed metrics: bit-equal where the kernels are the
reference's (torch build, CPU fingerprint, one thread), else within a portable band that a
one-line model change breaks. Both need the real TrecQA files (../shared/datasets)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pairrepro import paths
from pairrepro.data.preprocess import prepare_dataset
from pairrepro.device import cpu_fingerprint
from pairrepro.train.runner import train_recipe

SHORT = "mv_lstm_tensor_trecqa_short"
#: what README.md quotes (tests/test_readme_commands.py checks it): BM25's MAP/MRR within this,
BM25_TOLERANCE = 1e-9
#: and the band's training loss within this relative difference of the reference's
LOSS_RTOL = 1e-6


def _reference(recipe: str) -> dict:
    path = paths.PROJECT_DIR / "results" / recipe / "seed-1" / "result.json"
    return json.loads(path.read_text(encoding="utf-8"))["metrics"]


@pytest.fixture
def trecqa_clean(raw_from_mirror: Callable[[str], Path]) -> None:
    raw_from_mirror("trecqa")
    prepare_dataset("trecqa", variant="clean", strict=False, progress=False)


def test_bm25_trecqa_gives_the_committed_map_and_mrr(trecqa_clean: None, tmp_path: Path
                                                     ) -> None:
    (result,) = train_recipe(paths.recipes_dir() / "bm25_trecqa.toml", quiet=True,
                             runs_dir=tmp_path / "runs")
    expected = _reference("bm25_trecqa")["test"]
    for metric in ("map", "mrr"):
        assert result["metrics"]["test"][metric] == pytest.approx(expected[metric],
                                                               abs=BM25_TOLERANCE)


def _short_run(runs_dir: Path) -> tuple[dict, list[dict]]:
    """Train the short recipe as its reference was made (CPU, one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (result,) = train_recipe(paths.recipes_dir() / f"{SHORT}.toml", quiet=True,
                                 device="cpu", runs_dir=runs_dir)
    finally:
        torch.set_num_threads(threads)
    lines = (runs_dir / SHORT / "seed-1" / "metrics.jsonl").read_text(encoding="utf-8")
    return result["metrics"], [json.loads(line) for line in lines.splitlines()]


def band_problems(metrics: dict, history: list[dict], ref_metrics: dict,
                  ref_history: list[dict]) -> list[str]:
    """What breaks the portable band. Another CPU's kernels change the last bits only: the
    epochs' training loss within a relative 1e-6 (seen: 1.2e-8 between the AVX2 EPYC of the
    reference and an AMX Xeon, and an AVX512-BF16 EPYC), and a ranking metric by at most one
    query's worth (1 / queries), which is what a near-tied pair ordered the other way moves."""
    problems = []
    for mine, ref in zip(history, ref_history, strict=True):
        if mine["train_loss"] != pytest.approx(ref["train_loss"], rel=LOSS_RTOL):
            problems.append(f"epoch {ref['epoch']} train_loss {mine['train_loss']} vs "
                            f"{ref['train_loss']}")
    for split, values in ref_metrics.items():
        queries = values.get("num_queries") or 1
        for metric, value in values.items():
            got = metrics[split][metric]
            if abs(got - value) > 1 / queries + 1e-12:
                problems.append(f"{split} {metric} {got} vs {value} (band {1 / queries:.4f})")
    return problems


def _reference_run() -> tuple[dict, list[dict], dict]:
    folder = paths.PROJECT_DIR / "results" / SHORT / "seed-1"
    lines = (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return _reference(SHORT), [json.loads(line) for line in lines], manifest


def test_short_mv_lstm_recipe_gives_its_committed_metrics(trecqa_clean: None,
                                                          tmp_path: Path) -> None:
    """Bit-equal where the reference's kernels are this machine's (same torch build, CPU
    fingerprint and thread count); elsewhere inside the portable band."""
    ref_metrics, ref_history, manifest = _reference_run()
    if torch.__version__ != manifest["torch"]:
        pytest.skip(f"the reference was made with torch {manifest['torch']} "
                    f"(this is {torch.__version__})")
    metrics, history = _short_run(tmp_path / "runs")
    if manifest.get("cpu") == cpu_fingerprint() and manifest["cpu_threads"] == 1:
        assert metrics == ref_metrics
        assert [h["train_loss"] for h in history] == [h["train_loss"] for h in ref_history]
    else:
        assert not band_problems(metrics, history, ref_metrics, ref_history)


def test_the_portable_band_catches_a_one_line_model_change(
        trecqa_clean: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The band is no blank cheque: MV-LSTM's k-max pooling taking the top k-1 instead of k
    (one line) breaks it."""
    from pairrepro.models import mvlstm

    real = mvlstm.masked_kmax_pooling
    monkeypatch.setattr(mvlstm, "masked_kmax_pooling", lambda x, mask, k: real(x, mask, k)
                        * torch.tensor([1.0] * (k - 1) + [0.0]))
    ref_metrics, ref_history, _ = _reference_run()
    metrics, history = _short_run(tmp_path / "runs")
    assert band_problems(metrics, history, ref_metrics, ref_history)
