"""The DDP path on CPU: 2 processes, gloo backend, a tiny model, a few steps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from synth_prepared import write_synthetic

from pairrepro import paths
from pairrepro.train.loop import Trainer, TrainHooks
from pairrepro.train.runner import train_recipe

RECIPE = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
# 64 pairs in batches of 16: every global batch splits 8 + 8, so DDP's averaged gradient
# equals the single-process gradient of the whole batch
OVERRIDES = ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8", "train.epochs=2",
             "data.max_train_pairs=64", "train.batch_size=16"]


def _worker(rank: int, world: int, port: int, home: str, runs: str, out: str) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "PAIRREPRO_HOME": home, "PAIRREPRO_RUNS": runs})
    torch.set_num_threads(1)

    def save(trainer: Trainer) -> None:
        torch.save(trainer.module.state_dict(), Path(out) / f"rank{rank}.pt")

    try:
        results = train_recipe(RECIPE, OVERRIDES, quiet=True, device="cpu",
                               hooks=TrainHooks(on_step=save))
        (Path(out) / f"result{rank}.json").write_text(json.dumps(results))
    finally:
        from pairrepro.device import leave_process_group

        leave_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ddp_two_ranks_stay_in_sync_and_match_one_process(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_synthetic(data_home, n_train=200, n_eval=60)
    out = tmp_path / "out"
    out.mkdir()
    runs = tmp_path / "ddp_runs"
    mp.spawn(_worker, args=(2, _free_port(), str(data_home), str(runs), str(out)), nprocs=2,
             join=True)
    w0 = torch.load(out / "rank0.pt", weights_only=True)
    w1 = torch.load(out / "rank1.pt", weights_only=True)
    for key in w0:
        assert torch.equal(w0[key], w1[key]), key

    run = runs / "bilstm_max_synthetic" / "seed-1"
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished"
    assert json.loads((run / "manifest.json").read_text())["world_size"] == 2
    rank1 = json.loads((out / "result1.json").read_text())
    assert "status" not in rank1[0]  # only rank 0 reports and writes
    assert result["metrics"]["test"]["accuracy"] == json.loads(
        (out / "result0.json").read_text())[0]["metrics"]["test"]["accuracy"]

    # the same recipe in one process reaches the same weights (up to summation order)
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "single_runs"))
    train_recipe(RECIPE, OVERRIDES, quiet=True, device="cpu")
    single = torch.load(tmp_path / "single_runs/bilstm_max_synthetic/seed-1/checkpoints/last.pt",
                        weights_only=True)["model"]
    ddp_last = torch.load(run / "checkpoints/last.pt", weights_only=True)["model"]
    for key in single:
        torch.testing.assert_close(ddp_last[key], single[key], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(w0[key], single[key], atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------------- errors under DDP
def test_missing_data_is_reported_before_any_rank_starts(
        data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`train --nproc-per-node 2` checks the recipe, data and embeddings first: one error,
    its exit code, and no rank started (torchrun gave a copy per rank and a traceback)."""
    from typer.testing import CliRunner

    from pairrepro import device
    from pairrepro.cli.app import app

    def no_ranks(nproc: int, args: list[str]) -> None:
        raise AssertionError(f"ranks started: {args}")

    monkeypatch.setattr(device, "launch_ranks", no_ranks)
    result = CliRunner().invoke(app, ["train", str(paths.recipes_dir() / "mv_lstm_tensor.toml"),
                                      "--nproc-per-node", "2"])
    assert result.exit_code == 3 and isinstance(result.exception, SystemExit), result.output
    assert result.output.count("error:") == 1 and "pairrepro preprocess yahoo" in result.output


def _failure(tmp_path: Path, rank: int, exitcode: int, message: str | None = None,
             at: float = 0.0) -> Any:
    """torchelastic's record of a failed rank, read from the error file ``report_error``
    leaves (a rank's CLI run in-process with RANK and TORCHELASTIC_ERROR_FILE set)."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    error_file = tmp_path / f"error-{rank}-{at}.json"
    if message is not None:
        from typer.testing import CliRunner

        from pairrepro.cli.app import app

        env = {"RANK": str(rank), "TORCHELASTIC_ERROR_FILE": str(error_file)}
        result = CliRunner().invoke(app, ["train", f"recipes/{message}.toml"], env=env)
        assert result.exit_code == exitcode
        assert ("error:" in result.output) == (rank == 0)  # only rank 0 prints
        data = json.loads(error_file.read_text())
        data["pairrepro"]["time"] = at
        error_file.write_text(json.dumps(data))
    return ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=exitcode,
                          error_file=str(error_file))


def test_the_failure_reported_is_the_first_error_nobody_printed(tmp_path: Path) -> None:
    from pairrepro.device import reported_failure

    # every rank failed alike: rank 0 printed it, so rank 0 is named even where another rank
    # recorded it first; only its exit code is left to report
    alike = reported_failure({0: _failure(tmp_path, 0, 2, "missing", at=2.0),
                              1: _failure(tmp_path, 1, 2, "missing", at=1.0)})
    assert (alike.rank, alike.exit_code, alike.message) == (0, 2, None)
    # rank 1 failed on its own and rank 0 was stopped: rank 1's error, with its message
    alone = reported_failure({0: _failure(tmp_path, 0, -15),
                              1: _failure(tmp_path, 1, 2, "only_rank_1", at=1.0)})
    assert (alone.rank, alone.exit_code) == (1, 2)
    assert alone.message and "'recipes/only_rank_1.toml' not found" in alone.message
    # nothing recorded (a crash, a signal): the first failure, signal N as 128 + N
    killed = reported_failure({1: _failure(tmp_path, 1, -9)})
    assert (killed.rank, killed.exit_code, killed.message) == (1, 137, None)


@pytest.mark.slow
def test_an_error_in_the_ranks_prints_once_without_a_traceback(
        data_home: Path, tmp_path: Path) -> None:
    """Two real ranks (torchelastic, gloo) meet a user error only they can see (the run is
    finished; rank 0 plans, every rank stops): one error, one summary line, its exit code."""
    write_synthetic(data_home, n_train=200, n_eval=60)
    train_recipe(RECIPE, OVERRIDES, quiet=True, device="cpu")
    sets = [word for override in OVERRIDES for word in ("--set", override)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "300"}  # no wrapped lines
    done = subprocess.run(
        [sys.executable, "-m", "pairrepro", "train", str(RECIPE), *sets, "--device", "cpu",
         "--threads", "1", "--nproc-per-node", "2"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[0].endswith("already holds a finished run")
    assert lines[1].startswith("  hint: pass --resume")
    assert lines[2:] == ["2 ranks: rank 0 exited with code 2"], done.stderr
    assert done.stdout == ""
