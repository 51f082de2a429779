"""Run-folder faults (issue 13): a second process, --force, damaged files, failures of any
kind, SIGTERM, extending a finished run, unsafe recipe names, a read-only or full disk.

Every test uses tiny synthetic data and a tiny BiLSTM (a few seconds each)."""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from synth_prepared import write_synthetic
from typer.testing import CliRunner, Result

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.data.batches import PairBatch
from pairrepro.errors import DataError, StorageError
from pairrepro.runs import RunFolder, find_runs, read_run
from pairrepro.train.loop import Trainer, TrainHooks
from pairrepro.train.runner import train_recipe

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
SMALL = ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8",
         "data.max_train_pairs=64", "train.batch_size=16", "train.epochs=1"]
SETS = [x for o in SMALL for x in ("--set", o)]


@pytest.fixture
def synth(data_home: Path) -> Path:
    write_synthetic(data_home, n_train=200, n_eval=60)
    return data_home


def folder(seed: int = 1, recipe: str = "bilstm_max_synthetic") -> RunFolder:
    return RunFolder(paths.runs_dir() / recipe / f"seed-{seed}")


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def error_of(out: Result) -> dict:
    """The --json error record (the output may start with progress lines)."""
    return json.loads(out.output[out.output.index("{"):])


def test_a_live_run_is_locked_and_a_killed_one_is_stale(synth: Path, tmp_path: Path) -> None:
    """A real second process holds the run; train, --resume and --force all exit 2 naming
    it and leave its folder alone. kill -9 leaves "running" with the dead pid (the report's
    "stale") and frees the lock, so --resume then finishes it."""
    marker = tmp_path / "holding"
    script = (
        "import sys, time, pathlib\n"
        "from pairrepro.train.loop import TrainHooks\n"
        "from pairrepro.train.runner import train_recipe\n"
        "def hold(trainer):\n"
        "    if trainer.state.global_step == 2:\n"
        "        pathlib.Path(sys.argv[1]).write_text('x')\n"
        "        time.sleep(300)\n"
        "train_recipe(sys.argv[2], sys.argv[3:], quiet=True, hooks=TrainHooks(on_step=hold))\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(marker), str(NLI), *SMALL,
         "train.checkpoint_every=1"], cwd=paths.PROJECT_DIR, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert holder.poll() is None, "the holder process died"
            assert time.monotonic() < deadline, "the holder never started training"
            time.sleep(0.2)
        for flags in ([], ["--resume"], ["--force"]):
            out = cli("--json", "train", str(NLI), *SETS, *flags)
            assert out.exit_code == 2, (flags, out.output)
            assert f"pid {holder.pid} on " in error_of(out)["error"], flags
        left = folder().read_result()
        assert (left["status"], left["pid"]) == ("running", holder.pid)  # untouched
    finally:
        holder.kill()
        holder.wait()
    assert read_run(folder().path).status == "stale"
    out = cli("--json", "train", str(NLI), *SETS, "--set", "train.checkpoint_every=1",
              "--resume")
    assert out.exit_code == 0, out.output
    assert folder().read_result()["status"] == "finished"


def test_force_validates_first_and_keeps_the_old_run_until_a_checkpoint(synth: Path) -> None:
    (first,) = train_recipe(NLI, SMALL, quiet=True)
    # an invalid model key: exit 2 before the finished run is touched
    out = cli("--json", "train", str(NLI), *SETS, "--set", "model.nosuch=3", "--force")
    assert out.exit_code == 2 and "nosuch" in error_of(out)["error"]
    assert folder().read_result() == first

    # the new run fails before its first checkpoint: the old run comes back
    seen: dict[str, object] = {}

    def fail_at_step_1(trainer: Trainer) -> None:
        seen["aside"] = folder().aside_path.is_dir()
        seen["listed"] = [r.seed for r in find_runs(paths.runs_dir(), "bilstm_max_synthetic")]
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train_recipe(NLI, SMALL, quiet=True, force=True, hooks=TrainHooks(on_step=fail_at_step_1))
    assert seen == {"aside": True, "listed": [1]}  # kept aside, out of the seed-* listing
    assert folder().read_result() == first and not folder().aside_path.exists()

    # after the new run's first checkpoint the old one is gone, even if the new one fails
    def fail_at_step_3(trainer: Trainer) -> None:
        if trainer.state.global_step == 3:
            raise RuntimeError("late")

    with pytest.raises(RuntimeError, match="late"):
        train_recipe(NLI, [*SMALL, "train.checkpoint_every=2"], quiet=True, force=True,
                     hooks=TrainHooks(on_step=fail_at_step_3))
    assert not folder().aside_path.exists()
    assert folder().read_result()["status"] == "failed"
    (again,) = train_recipe(NLI, SMALL, quiet=True, force=True)
    assert again["metrics"] == first["metrics"] and not folder().aside_path.exists()


