"""Paper tables as data, the report (status, delta, rounding, formats), plans and figures.

Fake runs (result.json + manifest.json + config.toml) and fake recipes are written into a tmp
folder; the data home and manifests are isolated. Golden files for Markdown and LaTeX live in
tests/golden/; regenerate them with ``PAIRREPRO_UPDATE_GOLDEN=1 pytest tests/test_report.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairrepro import runs as rf
from pairrepro.cli.app import app
from pairrepro.errors import ConfigError
from pairrepro.planning import paper_tables as pt
from pairrepro.planning import recipe_index as ri
from pairrepro.planning.model_facts import MODEL_FACTS
from pairrepro.planning.plan import load_bench_figures, plan_tables, render_plan
from pairrepro.report.tables import cells as cl
from pairrepro.report.tables import layout as ly
from pairrepro.report.tables import numbers as nb
from pairrepro.report.tables import render as rd
from pairrepro.report.tables.figures import series_points

GOLDEN = Path(__file__).resolve().parent / "golden"

MANIFEST = """name = "{name}"
title = "test {name}"
task = "{task}"
reader = "x"
public = {public}
notes = "licence-gated"
label_map = ["0", "1", "2"]
default_variant = "raw"
[[files]]
path = "a.txt"
[variants.raw.splits.train]
files = ["a.txt"]
expected = {{ pairs = 1000 }}
"""


def recipe_text(rows: list[tuple[str, int, str]], dataset: str = "snli", model: str = "fake",
                extra: str = "") -> str:
    reps = ", ".join(f'{{paper = "{p}", table = {t}, row = "{r}"}}' for p, t, r in rows)
    return (f"[recipe]\nseeds = [1, 2]\nreproduces = [{reps}]\n[data]\ndataset = \"{dataset}\"\n"
            f"[model]\nname = \"{model}\"\n{extra}\n[train]\nepochs = 2\n")


def write_run(runs: Path, recipe: str, seed: int, metrics: dict, status: str = "finished",
              config: str = "", epoch: int = 3) -> Path:
    d = runs / recipe / f"seed-{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps({"git": {"commit": "0123456789abcdef"}}))
    (d / "config.toml").write_text(config)
    (d / "result.json").write_text(json.dumps({
        "recipe": recipe, "seed": seed, "status": status, "chosen_epoch": epoch,
        "metrics": metrics}))
    return d


def make_whole(d: Path, manifest: dict) -> None:
    """Give a hand-written run what the trainer leaves with a manifest recording
    ``epochs_run`` (a claim runs.read_run holds it to): that many metrics.jsonl lines and
    the predictions of every split its result records."""
    import pandas as pd

    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "metrics.jsonl").write_text("".join(
        json.dumps({"epoch": e, "train_pairs": 14611}) + "\n"
        for e in range(1, manifest["epochs_run"] + 1)))
    for split in json.loads((d / "result.json").read_text())["metrics"]:
        rf.RunFolder(d).write_predictions(split, pd.DataFrame({"pair_id": ["a"]}))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolated recipes, manifests, data home and runs; cwd = tmp_path (relative run links)."""
    for sub in ("recipes", "manifests", "home", "runs"):
        (tmp_path / sub).mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAIRREPRO_RECIPES", str(tmp_path / "recipes"))
    monkeypatch.setenv("PAIRREPRO_MANIFESTS", str(tmp_path / "manifests"))
    monkeypatch.setenv("PAIRREPRO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PAIRREPRO_RUNS", "runs")
    monkeypatch.setenv("PAIRREPRO_MIRROR", "")  # empty: no mirror, not even the default
    for name, task, public in (("snli", "classification", "true"),
                               ("trecqa", "ranking", "true"), ("yahoo", "ranking", "false")):
        (tmp_path / "manifests" / f"{name}.toml").write_text(
            MANIFEST.format(name=name, task=task, public=public))
    # snli is prepared, trecqa and yahoo are not; as `pairrepro preprocess` does, the default
    # variant's folder is also linked as prepared/snli (what a recipe without a variant loads)
    prepared = tmp_path / "home" / "prepared" / "snli-raw"
    prepared.mkdir(parents=True)
    (prepared / "DONE").write_text("")
    (prepared.parent / "snli").symlink_to("snli-raw", target_is_directory=True)
    return tmp_path


def add_recipe(env: Path, name: str, text: str) -> None:
    (env / "recipes" / f"{name}.toml").write_text(text)


def evaluate(paper: str, table: int) -> cl.EvalTable:
    doc = pt.load_paper(paper)
    return cl.evaluate_table(doc, doc.table(table), Path("runs"))


def shown(ev: cl.EvalTable, c: cl.Cell, text: object = ly.value_text) -> str:
    """What the renderers print of ``c``: its value, or ``text`` (another of render's)."""
    column = next(k for k in ev.table.columns if k.key == c.column)
    return text(c, column)  # type: ignore[operator]


def cell(ev: cl.EvalTable, label: str, column: str, nth: int = 0) -> cl.Cell:
    rows = [r for r in ev.rows if r.row.label == label]
    return next(c for c in rows[nth].cells if c.column == column)


# ----------------------------------------------------------------------------- loading


def test_every_paper_loads_with_its_tables() -> None:
    expected = {"clstm": [1, 2, 4], "dflstm": [1, 2, 4], "mvlstm": [2, 3, 5],
                "csran": [2, 3, 4, 5, 6, 7, 8], "cin": [2, 3, 4, 5]}
    for name, numbers in expected.items():
        paper = pt.load_paper(name)
        assert [t.number for t in paper.tables] == numbers
    assert len(pt.load_paper("csran").figures) == 2
    # row counts as printed (spec tables), footnote rows included
    assert len(pt.load_paper("clstm").table(2).rows) == 12
    assert len(pt.load_paper("cin").table(2).rows) == 14
    assert len(pt.load_paper("csran").table(7).rows) == 7


