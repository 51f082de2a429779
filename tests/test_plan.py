"""The compute plan's training-pair counts for data that is not here (issue 14): the
manifests' ``planning`` estimates against the papers' own counts, and an hours figure for
every recipe of every table."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pairrepro.cli.app import app
from pairrepro.data.formats.yahoo_l4 import split_parts
from pairrepro.data.manifests import load_manifest, parse_manifest
from pairrepro.errors import ConfigError
from pairrepro.planning.paper_tables import PAPERS, load_paper
from pairrepro.planning.plan import done_seeds, plan_tables, render_plan
from pairrepro.planning.recipe_index import load_recipe_index

PROJECT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_yahoo_estimates_are_the_papers_counts_split_as_the_reader_splits() -> None:
    # MV-LSTM 'Experiments': 60,564 positive pairs, 8:1:1, lists of 1 positive + 4 negatives.
    # By hand: dev = test = floor(60,564 / 10) = 6,056; train takes the remainder 48,452
    # (not round(60,564 * 0.8) = 48,451); 48,452 lists x 5 candidates = 242,260 pairs.
    mvlstm = load_manifest("yahoo").variant("mvlstm").splits["train"]
    assert mvlstm.planning is not None and mvlstm.planning.pairs == 242_260
    assert "60,564" in mvlstm.planning.source
    # C-LSTM / DF-LSTM: 220,000 positives, 20:1:1: dev = test = 10,000, train 200,000 x 5
    clstm = load_manifest("yahoo").variant("clstm").splits["train"]
    assert clstm.planning is not None and clstm.planning.pairs == 1_000_000
    assert "220,000" in clstm.planning.source
    # the reader's own split rounds as the hand computation above
    rng = np.random.default_rng(0)
    assert len(split_parts(60_564, {"train": 8, "dev": 1, "test": 1}, rng)["train"]) == 48_452
    assert len(split_parts(220_000, {"train": 20, "dev": 1, "test": 1}, rng)["train"]) == 200_000
    # an estimate for planning only: never an expected count that preprocess checks, never an
    # option the reader sees
    for split in (mvlstm, clstm):
        assert "pairs" not in split.expected and not hasattr(split.options, "planning")


def test_a_planning_estimate_must_say_where_it_comes_from() -> None:
    raw = {"name": "x", "title": "x", "task": "ranking", "reader": "x",
           "variants": {"v": {"splits": {"train": {"files": [], "planning": {"pairs": 10}}}}}}
    with pytest.raises(ConfigError, match="source"):
        parse_manifest(raw, "x.toml")


def test_every_recipe_of_every_table_has_an_hours_figure(data_home: Path) -> None:
    """With nothing prepared and nothing trained (an empty home), every recipe gets hours:
    throughput from the committed bench/preflight files (another recipe of the same model
    where it has none of its own), pairs from the manifests (expected or planning)."""
    index = load_recipe_index()
    tables = [(paper, table) for paper in map(load_paper, PAPERS) for table in paper.tables]
    items = plan_tables(tables, index, data_home.parent / "runs", comparisons=True)
    assert len(items) > 80
    assert [it.recipe for it in items if it.hours is None] == []
    text = render_plan(items)
    assert " | ? |" not in text and "without an estimate" not in text
    by_name = {it.recipe: it for it in items}
    # the licence-gated / unpublished sets are marked as estimates with their source
    assert "20 x 242260 (est.)" in text and by_name["mv_lstm_tensor"].train_pairs == 242_260
    assert by_name["mv_lstm_tensor_sc"].train_pairs_estimate
    assert by_name["csran"].train_pairs_estimate == ""  # SNLI: the manifest's expected count
    assert "yahoo/mvlstm: 242260 training pairs: MV-LSTM paper: 60,564" in text


def _total_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("estimated "))


def test_make_dry_run_reproduce_dry_run_and_report_plan_show_one_figure(
        data_home: Path) -> None:
    """Issue 27: ``make tables DRY=1`` totalled 11,830 CPU hours while ``reproduce all
    --dry-run`` and ``report all --plan`` totalled 15,154: make passed ``--seeds 1`` by
    default, the others planned each recipe's own seeds. One plan, one figure."""
    made = subprocess.run(["make", "-n", "tables", "DRY=1", "STAMP="], cwd=PROJECT,
                          capture_output=True, text=True, check=True).stdout
    words = shlex.split(next(line for line in made.splitlines() if " reproduce " in line))
    outputs = [runner.invoke(app, args) for args in (
        words[1:], ["reproduce", "all", "--dry-run"], ["report", "all", "--plan"])]
    assert all(o.exit_code == 0 for o in outputs), [o.output[-500:] for o in outputs]
    totals = {_total_line(o.output) for o in outputs}
    assert len(totals) == 1, totals
    # and the figure is each recipe's seeds: CSRAN Table 6's TrecQA recipe plans 3 of them
    assert re.search(r"^csran_trecqa \| [^|]+\| [^|]+\| [^|]+\| 1,2,3 \|", outputs[0].output,
                     re.MULTILINE), outputs[0].output[:2000]


