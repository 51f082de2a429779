"""The DDP path on CPU: 2 processes, gloo backend, a tiny model, a few steps."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

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
        from pairrepro.train.distributed import DistContext, cleanup

        cleanup(DistContext(rank, world))


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
