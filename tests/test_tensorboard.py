"""``train --tensorboard`` (pairrepro.train.watch): the event files in the run folder hold, read
back with TensorBoard's own reader, the epoch metrics ``metrics.jsonl`` holds; a resumed run
logs each step once; watching changes no bit of the run, a failing writer stops only the
watching, and without the tensorboard package ``train`` says how to install it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from synth_prepared import write_synthetic
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
SMALL = ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8", "model.dropout=0.2",
         "data.max_train_pairs=120", "train.batch_size=16", "train.epochs=3",
         "train.patience=0", "optim.lr_decay=0.5"]
SETS = [word for o in SMALL for word in ("--set", o)]
# per epoch: 120 pairs in batches of 16
STEPS = 8
#: What differs between two runs of the same bits: the clock.
TIMING = ("train_time_s", "pairs_per_s")


@pytest.fixture
def synth(data_home: Path) -> Path:
    write_synthetic(data_home, n_train=200, n_eval=60)
    return data_home


def run(*flags: str) -> Path:
    out = CliRunner().invoke(app, ["--quiet", "train", str(NLI), *SETS, *flags])
    assert out.exit_code == 0, out.output
    return paths.runs_dir() / NLI.stem / "seed-1"


def events(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of the run's event files, as TensorBoard's server
    reads them (its plugin accumulator, which also applies a resumed run's purge)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import (
        TENSORS,
        EventAccumulator,
    )
    from tensorboard.util.tensor_util import make_ndarray

    reader = EventAccumulator(str(folder / "tensorboard"), size_guidance={TENSORS: 0})
    reader.Reload()
    return {tag: [(e.step, make_ndarray(e.tensor_proto).item()) for e in reader.Tensors(tag)]
            for tag in reader.Tags()["tensors"]}


def metric_lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]


def check_epochs(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Each epoch tag holds, at the epoch's last step, exactly its metrics.jsonl value."""
    logged = events(folder)
    lines = metric_lines(folder)
    steps = [STEPS * line["epoch"] for line in lines]
    for key in ("train_loss", "train_running_accuracy", "lr", "pairs_per_s"):
        assert logged[f"epoch/{key}"] == list(zip(steps, [x[key] for x in lines],
                                                  strict=True)), key
    for name in lines[0]["dev"]:
        assert logged[f"epoch/dev_{name}"] == list(
            zip(steps, [x["dev"][name] for x in lines], strict=True)), name
    return logged


def test_the_event_file_holds_the_epoch_metrics_of_metrics_jsonl(synth: Path) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard package (pip install -e "
                                              "'.[tensorboard]')")
    folder = run("--tensorboard", "--tensorboard-every", "3")
    logged = check_epochs(folder)
    assert [line["lr"] for line in metric_lines(folder)] == [0.003, 0.0015, 0.00075]
    assert [step for step, _ in logged["step/lr"]] == list(range(3, 3 * STEPS + 1, 3))
    # the running loss at step 3 of epoch 2 is a mean over that epoch's first 3 batches
    assert {"step/train_loss", "step/pairs_per_s"} <= set(logged)


def test_a_resumed_run_logs_each_step_once(synth: Path) -> None:
    """A crash at step 11 (epoch 2), then --resume from the checkpoint of step 8: the points
    of steps 9 to 11 are logged again and replace the first ones, so no step has two points
    and the epochs are metrics.jsonl's."""
    pytest.importorskip("tensorboard")
    from pairrepro.train.runner import train_recipe
    from pairrepro.train.watch import TensorBoardLog

    hooks = TensorBoardLog(every=1).hooks()
    log_step = hooks.on_step
    assert log_step is not None

    def crash_at_step_11(trainer: Any) -> None:
        log_step(trainer)
        if trainer.state.global_step == 11:
            raise RuntimeError("crash")

    hooks.on_step = crash_at_step_11
    with pytest.raises(RuntimeError, match="crash"):
        train_recipe(NLI, SMALL, quiet=True, hooks=hooks)
    folder = paths.runs_dir() / NLI.stem / "seed-1"
    assert [step for step, _ in events(folder)["step/lr"]] == list(range(1, 12))
    # TensorBoard orders event files by name, in whole seconds: a resume never follows its
    # crash within the same second outside a test
    time.sleep(1.1)
    train_recipe(NLI, SMALL, quiet=True, resume=True, hooks=TensorBoardLog(every=1).hooks())
    logged = check_epochs(folder)
    assert [step for step, _ in logged["step/lr"]] == list(range(1, 3 * STEPS + 1))


