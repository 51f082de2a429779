"""What a new user hit following the README word by word: one test per surprise (issue 17)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.errors import DataError

PROJECT = Path(__file__).resolve().parents[1]
README = (PROJECT / "README.md").read_text()
#: the README and every docs/ page, where a README section may have moved
DOCS = "\n".join(p.read_text() for p in [PROJECT / "README.md", *sorted(
    (PROJECT / "docs").rglob("*.md"))])
runner = CliRunner()


def tour() -> list[str]:
    """The commands of the README's "A quick tour" block, comments stripped."""
    block = README.split("## A quick tour", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines()
            if line.strip() and not line.startswith("#")]


def test_readme_says_how_pairrepro_gets_on_the_path() -> None:
    """After `make install` the first tour command gave `pairrepro: command not found`."""
    before_tour = README.split("## A quick tour", 1)[0]
    assert ". .venv/bin/activate" in before_tour
    assert tour()[0].startswith("pairrepro ")


def test_tour_fetches_and_prepares_before_use() -> None:
    """The tour preprocessed trecqa before fetching it and scored --variant raw unprepared."""
    fetched: set[str] = set()
    prepared: set[tuple[str, str]] = set()
    for command in tour():
        words = command.split()
        if words[:2] == ["pairrepro", "fetch"]:
            fetched.add(words[2])
        elif words[:2] == ["pairrepro", "preprocess"]:
            assert words[2] in fetched, f"{command!r} before `pairrepro fetch {words[2]}`"
            variant = words[words.index("--variant") + 1] if "--variant" in words else ""
            prepared.add((words[2], variant))
        elif words[:2] == ["pairrepro", "eval"] and "--variant" in words:
            variant = words[words.index("--variant") + 1]
            dataset = re.search(r"runs/\w+?_(\w+)", command)
            assert dataset and (dataset.group(1), variant) in prepared, command


def _help_texts() -> str:
    from pairrepro.cli import data_cmds, pipeline_cmds, report_cmds, train_cmds

    bash = [block.split("```", 1)[0] for block in DOCS.split("```bash")[1:]]
    texts = [*bash, data_cmds.FETCH_HELP, data_cmds.DATASETS_HELP]
    for module in (train_cmds, report_cmds, pipeline_cmds):
        texts += [fn.__doc__ or "" for fn in vars(module).values() if callable(fn)]
    return "\n".join(texts)


def test_examples_name_recipes_that_exist() -> None:
    """Help examples named recipes/csran_snli.toml and runs/cin_snli, which do not exist."""
    text = _help_texts()
    recipes = {p.stem for p in paths.recipes_dir().glob("*.toml")}
    named = set(re.findall(r"recipes/(\w+)\.toml", text))
    assert named and named <= recipes, named - recipes
    runs = set(re.findall(r"runs/(\w+)", text)) - {"demo"}  # the demo's own runs folder
    assert runs <= recipes, runs - recipes


def test_errors_print_once_under_torchrun(monkeypatch: pytest.MonkeyPatch,
                                          data_home: Path) -> None:
    """Four ranks gave four copies of the error: only rank 0 prints it; all exit alike."""
    monkeypatch.setenv("RANK", "1")
    other = runner.invoke(app, ["train", "recipes/no_such_recipe.toml"])
    monkeypatch.setenv("RANK", "0")
    first = runner.invoke(app, ["train", "recipes/no_such_recipe.toml"])
    assert other.exit_code == first.exit_code == 2
    assert other.output == "" and "no_such_recipe" in first.output


def test_missing_vectors_hint_is_a_set_flag(tmp_path: Path) -> None:
    """The hint said to download GloVe, in TOML syntax; the command line takes --set."""
    from pairrepro.data.embeddings import iter_glove_text

    with pytest.raises(DataError) as caught:
        next(iter_glove_text(tmp_path / "word2vec" / "yahoo.txt"))
    hint = caught.value.hint or ""
    assert "--set embeddings.source=glove-6b-50d --set embeddings.dim=50" in hint
    assert "pairrepro embeddings train" in hint


def _missing_steps(recipe: str) -> tuple[list[str], list[str], str]:
    """Train ``recipe``; its one "needs ..." error as (what is missing, the command for it)
    per numbered step, in order, and the hint (``--json``: unwrapped by the terminal)."""
    result = runner.invoke(app, ["--json", "train", recipe])
    assert result.exit_code == 3, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, no traceback
    error = json.loads(result.stdout)
    numbered = re.findall(r"^ +(\d+)\. (.*)\n +(.*)$", error["error"], re.MULTILINE)
    assert [int(n) for n, _, _ in numbered] == list(range(1, len(numbered) + 1))
    assert len(error["error"].splitlines()) == 1 + 2 * len(numbered), error["error"]
    return [m for _, m, _ in numbered], [c for _, _, c in numbered], error["hint"] or ""


