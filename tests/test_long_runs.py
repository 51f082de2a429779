"""Long CPU runs: precision as a recipe setting, the CPU fingerprint a run records, checkpoints
by the clock, where a stopped run stands (report runs), the preflight gate of results add, and
the schema rule on dense L2 over fine-tuned pretrained vectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from synth_prepared import write_synthetic

from pairrepro import device as device_mod
from pairrepro import paths
from pairrepro.config import load_recipe
from pairrepro.errors import ConfigError
from pairrepro.runs import checkpoints, config_differences
from pairrepro.train.runner import train_recipe

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
TINY = ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8"]
CPU = torch.device("cpu")


@pytest.fixture
def synth(data_home: Path) -> Path:
    write_synthetic(data_home, n_train=200, n_eval=60, n_queries=40, n_eval_queries=20)
    return data_home


def test_auto_is_fp32_on_cpu_and_bf16_is_refused_without_bf16_units(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert device_mod.resolve_precision("auto", CPU) == "fp32"
    assert device_mod.resolve_precision("fp32", CPU) == "fp32"
    monkeypatch.setattr(device_mod, "cpu_has_bf16_units", lambda: False)
    with pytest.raises(ConfigError, match="bf16 units") as exc:
        device_mod.resolve_precision("bf16", CPU)
    assert "--precision fp32" in exc.value.hint
    monkeypatch.setattr(device_mod, "cpu_has_bf16_units", lambda: True)
    assert device_mod.resolve_precision("bf16", CPU) == "bf16"


def test_bf16_units_are_read_from_the_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """AMX or AVX512-BF16 count; AVX2 or AVX512F alone do not."""
    for flags, expected in [({"avx2"}, False), ({"avx2", "avx512f"}, False),
                            ({"avx512f", "avx512_bf16"}, True), ({"amx_bf16", "amx_tile"}, True)]:
        monkeypatch.setattr(device_mod, "cpu_flags", lambda f=flags: frozenset(f))
        assert device_mod.cpu_has_bf16_units() is expected, flags


def test_a_run_records_its_precision_and_cpu_and_bf16_is_refused_before_the_folder(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (_result,) = train_recipe(NLI, [*TINY, "train.epochs=1"], quiet=True)
    manifest = json.loads((paths.runs_dir() / "bilstm_max_synthetic" / "seed-1" /
                           "manifest.json").read_text(encoding="utf-8"))
    assert manifest["precision"] == "fp32"
    assert manifest["cpu"] == device_mod.cpu_fingerprint()
    assert manifest["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability()
    monkeypatch.setattr(device_mod, "cpu_has_bf16_units", lambda: False)
    with pytest.raises(ConfigError, match="precision"):
        train_recipe(NLI, [*TINY, "train.epochs=1", 'train.precision="bf16"'], quiet=True,
                     seeds=[2])
    assert not (paths.runs_dir() / "bilstm_max_synthetic" / "seed-2").exists()


def test_precision_and_checkpoint_timing_do_not_make_a_variant() -> None:
    recipe = load_recipe(NLI)
    other = load_recipe(NLI, ['train.precision="bf16"', "train.checkpoint_minutes=1.5"])
    assert config_differences(other.to_dict(), recipe.to_dict()) == {}
    assert config_differences(load_recipe(NLI, ["train.epochs=7"]).to_dict(),
                              recipe.to_dict()) == {"train.epochs": (7, recipe.train.epochs)}


def test_checkpoints_come_by_the_clock_as_well_as_per_epoch(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With checkpoint_minutes tiny every step is past due: one last.pt per step, plus the
    epoch's own; with 0 only the epoch's."""
    saved: list[str] = []
    real = checkpoints.save_checkpoint

    def counting(path: Path, state: dict) -> None:
        saved.append(Path(path).name)
        real(path, state)

    monkeypatch.setattr(checkpoints, "save_checkpoint", counting)
    overrides = [*TINY, "train.epochs=1", "train.batch_size=50"]
    train_recipe(NLI, [*overrides, "train.checkpoint_minutes=0"], quiet=True, seeds=[1])
    per_epoch = saved.count("last.pt")
    saved.clear()
    train_recipe(NLI, [*overrides, "train.checkpoint_minutes=1e-9"], quiet=True, seeds=[2])
    steps = json.loads((paths.runs_dir() / "bilstm_max_synthetic" / "seed-2" /
                        "metrics.jsonl").read_text(encoding="utf-8").splitlines()[0])["steps"]
    assert per_epoch == 1
    assert saved.count("last.pt") == steps + 1


GLOVE_ADAM = ['embeddings.source="glove-6b-50d"', "embeddings.dim=50",
              "embeddings.trainable=true", 'optim.name="adam"', "optim.l2=1e-6"]


