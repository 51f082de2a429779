"""Hostile and non-interactive use (issue 27): piped output, bad seeds, odd bytes, stale
locks, records and tables that lie. Each test failed before its fix."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from synth_prepared import write_synthetic
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.train.runner import train_recipe

runner = CliRunner()


@pytest.mark.parametrize("env", [{"COLUMNS": "80"}, {"COLUMNS": "60", "FORCE_COLOR": "1"}])
def test_piped_output_never_cuts_a_cell(env: dict[str, str]) -> None:
    """Off a terminal rich assumed 80 columns and cut cells to "0.…"."""
    result = runner.invoke(app, ["datasets"], env=env)
    assert result.exit_code == 0, result.output
    plain = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    assert "dev_mismatched 9,832" in plain
    assert max(len(line) for line in plain.splitlines()) > 80


NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
SMALL = ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8",
         "data.max_train_pairs=64", "train.batch_size=16", "train.epochs=1"]


def test_missing_prerequisites_leave_no_trace_in_runs(data_home: Path) -> None:
    """Exit 3 for missing data left runs/<recipe>/.seed-1.lock behind: everything is
    checked before the run folder is touched."""
    result = runner.invoke(app, ["train", str(NLI), "--seeds", "1,2"])
    assert result.exit_code == 3, result.output
    assert not paths.runs_dir().exists() or not any(paths.runs_dir().rglob("*"))


def test_a_finished_run_leaves_no_lock_file(data_home: Path) -> None:
    """The lock file goes with its holder: a run folder never shows a stale lock."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    train_recipe(NLI, SMALL, quiet=True)
    recipe_dir = paths.runs_dir() / "bilstm_max_synthetic"
    assert (recipe_dir / "seed-1" / "result.json").is_file()
    assert not list(recipe_dir.glob(".*.lock"))


REFERENCE = paths.PROJECT_DIR / "results" / "csran_trecqa" / "seed-1"


@pytest.fixture
def reference_run(tmp_path: Path) -> Path:
    """A copy of a committed reference run: predictions, no checkpoints."""
    run = tmp_path / "results" / "csran_trecqa" / "seed-1"
    shutil.copytree(REFERENCE, run)
    return run


def test_eval_of_a_reference_run_scores_its_saved_predictions(reference_run: Path) -> None:
    """`eval results/csran_trecqa/seed-1` exited 6 ("best.pt not found"); piped, every
    metric column of the table is printed whole."""
    recorded = json.loads((reference_run / "result.json").read_text())["metrics"]
    out = runner.invoke(app, ["--json", "eval", str(reference_run)])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.output)
    assert row["source"] == "predictions"
    assert row["metrics"]["map"] == pytest.approx(recorded["test"]["map"], abs=1e-9)
    out = runner.invoke(app, ["eval", str(reference_run), "--split", "dev"],
                        env={"COLUMNS": "40"})
    assert out.exit_code == 0, out.output
    assert f"{recorded['dev']['map']:.4f}" in out.output
    assert "saved predictions" in out.output and "…" not in out.output


@pytest.mark.parametrize(("flags", "code", "words"), [
    (["--split", "train"], 3, "no saved predictions of split 'train'"),
    (["--checkpoint", "last"], 2, "--checkpoint last"),
    (["--save"], 2, "--save"),
    (["--variant", "raw"], 2, "--variant"),
    (["--ensemble"], 2, "--ensemble"),
])
def test_eval_of_a_reference_run_says_what_it_cannot_do(
        reference_run: Path, flags: list[str], code: int, words: str) -> None:
    target = reference_run.parent if "--ensemble" in flags else reference_run
    out = runner.invoke(app, ["--json", "eval", str(target), *flags])
    assert out.exit_code == code, out.output
    error = json.loads(out.output)
    assert words in error["error"] and error["hint"], error


PREFLIGHT = paths.PROJECT_DIR / "bench" / "preflight"


def _preflight_record(folder: Path, recipe: str, text: str | None = None, **changes: object
                      ) -> Path:
    """A copy of the committed preflight record of ``recipe`` in ``folder``, changed."""
    record = json.loads((PREFLIGHT / f"{recipe}.json").read_text())
    path = folder / f"{recipe}.json"
    body = json.dumps({**record, **changes})
    path.write_text(body if text is None else text, encoding="utf-8")
    return path


def test_committed_preflight_records_are_valid() -> None:
    from pairrepro.planning.preflight_record import load_preflight

    assert len(load_preflight()) == len(list(PREFLIGHT.glob("*.json")))