def test_yahoo_path_names_every_missing_step_in_one_error(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Yahoo path gave one error at a time and ended with a wrong hint (download GloVe,
    in TOML syntax): one error lists every step, in order, and doing them word for word
    (DIR: where the licence-gated file is) makes the recipe run."""
    pytest.importorskip("gensim")
    from make_l4_sample import write_l4_sample

    monkeypatch.chdir(tmp_path)  # recipes read word2vec/... from the folder commands run in
    given = tmp_path / "webscope"
    given.mkdir()
    write_l4_sample(given / "manner.xml", 300, seed=0)
    recipe = str(paths.recipes_dir() / "mv_lstm_tensor.toml")
    missing, steps, hint = _missing_steps(recipe)
    assert "licence-gated" in missing[0] and "not prepared" in missing[1]
    assert "trained on yahoo/mvlstm" in missing[2]
    assert steps == ["pairrepro fetch yahoo --from DIR",
                     "pairrepro preprocess yahoo --variant mvlstm",
                     "pairrepro embeddings train --dataset yahoo --variant mvlstm --dim 50"]
    assert "--set embeddings.source=glove-6b-50d" in hint and "step 3" in hint
    assert "embeddings.dim" not in hint  # the recipe's vectors are 50-d already
    assert " = " not in hint  # a flag for the command line, not TOML
    for number, command in enumerate(steps):
        words = command.replace("DIR", str(given)).split()[1:]
        if words[:2] == ["embeddings", "train"]:
            words += ["--epochs", "1"]  # the command as printed, one pass for speed
        done = runner.invoke(app, words)
        assert done.exit_code == 0, done.output
        if number < len(steps) - 1:  # the error shrinks to the steps still to do
            assert _missing_steps(recipe)[1] == steps[number + 1:]
    # nothing is missing now, and the model gets the trained vector of every word (training
    # it is test_train's business, and minutes on a busy 2-core machine)
    from pairrepro.config import load_recipe
    from pairrepro.data.prepared import load_prepared
    from pairrepro.train.setup import build_recipe_model, check_prerequisites

    resolved = load_recipe(recipe)
    check_prerequisites(resolved)
    _, info = build_recipe_model(resolved, load_prepared("yahoo", "mvlstm"), 2, seed=1)
    assert info["embedding_oov"] == 0


def test_yahoo_glove_recipe_names_every_missing_step(data_home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A C-LSTM Yahoo recipe: the data's steps, then downloading its GloVe file; the hint
    gives the packaged vectors as flags, with the dim they need."""
    monkeypatch.chdir(tmp_path)
    _, steps, hint = _missing_steps(str(paths.recipes_dir() / "tc_lstm_yahoo.toml"))
    assert steps[:2] == ["pairrepro fetch yahoo --from DIR",
                         "pairrepro preprocess yahoo --variant clstm"]
    assert steps[2].startswith("download glove.6B.100d.txt (from https://nlp.stanford.edu/")
    assert steps[2].endswith(" to glove/glove.6B.100d.txt") and len(steps) == 3
    assert hint.endswith("--set embeddings.source=glove-6b-50d --set embeddings.dim=50")


def test_twitter_url_fetch_names_the_variant_it_can_prepare(
        data_home: Path, shared_datasets: Path) -> None:
    """`make data-twitter_url` said "complete", then preprocess missed the raw train file."""
    result = runner.invoke(app, ["fetch", "twitter_url", "--mirror", str(shared_datasets)])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "complete" not in flat
    assert "pairrepro preprocess twitter_url --variant tokenised" in flat


def test_pytest_says_why_tests_were_skipped(tmp_path: Path) -> None:
    """`make test` away from ../shared skipped tests without a word."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PAIRREPRO_MIRROR")}
    env["PAIRREPRO_SHARED"] = str(tmp_path / "nowhere")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_hub.py::test_fetch_from_names_the_source_once"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert "1 skipped" in done.stdout, done.stdout
    assert "1 test(s) skipped" in done.stdout and "PAIRREPRO_MIRROR" in done.stdout
    assert "\n1 skipped: 1 needs ../shared\n" in done.stdout  # the one line of reasons


def test_make_help_lists_the_paper_tables_and_the_demo_report() -> None:
    done = subprocess.run(["make", "-s", "help"], cwd=PROJECT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "csran-table6" in done.stdout and "cin-table2" in done.stdout
    demo_line = next(line for line in done.stdout.splitlines() if line.startswith("demo"))
    assert "report" in demo_line


def test_demo_runs_the_report_it_promises(data_home: Path) -> None:
    """The synthetic demo (offline) ends with its report step: the accuracy table."""
    result = runner.invoke(app, ["demo", "--data", "synthetic", "--epochs", "1",
                                 "--max-train-pairs", "300"])
    assert result.exit_code == 0, result.output
    assert "5/5" in result.output and "majority class" in result.output


@pytest.mark.slow
def test_demo_on_trecqa_renders_csran_table_6(data_home: Path, shared_datasets: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With TrecQA reachable (the mirror) the demo trains BM25 and MV-LSTM and renders Table
    6 with the user's rows; BM25 needs no training, so its test MAP is the published run's
    figure for this code (README: 0.683)."""
    monkeypatch.setenv("PAIRREPRO_MIRROR", str(shared_datasets))
    result = runner.invoke(app, ["demo", "--epochs", "1", "--max-train-pairs", "100"])
    assert result.exit_code == 0, result.output
    assert "Table 6" in result.output and "5/5" in result.output
    bm25 = json.loads((data_home.parent / "runs" / "demo" / "bm25_trecqa" / "seed-1"
                       / "result.json").read_text())
    assert round(bm25["metrics"]["test"]["map"], 3) == 0.683


def test_one_licence_for_the_synthetic_data() -> None:
    """CC0 in the CLI and MIT in the README: MIT (the project's), stated in the manifest."""
    manifest = tomllib.loads((PROJECT / "data_manifests" / "synthetic.toml").read_text())
    assert manifest["licence"].startswith("MIT ")
    row = next(line for line in DOCS.splitlines() if line.startswith("| `synthetic`"))
    assert "| MIT |" in row


def test_pyproject_licence_is_current(monkeypatch: pytest.MonkeyPatch) -> None:
    """setuptools deprecated the `license = { text = ... }` table: installing printed it."""
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(PROJECT)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), "pyproject.toml")
    messages = [str(w.message) for w in caught if "licen" in str(w.message).lower()]
    assert messages == []
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert all((PROJECT / f).is_file() for f in project["license-files"])


