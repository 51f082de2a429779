"""Every trainable model takes one training step under bf16 autocast, the code path of
``[train] precision = "bf16"`` (``pairrepro.device.autocast``). The CPU's bf16 autocast
stands in for a GPU's, where the CPU has bf16 units: the loss must be finite (computed in
float32, as ``Task.batch_loss`` does) and every trainable parameter tensor must get a finite,
non-zero gradient. Tiny sizes; the models' full sizes are preflight's business."""

from __future__ import annotations

import copy

import pytest
import torch
from model_harness import TINY, TRAINABLE, assert_one_bf16_step
from torch.nn.utils.rnn import pack_padded_sequence

from pairrepro.device import cpu_has_bf16_units
from pairrepro.models.layers import NEG_INF, masked_max, run_in

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
    assert_one_bf16_step(name, torch.device("cpu"))


def test_float16_cannot_hold_the_masks_fill_value_that_bf16_holds() -> None:
    """Why an RNN under CUDA autocast runs in bf16 but never in float16 (layers._call_rnn):
    the masked ops after it fill padding with NEG_INF, beyond float16's range."""
    x, mask = torch.randn(2, 4, 3), torch.tensor([[True, True, False, False]] * 2)
    with pytest.raises(RuntimeError, match="overflow"):
        masked_max(x.half(), mask)
    assert torch.isfinite(masked_max(x.bfloat16(), mask)).all()
    assert torch.finfo(torch.float16).max < -NEG_INF < torch.finfo(torch.bfloat16).max


@needs_bf16_units
def test_run_in_bf16_is_the_lstm_in_bf16_with_gradients_for_its_float32_weights() -> None:
    """The CUDA bf16 path of layers._call_rnn, on the CPU: the same bits as a bf16 copy of
    the LSTM, and float32 gradients for the module's own weights."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 5, batch_first=True, bidirectional=True)
    x = torch.randn(3, 4, 6)
    packed = pack_padded_sequence(x, torch.tensor([4, 3, 1]), batch_first=True)
    out, (h, _) = run_in(lstm, torch.bfloat16, packed, None)
    want, (want_h, _) = copy.deepcopy(lstm).bfloat16()(packed.to(torch.bfloat16))
    assert out.data.dtype == torch.bfloat16
    assert torch.equal(out.data, want.data) and torch.equal(h, want_h)
    out.data.float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and p.grad.abs().sum() > 0
               for p in lstm.parameters())
