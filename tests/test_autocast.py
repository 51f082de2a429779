"""Every trainable model takes one training step under bf16 autocast, the code path of
``[train] precision = "bf16"`` (``pairrepro.device.autocast``). The CPU's bf16 autocast
stands in for a GPU's, where the CPU has bf16 units: the loss must be finite (computed in
float32, as ``Task.batch_loss`` does) and every trainable parameter tensor must get a finite,
non-zero gradient. Tiny sizes; the models' full sizes are preflight's business."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from model_harness import build_vocab, context, encode

from pairrepro.data.synthetic import generate_nli
from pairrepro.device import cpu_has_bf16_units
from pairrepro.models.base import available_models, build_model
from pairrepro.train.setup import initialise

# constructor keywords that make each model tiny (others keep their defaults)
TINY: dict[str, dict[str, object]] = {
    "arc_i": {"filters": 8, "mlp_hidden": 8},
    "arc_ii": {"filters": 8, "mlp_hidden": 8},
    "attention_lstm": {"hidden": 8},
    "attention_lstm_wbw": {"hidden": 8},
    "bilstm_max": {"hidden": 8, "mlp_hidden": 8},
    "bilstm_rnn": {"hidden": 8},
    "cin": {"hidden": 6, "dim": 12, "layers": 2, "kmax": 2, "char_dim": 4, "char_filters": 4,
            "mlp_hidden": 8},
    "cntn": {"filters": 8, "tensor_slices": 2},
    "csran": {"hidden": 6, "layers": 2, "char_dim": 4, "char_hidden": 4, "fm_factors": 2,
              "aggr_layers": 1, "out_hidden": 8},
    "df_lstm": {"hidden": 6, "memory": 3},
    "esim": {"hidden": 8},
    "lc_lstm": {"hidden": 6, "fc_hidden": 8},
    "lstm_rnn": {"hidden": 8},
    "mv_lstm": {"hidden": 6, "k": 2, "tensor_slices": 2, "mlp_hidden": 8},
    "nbow": {"hidden": 8},
    "parallel_lstms": {"hidden": 8, "mlp_hidden": 8, "mlp_layers": 2},
    "single_lstm": {"hidden": 8},
    "tc_lstm": {"hidden": 6, "fc_hidden": 8},
}
TRAINABLE = sorted(name for name, cls in available_models().items() if cls.needs_training)
# oneDNN builds bf16 LSTM primitives only where the CPU has bf16 units (an AVX2-only CPU
# fails with "could not create a primitive descriptor"); there training refuses bf16
# (tests/test_precision.py), so there is no CPU bf16 path to test
needs_bf16_units = pytest.mark.skipif(
    not cpu_has_bf16_units(),
    reason="this CPU has no bf16 units (AMX or AVX512-BF16): bf16 training is refused here")


def test_every_trainable_model_has_tiny_settings() -> None:
    """A new model gets a line in TINY (so it is tested under autocast too)."""
    assert sorted(TINY) == TRAINABLE


@needs_bf16_units
@pytest.mark.parametrize("name", TRAINABLE)
def test_one_bf16_autocast_training_step(name: str) -> None:
    torch.manual_seed(0)
    frame = generate_nli(6, seed=5)
    vocab = build_vocab(frame)
    model = build_model(name, context(vocab, 3, embed_dim=8), {**TINY[name], "dropout": 0.0}
                        if "dropout" in _keywords(name) else TINY[name])
    initialise(model, _optim(), keep_embeddings=False)
    left, lm = encode(list(frame.left), vocab)
    right, rm = encode(list(frame.right), vocab)
    labels = torch.tensor(frame.label.values)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(left, lm, right, rm)
    assert out.dtype in (torch.bfloat16, torch.float32)
    loss = F.cross_entropy(out.float(), labels)
    assert torch.isfinite(loss), f"{name}: loss {loss} under bf16 autocast"
    loss.backward()
    dead = [n for n, p in model.named_parameters() if p.requires_grad
            and (p.grad is None or not bool(p.grad.abs().sum() > 0))]
    bad = [n for n, p in model.named_parameters() if p.grad is not None
           and not bool(torch.isfinite(p.grad).all())]
    assert not dead, f"{name}: no gradient under bf16 autocast for {dead}"
    assert not bad, f"{name}: non-finite gradient under bf16 autocast for {bad}"
    optimizer.step()
    assert all(bool(torch.isfinite(p).all()) for p in params)


def _keywords(name: str) -> set[str]:
    import inspect

    return set(inspect.signature(available_models()[name].__init__).parameters)


def _optim():  # type: ignore[no-untyped-def]
    from pairrepro.config import OptimSection

    return OptimSection(init="xavier")
