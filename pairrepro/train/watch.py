"""``train --tensorboard``: a run's scalars in its ``tensorboard/`` folder, x axis the optimiser
step (the tags: docs/internals.md, "Watching a run"). A failed write never stops the run."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pairrepro.errors import ConfigError

if TYPE_CHECKING:
    from pairrepro.train.loop import Trainer, TrainHooks

log = logging.getLogger(__name__)

#: Steps between two ``step/`` points, unless ``--tensorboard-every`` says otherwise.
TENSORBOARD_EVERY = 50
INSTALL = 'pip install tensorboard (or, in a checkout, pip install -e ".[tensorboard]")'


def check_available() -> None:
    """A :class:`ConfigError` saying how to install tensorboard when it is missing."""
    try:
        import torch.utils.tensorboard  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--tensorboard needs the tensorboard package ({exc})",
                          hint=f"{INSTALL}, or train without --tensorboard") from None


class TensorBoardLog:
    """The scalars of the runs of one ``train`` call (rank 0); :meth:`hooks` attaches it."""

    def __init__(self, every: int = TENSORBOARD_EVERY) -> None:
        self.every = every
        self.writer: Any = None
        self.failed = False
        self.last = (0.0, 0.0)  # (time, pairs of the epoch) at the last step point

    def hooks(self) -> TrainHooks:
        from pairrepro.train.loop import TrainHooks

        return TrainHooks(on_start=self.start, on_step=self.step, on_epoch=self.epoch,
                          on_end=self.end)

    def _safely(self, write: Callable[[], Any]) -> Any:
        """``write()``; a failure is reported once and ends the logging, never the run."""
        if self.failed:
            return None
        try:
            return write()
        except Exception as exc:  # whatever the writer raises: the run must go on
            self.failed = True
            log.warning("TensorBoard logging stopped (%s: %s); the run goes on, and "
                        "metrics.jsonl keeps every epoch", type(exc).__name__, exc)
            writer, self.writer = self.writer, None
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()

    def start(self, trainer: Trainer) -> None:
        if not trainer.dist.is_main:
            return
        self.failed = False
        self.last = (time.perf_counter(), trainer.state.pairs)
        self.writer = self._safely(
            lambda: trainer.folder.open_tensorboard(trainer.state.global_step + 1))

    def step(self, trainer: Trainer) -> None:
        st = trainer.state
        if self.writer is None or st.global_step % self.every:
            return
        now = time.perf_counter()
        since, pairs_then = self.last
        self.last = (now, st.pairs)
        points = {"step/lr": trainer.optimizer.param_groups[0]["lr"]}
        if st.pairs:  # the sums are added up every few steps (on GPU): none yet, no point
            points["step/train_loss"] = st.loss_sum / st.pairs
            points["step/pairs_per_s"] = (st.pairs - pairs_then) / max(now - since, 1e-9)
        self._safely(lambda: self._add(points, st.global_step))

    def epoch(self, trainer: Trainer, line: dict[str, Any]) -> None:
        if self.writer is None:
            return
        points = {f"epoch/{key}": line[key] for key in
                  ("train_loss", "train_running_accuracy", "lr", "pairs_per_s")}
        points.update({f"epoch/dev_{name}": value for name, value in line["dev"].items()})
        self._safely(lambda: self._add(points, trainer.state.global_step, flush=True))
        self.last = (time.perf_counter(), 0.0)  # the next epoch's sums start at 0

    def _add(self, points: dict[str, float], step: int, flush: bool = False) -> None:
        for tag, value in points.items():
            self.writer.add_scalar(tag, value, step, new_style=True, double_precision=True)
        if flush:
            self.writer.flush()

    def end(self, trainer: Trainer) -> None:
        """Flush and close this run's writer (the next run opens its own)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            self._safely(writer.close)
