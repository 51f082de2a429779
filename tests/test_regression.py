"""Regression checks against the committed reference runs (results/): BM25 on clean TrecQA
must give the committed test MAP/MRR to 1e-9 (seconds), and the one-minute recipe
mv_lstm_tensor_trecqa_short its committed metrics to 1e-6 on the build that made it (CPU,
torch 2.13.0+cpu, one thread). Both need the real TrecQA files (../shared/datasets)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pairrepro import paths
from pairrepro.data.prepare import prepare_dataset
from pairrepro.train.runner import train_recipe

REFERENCE_TORCH = "2.13.0+cpu"


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
        assert result["metrics"]["test"][metric] == pytest.approx(expected[metric], abs=1e-9)


def test_short_mv_lstm_recipe_gives_its_committed_metrics(trecqa_clean: None,
                                                          tmp_path: Path) -> None:
    if torch.__version__ != REFERENCE_TORCH:
        pytest.skip(f"the reference was made with torch {REFERENCE_TORCH} on CPU "
                    f"(this is {torch.__version__})")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (result,) = train_recipe(paths.recipes_dir() / "mv_lstm_tensor_trecqa_short.toml",
                                 quiet=True, device="cpu", runs_dir=tmp_path / "runs")
    finally:
        torch.set_num_threads(threads)
    expected = _reference("mv_lstm_tensor_trecqa_short")
    for split, values in expected.items():
        for metric, value in values.items():
            got = result["metrics"][split][metric]
            assert got == pytest.approx(value, abs=1e-6), (split, metric)