def test_editable_install_is_a_plain_path_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, defect 12: `make install` printed a BuildBackendWarning about the editable
    install and a folder with the package's name. setuptools warns when it falls back to an
    import-hook finder; with the checkout named as the package root it writes a .pth file."""
    from setuptools.command.editable_wheel import _StaticPth, editable_wheel
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(PROJECT)
    dist = Distribution()
    apply_configuration(dist, "pyproject.toml")
    command = editable_wheel(dist)
    command.ensure_finalized()
    # private, but the one place that says which strategy `pip install -e .` gets
    strategy = command._select_strategy("pairrepro", "py3-none-any", str(PROJECT / "build"))
    assert isinstance(strategy, _StaticPth), type(strategy).__name__


def test_trecqa_demo_table_has_the_projects_reference_rows(
        data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: the demo's Table 6 printed "CSRAN | 0.854 | not run" while ``report csran
    --table 6`` showed the committed reference run (results/csran_trecqa): the README promises
    "published rows, this project's rows, yours". Fetching, preprocessing, training and
    scoring are stubbed: only what the demo renders is under test."""
    import pairrepro.data.fetch
    import pairrepro.data.preprocess
    import pairrepro.train.provenance
    import pairrepro.train.runner

    monkeypatch.setattr(pairrepro.train.provenance, "evaluate_run", lambda *a, **k: {"map": 0.5})
    monkeypatch.setattr(pairrepro.data.fetch, "fetch_dataset", lambda *a, **k: None)
    monkeypatch.setattr(pairrepro.data.preprocess, "prepare_dataset", lambda *a, **k: None)
    monkeypatch.setattr(pairrepro.train.runner, "train_recipe", lambda recipe, *a, **k: [
        {"recipe": Path(recipe).stem, "metrics": {s: {"map": 0.5} for s in ("dev", "test")}}])
    demo = runner.invoke(app, ["--json", "demo", "--data", "trecqa"])
    report = runner.invoke(app, ["--json", "report", "csran", "--table", "6", "--runs",
                                 str(data_home.parent / "runs" / "demo")])
    assert demo.exit_code == 0 and report.exit_code == 0, demo.output + report.output
    (shown,), (reported,) = json.loads(demo.stdout), json.loads(report.stdout)
    csran = next(row for row in shown["rows"] if row["label"] == "CSRAN")
    assert "results/csran_trecqa" in json.dumps(csran)  # the reference run is the number
    assert shown == reported


def _readme_demo_steps() -> list[str]:
    """The steps README's `make demo` line names: "fetch -> preprocess -> ... -> report"."""
    line = next(line for line in README.splitlines() if line.startswith("make demo"))
    return line.split("then ", 1)[1].split(" -> ")


def _demo_steps(output: str) -> list[str]:
    """The demo's numbered steps ("3/5 pairrepro train ...", "5/5 report: ..."), in order,
    each named once."""
    found = re.findall(r"^\d/5 (?:pairrepro )?(\w+)", output, re.M)
    return list(dict.fromkeys(found))


