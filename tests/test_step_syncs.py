"""No training step waits for the device, proven without a GPU: every trainable model's
steady-state step (the trainer's own ``train_step``, its optimiser state already made) runs
with the model and the batch on PyTorch's ``meta`` device, which holds no values, under
``bench/step_profile.py``'s ``SyncSpy``: every read of device values on the host (``.item()``,
``.cpu()``, ``bool``), every op whose output size depends on device values (``unique``,
``nonzero``, ``masked_select``) and every blocking copy to the device (CUDA waits for the
stream before it) is seen there. ``tests/test_cuda.py`` checks the same on a GPU with
``torch.cuda.set_sync_debug_mode("error")``. Tiny sizes."""

from __future__ import annotations

import sys

import pytest
import torch
from model_harness import TINY, TRAINABLE

from pairrepro import paths

sys.path.insert(0, str(paths.PROJECT_DIR / "bench"))  # bench/ is not a package
from gpu_rates import model_recipes
from step_profile import SteadyStep, SyncSpy, spied

META = torch.device("meta")


def test_the_spy_sees_every_kind_of_wait_on_meta_and_none_on_host_values() -> None:
    """The spy against calls known to wait on CUDA, and host reads known not to."""
    x = torch.ones(4, 3, device=META)
    with SyncSpy() as spy:
        x.sum().item()
        x.cpu()
        torch.unique(x)
        x.nonzero()
        x.masked_select(x > 0)
        torch.ones(3).to(META)  # blocking: CUDA would wait for the stream first
        torch.ones(3).to(META, non_blocking=True)
        torch.tensor(2.0).item()  # a host value (an optimiser's step counter)
    assert dict(spy.syncs) == {"item": 1, "to_host": 1, "unique": 1, "nonzero": 1,
                               "masked_select": 1, "blocking_to_device": 1}
    assert spy.host_reads == 1


@pytest.fixture(scope="module")
def recipes() -> dict[str, str]:
    return model_recipes()


@pytest.mark.parametrize("name", TRAINABLE)
def test_a_steady_training_step_never_waits_for_the_device(name: str,
                                                           recipes: dict[str, str]) -> None:
    sets = ["train.batch_size=4", "embeddings.dim=8",
            *(f"model.{key}={value}" for key, value in TINY[name].items())]
    run = SteadyStep.build(recipes[name], META, overrides=sets).warm_up()
    spy = spied(run)
    assert spy.ops > 0
    assert not spy.syncs, f"{name}: a steady step waits for the device: {dict(spy.syncs)}"