def test_a_variant_run_is_not_a_done_seed_of_the_plan(data_home: Path) -> None:
    """The plan and ``reproduce`` agree on what is done: a finished run made with ``--set``
    overrides (a variant) leaves its seed to train in both."""
    index = load_recipe_index()
    recipe = index.recipes["csran_trecqa"]
    runs = data_home.parent / "runs"
    for name, text in (("csran_trecqa", recipe.to_toml().replace(
            f"epochs = {recipe.train.epochs}", f"epochs = {recipe.train.epochs + 1}")),):
        seed = runs / name / "seed-1"
        seed.mkdir(parents=True)
        (seed / "config.toml").write_text(text)
        (seed / "result.json").write_text(json.dumps(
            {"recipe": name, "seed": 1, "status": "finished", "metrics": {}}))
    paper = load_paper("csran")
    (item,) = [it for it in plan_tables([(paper, paper.table(6))], index, runs)
               if it.recipe == "csran_trecqa"]
    assert 1 in item.seeds_todo and item.seeds_done == []
    assert done_seeds(runs, recipe) == set()


def test_every_recipe_has_a_passing_preflight_record_of_its_own_config() -> None:
    """Preflight is a gate, not an option: each recipe in recipes/ has a committed record
    (bench/preflight/<recipe>.json) whose checks all passed on the recipe's resolved config
    as it is today (keys that do not change a training step aside), so `results add` can
    take any recipe's run. A recipe changed since its record was made fails here."""
    from pairrepro.planning.preflight_record import preflight_problem

    index = load_recipe_index()
    problems = [f"{name}: {problem}" for name, recipe in sorted(index.recipes.items())
                if (problem := preflight_problem(name, recipe.to_dict()))]
    assert len(index.recipes) >= 100 and not problems, "\n".join(problems)


def _gpu_rates(path: Path, runs: list[dict]) -> Path:
    path.write_text(json.dumps({"script": "gpu_rates", "runs": runs}))
    return path