def test_dense_l2_on_fine_tuned_vectors_under_an_adaptive_optimiser_needs_a_reason() -> None:
    with pytest.raises(ConfigError, match=r"\[optim\] l2_scope: 'all'") as exc:
        load_recipe(NLI, [*GLOVE_ADAM, 'optim.l2_scope="all"'])
    assert '"lazy"' in exc.value.hint and '"weights"' in exc.value.hint
    # a stated reason, another scope, plain SGD, frozen or random vectors, or no L2: fine
    for extra in (['optim.l2_scope="all"', 'optim.l2_scope_why="as the authors\' code"'],
                  ['optim.l2_scope="lazy"'], ['optim.l2_scope="weights"'],
                  ['optim.l2_scope="all"', 'optim.name="sgd"'],
                  ['optim.l2_scope="all"', "embeddings.trainable=false"],
                  ['optim.l2_scope="all"', 'embeddings.source="random"'],
                  ['optim.l2_scope="all"', "optim.l2=0.0"]):
        load_recipe(NLI, [*GLOVE_ADAM, *extra])


def test_report_runs_says_where_a_stopped_run_stands_and_its_command_continues_it(
        synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted run is listed with its epoch and step (checkpoints/last.json) and a
    command; running that command (its --set overrides, its PAIRREPRO_RUNS) finishes it."""
    import os
    import shlex
    import signal

    from typer.testing import CliRunner

    from pairrepro.cli.app import app
    from pairrepro.report.tables.runs_table import collect, format_line
    from pairrepro.train.loop import Trainer, TrainHooks

    runs = tmp_path / "elsewhere"
    monkeypatch.setenv("PAIRREPRO_RUNS", str(runs))
    monkeypatch.setattr(paths, "recipes_dir", lambda: NLI.parent)
    overrides = [*TINY, "train.epochs=2", "train.batch_size=50"]

    def stop_at_step_6(trainer: Trainer) -> None:  # 4 steps per epoch: epoch 2, step 2
        if trainer.state.global_step == 6:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        train_recipe(NLI, overrides, quiet=True, hooks=TrainHooks(on_step=stop_at_step_6))
    (line,) = collect(runs)
    assert line.status == "interrupted"
    text = format_line(line)[1]
    assert text.startswith("interrupted at epoch 2, step 2 of 4 (last checkpoint ")
    command = text.split("; continue: ", 1)[1]
    env, *words = shlex.split(command)
    assert env == f"PAIRREPRO_RUNS={runs}" and words[:5] == [
        "pairrepro", "train", "bilstm_max_synthetic", "--seeds", "1"]
    assert words[-1] == "--resume" and "--force" not in words
    assert sorted(w for w in words[5:-1] if w != "--set") == sorted(
        ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8", "train.epochs=2",
         "train.batch_size=50"])
    result = CliRunner().invoke(app, ["--quiet", *words[1:]])
    assert result.exit_code == 0, result.output
    (done,) = collect(runs)
    assert done.status == "finished" and done.epochs_run == 2


def test_results_add_takes_only_a_recipe_with_a_passing_preflight_of_its_config(
        synth: Path, tmp_path: Path) -> None:
    from pairrepro.report.publishing.verify import add_reference
    from pairrepro.train.preflight import run_preflight

    (result,) = train_recipe(NLI, quiet=True)
    run = paths.runs_dir() / "bilstm_max_synthetic" / "seed-1"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    manifest["git"] = {"commit": "0" * 40, "dirty": False, "untracked": []}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    records, results = tmp_path / "preflight", tmp_path / "results"
    records.mkdir()
    record_path = records / "bilstm_max_synthetic.json"

    def refused(words: str) -> None:
        with pytest.raises(ConfigError, match=words) as exc:
            add_reference(run, results, preflight_dir=records)
        assert "pairrepro preflight bilstm_max_synthetic" in exc.value.hint
        assert not results.exists()

    refused("no preflight record")
    record = run_preflight(load_recipe(NLI), steps=2, budget_s=5).to_json()
    assert record["config"] == load_recipe(NLI).to_dict()
    for change, words in [
        ({"config": {}}, "does not say which config"),
        ({"config": load_recipe(NLI, ["model.hidden=7"]).to_dict()}, r"model\.hidden 7 there"),
        ({"checks": [{"name": "finite", "status": "fail"}]}, r"failed check\(s\) finite")]:
        record_path.write_text(json.dumps({**record, **change}), encoding="utf-8")
        refused(words)
    # a record of the same step with another epoch count still vouches for the run
    other_epochs = load_recipe(NLI, ["train.epochs=99"]).to_dict()
    record_path.write_text(json.dumps({**record, "config": other_epochs}), encoding="utf-8")
    dest, _ = add_reference(run, results, preflight_dir=records)
    assert json.loads((dest.path / "result.json").read_text())["metrics"] == result["metrics"]
