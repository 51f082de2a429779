"""The training engine end to end on tiny synthetic data written as prepared folders."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import statistics
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from synth_prepared import write_synthetic

from pairrepro import paths
from pairrepro.data.batches import EpochPlan
from pairrepro.device import capture_rng_state, restore_rng_state
from pairrepro.errors import ConfigError, TrainingError
from pairrepro.metrics import classification_metrics
from pairrepro.report.publishing import verify
from pairrepro.runs import load_checkpoint, read_run
from pairrepro.train.loop import Trainer, TrainHooks
from pairrepro.train.provenance import evaluate_ensemble, evaluate_run
from pairrepro.train.runner import train_recipe

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
RANKING = paths.PROJECT_DIR / "recipes" / "bilstm_max_ranking_synthetic.toml"
TINY = ["model.hidden=16", "model.mlp_hidden=16", "embeddings.dim=16"]


@pytest.fixture
def synth(data_home: Path) -> Path:
    write_synthetic(data_home, n_train=600, n_eval=150, n_queries=150, n_eval_queries=60)
    return data_home


def run_dir(recipe: str = "bilstm_max_synthetic", seed: int = 1) -> Path:
    return paths.runs_dir() / recipe / f"seed-{seed}"


def model_weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def test_learns_nli_and_writes_a_complete_run(synth: Path) -> None:
    (result,) = train_recipe(NLI, [*TINY, "train.epochs=3"], quiet=True)
    assert result["status"] == "finished"
    assert result["metrics"]["test"]["accuracy"] > 0.6  # chance is 1/3
    folder = run_dir()
    for name in ["config.toml", "manifest.json", "metrics.jsonl", "result.json",
                 "checkpoints/best.pt", "checkpoints/last.pt", "predictions/test.parquet",
                 "predictions/dev.parquet", "predictions/train.parquet"]:
        assert (folder / name).is_file(), name
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in lines] == [1, 2, 3]
    # the chosen epoch is the best dev epoch (first one on ties)
    dev = [x["dev"]["accuracy"] for x in lines]
    assert result["chosen_epoch"] == int(np.argmax(dev)) + 1
    assert result["metrics"]["dev"]["accuracy"] == pytest.approx(max(dev))
    # test metrics equal the metrics recomputed from the saved predictions
    pred = pd.read_parquet(folder / "predictions" / "test.parquet")
    truth = pd.read_parquet(synth / "prepared" / "synthetic-nli" / "test.parquet")
    assert list(pred.pair_id) == list(truth.pair_id)
    probs = pred[["prob_0", "prob_1", "prob_2"]].to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    acc = float((probs.argmax(1) == truth.label.to_numpy()).mean())
    assert result["metrics"]["test"]["accuracy"] == pytest.approx(acc)
    manifest = json.loads((folder / "manifest.json").read_text())
    sha = hashlib.sha256((synth / "prepared/synthetic-nli/train.parquet").read_bytes())
    assert manifest["prepared_sha256"]["train.parquet"] == sha.hexdigest()
    assert manifest["chosen_epoch"] == result["chosen_epoch"] and manifest["seed"] == 1
    assert manifest["parameters"]["total"] > manifest["parameters"]["without_embeddings"]
    assert "epochs = 3" in (folder / "config.toml").read_text()
    # re-scoring the run from its best checkpoint gives the same numbers
    assert evaluate_run(folder, "test", "best") == pytest.approx(result["metrics"]["test"])


def test_hinge_ranking_beats_chance(synth: Path) -> None:
    (result,) = train_recipe(RANKING, ["train.epochs=4"], quiet=True)
    test = result["metrics"]["test"]
    chance_map = sum(1 / r for r in range(1, 6)) / 5  # one relevant among 5, random order
    assert test["num_queries"] == 60 and test["map"] > chance_map + 0.1
    pred = pd.read_parquet(run_dir("bilstm_max_ranking_synthetic") / "predictions/test.parquet")
    assert {"pair_id", "group_id", "label", "score"} <= set(pred.columns)


def test_pointwise_ranking_scores_are_class1_probabilities(synth: Path) -> None:
    """Pointwise ranking, with each epoch capped at 2 sampled negatives per query and the
    final train scoring capped at 100 pairs (whole queries)."""
    # negatives: the hinge loss's key, at its default for the pointwise task
    (result,) = train_recipe(RANKING, ["task.loss=pointwise", "task.negatives=1",
                                       "train.epochs=3",
                                       "task.max_negatives_per_query=2",
                                       "train.score_train_pairs=100"], quiet=True)
    folder = run_dir("bilstm_max_ranking_synthetic")
    pred = pd.read_parquet(folder / "predictions/test.parquet")
    assert pred.prob_1.between(0, 1).all()
    # score = class-1 log-odds, the same order as P(class 1) without its rounding to 1.0
    np.testing.assert_allclose(pred.score, np.log(pred.prob_1 / (1 - pred.prob_1)), rtol=1e-6)
    assert result["metrics"]["test"]["map"] > sum(1 / r for r in range(1, 6)) / 5 + 0.1
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    assert {x["train_pairs"] for x in lines} == {150 * (1 + 2)}  # 150 queries of 1 + 4
    train = pd.read_parquet(folder / "predictions/train.parquet")
    assert len(train) == 100 and train.groupby("group_id").size().eq(5).all()
    assert result["metrics"]["train"]["num_queries"] == 20


def _flatten(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in state.items()}


def test_resume_after_ctrl_c_is_bit_identical(synth: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    overrides = [*TINY, "train.epochs=2", "model.dropout=0.3", "data.max_train_pairs=300",
                 "optim.lr_decay=0.5", "optim.l2=0.0001"]
    (full,) = train_recipe(NLI, overrides, quiet=True)
    full_lines = (run_dir() / "metrics.jsonl").read_text().splitlines()
    full_best = _flatten(model_weights(run_dir() / "checkpoints/best.pt"))
    full_last = _flatten(model_weights(run_dir() / "checkpoints/last.pt"))

    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs2"))

    def ctrl_c_at_step_13(trainer: Trainer) -> None:  # 10 steps per epoch: mid epoch 2
        if trainer.state.global_step == 13:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        train_recipe(NLI, overrides, quiet=True, hooks=TrainHooks(on_step=ctrl_c_at_step_13))
    status = json.loads((run_dir() / "result.json").read_text())
    assert status["status"] == "interrupted"
    first = json.loads((run_dir() / "manifest.json").read_text())
    assert first["segments"] == 1 and first["wall_time_s"] > 0
    saved = load_checkpoint(run_dir() / "checkpoints/last.pt")
    assert saved["progress"]["global_step"] == 13 and saved["progress"]["epoch"] == 1
    with pytest.raises(ConfigError, match="--resume"):
        train_recipe(NLI, overrides, quiet=True)
    (resumed,) = train_recipe(NLI, overrides, quiet=True, resume=True)
    assert resumed["metrics"] == full["metrics"]
    assert resumed["chosen_epoch"] == full["chosen_epoch"]
    # the wall time covers both segments, not only the one that finished
    both = json.loads((run_dir() / "manifest.json").read_text())
    assert both["segments"] == 2 and both["wall_time_s"] > first["wall_time_s"]
    assert both["resumed"] and "wall_time_untimed" not in both
    for name, ref in (("best.pt", full_best), ("last.pt", full_last)):
        got = model_weights(run_dir() / "checkpoints" / name)
        assert got.keys() == ref.keys()
        for key in ref:
            assert torch.equal(got[key], ref[key]), (name, key)
    assert [json.loads(x)["lr"] for x in full_lines] == pytest.approx([0.003, 0.0015])
    strip = ("train_time_s", "pairs_per_s")
    lines = (run_dir() / "metrics.jsonl").read_text().splitlines()
    for a, b in zip(lines, full_lines, strict=True):
        a_d, b_d = json.loads(a), json.loads(b)
        assert {k: v for k, v in a_d.items() if k not in strip} == {
            k: v for k, v in b_d.items() if k not in strip}


def test_batches_collated_ahead_train_the_same_bits(synth: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Collating batches ahead in a thread (the CUDA loop's way) trains a CPU run to the
    same weights and metrics, bit for bit, as collating each batch in its step."""
    overrides = [*TINY, "train.epochs=2", "model.dropout=0.3", "data.max_train_pairs=300",
                 "optim.l2=0.0001"]
    (inline,) = train_recipe(NLI, overrides, quiet=True)
    weights = _flatten(model_weights(run_dir() / "checkpoints/last.pt"))
    collated_on: set[str] = set()
    collate = EpochPlan.collate

    def spy(plan: EpochPlan, *args: int) -> object:
        collated_on.add(threading.current_thread().name)
        return collate(plan, *args)

    monkeypatch.setattr(EpochPlan, "collate", spy)
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "ahead"))
    (ahead,) = train_recipe(NLI, overrides, quiet=True,
                            hooks=TrainHooks(on_start=lambda t: setattr(t, "batches_ahead", 3)))
    assert collated_on and threading.current_thread().name not in collated_on
    assert ahead["metrics"] == inline["metrics"]
    got = model_weights(run_dir() / "checkpoints/last.pt")
    assert got.keys() == weights.keys()
    assert all(torch.equal(got[key], weights[key]) for key in weights)


