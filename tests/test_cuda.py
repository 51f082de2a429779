"""The ``--device cuda`` path, where a GPU is visible (skipped elsewhere, CI included): fp32
on the GPU computes in fp32 (no TF32), every trainable model computes there what it computes
on the CPU, takes a bf16 autocast step, the grid engine's gradients follow the CPU's C kernels,
and a short run on the GPU resumes bit-exactly."""

from __future__ import annotations

import copy
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import torch
from model_harness import TINY, TRAINABLE, assert_one_bf16_step, build_vocab, encode, tiny_model
from synth_prepared import write_synthetic

from pairrepro import paths
from pairrepro.data.synthetic import generate_nli
from pairrepro.device import resolve_precision
from pairrepro.models.base import ModelContext, build_model
from pairrepro.models.layers import run_lstm_from, run_rnn
from pairrepro.train.loop import Trainer, TrainHooks
from pairrepro.train.runner import train_recipe

sys.path.insert(0, str(paths.PROJECT_DIR / "bench"))  # bench/ is not a package
from gpu_rates import model_recipes
from step_profile import SteadyStep

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA GPU visible: these check the --device cuda path")
CUDA = torch.device("cuda")
NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"


def test_fp32_on_cuda_is_fp32_in_lstms_convolutions_and_products() -> None:
    """Against float64 on the CPU: TF32's 10-bit mantissa would miss by about 1e-3."""
    resolve_precision("fp32", CUDA)
    torch.manual_seed(0)
    x = torch.randn(8, 40, 64, dtype=torch.float64)
    modules = [torch.nn.LSTM(64, 64, batch_first=True), torch.nn.Conv1d(40, 64, 3),
               torch.nn.Linear(64, 64)]
    for module in modules:
        want = module.double()(x)
        got = module.float().to(CUDA)(x.float().to(CUDA))
        want, got = (w[0] if isinstance(w, tuple) else w for w in (want, got))
        err = (got.double().cpu() - want).abs().max().item()
        assert err < 1e-5, f"{type(module).__name__}: fp32 on CUDA off by {err:.1e}"


@pytest.mark.parametrize(("autocast", "expected"), [
    (torch.bfloat16, torch.bfloat16 if torch.cuda.is_available()
     and torch.cuda.is_bf16_supported() else torch.float32),
    (torch.float16, torch.float32)])
def test_lstms_under_cuda_autocast_run_in_bf16_where_the_gpu_has_it_never_float16(
        autocast: torch.dtype, expected: torch.dtype) -> None:
    """torch's autocast runs cuDNN's RNNs in float16 whatever dtype it names: the RNNs run
    in bf16 under bf16 autocast, in float32 under float16 autocast (layers.rnn_dtype)."""
    lstm = torch.nn.LSTM(8, 8, batch_first=True).to(CUDA)
    x, mask = torch.randn(3, 5, 8, device=CUDA), torch.ones(3, 5, dtype=torch.bool, device=CUDA)
    with torch.autocast("cuda", dtype=autocast):
        out, last = run_rnn(lstm, x, mask)
        from_state, _ = run_lstm_from(lstm, x, mask)
        plain = lstm(x)[0].dtype  # what autocast alone gives (the claim measured)
    assert out.dtype == last.dtype == from_state.dtype == expected
    print(f"autocast {autocast}: a plain nn.LSTM runs in {plain}")


@pytest.mark.parametrize("name", TRAINABLE)
def test_a_steady_training_step_never_waits_for_the_gpu(name: str) -> None:
    """Every model's steady-state step in bf16, CUDA's default (bench/step_profile.py: the
    trainer's step on its recipe's stand-in batch, at tiny sizes) under
    torch.cuda.set_sync_debug_mode("error")."""
    sets = ["train.batch_size=8", "embeddings.dim=8",
            *(f"model.{key}={value}" for key, value in TINY[name].items())]
    run = SteadyStep.build(model_recipes()[name], CUDA, "bf16", sets).warm_up()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        run.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("name", TRAINABLE)
def test_every_model_computes_on_cuda_what_it_computes_on_the_cpu(name: str) -> None:
    resolve_precision("fp32", CUDA)
    torch.manual_seed(0)
    frame = generate_nli(6, seed=5)
    vocab = build_vocab(frame)
    model = tiny_model(name, vocab).eval()
    batch = [*encode(list(frame.left), vocab), *encode(list(frame.right), vocab)]
    with torch.no_grad():
        on_cpu = model(*batch)
        on_cuda = model.to(CUDA)(*(t.to(CUDA) for t in batch))
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name,hparams", [
    ("tc_lstm", {"hidden": 8, "directions": 4, "layers": 2, "pool_p": 2, "pool_q": 2}),
    ("df_lstm", {"hidden": 8, "memory": 3, "layers": 2}),
])
def test_the_grid_engine_on_cuda_follows_the_c_kernels(name: str, hparams: dict[str, object],
                                                       dtype: torch.dtype | None) -> None:
    """The GPU's wavefront (torch operations per diagonal; TC's gradients summed over the grid
    after the sweep) against the CPU's (C kernels where they build): output and gradients on
    ragged pairs, within the bounds tests/test_grid.py holds the same path to on the CPU."""
    resolve_precision("fp32", CUDA)
    torch.manual_seed(0)
    model = build_model(name, ModelContext(vocab_size=15, embed_dim=5, num_outputs=3), hparams)
    gen = torch.Generator().manual_seed(1)
    masks = [torch.arange(6)[None] < torch.tensor(k)[:, None] for k in ([4, 1, 5, 3], [3, 4, 1, 6])]
    batch = [x for mask in masks for x in (torch.randint(2, 15, mask.shape, generator=gen) * mask,
                                           mask)]
    weights = torch.randn(4, 3, generator=gen)
    results = []
    for device in (torch.device("cpu"), CUDA):
        on = copy.deepcopy(model).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype is not None):
            out = on(*(t.to(device) for t in batch)).float()
        grads = torch.autograd.grad((out * weights.to(device)).sum(), list(on.parameters()))
        results.append([t.cpu() for t in (out, *grads)])
    for got, want in zip(results[1], results[0], strict=True):
        if dtype is None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        else:
            assert (got - want).norm() <= (0.02 if want.norm() > 1e-3 else 0.15) * want.norm()


@pytest.mark.parametrize("name", TRAINABLE)
def test_every_model_takes_a_bf16_autocast_step_on_cuda(name: str) -> None:
    assert_one_bf16_step(name, CUDA)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_cuda_run_resumes_bit_exactly(precision: str, data_home: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write_synthetic(data_home, n_train=600, n_eval=150, n_queries=150, n_eval_queries=60)
    overrides = ["model.hidden=16", "model.mlp_hidden=16", "embeddings.dim=16",
                 "train.epochs=2", "data.max_train_pairs=300", 'train.device="cuda"',
                 f'train.precision="{precision}"']
    (full,) = train_recipe(NLI, overrides, quiet=True)
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "again"))

    def ctrl_c_mid_epoch_2(trainer: Trainer) -> None:
        if trainer.state.global_step == 13:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        train_recipe(NLI, overrides, quiet=True, hooks=TrainHooks(on_step=ctrl_c_mid_epoch_2))
    (resumed,) = train_recipe(NLI, overrides, quiet=True, resume=True)
    assert resumed["metrics"] == full["metrics"]
    manifest = json.loads((paths.runs_dir() / "bilstm_max_synthetic/seed-1/manifest.json")
                          .read_text())
    assert manifest["device"].startswith("cuda") and manifest["precision"] == precision
