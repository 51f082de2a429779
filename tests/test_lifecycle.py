"""``train.lifecycle.SeedRun`` on its own, without training: what a seed folder holds after a
run that fails or is interrupted before and after its first writes, ``--force``'s kept-aside
run, and the lock (ARCHITECTURE.md, "Run directory and result.json")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pairrepro import paths
from pairrepro.config import load_recipe
from pairrepro.device import DistContext
from pairrepro.errors import TrainingError
from pairrepro.runs import RunFolder, RunLockedError
from pairrepro.train.lifecycle import SeedRun, WallTime
from pairrepro.train.loop import Interrupted

RECIPE = load_recipe(paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml")


def _folder(tmp_path: Path) -> RunFolder:
    return RunFolder.of(tmp_path / "runs", RECIPE.name, 1)


def _result(folder: RunFolder) -> dict:
    return json.loads(folder.result_path.read_text(encoding="utf-8"))


def _run(folder: RunFolder) -> SeedRun:
    return SeedRun(folder, RECIPE, 1, DistContext())


def test_an_error_before_start_leaves_no_folder_and_no_lock(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with pytest.raises(TrainingError), _run(folder) as run:
        assert run.decide(lambda: "fresh", "") == "fresh"
        assert folder.lock_path.is_file()
        raise TrainingError("bad data")
    assert not folder.path.exists() and not folder.lock_path.exists()


def test_an_error_after_start_is_recorded_as_failed_with_its_wall_time(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with pytest.raises(ValueError), _run(folder) as run:
        run.decide(lambda: "fresh", "")
        run.start("fresh", {"recipe": RECIPE.name}, WallTime(12.0, 1), started=0.0)
        assert _result(folder)["status"] == "running"
        raise ValueError("boom")
    assert _result(folder)["status"] == "failed"
    assert _result(folder)["error"] == "ValueError: boom"
    manifest = folder.read_manifest()
    assert manifest["segments"] == 2 and manifest["wall_time_s"] > 12.0
    assert not folder.lock_path.exists()


def test_an_interrupted_run_says_so_and_leaves_as_keyboard_interrupt(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with pytest.raises(KeyboardInterrupt, match="checkpoint saved"), _run(folder) as run:
        run.decide(lambda: "fresh", "")
        run.start("fresh", {}, WallTime(), started=0.0)
        raise Interrupted("interrupted in epoch 1; checkpoint saved")
    assert _result(folder)["status"] == "interrupted"


def test_force_puts_the_old_run_back_until_the_new_one_has_a_checkpoint(
        tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    folder.path.mkdir(parents=True)
    folder.write_result(RECIPE.name, 1, "finished", RECIPE.select_metric, 3, {})
    with pytest.raises(ValueError), _run(folder) as run:
        run.start("replace", {}, WallTime(), started=0.0)
        assert folder.aside_path.is_dir()
        raise ValueError("before any checkpoint")
    assert _result(folder)["status"] == "finished" and not folder.aside_path.exists()
    with pytest.raises(ValueError), _run(folder) as run:
        run.start("replace", {}, WallTime(), started=0.0)
        run.drop_replaced()  # what the trainer's first checkpoint does
        raise ValueError("after a checkpoint")
    assert _result(folder)["status"] == "failed" and not folder.aside_path.exists()


def test_a_second_run_of_a_locked_folder_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with _run(folder) as run:
        run.decide(lambda: "fresh", "")
        with pytest.raises(RunLockedError, match="in use by another process"), \
                _run(folder) as other:
            other.decide(lambda: "fresh", "")


def test_finish_records_the_run_as_finished(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    history = [{"train_time_s": 2.0, "train_pairs": 100}, {"train_time_s": 3.0,
                                                            "train_pairs": 100}]
    with _run(folder) as run:
        run.decide(lambda: "fresh", "")
        run.start("fresh", {}, WallTime(), started=0.0)
        result = run.finish(2, history, {"dev": {"accuracy": 0.5}})
    assert result["status"] == _result(folder)["status"] == "finished"
    manifest = folder.read_manifest()
    assert (manifest["epochs_run"], manifest["chosen_epoch"]) == (2, 2)
    assert manifest["pairs_per_s"] == 40.0  # 200 pairs in 5 s


def test_a_ctrl_c_after_finish_leaves_the_run_finished(tmp_path: Path) -> None:
    """Once the finished result is written the run stands: a signal before the block ends
    (another seed's turn, the DDP barrier) does not make it ``interrupted``."""
    folder = _folder(tmp_path)
    with pytest.raises(KeyboardInterrupt), _run(folder) as run:
        run.decide(lambda: "fresh", "")
        run.start("fresh", {}, WallTime(), started=0.0)
        run.finish(1, [{"train_time_s": 1.0, "train_pairs": 10}], {})
        raise KeyboardInterrupt
    assert _result(folder)["status"] == "finished"
