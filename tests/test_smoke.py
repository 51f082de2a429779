"""The real-text smoke tests (recipes ``*_snli_smoke``, ``*_quora_smoke``): the ``dev_as_train``
variants against the published dev/test counts, the majority-class model against hand counts,
and the smoke report on real runs. The data tests skip without ../shared."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.data.manifests import load_manifest
from pairrepro.data.prepared import load_prepared
from pairrepro.data.preprocess import prepare_dataset
from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext
from pairrepro.models.majority import MajorityClass
from pairrepro.report.analyses.smoke import smoke_markdown, smoke_rows
from pairrepro.train.runner import train_recipe

# the seeded holdout (10% of the dev file's premises, seed 13), pinned so that any change to
# its stream shows; that train + dev is the whole dev file is checked against the manifest
SNLI_TRAIN = {"entailment": 2997, "neutral": 2907, "contradiction": 2953}
SNLI_HELD_OUT = {"entailment": 332, "neutral": 328, "contradiction": 325}
QUORA_TRAIN = {"0": 4508, "1": 4492}
QUORA_HELD_OUT = {"0": 492, "1": 508}


def _ids(*rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor(rows)
    return ids, ids != 0


def test_majority_class_predicts_the_most_frequent_training_label() -> None:
    model = MajorityClass(ModelContext(vocab_size=10, embed_dim=4, num_outputs=3))
    ids, mask = _ids([2, 3, 0], [4, 5, 6])
    with pytest.raises(ConfigError, match="fit_statistics"):
        model(ids, mask, ids, mask)
    model.fit_statistics([[2]] * 6, [[3]] * 6, [2, 0, 2, 1, 2, 0])  # by hand: 2 three times
    assert model(ids, mask, ids, mask).argmax(-1).tolist() == [2, 2]
    model.fit_statistics([[2]] * 4, [[3]] * 4, [1, 0, 1, 0])  # a tie: the first label
    assert model(ids, mask, ids, mask).argmax(-1).tolist() == [0, 0]
    restored = MajorityClass(model.ctx)
    restored.load_state_dict(model.state_dict())  # the checkpoint holds the label
    assert int(restored.label) == 0
    with pytest.raises(ConfigError, match="no labels"):
        model.fit_statistics([], [], [])
    with pytest.raises(ConfigError, match="classification"):
        MajorityClass(ModelContext(vocab_size=10, embed_dim=4, num_outputs=1))


def _counts(frame: pd.DataFrame, label_map: list[str]) -> dict[str, int]:
    counts = frame["label"].value_counts()
    return {name: int(counts.get(i, 0)) for i, name in enumerate(label_map)}


def _check_variant(dataset: str, train_counts: dict[str, int], held_out: dict[str, int]
                   ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The variant's splits: train + the held-out dev are the dev file, test is the test file,
    each as the manifest's default variant publishes them."""
    prepare_dataset(dataset, "dev_as_train", progress=False)
    manifest = load_manifest(dataset)
    published = manifest.variant("default").splits
    prepared = load_prepared(dataset, "dev_as_train")
    splits = {name: prepared.split(name) for name in ("train", "dev", "test")}
    labels = list(manifest.label_map)
    whole_dev = pd.concat([splits["train"], splits["dev"]])
    assert len(whole_dev) == published["dev"].expected["pairs"]
    assert _counts(whole_dev, labels) == published["dev"].expected["labels"]
    assert set(splits["train"]["pair_id"]).isdisjoint(splits["dev"]["pair_id"])
    assert len(splits["test"]) == published["test"].expected["pairs"]
    assert _counts(splits["test"], labels) == published["test"].expected["labels"]
    assert _counts(splits["train"], labels) == train_counts
    assert _counts(splits["dev"], labels) == held_out
    return splits, labels


def _majority_test_accuracy(recipe: str) -> float:
    (result,) = train_recipe(paths.recipes_dir() / f"{recipe}.toml", seeds=[1], quiet=True)
    return float(result["metrics"]["test"]["accuracy"])


def test_snli_dev_as_train_holds_out_whole_premises_and_majority_scores_the_hand_count(
        raw_from_mirror: Callable[[str], Path]) -> None:
    raw_from_mirror("snli")
    splits, _ = _check_variant("snli", SNLI_TRAIN, SNLI_HELD_OUT)
    train_premises, dev_premises = set(splits["train"]["left"]), set(splits["dev"]["left"])
    assert train_premises.isdisjoint(dev_premises)
    assert len(dev_premises) == round(0.1 * len(train_premises | dev_premises))
    # entailment leads train (2,997) as it leads the whole dev file (3,329 of 9,842): the
    # majority class scores test's 3,368 entailment pairs of 9,824
    assert _majority_test_accuracy("majority_snli_smoke") == 3368 / 9824


def test_quora_dev_as_train_and_its_majority_class(raw_from_mirror: Callable[[str], Path]
                                                    ) -> None:
    raw_from_mirror("quora")
    _check_variant("quora", QUORA_TRAIN, QUORA_HELD_OUT)
    assert _majority_test_accuracy("majority_quora_smoke") == 5000 / 10000
    # preflight passes it: a constant output is its design, not a fault
    out = CliRunner().invoke(app, ["--json", "preflight", "majority_quora_smoke"])
    assert out.exit_code == 0, out.output
    record = json.loads(out.output)
    checks = {check["name"]: check["status"] for check in record["checks"]}
    assert checks["outputs_vary"] == "n/a" and checks["padding"] == "pass"


def test_smoke_report_sets_a_model_beside_the_majority_class(
        raw_from_mirror: Callable[[str], Path]) -> None:
    raw_from_mirror("snli")
    prepare_dataset("snli", "dev_as_train", progress=False)
    runs = paths.runs_dir()
    assert smoke_rows(runs) == [] and "No smoke-test runs" in smoke_markdown(runs)
    majority = _majority_test_accuracy("majority_snli_smoke")
    (result,) = train_recipe(paths.recipes_dir() / "nbow_snli_smoke.toml", seeds=[1],
                             overrides=["train.epochs=1"], quiet=True)
    (row,) = smoke_rows(runs)
    predictions = pd.read_parquet(runs / "nbow_snli_smoke" / "seed-1" / "predictions"
                                  / "test.parquet")
    by_hand = float((predictions["prediction"] == predictions["label"]).mean())
    assert row.recipe == "nbow_snli_smoke" and row.seeds == 1
    assert row.accuracy.value == pytest.approx(by_hand, abs=1e-12)
    assert by_hand == pytest.approx(result["metrics"]["test"]["accuracy"], abs=1e-6)
    assert row.majority == majority
    assert row.difference.value == pytest.approx(by_hand - majority, abs=1e-12)
    assert row.versus.holm == row.versus.p_value  # one model: nothing to adjust for
    assert row.beats_majority == (row.versus.holm < 0.05 and not row.versus.undecided
                                  and row.difference.low > 0)
    assert "| snli | nbow_snli_smoke | 1 |" in smoke_markdown(runs)