def test_trecqa_demo_has_every_step_the_readme_names(data_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: the README's `make demo` line promises fetch -> preprocess -> train -> eval ->
    report; the TrecQA demo had no eval step. The step re-scores the trained MV-LSTM's best
    checkpoint on test. Fetching, preprocessing, training and scoring are stubbed."""
    import pairrepro.data.fetch
    import pairrepro.data.preprocess
    import pairrepro.train.provenance
    import pairrepro.train.runner

    monkeypatch.setattr(pairrepro.data.fetch, "fetch_dataset", lambda *a, **k: None)
    monkeypatch.setattr(pairrepro.data.preprocess, "prepare_dataset", lambda *a, **k: None)
    monkeypatch.setattr(pairrepro.train.runner, "train_recipe", lambda recipe, *a, **k: [
        {"recipe": Path(recipe).stem, "metrics": {s: {"map": 0.5} for s in ("dev", "test")}}])
    scored = []
    monkeypatch.setattr(pairrepro.train.provenance, "evaluate_run",
                        lambda run, split, checkpoint: scored.append((Path(run), split))
                        or {"map": 0.5, "mrr": 0.6, "p_at_1": 0.4, "num_queries": 68})
    result = runner.invoke(app, ["demo", "--data", "trecqa"])
    assert result.exit_code == 0, result.output
    assert _demo_steps(result.output) == _readme_demo_steps() == [
        "fetch", "preprocess", "train", "eval", "report"]
    runs = data_home.parent / "runs" / "demo"
    assert scored == [(runs / "mv_lstm_tensor_trecqa" / "seed-1", "test")]


def test_synthetic_demo_has_every_step_the_readme_names(data_home: Path) -> None:
    """Offline the demo "runs the same steps" (README) on the synthetic data."""
    result = runner.invoke(app, ["demo", "--data", "synthetic", "--epochs", "1",
                                 "--max-train-pairs", "300"])
    assert result.exit_code == 0, result.output
    assert _demo_steps(result.output) == _readme_demo_steps()


def test_verify_without_arguments_checks_the_demos_runs(data_home: Path) -> None:
    """Issue 27: after the demo `make verify` said "no run folders in " (no folder named)
    and exit 7: the demo's runs sit one level down, in runs/demo/. Every run under the runs
    folder is checked; a runs folder without runs, or none yet, is named (exit 7)."""
    runs = data_home.parent / "runs"
    for _ in range(2):  # no runs folder yet, then an empty one
        empty = runner.invoke(app, ["verify"])
        assert empty.exit_code == 7, empty.output
        assert f"no run folders in {runs}" in " ".join(empty.output.split()), empty.output
        runs.mkdir(exist_ok=True)
    demo_run = runs / "demo" / "bm25_trecqa" / "seed-1"
    shutil.copytree(PROJECT / "results" / "bm25_trecqa" / "seed-1", demo_run)
    result = runner.invoke(app, ["verify"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"same: {demo_run} vs "), result.output


def test_verify_on_another_cpu_with_the_references_settings_is_consistent(
        tmp_path: Path) -> None:
    """Issue 27, defect 2, on an AVX512 EPYC: `train mv_lstm_tensor_trecqa_short --threads 1`
    then `verify` said "different" (exit 9): the reference's test tie share is 0 in every
    resample, so its interval is [0, 0] with no Monte-Carlo error, and a run's 0 "at the
    edge" was taken as undecidable. The reference itself, as if made on another CPU, is
    consistent."""
    from pairrepro.report.publishing.verify import CONSISTENT, verify_run

    run = tmp_path / "runs" / "mv_lstm_tensor_trecqa_short" / "seed-1"
    shutil.copytree(PROJECT / "results" / "mv_lstm_tensor_trecqa_short" / "seed-1", run)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["cpu"]["capability"] != "AVX9"
    manifest["cpu"] = {**manifest["cpu"], "capability": "AVX9"}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    found = verify_run(run)
    assert found.verdict == CONSISTENT, found.line()
    assert "test.tie_share 0.0000 in [0.0000, 0.0000]" in found.checks["metrics"]


def test_an_interval_without_monte_carlo_error_straddles_nothing() -> None:
    """An endpoint with no Monte-Carlo error is exact: a value on it is inside whatever the
    resampling seed, and only a value within MC error of an uncertain endpoint straddles."""
    from pairrepro.stats import MC_Z, Interval

    exact = Interval(value=0.0, low=0.0, high=0.0, confidence=0.95, resamples=2000, seeds=1,
                     units=68)
    assert exact.contains(0.0) and not exact.straddles(0.0)
    loose = Interval(value=0.2, low=0.1, high=0.3, confidence=0.95, resamples=2000, seeds=1,
                     units=68, low_se=0.001)
    assert loose.straddles(0.1 + MC_Z * 0.001 / 2) and not loose.straddles(0.3)