@pytest.mark.slow
def test_compiled_run_is_recorded_and_verified_by_interval(synth: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """``train.compile`` trains through torch.compile (inductor on a CPU) on widened batches:
    the manifest says so, the run learns as the eager one does, and ``verify`` compares it by
    interval, never claiming bit-equality."""
    import torch._dynamo

    overrides = [*TINY, "train.epochs=1", "data.max_train_pairs=300", "train.batch_size=100"]
    (eager,) = train_recipe(NLI, overrides, quiet=True)
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "compiled"))
    torch._dynamo.reset()
    (compiled,) = train_recipe(NLI, [*overrides, "train.compile=true"], quiet=True)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    manifest = json.loads((run_dir() / "manifest.json").read_text())
    assert manifest["compiled"] is True
    for split in ("dev", "test"):
        assert compiled["metrics"][split]["accuracy"] == pytest.approx(
            eager["metrics"][split]["accuracy"], abs=0.05)
    # the same environment in every other way: only the compiling keeps it from a bit claim
    same_env, words = verify._environment(read_run(run_dir()),
                                          read_run(tmp_path / "runs" / run_dir().relative_to(
                                              tmp_path / "compiled")))
    assert not same_env and words == "compiled with torch.compile"


def test_resume_after_a_crash_replays_from_the_step_checkpoint(
        synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    overrides = [*TINY, "train.epochs=1", "data.max_train_pairs=300",
                 "train.checkpoint_every=4"]
    (full,) = train_recipe(NLI, overrides, quiet=True)
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs2"))

    def crash_at_step_6(trainer: Trainer) -> None:
        if trainer.state.global_step == 6:
            raise RuntimeError("simulated kill")

    with pytest.raises(RuntimeError, match="simulated kill"):
        train_recipe(NLI, overrides, quiet=True, hooks=TrainHooks(on_step=crash_at_step_6))
    saved = load_checkpoint(run_dir() / "checkpoints/last.pt")
    assert saved["progress"]["global_step"] == 4  # the last step checkpoint before the crash
    # an exception of any kind marks the run failed with the error (a kill -9, which
    # nothing can catch, leaves "running" with its pid: test_faults.py checks that)
    left = json.loads((run_dir() / "result.json").read_text())
    assert left["status"] == "failed" and left["error"] == "RuntimeError: simulated kill"
    (resumed,) = train_recipe(NLI, overrides, quiet=True, resume=True)
    assert resumed["metrics"] == full["metrics"]
    assert json.loads((run_dir() / "manifest.json").read_text())["segments"] == 2


def test_checkpoints_load_with_weights_only_and_rng_round_trips(synth: Path) -> None:
    train_recipe(NLI, [*TINY, "train.epochs=1", "data.max_train_pairs=64"], quiet=True)
    state = torch.load(run_dir() / "checkpoints/last.pt", weights_only=True)
    assert {"model", "optimizer", "scheduler", "rng", "progress", "meta"} <= set(state)
    assert state["progress"]["epoch"] == 1 and state["progress"]["position"] == 0
    saved = capture_rng_state()
    first = (np.random.rand(3), torch.rand(3), __import__("random").random())
    restore_rng_state(saved)
    again = (np.random.rand(3), torch.rand(3), __import__("random").random())
    np.testing.assert_array_equal(first[0], again[0])
    assert torch.equal(first[1], again[1]) and first[2] == again[2]


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(synth: Path) -> None:
    def poison_at_step_6(trainer: Trainer) -> None:
        if trainer.state.global_step == 6:
            with torch.no_grad():
                next(trainer.module.parameters()).fill_(math.nan)

    overrides = [*TINY, "train.epochs=1", "train.checkpoint_every=4"]
    with pytest.raises(TrainingError, match="non-finite"):
        train_recipe(NLI, overrides, quiet=True, hooks=TrainHooks(on_step=poison_at_step_6))
    result = json.loads((run_dir() / "result.json").read_text())
    assert result["status"] == "failed" and "non-finite" in result["error"]
    saved = load_checkpoint(run_dir() / "checkpoints/last.pt")
    assert saved["progress"]["global_step"] == 4
    assert all(torch.isfinite(v).all() for v in saved["model"].values())
    with pytest.raises(TrainingError, match="non-finite"):
        # weights that overflow (lr = inf, used before, is now refused by the schema)
        train_recipe(NLI, [*overrides, "optim.init=uniform", "optim.init_range=1e38"],
                     quiet=True, force=True)


def test_refuses_to_overwrite_a_finished_run(synth: Path) -> None:
    overrides = [*TINY, "train.epochs=1", "data.max_train_pairs=64"]
    (first,) = train_recipe(NLI, overrides, quiet=True)
    with pytest.raises(ConfigError) as info:
        train_recipe(NLI, overrides, quiet=True)
    assert "--force" in str(info.value) and "--resume" in str(info.value)
    (kept,) = train_recipe(NLI, overrides, quiet=True, resume=True)
    assert kept == first
    with pytest.raises(ConfigError, match="recipe changed"):
        train_recipe(NLI, [*overrides, "optim.lr=0.01"], quiet=True, resume=True)
    (again,) = train_recipe(NLI, overrides, quiet=True, force=True)
    assert again["metrics"] == first["metrics"]  # same seed, deterministic on CPU


def test_seeds_aggregate_and_ensemble(synth: Path) -> None:
    overrides = [*TINY, "train.epochs=1", "data.max_train_pairs=200"]
    results = train_recipe(NLI, overrides, seeds=[1, 2], quiet=True)
    summary = json.loads((paths.runs_dir() / "bilstm_max_synthetic/summary.json").read_text())
    values = [r["metrics"]["test"]["accuracy"] for r in results]
    assert summary["seeds"] == [1, 2]
    agg = summary["metrics"]["test"]["accuracy"]
    assert agg["mean"] == pytest.approx(statistics.mean(values))
    assert agg["std"] == pytest.approx(statistics.stdev(values))
    # ensemble = argmax of the averaged class probabilities of the saved predictions
    frames = [pd.read_parquet(run_dir(seed=s) / "predictions/test.parquet") for s in (1, 2)]
    cols = ["prob_0", "prob_1", "prob_2"]
    mean = (frames[0][cols].to_numpy() + frames[1][cols].to_numpy()) / 2
    expected = classification_metrics(frames[0].label.to_numpy(), mean.argmax(1), 3)
    got = evaluate_ensemble([run_dir(seed=1), run_dir(seed=2)], "test")
    assert got["ensemble_size"] == 2
    assert got["accuracy"] == pytest.approx(expected["accuracy"])


def test_unknown_dataset_and_bad_select_metric_are_config_errors(synth: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[data\] dataset.*nosuch"):
        train_recipe(NLI, ["data.dataset=nosuch"], quiet=True)
    with pytest.raises(ConfigError, match="select_metric"):
        train_recipe(NLI, [*TINY, "train.epochs=1", "data.max_train_pairs=32",
                           "train.select_metric=map"], quiet=True)


def test_cli_train_eval_json_and_exit_codes(synth: Path) -> None:
    from typer.testing import CliRunner

    from pairrepro.cli.app import app

    runner = CliRunner()
    args = ["--json", "train", str(NLI), "--max-epochs", "1", "--set", "data.max_train_pairs=64",
            *(x for o in TINY for x in ("--set", o))]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    (result,) = json.loads(first.output)
    assert result["status"] == "finished" and result["chosen_epoch"] == 1
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "--force" in json.loads(again.output)["hint"]
    scored = runner.invoke(app, ["--json", "eval", "bilstm_max_synthetic", "--split", "dev"])
    assert scored.exit_code == 0, scored.output
    (row,) = json.loads(scored.output)
    assert row["metrics"]["accuracy"] == pytest.approx(result["metrics"]["dev"]["accuracy"])
    bad = runner.invoke(app, ["--json", "train", "no_such_recipe"])
    assert bad.exit_code == 2 and "bilstm_max_synthetic" in json.loads(bad.output)["hint"]


def test_optimiser_options_do_what_the_recipe_says() -> None:
    from pairrepro.config import OptimSection
    from pairrepro.models.base import ModelContext, build_model
    from pairrepro.train.optim import (
        build_optimizer,
        clip_gradients,
        l2_penalty,
        trainable_parameters,
    )
    from pairrepro.train.setup import initialise

    torch.manual_seed(0)
    pretrained = torch.randn(12, 6)
    ctx = ModelContext(vocab_size=12, embed_dim=6, num_outputs=3, pretrained=pretrained,
                       trainable_embeddings=False)
    model = build_model("bilstm_max", ctx, {"hidden": 5, "mlp_hidden": 4})
    cfg = OptimSection(name="adagrad", lr=0.05, l2=0.01, init="uniform", init_range=0.02,
                       lstm_orthogonal=True)
    initialise(model, cfg, keep_embeddings=True)
    assert torch.equal(model.embed.embedding.weight, pretrained)  # pretrained kept
    params = trainable_parameters(model)
    assert all(p is not model.embed.embedding.weight for p in params)  # frozen: no L2/updates
    by_hand = 0.5 * 0.01 * sum(float((p.detach().double() ** 2).sum()) for p in params)
    assert float(l2_penalty(params, 0.01).detach()) == pytest.approx(by_hand, rel=1e-5)
    hh = model.encoder.weight_hh_l0
    for block in hh.detach().chunk(4, dim=0):  # each gate's recurrent matrix is orthogonal
        torch.testing.assert_close(block @ block.T, torch.eye(5), atol=1e-5, rtol=0)
    assert model.mlp.net[0].weight.abs().max() <= 0.02
    optimizer = build_optimizer(model, cfg)
    assert isinstance(optimizer, torch.optim.Adagrad)
    assert optimizer.param_groups[0]["lr"] == 0.05
    for p in params:
        p.grad = torch.full_like(p, 3.0)
    clip_gradients(params, 1.0)
    total = torch.sqrt(sum((p.grad ** 2).sum() for p in params))
    assert float(total) == pytest.approx(1.0, rel=1e-5)


def test_demo_runs_the_whole_pipeline(data_home: Path) -> None:
    from typer.testing import CliRunner

    from pairrepro.cli.app import app

    # the synthetic path (with a dataset mirror present, "auto" would run the TrecQA demo)
    out = CliRunner().invoke(app, ["--json", "demo", "--data", "synthetic", "--epochs", "1"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    test = next(r for r in report["results"] if r["split"] == "test")
    assert test["accuracy"] > test["majority_class"] + 0.2
    assert (data_home / "prepared" / "synthetic-nli" / "DONE").is_file()


def test_orthogonal_init_reaches_the_df_lstm_grid() -> None:
    """``lstm_orthogonal`` also reaches recurrences built without nn.LSTM (DF-LSTM's cells)."""
    from pairrepro.config import OptimSection
    from pairrepro.models import ModelContext, build_model
    from pairrepro.train.setup import initialise

    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=12, embed_dim=6, num_outputs=3)
    model = build_model("df_lstm", ctx, {"hidden": 4, "memory": 2, "layers": 1})
    cfg = OptimSection(init="uniform", init_range=0.1, lstm_orthogonal=True)
    initialise(model, cfg, keep_embeddings=False)
    cell = model.blocks[0]
    for side in (cell.x, cell.y):
        for block in side.u.weight.detach().chunk(4, dim=0):  # rows orthonormal
            torch.testing.assert_close(block @ block.T, torch.eye(4), atol=1e-5, rtol=0)


def test_min_count_sends_rare_train_tokens_to_unk(tmp_path: Path) -> None:
    """``data.min_count``: counted by hand on a four-word vocabulary."""
    from pairrepro.data.prepared import PreparedDataset

    data = PreparedDataset(root=tmp_path, vocab=["<pad>", "<unk>", "a", "b", "c", "d"],
                           train_counts=[0, 0, 5, 2, 1, 0], stats={})
    assert data.rare_token_map(1, keep_unseen=True) is None
    assert list(data.rare_token_map(1, keep_unseen=False)) == [0, 1, 2, 3, 4, 1]
    assert list(data.rare_token_map(3, keep_unseen=True)) == [0, 1, 2, 1, 1, 5]
    assert list(data.rare_token_map(3, keep_unseen=False)) == [0, 1, 2, 1, 1, 1]


def test_test_only_words_stay_for_scorers_without_parameters(data_home: Path) -> None:
    """A word seen only in test ("zorro") becomes <unk> for a model learning random
    embeddings (nothing could train it) but stays itself for BM25, which can match it."""
    from pairrepro.config import recipe_from_dict
    from pairrepro.data.prepared import write_prepared
    from pairrepro.train.setup import load_task_data

    def frame(words: list[str], ids: list[int]) -> pd.DataFrame:
        return pd.DataFrame({"pair_id": ["p"], "group_id": ["q"], "left": [" ".join(words)],
                             "right": [" ".join(words)], "label": [1],
                             "left_ids": [ids], "right_ids": [ids]})

    write_prepared(paths.prepared_dir("tiny", "v"),
                   {"train": frame(["who"], [2]), "dev": frame(["who"], [2]),
                    "test": frame(["who", "zorro"], [2, 3])},
                   ["<pad>", "<unk>", "who", "zorro"], [0, 0, 2, 0], {"task": "ranking"})
    seen = {}
    for model in ("bm25", "mv_lstm"):
        recipe = recipe_from_dict({"data": {"dataset": "tiny", "variant": "v"},
                                   "model": {"name": model}, "embeddings": {"source": "random"},
                                   "task": {"type": "ranking", "loss": "pointwise"}}, "r", "r")
        _, data = load_task_data(recipe, 1)
        seen[model] = data.splits["test"].left[0].tolist()
    assert seen == {"bm25": [2, 3], "mv_lstm": [2, 1]}


def test_corrupt_run_config_is_a_clear_error(tmp_path: Path) -> None:
    """A run whose config.toml was damaged is named in the error, not a TOML traceback (a
    damaged run folder: exit 3, as every file of it, runs.DamagedRunError)."""
    from pairrepro.runs import DamagedRunError
    from pairrepro.train.setup import load_run_model

    run = tmp_path / "runs" / "x" / "seed-1"
    run.mkdir(parents=True)
    (run / "config.toml").write_text("[data\n", encoding="utf-8")
    with pytest.raises(DamagedRunError, match=r"config\.toml: not valid TOML"):
        load_run_model(run, "best", ["test"])


def test_pointwise_scores_do_not_saturate_into_ties() -> None:
    """Logit margins of 40 and 50 are both P(class 1) = 1.0 in floating point; ranked by the
    log-odds they stay apart (and in the order the probabilities would have)."""
    from pairrepro.tasks import POINTWISE_RANKING

    outputs = np.array([[0.0, 50.0], [0.0, 40.0], [1.0, 0.0]], dtype=np.float32)
    shifted = outputs - outputs.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    assert probs[0, 1] == probs[1, 1] == 1.0  # the tie the log-odds avoid
    assert POINTWISE_RANKING.scores(outputs).tolist() == [50.0, 40.0, -1.0]
