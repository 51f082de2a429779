"""bf16 against fp32 (pairrepro/report/analyses/parity.py): every number is read back from the runs'
result.json files by hand, and a pair may differ in nothing but the precision."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.report.analyses import parity

RESULTS = paths.PROJECT_DIR / "results"
FP32 = "csran_trecqa"


def _copy_as(tmp: Path, source: Path, recipe: str, seed: int, precision: str) -> None:
    """``source`` as run ``recipe/seed-<seed>`` in ``precision`` (its files naming it so)."""
    target = tmp / recipe / f"seed-{seed}"
    shutil.copytree(source, target)
    for name, changes in (("manifest.json", {"precision": precision}), ("result.json", {})):
        record = json.loads((target / name).read_text())
        record.update(recipe=recipe, seed=seed, **changes)
        (target / name).write_text(json.dumps(record))


def _test_map(folder: Path) -> float:
    return json.loads((folder / "result.json").read_text())["metrics"]["test"]["map"]


def _csran_table(results: Path) -> parity.ParityResult:
    table = parity.ParityTable(title="t", metrics=["test.map"], pairs=[
        parity.ParityPair(model="CSRAN", fp32=FP32, bf16=f"{FP32}_bf16")])
    (found,) = parity.evaluate_parity(results, table=table)
    return found


def test_identical_runs_in_both_precisions_are_the_same(tmp_path: Path) -> None:
    """The fp32 runs copied as bf16 runs: no difference at all, and the verdict says so."""
    for seed in (1, 2, 3):
        source = RESULTS / FP32 / f"seed-{seed}"
        _copy_as(tmp_path, source, FP32, seed, "fp32")
        _copy_as(tmp_path, source, f"{FP32}_bf16", seed, "bf16")
    (value,) = _csran_table(tmp_path).values
    assert value.seeds == [1, 2, 3]
    assert value.fp32 == value.bf16 == [_test_map(RESULTS / FP32 / f"seed-{s}")
                                        for s in (1, 2, 3)]
    assert value.comparison.difference == 0.0 and value.comparison.p_value == 1.0
    assert value.verdict == "same"


def test_each_cell_is_what_the_result_files_give(tmp_path: Path) -> None:
    """bf16 seed k made of fp32 seed k+1 (so the two differ): means, seed-by-seed
    differences, the spread and the mean difference all follow from result.json alone."""
    for seed in (1, 2, 3):
        _copy_as(tmp_path, RESULTS / FP32 / f"seed-{seed}", FP32, seed, "fp32")
        _copy_as(tmp_path, RESULTS / FP32 / f"seed-{seed % 3 + 1}", f"{FP32}_bf16", seed,
                 "bf16")
    fp32 = [_test_map(RESULTS / FP32 / f"seed-{s}") for s in (1, 2, 3)]
    bf16 = fp32[1:] + fp32[:1]
    found = _csran_table(tmp_path)
    (value,) = found.values
    assert value.fp32 == fp32 and value.bf16 == bf16
    assert value.spread == pytest.approx(max(fp32) - min(fp32))
    # the seeds share their test queries, so the per-query mean difference is the MAPs'
    assert value.comparison.difference == pytest.approx(
        statistics.fmean(bf16) - statistics.fmean(fp32), abs=1e-12)
    assert value.fp32_text.startswith(f"{statistics.fmean(fp32):.3f} [")
    row = parity.parity_markdown([found]).splitlines()[2].split(" | ")
    by_seed = [f"{b - a:+.3f}".replace("-", "−") for a, b in zip(fp32, bf16, strict=True)]
    assert row[5] == ", ".join(by_seed)


def test_a_run_in_the_other_precision_is_not_evidence(tmp_path: Path) -> None:
    """A run of the bf16 recipe trained with --precision fp32 says nothing about bf16."""
    for seed in (1, 2):
        _copy_as(tmp_path, RESULTS / FP32 / f"seed-{seed}", FP32, seed, "fp32")
        _copy_as(tmp_path, RESULTS / FP32 / f"seed-{seed}", f"{FP32}_bf16", seed, "fp32")
    (value,) = _csran_table(tmp_path).values
    assert value.missing.startswith("needs the same 2+ seeds") and value.comparison.p_value is None


def test_a_pair_that_differs_in_more_than_the_precision_is_refused() -> None:
    table = parity.ParityTable(title="t", metrics=["test.map"], pairs=[
        parity.ParityPair(model="x", fp32=FP32, bf16="esim_trecqa_bf16")])
    with pytest.raises(ConfigError, match=r"not only in train\.precision") as err:
        parity.evaluate_parity(RESULTS, table=table)
    assert "model.name" in err.value.message
    table = table.model_copy(update={"pairs": [parity.ParityPair(
        model="x", fp32="esim_trecqa", bf16="esim_trecqa")]})  # trains in fp32
    with pytest.raises(ConfigError, match="trains in auto"):
        parity.evaluate_parity(RESULTS, table=table)


def test_every_pair_of_the_shipped_file_is_a_recipe_and_its_bf16_twin() -> None:
    table = parity.load_parity()
    assert table.pairs
    found = parity.evaluate_parity(RESULTS, table=table)
    assert [r.bf16 for r in found] == [f"{r.fp32}_bf16" for r in found]