def test_the_gpu_plan_uses_measured_rates_and_labels_the_flop_bound_elsewhere(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: with ``--gpu h100`` each recipe's GPU hours come from a rate measured on an
    H100 (bench/records/gpu_rates.json) where one exists for the recipe or its model, in the
    precision it trains in on CUDA, and are the FLOP lower bound elsewhere; the plan says
    which for every figure. Dry runs and other GPUs' runs never count."""
    from pairrepro.planning import gpus, plan

    h100 = {"gpu": "h100", "device_name": "NVIDIA H100 80GB HBM3", "dry_run": False,
            "measured": "2026-11-27 10:00 UTC",
            "models": [{"model": "esim", "recipe": "esim",
                        "fp32": {"pairs_per_s": 400.0}, "bf16": {"pairs_per_s": 500.0}}],
            "epoch": {"recipe": "csran_trecqa", "precision": "bf16", "pairs_per_s": 250.0}}
    dry = {**h100, "dry_run": True, "models": [{**h100["models"][0], "model": "cin",
                                                  "recipe": "cin"}]}
    other = {**h100, "gpu": "a100", "models": [{**h100["models"][0], "model": "tc_lstm",
                                                  "recipe": "tc_lstm"}]}
    monkeypatch.setattr(gpus, "GPU_RATES", _gpu_rates(tmp_path / "gpu_rates.json",
                                                      [h100, dry, other]))
    index = load_recipe_index()
    paper = load_paper("csran")
    items = {it.recipe: it for it in plan_tables([(paper, paper.table(6))], index,
                                                 data_home.parent / "runs", gpu="h100",
                                                 comparisons=True)}
    esim, csran, cin = items["esim_trecqa"], items["csran_trecqa"], items["cin_trecqa"]
    precision = "fp32" if index.recipes["esim_trecqa"].train.precision == "fp32" else "bf16"
    rate = {"fp32": 400.0, "bf16": 500.0}[precision]
    hours = len(esim.seeds_todo) * esim.epochs * (esim.train_pairs or 0) / rate / 3600
    assert esim.gpu_figure == (pytest.approx(hours), plan.MEASURED) and hours > 0
    assert "esim on esim" in esim.gpu_rate_source
    # the recipe's own measured epoch comes before its model's preflight rate
    assert csran.gpu_rate == 250.0 and csran.gpu_figure[1] == plan.MEASURED
    assert cin.gpu_rate is None  # only a dry run measured CIN
    assert cin.gpu_figure == (cin.gpu_lower_bound_hours, plan.LOWER_BOUND)
    text = render_plan(list(items.values()))
    assert re.search(r"^esim_trecqa \|.* \| [\d.]+ \(measured\)$", text, re.MULTILINE), text
    assert re.search(r"^cin_trecqa \|.* \| ≥[\d.e+-]+ \(lower bound\)$", text, re.MULTILINE)
    assert "measured" in text and "NVIDIA H100 80GB HBM3, 2026-11-27 10:00 UTC" in text
    assert "at least" in text and "FLOP lower bound" in text
    assert gpus.gpu_key("NVIDIA H100 80GB HBM3") == "h100"
    assert gpus.gpu_key("NVIDIA H100 PCIe") == "h100-pcie" and gpus.gpu_key("NVIDIA L40S") == ""


def test_seeds_that_fit_on_one_gpu_together_count_at_the_measured_shared_rate(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new gpu_rates.json run with the total rate of 3 ESIM runs sharing an H100 (bench/
    gpu_rates.py --shared 3) sets the hours of a recipe with 3 seeds to train whose preflight
    peak fits 3 times in the GPU's memory; with room for fewer, or none measured, one run's
    rate counts, and the plan states that assumption."""
    from pairrepro.planning import gpus, plan

    def run(when: str, shared: dict | None = None) -> dict:
        row = {"model": "esim", "recipe": "esim", "fp32": {"pairs_per_s": 400.0},
               "bf16": {"pairs_per_s": 500.0}, **({"shared": shared} if shared else {})}
        return {"gpu": "h100", "device_name": "H100", "dry_run": False, "measured": when,
                "models": [row]}

    index = load_recipe_index()
    paper = load_paper("csran")
    precision = "fp32" if index.recipes["esim_trecqa"].train.precision == "fp32" else "bf16"
    single = {"fp32": 400.0, "bf16": 500.0}[precision]
    shared = {"runs": 3, "precision": precision, "pairs_per_s": 1200.0}
    rates = _gpu_rates(tmp_path / "gpu_rates.json", [run("day 1"), run("day 2", shared)])
    monkeypatch.setattr(gpus, "GPU_RATES", rates)
    # esim_trecqa's preflight peak + the CUDA context: about 1.9 GB, 3 fit in 80 GB, 1 in 3 GB
    for memory, rate in ((80 * 1024.0, 1200.0), (3000.0, single)):
        monkeypatch.setattr(plan, "gpu_peak", lambda name, m=memory: ("H100", 989e12, m))
        items = {it.recipe: it for it in plan_tables([(paper, paper.table(6))], index,
                                                     data_home.parent / "runs", gpu="h100",
                                                     comparisons=True)}
        esim = items["esim_trecqa"]
        assert len(esim.seeds_todo) == 3 and esim.gpu_rate == rate
        hours = 3 * esim.epochs * (esim.train_pairs or 0) / rate / 3600
        assert esim.gpu_figure == (pytest.approx(hours), plan.MEASURED)
        assert ("3 runs of esim sharing the device" in esim.gpu_rate_source) == (rate == 1200)
    text = render_plan(list(items.values()))
    assert "assumed no faster together than one after another" in text


def test_a_later_gpu_run_of_a_few_models_keeps_the_earlier_runs_other_rates(
        tmp_path: Path) -> None:
    """A rerun that measures one model (bench/gpu_rates.py --models csran) replaces that
    model's rates and adds its epoch; every other model keeps the earlier run's rate."""
    from pairrepro.planning.gpus import load_gpu_rates

    def run(when: str, rates: dict[str, float], epoch: float | None = None) -> dict:
        return {"gpu": "h100", "device_name": "H100", "dry_run": False, "measured": when,
                "models": [{"model": m, "recipe": m, "fp32": {"pairs_per_s": r}}
                           for m, r in rates.items()],
                **({"epoch": {"recipe": "csran_big", "precision": "bf16",
                              "pairs_per_s": epoch}} if epoch else {})}

    path = _gpu_rates(tmp_path / "gpu_rates.json",
                      [run("day 1", {"esim": 800.0, "csran": 900.0}),
                       run("day 2", {"csran": 780.0}, epoch=300.0)])
    rates = load_gpu_rates("h100", path)
    assert (rates[("esim", "fp32")].pairs_per_s, rates[("esim", "fp32")].run) == (800.0,
                                                                                "H100, day 1")
    assert (rates[("csran", "fp32")].pairs_per_s, rates[("csran", "fp32")].run) == (780.0,
                                                                                  "H100, day 2")
    assert rates[("csran_big", "bf16")].pairs_per_s == 300.0


def test_the_cli_plan_says_where_each_gpu_figure_comes_from(data_home: Path) -> None:
    out = runner.invoke(app, ["report", "all", "--plan", "--gpu", "h100"])
    assert out.exit_code == 0, out.output
    rows = [line for line in out.output.splitlines() if line.count(" | ") >= 9][1:]
    todo = [line for line in rows if not line.endswith(" | -")]
    assert len(todo) > 50 and all(line.endswith(("(measured)", "(lower bound)"))
                                  for line in todo), todo[:3]
    assert "lower bound: preflight FLOPs per pair" in out.output
    alone = runner.invoke(app, ["report", "all", "--gpu", "h100"])
    assert alone.exit_code == 2 and "--plan" in alone.output