def test_a_damaged_result_blocks_resume_and_eval_but_not_force(synth: Path) -> None:
    train_recipe(NLI, SMALL, quiet=True)
    folder().result_path.write_text("{not json", encoding="utf-8")
    for args in (["train", str(NLI), *SETS, "--resume"], ["eval", str(folder().path)]):
        out = cli("--json", *args)
        assert out.exit_code == 3, out.output
        assert "result.json: not valid JSON" in error_of(out)["error"]
    out = cli("--json", "train", str(NLI), *SETS, "--force")
    assert out.exit_code == 0, out.output
    assert folder().read_result()["status"] == "finished"


def test_eval_and_resume_refuse_data_prepared_again_since_the_run(synth: Path) -> None:
    """A run's weights belong to the prepared bytes its manifest names: after the data is
    prepared again differently (another seed of the synthetic generator), eval and --resume
    exit 3 naming the manifest and the file, instead of scoring other data."""
    train_recipe(NLI, [*SMALL, "train.epochs=2"], quiet=True)
    recorded = folder().read_manifest()["prepared_sha256"]["dev.parquet"]
    write_synthetic(synth, n_train=200, n_eval=61)  # one pair more in dev and test
    out = cli("--json", "eval", str(folder().path))
    assert out.exit_code == 3, out.output
    error = error_of(out)["error"]
    # the first file that differs (in name order) is named, with the hash the run recorded
    assert "manifest.json" in error and "dev.parquet" in error and recorded in error
    result = folder().read_result()
    folder().write_result(result["recipe"], 1, "interrupted", result["select_metric"])
    out = cli("--json", "train", str(NLI), *SETS, "--set", "train.epochs=2", "--resume")
    assert out.exit_code == 3, out.output
    assert "prepared file" in error_of(out)["error"]


def test_eval_refuses_a_best_checkpoint_the_run_did_not_choose(synth: Path) -> None:
    """Another run's best.pt copied into a run was scored as the run's own (rc 0, another
    MAP, no word). A finished run records the sha256 of the best.pt it chose; eval refuses
    another one (exit 3 naming it), and one of another epoch where no sha256 is recorded."""
    import shutil

    from pairrepro.runs import load_checkpoint, save_checkpoint

    for seed in (1, 2):
        train_recipe(NLI, [*SMALL, "train.epochs=2"], seeds=[seed], quiet=True)
    assert cli("eval", str(folder().path)).exit_code == 0
    shutil.copyfile(folder(2).checkpoint("best"), folder().checkpoint("best"))
    out = cli("--json", "eval", str(folder().path))
    error = error_of(out)["error"]
    assert out.exit_code == 3 and "best.pt is not the one this run chose" in error, error
    assert "sha256 " + folder(2).read_result()["best_sha256"][:16] in error
    result = folder(2).read_result()
    folder(2).write_result(**{**result, "best_sha256": None})
    state = load_checkpoint(folder(2).checkpoint("best"))
    save_checkpoint(folder(2).checkpoint("best"), {**state, "epoch": 3 - state["epoch"]})
    out = cli("--json", "eval", str(folder(2).path))
    assert out.exit_code == 3, out.output
    assert error_of(out)["error"].endswith(
        f"epoch {3 - state['epoch']} where result.json records epoch {state['epoch']}")