def _predictions(folder: Path) -> dict[str, pd.DataFrame]:
    return {p.stem: pd.read_parquet(p) for p in sorted((folder / "predictions").iterdir())}


def test_watching_changes_no_bit_and_a_failing_writer_stops_only_the_watching(
        synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    outcomes = []
    for name, flags in (("off", []), ("on", ["--tensorboard", "--tensorboard-every", "1"]),
                        ("failing", ["--tensorboard"])):
        monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / name))
        if name == "failing":
            def disk_full(*args: Any, **kwargs: Any) -> None:
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(SummaryWriter, "add_scalar", disk_full)
        folder = run(*flags)
        lines = [{k: v for k, v in x.items() if k not in TIMING} for x in metric_lines(folder)]
        result = json.loads((folder / "result.json").read_text())
        outcomes.append((lines, result["metrics"], _predictions(folder)))
    (off_lines, off_metrics, off_pred), *watched = outcomes
    for lines, metrics, predictions in watched:
        assert lines == off_lines and metrics == off_metrics
        assert predictions.keys() == off_pred.keys()
        for split, frame in predictions.items():
            pd.testing.assert_frame_equal(frame, off_pred[split], check_exact=True)


def test_a_failing_writer_is_reported_once(synth: Path, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    calls: list[str] = []

    def disk_full(self: Any, tag: str, *args: Any, **kwargs: Any) -> None:
        calls.append(tag)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SummaryWriter, "add_scalar", disk_full)
    run("--tensorboard", "--tensorboard-every", "1")
    stopped = [r.getMessage() for r in caplog.records if "TensorBoard" in r.getMessage()]
    assert stopped == ["TensorBoard logging stopped (OSError: [Errno 28] No space left on "
                       "device); the run goes on, and metrics.jsonl keeps every epoch"]
    assert len(calls) == 1


def test_without_the_package_train_says_how_to_install_it(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training needs no tensorboard; --tensorboard without it is refused before anything
    runs, with the command that installs it."""
    for module in ("tensorboard", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails, as when not installed
    out = CliRunner().invoke(app, ["--json", "train", str(NLI), *SETS, "--tensorboard"])
    assert out.exit_code == 2, out.output
    error = json.loads(out.output)
    assert error["error"].startswith("--tensorboard needs the tensorboard package")
    assert error["hint"].startswith("pip install tensorboard")
    assert not paths.runs_dir().exists()
    folder = run()
    assert json.loads((folder / "result.json").read_text())["status"] == "finished"
    assert not (folder / "tensorboard").exists()


def test_the_command_that_continues_a_stopped_run_keeps_watching_it(
        synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C's "continue with:" line and `report runs` left out --tensorboard, so the run
    they continued stopped logging without a word."""
    pytest.importorskip("tensorboard")
    import os
    import shlex
    import signal

    from pairrepro.report.tables.runs_table import collect, format_line
    from pairrepro.train.loop import Trainer

    step = Trainer.train_step

    def stop_at_step_10(self: Trainer, batch: object) -> object:
        out = step(self, batch)
        if self.state.global_step == 9:  # counted after this step returns
            os.kill(os.getpid(), signal.SIGINT)
        return out

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", stop_at_step_10)
        out = CliRunner().invoke(app, ["train", str(NLI), *SETS, "--tensorboard",
                                       "--tensorboard-every", "3"])
    assert out.exit_code == 130, out.output
    printed = shlex.split(out.output.split("continue with:", 1)[1])
    assert printed[-4:] == ["--resume", "--tensorboard", "--tensorboard-every", "3"], printed
    listed = shlex.split(format_line(collect(paths.runs_dir())[0])[1].split("; continue: ")[1])
    assert "--tensorboard" in listed, listed
    time.sleep(1.1)  # a new event file sorts after the first (see above)
    words = [w for w in printed if not w.startswith("PAIRREPRO_RUNS=")]
    assert CliRunner().invoke(app, ["--quiet", *words[1:]]).exit_code == 0
    logged = check_epochs(paths.runs_dir() / NLI.stem / "seed-1")
    assert [s for s, _ in logged["step/lr"]] == list(range(3, 3 * STEPS + 1, 3))