def test_invalid_table_file_names_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text('paper = "x"\ntitle = "t"\n[[tables]]\nnumber = 2\ncaption = "c"\n'
                   'columns = [{key = "a", header = "A", metric = "test.accuracy"}]\n'
                   '[[tables.blocks]]\nrows = [{label = "M", values = {b = "1.0"}}]\n')
    with pytest.raises(ConfigError, match=r"x\.toml: tables\[0\] \(Table 2\) blocks\[0\] "
                                          r"rows\[0\] 'M': values: unknown column 'b'"):
        pt.load_paper_file(bad)
    bad.write_text(bad.read_text().replace('{b = "1.0"}', '{a = 1.0}'))
    with pytest.raises(ConfigError, match="published values are strings"):
        pt.load_paper_file(bad)
    bad.write_text(bad.read_text().replace('metric = "test.accuracy"', 'metric = "accuracy"'))
    with pytest.raises(ConfigError, match=r"<split>\.<metric>"):
        pt.load_paper_file(bad)


# ----------------------------------------------------------------------------- numbers


def test_number_formatting_follows_the_paper() -> None:
    pct = pt.Column(key="a", header="A", unit="%", decimals=1)
    frac = pt.Column(key="b", header="B", unit="fraction", decimals=4, leading_zero=False)
    assert nb.format_number(84.25, pct) == "84.2"  # banker's-free: float repr 84.25 -> 84.2
    assert nb.format_number(84.26, pct) == "84.3"
    assert nb.format_number(0.89124, frac) == ".8912"
    assert nb.format_number(-0.0123, frac, signed=True) == "−.0123"
    assert nb.format_number(0.3, pct, signed=True) == "+0.3"
    assert nb.parse_published("5E−5") == pytest.approx(5e-5)
    assert nb.parse_published("77.5K") == 77500
    assert nb.parse_published("-") is None
    assert nb.format_count(77500) == "77.5K" and nb.format_count(190000) == "190K"
    # inferred from the printed strings
    mv = pt.load_paper("mvlstm").table(3).columns[0]
    assert (mv.decimals, mv.leading_zero) == (3, True)
    cin4 = pt.load_paper("cin").table(4).columns[0]
    assert cin4.decimals == 2


def test_label_normalisation_drops_citations_and_spaces() -> None:
    n = ri.normalise_label
    assert n("MV-LSTM(k=3)") == n("MV-LSTM (k=3)") == n("MV-LSTM ( $k$ =3)")
    assert n("single LSTM (Rocktäschel et al., 2015)") == n("single LSTM")
    assert n("ESIM (Chen et al., 2017a) (Ensemble)") == n("ESIM (Ensemble)")
    assert n("TC-LSTMs (Single Direction)") != n("TC-LSTMs")


# ----------------------------------------------------------------------------- statuses


def test_status_of_every_kind_of_cell(env: Path) -> None:
    add_recipe(env, "tc4", recipe_text([("clstm", 2, "four stacked TC-LSTMs")]))
    add_recipe(env, "tc1", recipe_text([("clstm", 2, "TC-LSTMs")]))
    add_recipe(env, "lc1", recipe_text([("clstm", 2, "LC-LSTMs")]))
    add_recipe(env, "lc4", recipe_text([("clstm", 2, "four stacked LC-LSTMs")]))
    add_recipe(env, "lcs", recipe_text([("clstm", 2, "LC-LSTMs (Single Direction)")]))
    # data missing / not public: rows of tables on those datasets (TrecQA, Yahoo)
    add_recipe(env, "tcs", recipe_text([("csran", 6, "CSRAN")], dataset="trecqa"))
    add_recipe(env, "nbow", recipe_text([("clstm", 4, "NBOW")], dataset="yahoo"))
    # 84.2, 85.0, 86.0 -> mean 85.0666 (published 85.1: delta -0.0333, within 1.0)
    for seed, acc in ((1, 0.842), (2, 0.850), (3, 0.860)):
        write_run(env / "runs", "tc4", seed, {"test": {"accuracy": acc}}, epoch=seed + 4)
    write_run(env / "runs", "tc1", 1, {"test": {"accuracy": 0.700}})  # 81.6 published: off
    write_run(env / "runs", "lc1", 1, {}, status="running")  # started: no metrics yet
    write_run(env / "runs", "lc4", 1, {}, status="failed")
    ev = evaluate("clstm", 2)
    c = cell(ev, "four stacked TC-LSTMs", "test")
    assert c.status == cl.REPRODUCED and c.estimate and c.estimate.seeds == [1, 2, 3]
    assert c.estimate.mean == pytest.approx((84.2 + 85.0 + 86.0) / 3)
    assert shown(ev, c) == "85.1 ± 0.9"  # std of (84.2, 85, 86) = 0.9018
    assert shown(ev, c, ly.delta_text) == "−0.0"
    assert cell(ev, "four stacked TC-LSTMs", "test").bold
    off = cell(ev, "TC-LSTMs", "test")
    assert off.status == cl.BELOW and shown(ev, off, ly.delta_text) == "−11.6"
    assert cell(ev, "LC-LSTMs", "test").status == cl.RUNNING
    assert cell(ev, "four stacked LC-LSTMs", "test").status == cl.FAILED
    not_run = cell(ev, "LC-LSTMs (Single Direction)", "test")
    # the README's wording ("no reference run", with the command), not a second one
    assert not_run.status == cl.NO_REFERENCE and "pairrepro train" in not_run.detail
    missing = cell(evaluate("csran", 6), "CSRAN", "map")
    assert missing.status == cl.DATA_MISSING
    assert missing.detail.startswith("pairrepro fetch trecqa --mirror DIR")
    gated = cell(evaluate("clstm", 4), "NBOW", "p5")
    assert gated.status == cl.DATA_MISSING and "not public" in gated.detail
    assert cell(ev, "single LSTM", "test").status == cl.NOT_IMPLEMENTED
    assert "Rocktäschel" in cell(ev, "single LSTM", "test").detail
    assert cell(ev, "stacked attention-based LSTM", "test").status == cl.NOT_IMPLEMENTED
    assert cell(ev, "NBOW", "k").status == cl.INFO
    # the run link: directory, commit, seeds and chosen epochs
    md = rd.to_markdown(ev)
    assert "[85.1 ± 0.9 (−0.0) ✓](runs/tc4)" in md
    assert "runs/tc4 (commit 0123456789; seeds 1,2,3; chosen epochs 5,6,7)" in md