def test_any_failure_is_marked_failed_and_keeps_its_exit_code(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bad_step(trainer: Trainer) -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        train_recipe(NLI, SMALL, quiet=True, hooks=TrainHooks(on_step=bad_step))
    result = folder().read_result()
    assert result["status"] == "failed" and result["error"] == "ValueError: a bug"

    def data_problem(self: Trainer, batch: object) -> None:
        raise DataError("the batch is broken")

    monkeypatch.setattr(Trainer, "train_step", data_problem)
    out = cli("--json", "train", str(NLI), *SETS, "--seeds", "3")
    assert out.exit_code == DataError.exit_code, out.output
    result = folder(3).read_result()
    assert result["status"] == "failed" and result["error"] == "the batch is broken"


def test_sigterm_checkpoints_and_prints_the_command_that_resumes(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM at step 3 of 4: checkpoint at step 3, status interrupted, exit 130, and the
    printed command (with the run's own --seeds/--set) finishes the run; it is the same run
    as one never stopped (resume is exact on CPU)."""
    sets = [*SETS, "--set", "model.dropout=0.2"]
    (straight,) = train_recipe(NLI, [*SMALL, "model.dropout=0.2"], seeds=[2], quiet=True,
                               runs_dir=paths.runs_dir().parent / "straight")
    step = Trainer.train_step

    def term_at_step_3(self: Trainer, batch: PairBatch) -> object:
        out = step(self, batch)
        if self.state.global_step == 2:  # counted after this step returns: step 3
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", term_at_step_3)
        out = cli("train", str(NLI), "--seeds", "2", *sets)
    assert out.exit_code == 130, out.output
    result = folder(2).read_result()
    assert result["status"] == "interrupted"
    from pairrepro.runs import load_checkpoint

    assert load_checkpoint(folder(2).checkpoint("last"))["progress"]["global_step"] == 3
    command = out.output.split("continue with:", 1)[1].strip()
    assert "--force" not in out.output
    setting, *words = shlex.split(command)
    assert words[:2] == ["pairrepro", "train"] and words[-1] == "--resume"
    assert "--seeds" in words and "model.dropout=0.2" in words
    # the runs folder is named: pasted into a new shell (no PAIRREPRO_RUNS) it continues
    # the run, where without it --resume finds none (exit 7 naming the folder it looked in)
    name, value = setting.split("=", 1)
    assert name == "PAIRREPRO_RUNS" and Path(value) == paths.runs_dir().absolute()
    monkeypatch.delenv("PAIRREPRO_RUNS")
    monkeypatch.chdir(synth)  # a shell elsewhere: ./runs is not the run's folder
    lost = cli(*words[1:])
    assert lost.exit_code == 7 and "PAIRREPRO_RUNS (unset: ./runs)" in lost.output, lost.output
    monkeypatch.setenv(name, value)
    again = cli(*words[1:])
    assert again.exit_code == 0, again.output
    assert folder(2).read_result()["metrics"] == straight["metrics"]


# manifest keys that say how long and by which command, not how the run computed
TIMING = ("command", "wall_time_s", "segments", "resumed", "train_time_s", "pairs_per_s")


def _run_record(seed_dir: Path) -> dict[str, object]:
    """What two runs that computed alike share: result, config.toml, manifest and
    metrics.jsonl less their timing, and the weights of both checkpoints."""
    import torch

    run = RunFolder(seed_dir)
    manifest = {k: v for k, v in run.read_manifest().items() if k not in TIMING}
    epochs = [{k: v for k, v in line.items() if k not in ("train_time_s", "pairs_per_s")}
              for line in run.read_metrics()]
    weights = {name: {k: v.tolist() for k, v in torch.load(
        run.checkpoint(name), weights_only=True)["model"].items()} for name in ("best", "last")}
    return {"result": run.read_result(),
            "config": run.config_path.read_text(), "manifest": manifest, "epochs": epochs,
            "weights": weights}


def test_a_resumed_run_continues_as_it_started_whichever_command_continues_it(
        synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started with --precision, --threads and checkpoint_minutes, stopped mid-epoch 2 by
    Ctrl-C, and continued by the command Ctrl-C printed, by the one report runs prints, or
    by the start's command without those three: each ends bit-equal to the run never
    stopped, with the same config.toml and manifest (precision, cpu_threads,
    checkpoint_minutes). Before, the last two lost all three and the first lost the
    threads."""
    from pairrepro.device import cpu_has_bf16_units, default_threads
    from pairrepro.report.tables.runs_table import collect, format_line

    monkeypatch.setattr(paths, "recipes_dir", lambda: NLI.parent)
    sets = [*SETS, "--set", "train.epochs=2", "--set", "train.checkpoint_minutes=5"]
    threads = default_threads() + 1  # never what a command without --threads gets
    started = ["train", "bilstm_max_synthetic", "--seeds", "1", *sets, "--threads",
               str(threads), "--precision", "bf16" if cpu_has_bf16_units() else "fp32"]
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "straight"))
    assert cli(*started).exit_code == 0
    straight = _run_record(tmp_path / "straight" / "bilstm_max_synthetic" / "seed-1")
    assert straight["manifest"]["cpu_threads"] == threads
    step = Trainer.train_step

    def stop_at_step_6(self: Trainer, batch: PairBatch) -> object:
        out = step(self, batch)
        if self.state.global_step == 5:  # counted after this step returns: step 6 of 8
            os.kill(os.getpid(), signal.SIGINT)
        return out

    for how in ("printed on Ctrl-C", "report runs", "settings left out"):
        runs = tmp_path / how.replace(" ", "-")
        monkeypatch.setenv("PAIRREPRO_RUNS", str(runs))
        with monkeypatch.context() as patch:
            patch.setattr(Trainer, "train_step", stop_at_step_6)
            out = cli(*started)
        assert out.exit_code == 130, out.output
        if how == "printed on Ctrl-C":
            command = out.output.split("continue with:", 1)[1].strip()
        elif how == "report runs":
            command = format_line(collect(runs)[0])[1].split("; continue: ", 1)[1]
        else:
            command = shlex.join(["pairrepro", *started[:-6], "--resume"])
        words = [w for w in shlex.split(command) if not w.startswith("PAIRREPRO_RUNS=")]
        again = cli(*words[1:])  # no --threads: the CLI's default would be default_threads()
        assert again.exit_code == 0, (how, again.output)
        assert _run_record(runs / "bilstm_max_synthetic" / "seed-1") == straight, how


def test_a_resume_refuses_to_change_how_the_run_computes(synth: Path) -> None:
    """A resume that names another precision or checkpoint timing, or would move the run to
    another device type or number of ranks, exits 2 naming the key and both values; another
    --threads is not used, and a warning says so."""
    sets = [*SETS, "--set", "train.epochs=2", "--set", "train.checkpoint_every=2"]
    stop = TrainHooks(on_step=lambda t: t.state.global_step == 3 and os.kill(
        os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        train_recipe(NLI, [*SMALL, "train.epochs=2", "train.checkpoint_every=2",
                           'train.precision="fp32"'], quiet=True, hooks=stop)
    for extra, words in (
            (["--set", "train.checkpoint_minutes=1"],
             "was started with train.checkpoint_minutes = 10.0; this command sets 1"),
            (["--precision", "auto"],
             "was started with train.precision = 'fp32'; this command sets 'auto'")):
        out = cli("--json", "train", str(NLI), *sets, "--precision", "fp32", *extra,
                  "--resume")
        assert out.exit_code == 2 and words in error_of(out)["error"], out.output
    manifest = folder().read_manifest()
    for key, value, words in (("device", "cuda:0", "trained on cuda:0; this command would "
                                                   "continue it on cpu"),
                              ("world_size", 2, "trained with world_size 2; this command "
                                                "would continue it with 1")):
        folder().write_manifest({**manifest, key: value})
        out = cli("--json", "train", str(NLI), *sets, "--precision", "fp32", "--resume")
        assert out.exit_code == 2 and words in error_of(out)["error"], out.output
    folder().write_manifest(manifest)
    threads = manifest["cpu_threads"]
    out = cli("--json", "train", str(NLI), *sets, "--precision", "fp32", "--resume",
              "--threads", str(threads + 1))
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.output[out.output.index("["):])
    assert result["warnings"] == [
        f"--resume: --threads {threads + 1} not used: {folder().path} continues with the "
        f"{threads} thread(s) it trained with, so that it equals a run never stopped "
        "(--force starts it over)"]
    assert folder().read_manifest()["cpu_threads"] == threads


def test_resume_without_a_run_to_continue_is_an_error_naming_where_it_looked(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--resume where no seed has a run started one from scratch, exit 0, without a word (a
    resume command pasted into a shell with another PAIRREPRO_RUNS). Now exit 7 naming the
    folder and PAIRREPRO_RUNS, nothing written; of several seeds, those never started are
    started, each with a warning."""
    runs = paths.runs_dir()
    out = cli("train", str(NLI), "--seeds", "1,2", *SETS, "--resume")
    assert out.exit_code == 7, out.output
    assert (f"no run of bilstm_max_synthetic (seed 1, 2) to continue in "
            f"{(runs / 'bilstm_max_synthetic').absolute()}") in " ".join(out.output.split())
    assert f"$PAIRREPRO_RUNS (set to {runs})" in out.output
    assert not (runs / "bilstm_max_synthetic").exists()
    train_recipe(NLI, SMALL, quiet=True)
    out = cli("--json", "train", str(NLI), "--seeds", "1,2", *SETS, "--resume")
    assert out.exit_code == 0, out.output
    kept, started = json.loads(out.output[out.output.index("["):])
    assert "warnings" not in kept and started["status"] == "finished"
    assert started["warnings"] == [f"--resume: {folder(2).path} held no run to continue: "
                                   "this seed was started"]


def test_resume_with_more_epochs_extends_a_finished_run(synth: Path) -> None:
    """1 epoch, then --resume --set train.epochs=2: the same run as 2 epochs at once."""
    (two,) = train_recipe(NLI, [*SMALL, "train.epochs=2"], quiet=True,
                          runs_dir=paths.runs_dir().parent / "two")
    train_recipe(NLI, SMALL, quiet=True)
    (extended,) = train_recipe(NLI, [*SMALL, "train.epochs=2"], quiet=True, resume=True)
    assert [line["epoch"] for line in folder().read_metrics()] == [1, 2]
    assert extended["metrics"] == two["metrics"]
    assert extended["chosen_epoch"] == two["chosen_epoch"]
    assert folder().read_manifest()["epochs_run"] == 2


@pytest.mark.parametrize("stem", ["..", "Bad Name"])
def test_unsafe_recipe_names_stop_before_anything_is_written(
        synth: Path, tmp_path: Path, stem: str) -> None:
    recipe = tmp_path / "recipes" / f"{stem}.toml"
    recipe.parent.mkdir()
    recipe.write_text(NLI.read_text(encoding="utf-8"), encoding="utf-8")
    out = cli("--json", "train", str(recipe), *SETS)
    assert out.exit_code == 2, out.output
    assert "name" in error_of(out)["error"] and repr(stem) in error_of(out)["error"]
    assert not paths.runs_dir().exists()
    assert not (paths.runs_dir().parent / "seed-1").exists()


@pytest.fixture
def read_only_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The runs folder read-only: by its mode, or (root ignores modes) by refusing every
    create under it with EROFS, as a read-only mount does."""
    runs = paths.runs_dir()
    runs.mkdir(parents=True)
    if os.geteuid() != 0:
        runs.chmod(0o555)
        yield runs
        runs.chmod(0o755)
        return
    real_open, real_mkdir = os.open, os.mkdir

    def refuse(path: object) -> None:
        if str(path).startswith(str(runs)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def fake_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            refuse(path)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    def fake_mkdir(path: object, *args: object, **kwargs: object) -> None:
        refuse(path)
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
    yield runs


def test_a_read_only_runs_folder_is_exit_8_in_one_line(synth: Path,
                                                      read_only_runs: Path) -> None:
    out = cli("--json", "train", str(NLI), *SETS)
    assert out.exit_code == StorageError.exit_code, out.output
    error = error_of(out)
    assert "cannot write" in error["error"] and "\n" not in error["error"]
    assert "Traceback" not in out.output
    assert not any(read_only_runs.rglob("result.json"))


def test_a_full_disk_is_exit_8_and_the_run_is_marked_failed(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(self: Path, data: bytes) -> int:  # checkpoints are written this way
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", disk_full)
    out = cli("--json", "train", str(NLI), *SETS)
    assert out.exit_code == StorageError.exit_code, out.output
    error = error_of(out)
    assert ".pt: cannot write" in error["error"] and "No space left" in error["error"]
    assert "\n" not in error["error"] and "Traceback" not in out.output
    result = folder().read_result()
    assert result["status"] == "failed" and "No space left" in result["error"]
