"""What the report knows of the models without importing them: the θ_M counting rule, and
the committed ``bench/model_facts.json`` (model defaults, ``needs_training``, θ_M of the
recipes of the parameter columns) must equal what the model code gives today."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from torch import nn

from pairrepro.models.base import count_weight_params
from pairrepro.planning.model_facts import MODEL_FACTS

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:  # bench/ is not a package
    spec = importlib.util.spec_from_file_location("model_facts_script",
                                                  ROOT / "bench" / "model_facts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_count_weight_params_excludes_embeddings_and_biases() -> None:
    model = nn.Sequential(nn.Embedding(1000, 100), nn.Linear(100, 50), nn.LSTM(50, 20))
    # by hand: Linear 100*50; LSTM weight_ih 80*50 + weight_hh 80*20; no biases, no embedding
    assert count_weight_params(model) == 100 * 50 + 80 * 50 + 80 * 20


def test_committed_facts_equal_what_the_models_give(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rerun ``python bench/model_facts.py`` after changing a model or such a recipe."""
    monkeypatch.delenv("PAIRREPRO_RECIPES", raising=False)
    committed = json.loads(MODEL_FACTS.read_text(encoding="utf-8"))
    built = _script().facts()
    assert committed["models"] == built["models"]
    assert committed["weights"] == built["weights"]
    # against the paper: C-LSTMs Table 2 prints 190K for four stacked TC-LSTMs (5%: the
    # report's rule for a count printed to 2-3 digits); BM25 learns nothing
    assert abs(committed["weights"]["tc_lstm_4stack"] - 190_000) <= 0.05 * 190_000
    assert committed["models"]["bm25"]["needs_training"] is False