def test_dead_or_interrupted_runs_are_stale_not_running(env: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()  # reaped: its pid names no process now
    host = socket.gethostname()
    cases = {"alive": (os.getpid(), host, "running"), "dead": (dead.pid, host, "stale"),
             "elsewhere": (dead.pid, host + "-other", "running")}
    for name, (pid, where, _) in cases.items():
        add_recipe(env, name, recipe_text([("clstm", 2, "TC-LSTMs")]))
        d = write_run(env / "runs", name, 1, {}, status="running")
        result = json.loads((d / "result.json").read_text())
        (d / "result.json").write_text(json.dumps({**result, "pid": pid, "host": where}))
    for name, (_, _, status) in cases.items():
        (run,) = rf.find_runs(Path("runs"), name)
        assert run.status == status, name
    # the report: a dead run is stale with the command that continues it; so is Ctrl-C
    add_recipe(env, "lc1", recipe_text([("clstm", 2, "LC-LSTMs")]))
    write_run(env / "runs", "lc1", 1, {}, status="interrupted")
    for recipe in ("alive", "elsewhere"):  # leave "dead" the only recipe of its row
        (env / "recipes" / f"{recipe}.toml").unlink()
    ev = evaluate("clstm", 2)
    for label, why in (("TC-LSTMs", "process gone"), ("LC-LSTMs", "interrupted")):
        c = cell(ev, label, "test")
        assert c.status == cl.STALE, (label, c.status)
        assert why in c.detail and c.detail.endswith(".toml --resume"), c.detail
    assert "stale" in rd.to_markdown(ev)


def test_tolerance_boundary_and_fraction_columns(env: Path) -> None:
    add_recipe(env, "cs", recipe_text([("csran", 6, "CSRAN")], dataset="trecqa"))
    # MAP exactly 0.01 below 0.854 is still reproduced; MRR 0.02 above is off
    write_run(env / "runs", "cs", 1, {"test": {"map": 0.844, "mrr": 0.955}})
    ev = evaluate("csran", 6)
    assert cell(ev, "CSRAN", "map").status == cl.REPRODUCED
    assert shown(ev, cell(ev, "CSRAN", "map")) == "0.844"
    assert shown(ev, cell(ev, "CSRAN", "map"), ly.delta_text) == "−0.010"
    assert cell(ev, "CSRAN", "mrr").status == cl.ABOVE
    assert shown(ev, cell(ev, "CSRAN", "mrr"), ly.delta_text) == "+0.020"


def test_no_published_value_and_cited_label(env: Path) -> None:
    add_recipe(env, "arc1", recipe_text([("mvlstm", 5, "ARC-I (Hu et al., 2014)")],
                                        dataset="reuters_sc"))
    write_run(env / "runs", "arc1", 1, {"test": {"p_at_1": 0.5, "mrr": 0.7}})
    ev = evaluate("mvlstm", 5)
    assert cell(ev, "ARC-I", "mrr").status == cl.NEW
    assert cell(ev, "ARC-I", "p1").status == cl.ABOVE  # 0.500 vs 0.475: +0.025 > 0.01


def test_comparison_rows_come_below_the_papers_rows(env: Path) -> None:
    """A recipe with ``compares`` adds its own row (no published value) under the table; the
    plan and ``reproduce`` take it only when asked."""
    add_recipe(env, "cs_trec", recipe_text([("csran", 6, "CSRAN")], dataset="trecqa"))
    add_recipe(env, "bm25_trec", recipe_text([], dataset="trecqa", model="bm25").replace(
        "reproduces = []", 'compares = [{paper = "csran", table = 6, row = "BM25"}]'))
    write_run(env / "runs", "bm25_trec", 1, {"test": {"map": 0.6871, "mrr": 0.7972}})
    ev = evaluate("csran", 6)
    assert [r.row.label for r in ev.rows][-2:] == ["CSRAN", "BM25"]
    bm25 = next(r for r in ev.rows if r.row.label == "BM25")
    assert bm25.row.block == ri.COMPARISON_BLOCK and bm25.recipes == ["bm25_trec"]
    assert cell(ev, "BM25", "map").status == cl.NEW
    assert shown(ev, cell(ev, "BM25", "map")) == "0.687"
    assert cell(ev, "BM25", "map").published == ""
    md = rd.to_markdown(ev)
    assert "| BM25 |  | [0.687](runs/bm25_trec) |  | [0.797](runs/bm25_trec) |" in md
    assert "models run here for comparison" in md
    paper = pt.load_paper("csran")
    index = ri.load_recipe_index()
    assert ri.table_recipes(paper, paper.table(6), index) == ["cs_trec"]
    assert ri.table_recipes(paper, paper.table(6), index, True) == ["bm25_trec", "cs_trec"]
    items = plan_tables([(paper, paper.table(6))], index, Path("runs"), comparisons=True)
    assert sorted(i.recipe for i in items) == ["bm25_trec", "cs_trec"]
    assert evaluate("csran", 5).rows[-1].row.label == "CSRAN"  # other tables: unchanged


def test_mixed_dataset_columns_pick_the_recipe_of_their_dataset(env: Path) -> None:
    add_recipe(env, "abl_snli", recipe_text([("csran", 8, "w/o MAR")], dataset="snli"))
    add_recipe(env, "abl_trec", recipe_text([("csran", 8, "w/o MAR")], dataset="trecqa"))
    write_run(env / "runs", "abl_snli", 1, {"dev": {"accuracy": 0.884}})
    write_run(env / "runs", "abl_trec", 1, {"dev": {"map": 0.80, "mrr": 0.85}})
    ev = evaluate("csran", 8)
    assert cell(ev, "w/o MAR", "snli").recipe == "abl_snli"
    assert cell(ev, "w/o MAR", "snli").status == cl.REPRODUCED
    assert cell(ev, "w/o MAR", "trec_map").recipe == "abl_trec"
    assert shown(ev, cell(ev, "w/o MAR", "trec_map")) == "0.80"
    assert cell(ev, "w/o MAR", "scitail").status == cl.NO_RECIPE


def test_hparam_table_compares_recipe_values(env: Path) -> None:
    extra = "hidden = 50\npool_p = 1\npool_q = 1"
    text = recipe_text([("clstm", 2, "four stacked TC-LSTMs")], extra=extra)
    text += "[optim]\nlr = 0.005\nl2 = 2e-5\n[embeddings]\ndim = 100\n"
    add_recipe(env, "tc4", text)
    ev = evaluate("clstm", 1)
    assert cell(ev, "Embedding size", "rte").status == cl.REPRODUCED
    assert cell(ev, "Initial learning rate", "rte").status == cl.REPRODUCED
    assert cell(ev, "Regularization", "rte").status == cl.OFF  # 2e-5 vs 1E-5
    assert cell(ev, "Pooling (p, q)", "rte").status == cl.REPRODUCED
    assert cell(ev, "Hidden layer size", "mqa").status == cl.NO_RECIPE


def test_paper_settings_resolve_in_the_real_recipes(tmp_path: Path) -> None:
    """Every recipe setting a paper TOML names must exist in the shipped recipes (model
    defaults included): hparams rows (C-LSTM and DF-LSTM Table 1 must match the paper), the
    figures' x and series keys, and the x of a plotted table (MV-LSTM Table 2: model.k)."""
    index = ri.load_recipe_index()
    for name in pt.PAPERS:
        paper = pt.load_paper(name)
        for table in paper.tables:
            if table.kind != "hparams":
                continue
            ev = cl.evaluate_table(paper, table, tmp_path, index)
            for row in ev.rows:
                for c in row.cells:
                    where = (name, table.number, row.row.label, c.column, c.detail)
                    assert c.recipe and shown(ev, c) != "not set", where
                    assert c.status == cl.REPRODUCED, where
        for figure in paper.figures:
            for series in figure.series:
                model = series["match"]["model.name"]
                recipes = [r for r in index.recipes.values() if r.model.name == model]
                assert recipes, (name, figure.number, model)
                for recipe in recipes:
                    flat = ri.settings(recipe.to_dict())
                    missing = {figure.x, *series["match"]} - set(flat)
                    assert not missing, (name, figure.number, recipe.name, missing)
    table2 = pt.load_paper("mvlstm").table(2)
    plotted = [row for row in table2.rows if row.x is not None]
    assert len(plotted) == 4
    for row in plotted:
        (recipe,) = index.for_row("mvlstm", 2, row.label)
        assert ri.settings(index.recipes[recipe].to_dict())["model.k"] == row.x, recipe


# ----------------------------------------------------------------------------- rendering


def test_every_table_renders_in_every_format(env: Path) -> None:
    # one recipe per paper table, each with a finished run at the published value of its
    # first numeric row, so every format shows reproduced cells
    for paper_name in pt.PAPERS:
        paper = pt.load_paper(paper_name)
        for table in paper.tables:
            if table.kind == "hparams":
                continue
            row = next(r for r in table.rows if not r.footnote)
            name = f"{paper_name}_t{table.number}"
            dataset = table.datasets[0]  # a row's run must be on its table's dataset
            add_recipe(env, name, recipe_text([(paper_name, table.number, row.label)],
                                              dataset=dataset))
            metrics: dict[str, dict[str, float]] = {}
            for col in table.columns:
                value = nb.parse_published(row.values.get(col.key, ""))
                mine = col.dataset in ("", dataset)  # the recipe's dataset
                if col.kind == "metric" and value is not None and mine:
                    frac = value / 100 if col.unit == "%" else value
                    metrics.setdefault(col.split, {})[col.metric_name] = frac
            write_run(env / "runs", name, 1, metrics)
    for paper_name in pt.PAPERS:
        doc = pt.load_paper(paper_name)
        for ev in (cl.evaluate_table(doc, t, Path("runs")) for t in doc.tables):
            outputs = {fmt: rd.render(ev, fmt) for fmt in rd.FORMATS}
            for row in ev.table.rows:
                for value in row.values.values():
                    if value != "-":
                        assert value in outputs["md"], (ev.table.name, value)
            if ev.table.kind != "hparams":
                # a one-seed row counts as one trained model, not as a reproduced method
                counts = ev.counts()
                assert counts.get(cl.REPRODUCED, 0) + counts.get(cl.ONE_MODEL, 0) >= 1, \
                    ev.table.name
            assert outputs["latex"].count(r"\begin{table}") == 1
            assert outputs["html"].count("<tr") == len(ev.rows) + 1
            assert ev.table.caption.split()[0] in outputs["term"]


@pytest.mark.parametrize(("paper", "table"), [("csran", 6), ("mvlstm", 2), ("cin", 5)])
def test_golden_markdown_and_latex(env: Path, paper: str, table: int) -> None:
    add_recipe(env, "csran_trecqa", recipe_text([("csran", 6, "CSRAN")], dataset="trecqa"))
    add_recipe(env, "mv_k5", recipe_text([("mvlstm", 2, "MV-LSTM (k=5)")], dataset="yahoo"))
    add_recipe(env, "mv_k10", recipe_text([("mvlstm", 2, "MV-LSTM(k=10)")], dataset="yahoo"))
    add_recipe(env, "cin", recipe_text([("cin", 5, "CIN")]))
    add_recipe(env, "cin_noint", recipe_text([("cin", 5, "Remove whole interaction")]))
    for seed, (m, r) in enumerate(((0.851, 0.931), (0.857, 0.941)), 1):
        write_run(env / "runs", "csran_trecqa", seed, {"test": {"map": m, "mrr": r}})
    write_run(env / "runs", "mv_k5", 1, {"test": {"p_at_1": 0.712, "mrr": 0.849}})
    write_run(env / "runs", "cin", 1, {"dev": {"accuracy": 0.8852}, "test": {"accuracy": 0.8791}})
    ev = evaluate(paper, table)
    for fmt, ext in (("md", "md"), ("latex", "tex")):
        got = rd.render(ev, fmt)
        path = GOLDEN / f"{paper}-table{table}.{ext}"
        if os.environ.get("PAIRREPRO_UPDATE_GOLDEN"):
            path.write_text(got, encoding="utf-8")
        assert path.is_file(), f"missing golden {path}; run with PAIRREPRO_UPDATE_GOLDEN=1"
        assert got == path.read_text(encoding="utf-8"), f"{path} differs"


# ----------------------------------------------------------------------------- plan & CLI


def test_plan_estimates_gpu_hours_from_bench_figures(env: Path) -> None:
    add_recipe(env, "cs", recipe_text([("csran", 2, "CSRAN")], model="csran"))
    write_run(env / "runs", "cs", 1, {"test": {"accuracy": 0.88}})  # seed 1 done, 2 to go
    paper = pt.load_paper("csran")
    items = plan_tables([(paper, paper.table(2))], ri.load_recipe_index(), Path("runs"),
                        figures={"csran": {"pairs_per_s": 100.0, "source": "test"}})
    (item,) = items
    assert item.seeds_done == [1] and item.seeds_todo == [2]
    assert item.train_pairs == 1000 and item.data_ready
    # 1 seed x 2 epochs x 1000 pairs / 100 pairs/s = 20 s
    assert item.gpu_hours == pytest.approx(20 / 3600)
    text = render_plan(items)
    assert "cs | csran T2 | snli | ready | 2 | 2 x 1000 | 100 (test) | 0.01" in text
    assert "estimated GPU hours: 0.01" in text
    assert load_bench_figures()["csran"]["pairs_per_s"] > 0


def test_plan_keeps_cpu_and_gpu_hours_apart(env: Path, tmp_path: Path) -> None:
    add_recipe(env, "cs", recipe_text([("csran", 2, "CSRAN")], model="csran"))
    add_recipe(env, "es", recipe_text([("csran", 2, "ESIM")], model="esim"))
    paper = pt.load_paper("csran")
    figures = {"csran": {"pairs_per_s": 5.0, "hardware": "cpu", "source": "cpu bench"},
               "esim": {"pairs_per_s": 400.0, "hardware": "gpu", "source": "gpu bench"}}
    items = {it.recipe: it for it in plan_tables(
        [(paper, paper.table(2))], ri.load_recipe_index(), Path("runs"), figures=figures)}
    # 2 seeds x 2 epochs x 1000 pairs: 4000 / 5 = 800 s on CPU, 4000 / 400 = 10 s on GPU
    assert items["cs"].cpu_hours == pytest.approx(800 / 3600) and items["cs"].gpu_hours is None
    assert items["es"].gpu_hours == pytest.approx(10 / 3600) and items["es"].cpu_hours is None
    text = render_plan(list(items.values()))
    assert "| 5.0 (cpu bench) | 0.22 | CPU" in text and "| 400 (gpu bench) | 0.00 | GPU" in text
    assert "estimated CPU hours: 0.22; estimated GPU hours: 0.00" in text
    # every figure in bench/figures.toml says where it was measured; one that does not is an error
    assert {entry["hardware"] for entry in load_bench_figures().values()} <= {"cpu", "gpu"}
    bad = tmp_path / "figures.toml"
    bad.write_text("[models.csran]\npairs_per_s = 5.0\n")
    with pytest.raises(ConfigError, match=r"\[models\.csran\] hardware"):
        load_bench_figures(bad)


def test_cli_report_reproduce_and_figures(env: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["report", "csran", "--table", "6", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "0.854" in result.output and "n/a [" in result.output
    result = runner.invoke(app, ["report", "all", "--table", "2", "--out", "t2.html"])
    assert result.exit_code == 0, result.output
    assert (env / "t2.html").read_text().count("<table>") == 5
    result = runner.invoke(app, ["--json", "report", "cin", "--table", "5"])
    assert json.loads(result.output)[0]["rows"][0]["cells"]["dev"]["published"] == "88.6"
    # nothing declares a row of CIN table 4: exit 7 (NothingToRunError), table still rendered
    result = runner.invoke(app, ["reproduce", "cin", "--table", "4", "--format", "md"])
    assert result.exit_code == 7 and "88.62" in result.output
    result = runner.invoke(app, ["reproduce", "all", "--table", "2", "--dry-run"])
    assert result.exit_code == 0 and "Nothing to run" in result.output
    # figures: CSRAN depth curves from runs whose config sets model.layers, and curves of a run
    for layers, acc in ((1, 0.85), (3, 0.88)):
        config = (f'[data]\ndataset = "scitail"\n[model]\nname = "csran"\nuse_csra = true\n'
                  f"layers = {layers}\n")
        write_run(env / "runs", f"csran_l{layers}", 1, {"dev": {"accuracy": acc}}, config=config)
    points = series_points(pt.load_paper("csran").figures[0], rf.all_runs(Path("runs")))
    assert points["CSRA"] == [(1.0, 85.0, 0.0), (3.0, 88.0, 0.0)]
    result = runner.invoke(app, ["report", "figures", "--figures", "figs"])
    assert result.exit_code == 0, result.output
    for stem in ("csran-figure2", "mvlstm-table2"):
        for ext in ("png", "svg"):
            assert (env / "figs" / f"{stem}.{ext}").stat().st_size > 1000
    # no run varies what Figure 3 plots: left out, saying so, not drawn empty
    assert not list((env / "figs").glob("csran-figure3.*"))
    assert "csran Figure 3 left out: no finished run in runs matches it" in result.output
    run = env / "runs" / "x" / "seed-1"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"epoch": e, "train_loss": 1 / e, "dev": {"accuracy": 0.5 + e / 10}}) + "\n"
        for e in (1, 2, 3)))
    result = runner.invoke(app, ["report", "curves", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "curves-x-seed-1.png").is_file() and (run / "curves-x-seed-1.svg").is_file()


# ----------------------------------------------------------------------------- against the papers


def _tokens(line: str) -> set[str]:
    line = re.sub(r"</?b>|\$", "", line)  # bold tags and LaTeX math delimiters
    return set(re.split(r"[\s/]+", line.strip()))


def _table_window(lines: list[str], number: int) -> list[str]:
    starts = [i for i, line in enumerate(lines) if line.startswith(f"Table {number}:")]
    assert starts, f"caption of Table {number} not found"
    i = starts[0]
    return lines[max(0, i - 60): i + 20]


def test_every_published_value_is_in_the_paper_text(shared_dir: Path) -> None:
    """Each row's printed values must appear together on one line (or on the line after the
    label, where the conversion breaks a cell) near the table's caption; footnote rows must
    quote the paper verbatim, value included. Catches typos in the TOMLs."""
    for name in pt.PAPERS:
        paper = pt.load_paper(name)
        text = (shared_dir / "papers" / paper.source).read_text(encoding="utf-8")
        lines = text.splitlines()
        flat_text = re.sub(r"\s+", " ", text)
        for table in paper.tables:
            window = _table_window(lines, table.number)
            for row in table.rows:
                values = [v for v in row.values.values() if v != "-"] + (
                    ["-"] if "-" in row.values.values() else [])
                if row.footnote:
                    assert row.quote in flat_text, (name, table.number, row.label)
                    assert all(v in row.quote for v in values), (name, row.label)
                    continue
                found = any(set(values) <= _tokens(line) for line in window)
                assert found, f"{name} Table {table.number} row {row.label!r}: {values}"
                first = row.label.split()[0].split("(")[0]
                assert any(first in line for line in window), (name, table.number, row.label)


def test_run_note_says_how_the_number_was_made() -> None:
    """The run line next to a reproduced number names the vectors, epochs and data size."""
    from pairrepro.report.tables.layout import _run_setup

    config = {"embeddings": {"source": "glove-6b-50d", "dim": 50}, "train": {"epochs": 3},
              "data": {"max_train_pairs": 12000}}
    assert _run_setup(config) == ("embeddings glove-6b-50d 50d; at most 3 epochs; "
                                  "12,000 training pairs sampled")
    config = {"embeddings": {"source": "glove-6b-50d", "dim": 50}, "train": {"epochs": 4},
              "model": {"use_exact_match": True}, "task": {"max_negatives_per_query": 10}}
    assert _run_setup(config) == ("embeddings glove-6b-50d 50d; exact-match feature; at most "
                                  "4 epochs; ≤10 negatives per query and epoch")
    assert _run_setup({}) == ""
    assert _run_setup({"model": {"name": "bm25"}, "train": {"epochs": 1}}) == "no training"


def test_report_runs_lists_the_key_manifest_fields(env: Path) -> None:
    d = write_run(env / "runs", "cs_trec", 2, {"dev": {"map": 0.81234, "mrr": 0.9},
                                               "test": {"map": 0.75, "mrr": 0.8,
                                                        "tie_share": 0.0}}, epoch=3)
    make_whole(d, {
        "git": {"commit": "abcdef1234567", "dirty": True}, "dataset": "trecqa",
        "variant": "clean", "epochs_run": 4, "wall_time_s": 812.4, "pairs_per_s": 71.6,
        "cpu_threads": 1, "device": "cpu",
        "prepared_sha256": {"train.parquet": "a" * 64, "test.parquet": "b" * 64}})
    write_run(env / "runs", "tw", 1, {"dev": {"f1": 0.7, "accuracy": 0.8},
                                      "test": {"f1": 0.6, "accuracy": 0.85}})
    write_run(env / "runs", "unfinished", 1, {}, status="running")
    result = CliRunner().invoke(app, ["report", "runs", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert ("| `runs/cs_trec/seed-2` | 0.812 / 0.900 | 0.750 / 0.800 | 0.000 | 3 / 4 | 812 s "
            f"| 72 | 14,611 | 1 | abcdef1+dirty | {'a' * 10} / {'b' * 10} |  |") in result.output
    assert "| `runs/tw/seed-1` | 0.700 (acc 0.800) | 0.600 (acc 0.850) |" in result.output
    assert "unfinished" not in result.output
    only = CliRunner().invoke(app, ["--json", "report", "runs", "--dataset", "trecqa"])
    assert [x["run"] for x in json.loads(only.output)] == ["runs/cs_trec/seed-2"]


@pytest.mark.parametrize(("fields", "shown"), [
    ({"wall_time_s": 812.4}, "812 s"),
    ({"wall_time_s": 812.4, "resumed": True, "segments": 2}, "812 s (2 segments)"),
    ({"wall_time_s": 812.4, "resumed": True, "segments": 2, "wall_time_untimed": True},
     "812 s (2 segments, one untimed)"),
    # a manifest from before resumed runs added up their segments
    ({"wall_time_s": 812.4, "resumed": True}, "812 s (last segment only)"),
])
def test_report_runs_says_what_a_resumed_runs_wall_time_covers(
        env: Path, fields: dict[str, object], shown: str) -> None:
    d = write_run(env / "runs", "tw", 1, {"dev": {"f1": 0.7}, "test": {"f1": 0.6}})
    make_whole(d, {"dataset": "twitter_url", "epochs_run": 3, **fields})
    result = CliRunner().invoke(app, ["report", "runs", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert f" / 3 | {shown} |" in result.output  # chosen / run epochs, then the wall time


def test_plan_counts_the_pairs_an_epoch_really_has(env: Path) -> None:
    """With max_negatives_per_query the plan counts each query's positives plus at most that
    many negatives (counted here by hand), not the whole training split."""
    import pandas as pd

    prepared = env / "home" / "prepared" / "trecqa"  # the recipe names no variant
    prepared.mkdir(parents=True)
    (prepared / "DONE").write_text("")
    # q1: 1 positive + 5 negatives -> 1 + 2; q2: 2 + 1 -> 3; q3: 0 + 4 -> 2   => 8 of 15
    labels = {"q1": [1, 0, 0, 0, 0, 0], "q2": [1, 1, 0], "q3": [0, 0, 0, 0]}
    pd.DataFrame({"group_id": [g for g, ls in labels.items() for _ in ls],
                  "label": [x for ls in labels.values() for x in ls]}).to_parquet(
        prepared / "train.parquet")
    (prepared / "stats.json").write_text(json.dumps({"splits": {"train": {"pairs": 15}}}))
    extra = '[task]\ntype = "ranking"\nloss = "pointwise"\nmax_negatives_per_query = 2'
    add_recipe(env, "cs_trec", recipe_text([("csran", 6, "CSRAN")], dataset="trecqa",
                                           model="csran", extra=extra))
    paper = pt.load_paper("csran")
    (item,) = plan_tables([(paper, paper.table(6))], ri.load_recipe_index(), Path("runs"))
    assert item.train_pairs == 8


# ----------------------------------------------------------------------------- issue 12


def test_paper_schema_errors_name_table_row_column_and_allowed(tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    table = ('paper = "x"\ntitle = "t"\n[[tables]]\nnumber = 2\ncaption = "c"\n'
             'columns = [{key = "a", header = "A", metric = "test.accuracy"}]\n'
             '[[tables.blocks]]\nrows = [{label = "M", values = {a = "1.0"}}]\n')
    bad.write_text(table.replace('values = {a = "1.0"}', 'values = {a = "1.0"}, colour = 1'))
    with pytest.raises(ConfigError) as err:
        pt.load_paper_file(bad)
    assert err.value.message.startswith(f"{bad}: tables[0] (Table 2) blocks[0] rows[0] 'M': "
                                        "colour: unknown key")
    assert "label" in (err.value.hint or "")  # the keys a row allows
    bad.write_text(table.replace('metric = "test.accuracy"',
                                 'metric = "test.accuracy", unit = "percent"'))
    with pytest.raises(ConfigError) as err:
        pt.load_paper_file(bad)
    assert err.value.message.startswith(f"{bad}: tables[0] (Table 2): columns[0] unit: "
                                        "'percent': ")
    assert "'%'" in err.value.message and "'fraction'" in err.value.message
    bad.write_text(table.replace('values = {a = "1.0"}', 'values = {a = "1.0"}, bold = ["z"]'))
    with pytest.raises(ConfigError, match=r"rows\[0\] 'M': bold/best: unknown column 'z' "
                                          r"\(columns: a\)"):
        pt.load_paper_file(bad)


def _damage(folder: Path) -> None:
    (folder / "result.json").write_text('{"status": "finished", ')


def test_damaged_run_shows_as_damaged_and_the_rest_renders(env: Path) -> None:
    add_recipe(env, "tc4", recipe_text([("clstm", 2, "four stacked TC-LSTMs")]))
    add_recipe(env, "tc1", recipe_text([("clstm", 2, "TC-LSTMs")]))
    write_run(env / "runs", "tc4", 1, {"test": {"accuracy": 0.851}})
    _damage(write_run(env / "runs", "tc4", 2, {"test": {"accuracy": 0.9}}))
    _damage(write_run(env / "runs", "tc1", 1, {"test": {"accuracy": 0.816}}))
    ev = evaluate("clstm", 2)
    # one seed finished, one damaged: the number stands on the finished seed, the note says
    good = cell(ev, "four stacked TC-LSTMs", "test")
    assert good.status == cl.REPRODUCED and good.estimate and good.estimate.seeds == [1]
    assert "1 seed(s) damaged: runs/tc4/seed-2/result.json: not valid JSON" in good.detail
    bad = cell(ev, "TC-LSTMs", "test")
    assert bad.status == cl.DAMAGED
    assert bad.detail.startswith("runs/tc1/seed-1/result.json: not valid JSON")
    md = rd.to_markdown(ev)
    assert "damaged [" in md and "runs/tc1/seed-1/result.json: not valid JSON" in md
    # report runs: the damaged folders are lines naming the file, the finished run is listed
    result = CliRunner().invoke(app, ["report", "runs", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "| `runs/tc4/seed-1` | " in result.output
    assert "| `runs/tc1/seed-1` | damaged: runs/tc1/seed-1/result.json: not valid JSON" \
        in result.output
    term = CliRunner().invoke(app, ["report", "runs"])  # the rich table (80 columns: cut)
    assert term.exit_code == 0 and "dam" in term.output, term.output
    # a damaged metrics.jsonl of a finished run: that line is damaged, naming file and line
    (env / "runs" / "tc4" / "seed-1" / "metrics.jsonl").write_text('{"epoch": 1}\n{oops\n')
    lines = json.loads(CliRunner().invoke(app, ["--json", "report", "runs"]).output)
    assert {x["run"]: x["status"] for x in lines} == {
        "runs/tc1/seed-1": "damaged", "runs/tc4/seed-1": "damaged", "runs/tc4/seed-2": "damaged"}
    assert next(x for x in lines if x["run"] == "runs/tc4/seed-1")["problem"].startswith(
        "runs/tc4/seed-1/metrics.jsonl:2: not valid JSON")


def test_a_number_without_evidence_keeps_its_value_and_says_why(env: Path) -> None:
    """Where the predictions give no per-unit values (none saved; seeds scored on different
    pairs) the cell keeps result.json's mean and the interval's place says why: a
    NoEvidenceError, a DataError (exit 3 should one reach the CLI), not a bare ValueError."""
    import pandas as pd

    from pairrepro.errors import DataError, NoEvidenceError
    from pairrepro.report.analyses import evidence

    add_recipe(env, "tc4", recipe_text([("clstm", 2, "four stacked TC-LSTMs")]))
    for seed in (1, 2):
        write_run(env / "runs", "tc4", seed, {"test": {"accuracy": 0.75}})
    c = cell(evaluate("clstm", 2), "four stacked TC-LSTMs", "test")
    # 75.0 against the published 85.1: a number, and a verdict, without an interval
    assert c.estimate and c.estimate.mean == pytest.approx(75.0) and c.status == cl.BELOW
    assert c.estimate.interval is None
    assert c.estimate.interval_note == "runs/tc4/seed-1 has no predictions/test.parquet"
    # 3 of 4 pairs right in each seed (hand-counted), but seed 2 scored pair e, not d
    for seed, last in ((1, "d"), (2, "e")):
        rf.RunFolder.of(Path("runs"), "tc4", seed).write_predictions("test", pd.DataFrame({
            "pair_id": ["a", "b", "c", last], "group_id": ["a", "b", "c", last],
            "label": [0, 1, 2, 0], "prediction": [0, 1, 2, 1]}))
    runs = rf.find_runs(Path("runs"), "tc4")
    assert evidence.run_units(runs[:1], "test.accuracy").values.tolist() == [[1, 1, 1, 0]]
    with pytest.raises(NoEvidenceError, match="seed-2: scored on other test units") as info:
        evidence.run_units(runs, "test.accuracy")
    assert isinstance(info.value, DataError) and not isinstance(info.value, ValueError)
    assert info.value.exit_code == 3
    c = cell(evaluate("clstm", 2), "four stacked TC-LSTMs", "test")
    assert c.estimate and c.estimate.mean == pytest.approx(75.0) and c.status == cl.BELOW
    assert c.estimate.interval is None
    assert c.estimate.interval_note.endswith(
        "seed-2: scored on other test units than the other seeds")


def test_data_counts_as_prepared_only_with_its_done_marker(env: Path) -> None:
    """The report's rule is the loader's: parquet files without DONE are an unfinished
    preprocess, so the row needs data, not training."""
    from pairrepro.data.prepared import data_status

    half = env / "home" / "prepared" / "trecqa"
    half.mkdir(parents=True)
    (half / "train.parquet").write_bytes(b"PAR1")
    add_recipe(env, "tcs", recipe_text([("csran", 6, "CSRAN")], dataset="trecqa"))
    assert data_status("trecqa") == (False, "pairrepro fetch trecqa --mirror DIR && "
                                            "pairrepro preprocess trecqa")
    assert cell(evaluate("csran", 6), "CSRAN", "map").status == cl.DATA_MISSING
    (half / "DONE").write_text("")
    assert data_status("trecqa") == (True, "")
    assert cell(evaluate("csran", 6), "CSRAN", "map").status == cl.NO_REFERENCE


def test_parameter_counts_come_from_runs_or_the_committed_file(env: Path) -> None:
    """θ_M without building a model: a run's manifest (parameters.weights) first, else
    bench/model_facts.json (keyed by recipe name), else a note saying how to get one."""
    add_recipe(env, "tc_lstm_1dir", recipe_text([("clstm", 2, "TC-LSTMs (Single Direction)")]))
    add_recipe(env, "tc1", recipe_text([("clstm", 2, "TC-LSTMs")]))
    add_recipe(env, "lc1", recipe_text([("clstm", 2, "LC-LSTMs")]))
    d = write_run(env / "runs", "tc1", 1, {"test": {"accuracy": 0.8}})
    (d / "manifest.json").write_text(json.dumps({"parameters": {"weights": 77_000}}))
    ev = evaluate("clstm", 2)
    from_run = cell(ev, "TC-LSTMs", "params")  # published 77.5K: 77.0K is within 5%
    assert (from_run.status, shown(ev, from_run)) == (cl.REPRODUCED, "77K")
    assert "runs/tc1/seed-1/manifest.json" in from_run.detail
    committed = json.loads(MODEL_FACTS.read_text(encoding="utf-8"))["weights"]
    from_file = cell(ev, "TC-LSTMs (Single Direction)", "params")
    assert from_file.estimate and from_file.estimate.mean == committed["tc_lstm_1dir"]
    assert "bench/model_facts.json" in from_file.detail
    unknown = cell(ev, "LC-LSTMs", "params")
    assert unknown.status == cl.NOT_RUN and "python bench/model_facts.py" in unknown.detail


def test_global_flags_work_after_the_command(env: Path) -> None:
    """--json / --quiet are accepted before or after the sub-command, with the same output;
    an option's value that looks like a flag stays that option's value."""
    write_run(env / "runs", "cs_trec", 1, {"test": {"map": 0.8, "mrr": 0.9}})
    runner = CliRunner()
    for before, after in (
        (["--json", "report", "runs"], ["report", "runs", "--json"]),
        (["--json", "report", "cin", "--table", "5"], ["report", "cin", "--table", "5", "--json"]),
        (["--json", "report", "paper", "cin", "-t", "5"], ["report", "cin", "--json", "-t", "5"]),
        (["--json", "eval", "no_such_run", "--split", "test"],
         ["eval", "no_such_run", "--split", "test", "--json"]),
        (["--json", "train", "no_such_recipe"], ["train", "no_such_recipe", "--json"]),
        (["--json", "-q", "datasets"], ["datasets", "-q", "--json"]),
    ):
        first, second = runner.invoke(app, before), runner.invoke(app, after)
        assert first.exit_code == second.exit_code, (after, second.output)
        assert json.loads(second.output) == json.loads(first.output), after
    assert "error" in json.loads(runner.invoke(app, ["eval", "x", "--json"]).output)
    # "--json" as the value of --dataset: filters on a dataset named so (none), no JSON
    result = runner.invoke(app, ["report", "runs", "--dataset", "--json", "--format", "md"])
    assert result.exit_code == 0 and result.output.startswith("| run |"), result.output


def test_reproduce_passes_the_runs_folder_explicitly(env: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--runs reaches training as an argument; the environment is left alone."""
    import pairrepro.train.runner as runner_module

    calls: list[dict] = []
    monkeypatch.setattr(runner_module, "train_recipe",
                        lambda *args, **kwargs: calls.append(kwargs) or [])
    add_recipe(env, "tc4", recipe_text([("clstm", 2, "four stacked TC-LSTMs")]))
    result = CliRunner().invoke(app, ["reproduce", "clstm", "--table", "2", "--runs", "elsewhere",
                                      "--seeds", "1, 3", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert os.environ["PAIRREPRO_RUNS"] == "runs"
    # one call per (recipe, seed): a failed seed does not stop the others; a first start,
    # not a resume (--resume refuses a seed without a run)
    assert [(c["runs_dir"], c["resume"]) for c in calls] == [(Path("elsewhere"), False)] * 2
    bad = CliRunner().invoke(app, ["reproduce", "clstm", "--seeds", "1,x"])
    assert bad.exit_code == 2 and "'x' is not a seed" in bad.output


def test_report_runs_points_at_the_demos_runs_folder(env: Path) -> None:
    """Issue 27: after the demo (runs in runs/demo/), ``report runs --dataset trecqa`` was an
    empty table without a word; it now names the folder and the option that lists them."""
    d = write_run(env / "runs" / "demo", "bm25_trecqa", 1, {"test": {"map": 0.683}})
    (d / "manifest.json").write_text(json.dumps({"dataset": "trecqa"}))
    result = CliRunner().invoke(app, ["report", "runs", "--dataset", "trecqa"])
    assert result.exit_code == 0, result.output
    assert "pairrepro report runs --runs runs/demo --dataset trecqa" in result.output
    listed = CliRunner().invoke(app, ["--json", "report", "runs", "--runs", "runs/demo"])
    assert [x["run"] for x in json.loads(listed.stdout)] == ["runs/demo/bm25_trecqa/seed-1"]
    # another dataset's runs are no reason to point there
    quiet = CliRunner().invoke(app, ["report", "runs", "--dataset", "snli"])
    assert "--runs" not in quiet.output
