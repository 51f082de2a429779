"""Every trainable model takes one training step under bf16 autocast, the code path of
``[train] precision = "bf16"`` (``pairrepro.device.autocast``). The CPU's bf16 autocast
stands in for a GPU's, where the CPU has bf16 units: the loss must be finite (computed in
float32, as ``Task.batch_loss`` does) and every trainable parameter tensor must get a finite,
non-zero gradient. Tiny sizes; the models' full sizes are preflight's business."""

from __future__ import annotations

import pytest
import torch
from model_harness import TINY, TRAINABLE, assert_one_bf16_step

from pairrepro.device import cpu_has_bf16_units

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