@pytest.mark.parametrize(("changes", "key"), [
    ({"pairs_per_s": -37.8}, "pairs_per_s"),
    ({"pairs_per_s": float("nan")}, "pairs_per_s"),
    ({"flops_per_pair": 0}, "flops_per_pair"),
    ({"hardware": "tpu"}, "hardware"),
    ({"pairs_per_s": "fast"}, "pairs_per_s"),
])
def test_a_false_preflight_figure_is_an_error_naming_file_and_key(
        tmp_path: Path, changes: dict[str, object], key: str) -> None:
    """pairs_per_s = -37.8 gave "-1.29" hours with exit 0."""
    from pairrepro.errors import ConfigError
    from pairrepro.planning.preflight_record import load_preflight

    _preflight_record(tmp_path, "arc_ii")
    path = _preflight_record(tmp_path, "arc_i", **changes)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {key}")) as info:
        load_preflight(tmp_path)
    assert "pairrepro preflight arc_i" in (info.value.hint or "")


def test_a_truncated_preflight_record_is_an_error_not_another_figure(tmp_path: Path) -> None:
    """A truncated record was skipped, and the plan took another recipe's figure."""
    from pairrepro.errors import ConfigError
    from pairrepro.planning.preflight_record import load_preflight

    _preflight_record(tmp_path, "arc_ii")
    whole = (PREFLIGHT / "arc_i.json").read_text()
    path = _preflight_record(tmp_path, "arc_i", text=whole[: len(whole) // 2])
    with pytest.raises(ConfigError, match=re.escape(f"{path}: not valid JSON")):
        load_preflight(tmp_path)


CSRAN_TABLES = paths.PROJECT_DIR / "pairrepro" / "planning" / "papers" / "csran.toml"


@pytest.mark.parametrize(("old", "new", "words"), [
    ('values = { map = "0.854", mrr = "0.935" }', 'values = { map = "85.4", mrr = "0.935" }',
     "'CSRAN': map: '85.4' is not a fraction"),
    ('metric = "test.map", unit = "fraction"', 'metric = "test.mapx", unit = "fraction"',
     "metric: unknown metric 'mapx' in 'test.mapx'"),
])
def test_a_paper_table_value_or_metric_that_cannot_be_right_is_a_schema_error(
        tmp_path: Path, old: str, new: str, words: str) -> None:
    """"85.4" in a fraction column rendered "(−84.647) ↓"; `test.mapx` turned existing runs
    into "not run"."""
    from pairrepro.errors import ConfigError
    from pairrepro.planning.paper_tables import load_paper_file

    text = CSRAN_TABLES.read_text(encoding="utf-8")
    assert old in text
    bad = tmp_path / "csran.toml"
    bad.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(words)) as info:
        load_paper_file(bad)
    assert str(bad) in info.value.message and "(Table 6)" in info.value.message


CONTROL = "".join(map(chr, [*range(0x20), 0x7F]))


def test_every_control_character_round_trips_through_config_toml() -> None:
    """A `--set recipe.description="a\\x01b"` run wrote a config.toml that eval and
    --resume could not read."""
    import tomllib

    from pairrepro.fileio import dumps_toml

    text = f'a{CONTROL}b "quoted" \\ back\\slash ünï €'
    data = {"recipe": {"description": text, "tags": [text], "table": {"k": text}},
            "model": {"weird key": text}}
    assert tomllib.loads(dumps_toml(data)) == data


def test_a_control_character_override_trains_into_a_readable_config() -> None:
    from pairrepro.config import load_recipe, recipe_from_dict

    recipe = load_recipe(NLI, ['recipe.description="a\\u0001b\\u007f"'])
    assert recipe.recipe.description == "a\x01b\x7f"
    import tomllib

    again = recipe_from_dict(tomllib.loads(recipe.to_toml()), recipe.name, recipe.source)
    assert again.recipe.description == recipe.recipe.description


def test_an_override_that_is_not_utf8_is_a_config_error() -> None:
    from pairrepro.config import load_recipe
    from pairrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_recipe(NLI, ["recipe.description=a\udcffb"])


@pytest.mark.parametrize(("seeds", "words"), [
    ("-1", "'-1' is not a seed"),
    ("99999999999999999999", "larger than 4294967295"),
    ("1,1", "seed 1 is given twice"),
    ("1,x", "'x' is not a seed"),
    (",", "no seed given"),
])
def test_bad_seeds_are_refused_before_anything_is_touched(
        data_home: Path, seeds: str, words: str) -> None:
    """--seeds -1 left seed--1/ marked failed; a huge seed overflowed; 1,1 trained then
    exited 2."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    out = runner.invoke(app, ["--json", "train", str(NLI), "--seeds", seeds])
    assert out.exit_code == 2, out.output
    assert words in json.loads(out.output)["error"]
    assert not paths.runs_dir().exists()


@pytest.mark.parametrize("command", [["preflight", "bm25_trecqa"], ["demo"],
                                     ["embeddings", "train", "--dataset", "trecqa"]],
                         ids=["preflight", "demo", "embeddings"])
@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999"])
def test_a_single_seed_out_of_range_is_refused_before_anything_runs(
        data_home: Path, command: list[str], seed: str) -> None:
    """`preflight bm25_trecqa --seed -1` gave "ValueError: expected non-negative integer"
    (a traceback, exit 1); --seed of demo and embeddings train took any integer as well."""
    out = runner.invoke(app, [*command, "--seed", seed])
    assert out.exit_code == 2, out.output
    assert "Invalid value for '--seed'" in out.output, out.output
    assert not paths.runs_dir().exists()


@pytest.mark.parametrize(("seeds", "words"), [
    ("[99999999999999999999]", "less than or equal to 4294967295"),
    ("[1, 2, 1]", "seed 1 is given twice"),
])
def test_recipe_seeds_are_checked_as_the_seeds_flag_is(data_home: Path, seeds: str,
                                                       words: str) -> None:
    """`recipe.seeds = [99999999999999999999]` gave "Overflow when unpacking long long" (a
    traceback, exit 1); `[1, 1]` trained seed 1, then exited 2 ("already holds a finished
    run"). The recipe's list is refused as --seeds is, before anything is touched."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    for flags in (["--print-config"], []):
        out = runner.invoke(app, ["--json", "train", str(NLI), "--set",
                                  f"recipe.seeds={seeds}", *flags])
        assert out.exit_code == 2, out.output
        error = json.loads(out.output)["error"]
        assert error.startswith(f"--set recipe.seeds={seeds}: [recipe] seeds"), error
        assert words in error, error
    assert not paths.runs_dir().exists()


def test_parse_seeds_keeps_good_seeds_in_order() -> None:
    from pairrepro.cli.common import parse_seeds

    assert parse_seeds(" 3, 1,0 ,4294967295") == [3, 1, 0, 4294967295]
    assert parse_seeds("") is None


def _extending(tmp_path: Path, body: str) -> Path:
    """A recipe that extends the synthetic NLI recipe (copied beside it) with ``body``."""
    shutil.copy(NLI, tmp_path / NLI.name)
    path = tmp_path / "child.toml"
    path.write_text(f'extends = "{NLI.name}"\n{body}', encoding="utf-8")
    return path


def test_a_table_over_a_value_in_extends_names_file_and_key(tmp_path: Path) -> None:
    """[model.hidden] over the base's hidden = 50 gave "'<' not supported between
    instances of 'dict' and 'int'"."""
    child = _extending(tmp_path, "[model.hidden]\nsize = 8\n")
    out = runner.invoke(app, ["--json", "train", str(child), "--print-config"])
    assert out.exit_code == 2, out.output
    error = json.loads(out.output)
    assert error["error"].startswith(f"{child}: model.hidden: a table here, but the value")


@pytest.mark.parametrize(("old", "new"), [
    ("hidden = 48\n", "hidden = 48\nhiden = 8\n"),
    ("hidden = 48\n", "[model.hidden]\nsize = 8\n"),
])
def test_print_config_rejects_what_train_rejects(tmp_path: Path, data_home: Path, old: str,
                                                 new: str) -> None:
    """--print-config printed an unknown [model] key with exit 0 while train refused it."""
    text = NLI.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "own.toml"
    # a [model.hidden] table goes last: the lines after a table header belong to it
    moved = text.replace(old, "", 1) + new if new.startswith("[") else text.replace(old, new)
    path.write_text(moved, encoding="utf-8")
    for flags in (["--print-config"], ["--seeds", "1"]):
        out = runner.invoke(app, ["--json", "train", str(path), *flags])
        assert out.exit_code == 2, out.output
        error = json.loads(out.output)["error"]
        assert error.startswith(f"{path}: [model] hid"), error


def _fetch_local_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     card: bytes) -> tuple[Path, dict[str, str]]:
    """``fetch snli --source hub --from`` a local copy with one test parquet and ``card`` as
    its README.md; checks exit 3 and returns the folder and the JSON error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    repo = tmp_path / "snli-hub"
    (repo / "plain_text").mkdir(parents=True)
    table = pa.table({"premise": ["a"], "hypothesis": ["b"], "label": [0]})
    pq.write_table(table, repo / "plain_text" / "test-00000-of-00001.parquet")
    (repo / "README.md").write_bytes(card)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out = runner.invoke(app, ["--json", "fetch", "snli", "--source", "hub", "--from",
                              str(repo)])
    assert out.exit_code == 3, out.output
    return repo, json.loads(out.output[out.output.index("{"):])


BAD_CARD = """---
configs:
- config_name: plain_text
  data_files: [unclosed
---
# a dataset card whose YAML header is broken
"""


def test_a_hub_folder_with_a_broken_card_is_a_data_error(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed README front matter gave a yaml ParserError traceback."""
    repo, error = _fetch_local_hub(tmp_path, monkeypatch, BAD_CARD.encode("utf-8"))
    assert "README.md" in error["error"] and str(repo) in error["error"]


@pytest.mark.parametrize("card", [
    "---\nconfigs: 5\n---\n",  # YAML, but not the shape a card has
    "---\n- a\n- b\n---\n",  # a list, not a mapping
    "---\nconfigs:\n- data_files: plain_text/*.parquet\n---\n",  # a config without name
    "---\nconfigs: \udcff\n---\n",  # not UTF-8 (written with surrogateescape)
], ids=["not-a-card", "a-list", "config-without-name", "not-utf8"])
def test_a_local_hub_folder_that_cannot_be_read_is_a_data_error(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, card: str) -> None:
    """A local copy (--from DIR) whose card has the wrong shape was exit 4, "cannot load ...
    from the Hugging Face hub", with the hint to unset HF_DATASETS_OFFLINE and get internet:
    nothing was downloaded, the folder's files are at fault (exit 3, the folder named)."""
    repo, error = _fetch_local_hub(tmp_path, monkeypatch,
                                   card.encode("utf-8", "surrogateescape"))
    assert error["error"].startswith(f"{repo}: ") and "README.md" in error["hint"], error
    assert "HF_DATASETS_OFFLINE" not in str(error) and "internet" not in str(error), error


def test_an_unwritable_default_data_home_is_exit_8_with_a_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A HOME that cannot be written gave an OSError traceback (exit 1)."""
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("a file where HOME should be a folder")
    monkeypatch.delenv("PAIRREPRO_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(not_a_folder))
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs"))
    out = runner.invoke(app, ["--json", "fetch", "synthetic"])
    assert out.exit_code == 8, out.output
    error = json.loads(out.output[out.output.index("{"):])
    assert str(not_a_folder) in error["error"] and "PAIRREPRO_HOME" in error["hint"]


@pytest.mark.parametrize("body", ['[recipe]\ndescription = "caf\xe9"\n'.encode("latin-1"),
                                  bytes(range(256))])
def test_a_recipe_that_is_not_utf8_is_a_config_error(tmp_path: Path, body: bytes) -> None:
    """A Latin-1 or binary recipe gave a UnicodeDecodeError traceback."""
    path = tmp_path / "latin.toml"
    path.write_bytes(body)
    out = runner.invoke(app, ["--json", "train", str(path), "--print-config"])
    assert out.exit_code == 2, out.output
    error = json.loads(out.output)
    assert error["error"].startswith(f"{path}: not UTF-8 text: byte 0x") and error["hint"]


def test_resume_with_fewer_epochs_says_nothing_was_trained(data_home: Path) -> None:
    """--resume --set train.epochs=1 on a finished 2-epoch run printed the old result
    without a word."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    two = [*SMALL, "train.epochs=2"]
    (first,) = train_recipe(NLI, two, quiet=True)
    sets = [x for o in [*SMALL, "train.epochs=1"] for x in ("--set", o)]
    out = runner.invoke(app, ["--json", "train", str(NLI), *sets, "--resume"])
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.output)
    assert result["chosen_epoch"] == first["chosen_epoch"]
    assert "nothing was trained" in result["warnings"][0]
    out = runner.invoke(app, ["train", str(NLI), *sets, "--resume"])
    assert out.exit_code == 0 and "warning: --resume:" in out.output, out.output
    stored = json.loads((paths.runs_dir() / "bilstm_max_synthetic" / "seed-1" /
                         "result.json").read_text())
    assert "warnings" not in stored


def test_preflight_help_takes_its_exit_codes_from_the_errors() -> None:
    """`preflight --help` said exit 9; errors.py says 10."""
    from pairrepro.errors import DataError, PreflightError

    out = runner.invoke(app, ["preflight", "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    assert (f"Exit code 0: every check passed; {PreflightError.exit_code}: a check failed"
            in out.output), out.output
    assert f"{DataError.exit_code}: no data" in out.output


def test_preflight_writes_its_record_under_runs_by_default(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --out-dir, preflight wrote preflight.json into the current folder (the
    repository root)."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, ["preflight", str(NLI), "--steps", "2",
                              *[x for o in SMALL for x in ("--set", o)]])
    assert out.exit_code in (0, 10), out.output
    # off a terminal, the progress is a plain line on stderr
    assert "preflight bilstm_max_synthetic: 2/2 steps (100%)" in out.stderr, out.stderr
    assert (paths.runs_dir() / "preflight" / "bilstm_max_synthetic.json").is_file()
    assert not (tmp_path / "preflight.json").exists()


def test_curves_of_a_reference_run_are_drawn_outside_results(
        reference_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`report curves results/...` wrote PNG and SVG into the tracked results/ folder."""
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs"))
    before = sorted(p.name for p in reference_run.rglob("*"))
    out = runner.invoke(app, ["--json", "report", "curves", str(reference_run)])
    assert out.exit_code == 0, out.output
    written = [Path(p) for p in json.loads(out.output)["written"]]
    assert written and all(p.parent == tmp_path / "runs" / "figures" for p in written)
    assert sorted(p.name for p in reference_run.rglob("*")) == before


def test_training_off_a_terminal_prints_plain_progress_lines(data_home: Path) -> None:
    """Training printed nothing while stderr was not a terminal; --quiet and --json stay
    silent."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    sets = [x for o in [*SMALL, "train.epochs=2"] for x in ("--set", o)]
    out = runner.invoke(app, ["train", str(NLI), *sets])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.stderr.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == ["epoch 1/2", "epoch 2/2"], out.stderr
    assert all("pairs/s" in line and line.endswith("done") for line in lines)
    assert "\x1b" not in out.stderr
    for flag in ("--quiet", "--json"):
        again = runner.invoke(app, [flag, "train", str(NLI), *sets, "--force"])
        assert again.exit_code == 0, again.output
        assert "pairs/s" not in again.stderr
        if flag == "--json":
            assert json.loads(again.stdout)[0]["status"] == "finished"


def test_plain_progress_prints_tenths_of_a_long_epoch_with_an_eta() -> None:
    import io

    from rich.console import Console

    from pairrepro.console import PlainProgress

    buffer = io.StringIO()
    progress = PlainProgress(Console(file=buffer), min_interval_s=0.0)
    task = progress.add_task("epoch 1/3", total=100, loss="-", speed="-")
    for step in range(1, 101):
        progress.update(task, completed=step, loss="0.5000", speed="1234")
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 10 and lines[0].startswith("epoch 1/3: 10/100 batches (10%)")
    assert "ETA 0:00:00" in lines[0] and lines[-1].endswith("1234 pairs/s, done")


# --------------------------------------------------------------------------- issue 27, last items


def test_a_split_with_no_file_is_named_once_among_the_missing(shared_datasets: Path,
                                                               data_home: Path) -> None:
    """`fetch snli --mirror` said "missing train, train (no variant can read it)": the mirror
    has no train file, so no variant can read train either; the split is named once."""
    result = runner.invoke(app, ["fetch", "snli", "--mirror", str(shared_datasets)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    missing = text[text.index("; missing ") + len("; missing "):text.index(" (later steps")]
    assert missing == "train"


def test_hub_without_network_fails_at_once_and_names_no_unset_variable(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--source hub` with no network retried five times (26 s) before failing. The hub's
    host name not resolving is the answer at once; HF_DATASETS_OFFLINE, not set, is only
    named as the switch for a cached copy, never as something to unset."""
    import socket

    import datasets

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    tried: list[str] = []

    def no_dns(host: str, *args: object, **kwargs: object) -> list[object]:
        tried.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    def hub_client(*args: object, **kwargs: object) -> None:  # what used to retry
        raise AssertionError("the hub client was called without a network")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(datasets, "load_dataset_builder", hub_client)
    result = runner.invoke(app, ["fetch", "snli", "--source", "hub"])
    assert result.exit_code == 4, result.output
    text = " ".join(result.output.split())
    assert tried == ["huggingface.co"] and "huggingface.co cannot be resolved" in text
    assert "unset HF_DATASETS_OFFLINE" not in text and "HF_DATASETS_OFFLINE=1" in text


def test_the_slurm_skip_reason_points_only_to_what_exists() -> None:
    """The skipped Slurm case said "see the README" for set-up steps the README does not
    have: its reason either says what is needed itself or points to text that is there."""
    import ast

    tree = ast.parse((Path(__file__).parent / "test_launch.py").read_text(encoding="utf-8"))
    (reason,) = [ast.literal_eval(k.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Call) for k in node.keywords
                 if k.arg == "reason" and "Slurm" in ast.literal_eval(k.value)]
    readme = (paths.PROJECT_DIR / "README.md").read_text(encoding="utf-8")
    assert "sinfo" in reason
    if "README" in reason:  # the steps it points to are there
        assert "slurmctld" in readme and "slurmd" in readme, reason


def test_markdown_reports_link_runs_without_this_machines_paths(tmp_path: Path,
                                                                data_home: Path) -> None:
    """`report --format md --out` linked results/ rows as /abs/path/of/the/renderer/results/…;
    links are relative (to the file's folder, or to the checkout for its own results/), and
    each one leads to the run folder."""
    inside = paths.PROJECT_DIR / f".report-links-{tmp_path.name}"  # removed below
    for out in (tmp_path / "out" / "t6.md", inside / "t6.md"):
        try:
            result = runner.invoke(app, ["report", "csran", "--table", "6", "--format", "md",
                                         "--out", str(out), "--runs", str(tmp_path / "runs")])
            assert result.exit_code == 0, result.output
            links = re.findall(r"\]\(([^)\s]+)\)", out.read_text(encoding="utf-8"))
        finally:
            out.unlink(missing_ok=True)
            if out.parent == inside and inside.is_dir():
                inside.rmdir()
        assert "results/csran_trecqa" in " ".join(links)
        for link in links:
            assert not link.startswith("/") and str(paths.PROJECT_DIR) not in link, link
            # lexically (normpath): the folder of the file inside the checkout is gone by now
            from_file = Path(os.path.normpath(out.parent / link))
            assert from_file.is_dir() or (paths.PROJECT_DIR / link).is_dir(), link
            if out.is_relative_to(paths.PROJECT_DIR):  # inside the checkout: from the file
                assert from_file.is_dir(), link


def test_a_second_signal_during_the_checkpoint_write_waits_for_it(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C twice, the second while last.pt is written: the second raised
    KeyboardInterrupt inside the write, so the checkpoint the first asked for was never
    written (the run went back to an older one, or to none). The handler only sets a flag
    there; the abort follows the write, and the resumed run ends where an uninterrupted one
    does, weight for weight."""
    import os
    import signal

    import torch

    from pairrepro.runs import checkpoints
    from pairrepro.train.loop import Trainer, TrainHooks

    write_synthetic(data_home, n_train=200, n_eval=60)
    small = [*SMALL, "train.epochs=2", "model.dropout=0.3"]  # 4 steps an epoch
    train_recipe(NLI, small, quiet=True)
    full = torch.load(paths.runs_dir() / "bilstm_max_synthetic" / "seed-1" / "checkpoints"
                      / "last.pt", weights_only=True)["model"]
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs2"))
    folder = paths.runs_dir() / "bilstm_max_synthetic" / "seed-1"
    real_save = checkpoints.save_checkpoint
    sent: list[int] = []

    def first_ctrl_c(trainer: Trainer) -> None:
        if trainer.state.global_step == 6 and not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)

    def save_with_a_second_ctrl_c(path: Path, state: dict) -> None:
        if sent == [1] and path.name == "last.pt":
            sent.append(2)
            os.kill(os.getpid(), signal.SIGINT)  # lands inside the write
        real_save(path, state)

    monkeypatch.setattr(checkpoints, "save_checkpoint", save_with_a_second_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train_recipe(NLI, small, quiet=True, hooks=TrainHooks(on_step=first_ctrl_c))
    assert sent == [1, 2]
    saved = checkpoints.load_checkpoint(folder / "checkpoints" / "last.pt")
    assert (saved["progress"]["global_step"], saved["progress"]["position"]) == (6, 2)
    assert json.loads((folder / "checkpoints" / "last.json").read_text())["global_step"] == 6
    assert json.loads((folder / "result.json").read_text())["status"] == "interrupted"
    monkeypatch.setattr(checkpoints, "save_checkpoint", real_save)
    train_recipe(NLI, small, quiet=True, resume=True)
    resumed = torch.load(folder / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert resumed.keys() == full.keys()
    assert all(torch.equal(resumed[k], full[k]) for k in full)


def test_a_stop_between_loss_flushes_leaves_the_training_loss_unchanged(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step losses are summed on the device and added to the epoch's sum every
    ``sync_every`` steps (50 on a GPU). A checkpoint added them at the stop as well, so an
    interrupted and resumed run summed them in other groups: its training loss differed from
    the uninterrupted run's by ~1e-8. The open sums now go into the checkpoint as they are."""
    import os
    import signal

    from pairrepro.train.loop import Trainer, TrainHooks

    real_init = Trainer.__init__

    def every_third_step(self: Trainer, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)
        self.sync_every = 8  # as on a GPU, where it is 50

    monkeypatch.setattr(Trainer, "__init__", every_third_step)
    write_synthetic(data_home, n_train=200, n_eval=60)
    small = [*SMALL, "train.epochs=2", "data.max_train_pairs=192"]  # 12 steps an epoch

    def epochs() -> list[dict]:
        path = paths.runs_dir() / "bilstm_max_synthetic" / "seed-1" / "metrics.jsonl"
        return [{k: v for k, v in json.loads(line).items()
                 if k in ("train_loss", "train_running_accuracy", "dev")}
                for line in path.read_text().splitlines()]

    train_recipe(NLI, small, quiet=True)
    full = epochs()
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs2"))

    def ctrl_c_at_step_3(trainer: Trainer) -> None:  # before the first flush (step 8)
        if trainer.state.global_step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        train_recipe(NLI, small, quiet=True, hooks=TrainHooks(on_step=ctrl_c_at_step_3))
    train_recipe(NLI, small, quiet=True, resume=True)
    assert epochs() == full


# ------------------------------------------------ a damaged seed in the evidence reports

RESULTS = paths.PROJECT_DIR / "results"
TABLE8_TRECQA = ("csran_trecqa", "csran_no_mar_trecqa", "csran_no_csra_trecqa",
                 "csran_no_mar_no_csra_trecqa")


def _results_with_a_damaged_seed(tmp_path: Path, recipes: tuple[str, ...]) -> Path:
    """A copy of the reference runs of ``recipes`` whose csran_trecqa seed 2 has a truncated
    result.json (the run can no longer be read; the other seeds can)."""
    results = tmp_path / "results"
    for recipe in recipes:
        shutil.copytree(RESULTS / recipe, results / recipe)
    damaged = results / "csran_trecqa" / "seed-2" / "result.json"
    damaged.write_text(damaged.read_text(encoding="utf-8")[:50], encoding="utf-8")
    return results


def test_a_gap_ladder_names_a_damaged_seed_instead_of_dropping_it(tmp_path: Path) -> None:
    """`report gap csran_trecqa` with seed 2 of step 0 unreadable printed step 0 over seeds 1
    and 3 (another mean, another test) with exit 0 and no word about seed 2."""
    from pairrepro.report.analyses import ladders
    from pairrepro.runs import DamagedRunError

    results = _results_with_a_damaged_seed(tmp_path, ("csran_trecqa",))
    with pytest.raises(DamagedRunError, match=r"csran_trecqa/seed-2/result\.json"):
        ladders.evaluate_ladder("csran_trecqa", results)
    result = runner.invoke(app, ["report", "gap", "csran_trecqa", "--results", str(results)])
    assert result.exit_code == 3 and "seed-2" in result.output, result.output


def test_parity_names_a_damaged_seed_instead_of_dropping_it(tmp_path: Path) -> None:
    """`report parity` with one bf16 seed unreadable compared the other two seeds and said
    'same' with exit 0."""
    from pairrepro.report.analyses import parity
    from pairrepro.runs import DamagedRunError

    results = tmp_path / "results"
    for precision, recipe in (("fp32", "csran_trecqa"), ("bf16", "csran_trecqa_bf16")):
        for seed in (1, 2, 3):
            target = results / recipe / f"seed-{seed}"
            shutil.copytree(RESULTS / "csran_trecqa" / f"seed-{seed}", target)
            manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
            (target / "manifest.json").write_text(json.dumps({**manifest,
                                                              "precision": precision}))
    (results / "csran_trecqa_bf16" / "seed-2" / "manifest.json").write_text("{")
    table = parity.ParityTable(title="t", metrics=["test.map"], pairs=[
        parity.ParityPair(model="CSRAN", fp32="csran_trecqa", bf16="csran_trecqa_bf16")])
    with pytest.raises(DamagedRunError, match=r"csran_trecqa_bf16/seed-2/manifest\.json"):
        parity.evaluate_parity(results, table=table)


def test_an_ordering_makes_no_verdict_on_a_row_with_a_damaged_seed(tmp_path: Path) -> None:
    """`report orderings csran --table 8` with seed 2 of Original unreadable tested the other
    two seeds, and 'undecided' became 'same direction, not significant', silently."""
    from pairrepro.planning.paper_tables import load_paper
    from pairrepro.planning.recipe_index import load_recipe_index
    from pairrepro.report.analyses import orderings
    from pairrepro.report.tables.cells import evaluate_table

    results = _results_with_a_damaged_seed(tmp_path, TABLE8_TRECQA)
    paper = load_paper("csran")
    ev = evaluate_table(paper, paper.table(8), None, load_recipe_index(), results)
    found = orderings.table_orderings(ev)
    with_original = [o for o in found if "Original" in (o.higher, o.lower)]
    others = [o for o in found if "Original" not in (o.higher, o.lower)]
    assert with_original and others
    for item in with_original:
        assert item.verdict == orderings.NO_TEST and item.comparison.p_value is None, item
        assert "csran_trecqa/seed-2" in item.comparison.problem, item.comparison
    # the rows without damage are tested
    assert all(o.comparison.p_value is not None for o in others)


# ------------------------------------------------------------- an interrupted `results add`

def _reference_pair(tmp_path: Path) -> tuple[object, object, str]:
    """(source run, existing reference it replaces, that reference's result.json text)."""
    from pairrepro.runs import RunFolder

    dest = tmp_path / "results" / "bm25_trecqa" / "seed-1"
    shutil.copytree(RESULTS / "bm25_digits_trecqa" / "seed-1", dest)  # the "old" reference
    return (RunFolder(RESULTS / "bm25_trecqa" / "seed-1"), RunFolder(dest),
            (dest / "result.json").read_text(encoding="utf-8"))


def test_an_add_interrupted_while_copying_keeps_the_old_reference_and_no_staging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while `results add --force` wrote the new copy left results/<recipe>/.seed-1.
    incoming/ behind in the tracked folder."""
    from pairrepro import runs

    source, dest, old = _reference_pair(tmp_path)
    monkeypatch.setattr(runs.index, "read_predictions", lambda *a: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        runs.copy_compact(source, dest)
    assert (dest.path / "result.json").read_text(encoding="utf-8") == old
    assert sorted(p.name for p in dest.path.parent.iterdir()) == ["seed-1"]


def test_an_add_interrupted_between_removing_and_placing_loses_no_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old reference was deleted, then the new copy renamed into place: a signal between
    the two lost the reference (results/<recipe>/seed-1 gone, the copy still staged)."""
    from pairrepro import runs

    source, dest, old = _reference_pair(tmp_path)
    real = os.replace

    def interrupted(src: object, dst: object) -> None:
        if Path(str(src)).name.endswith(".incoming"):
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runs.copy_compact(source, dest)
    assert (dest.path / "result.json").read_text(encoding="utf-8") == old
    assert sorted(p.name for p in dest.path.parent.iterdir()) == ["seed-1"]
    monkeypatch.setattr(os, "replace", real)
    runs.copy_compact(source, dest)  # and the add, run again, replaces it
    assert (dest.path / "result.json").read_bytes() == (
        source.path / "result.json").read_bytes()
    assert sorted(p.name for p in dest.path.parent.iterdir()) == ["seed-1"]


def test_a_reference_put_aside_by_a_killed_add_is_put_back(tmp_path: Path) -> None:
    """A SIGKILL between moving the old reference aside and placing the new one leaves it
    aside, hidden: the next `results add` of that seed puts it back before anything else (so
    it still refuses to replace it without --force)."""
    from pairrepro.errors import ConfigError
    from pairrepro.report.publishing.verify import add_reference

    _, dest, old = _reference_pair(tmp_path)
    aside = dest.path.parent / f".{dest.path.name}.replaced"
    os.replace(dest.path, aside)
    with pytest.raises(ConfigError, match="already holds a reference run"):
        add_reference(RESULTS / "bm25_trecqa" / "seed-1", tmp_path / "results")
    assert (dest.path / "result.json").read_text(encoding="utf-8") == old
    assert not aside.exists()
    shutil.copytree(dest.path, aside)  # killed after the new one moved in: aside is stale
    with pytest.raises(ConfigError, match="already holds a reference run"):
        add_reference(RESULTS / "bm25_trecqa" / "seed-1", tmp_path / "results")
    assert not aside.exists() and (dest.path / "result.json").read_text("utf-8") == old


def test_readme_tables_says_what_it_is_doing_off_a_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, defect 10: `make readme-tables` (results readme) printed nothing for its whole
    run (68 s on the reporter's machine) while it re-scored every reference run and rendered
    each section: one line per phase, on stderr, unless --quiet or --json."""
    from pairrepro.report.publishing import readme as readme_mod

    monkeypatch.setattr(readme_mod, "SECTIONS", {"one": lambda r: "A", "two": lambda r: "B"})
    (tmp_path / "results").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text("".join(f"<!-- BEGIN generated: {n} -->\nold\n<!-- END generated -->\n"
                              for n in ("one", "two")), encoding="utf-8")
    args = ["results", "readme", "--readme", str(readme), "--results", str(tmp_path / "results")]
    for extra in ([], ["--check"]):
        out = runner.invoke(app, [*args, *extra])
        assert out.exit_code == 0, out.output
        lines = out.stderr.splitlines()
        assert any(line.startswith("checking 0 reference runs in ") for line in lines), lines
        assert [line.split(" (")[0] for line in lines if line.startswith("section ")] == [
            "section 1/2: one", "section 2/2: two"], lines
    quiet = runner.invoke(app, ["--quiet", *args, "--check"])
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr


@pytest.mark.parametrize("metrics", [{"test": {"map": "x"}}, {"test": 0.7},
                                     {"test": {"map": True}}],
                         ids=["text", "split-not-a-table", "bool"])
def test_a_result_whose_metrics_are_not_numbers_is_damaged(tmp_path: Path,
                                                           metrics: dict) -> None:
    """A user's result.json with `"map": "x"` read as a finished run: `report csran --table 6`
    then printed the reference's value in its row as if no run were there (exit 0), and
    `report runs` a blank cell."""
    from pairrepro.runs import read_run

    run = tmp_path / "runs" / "bm25_trecqa" / "seed-1"
    shutil.copytree(RESULTS / "bm25_trecqa" / "seed-1", run)
    result = json.loads((run / "result.json").read_text(encoding="utf-8"))
    (run / "result.json").write_text(json.dumps({**result, "metrics": metrics}),
                                     encoding="utf-8")
    info = read_run(run)
    assert info.status == "damaged", info
    assert info.problem.startswith(f"{run / 'result.json'}: metrics") and "test" in info.problem
