"""One seed's run in its folder, from the lock to the last write (:class:`SeedRun`): a run that
raises never leaves ``running`` behind."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from pairrepro.config import Recipe
from pairrepro.device import DistContext, barrier, broadcast_object
from pairrepro.errors import PairreproError, StorageError
from pairrepro.fileio import sha256_file
from pairrepro.runs import RunFolder
from pairrepro.train.loop import Interrupted

T = TypeVar("T")


@dataclass(frozen=True)
class WallTime:
    """The wall time of a run's earlier segments (``--resume`` adds the next one)."""

    earlier_s: float = 0.0
    segments: int = 0  # earlier segments
    untimed: bool = False  # an earlier segment recorded no wall time (before this rule)

    @classmethod
    def after(cls, manifest: dict[str, Any]) -> WallTime:
        """The earlier segments, as an interrupted run's ``manifest`` records them."""
        if "wall_time_s" not in manifest:
            return cls(0.0, 1, True)
        return cls(float(manifest["wall_time_s"]), int(manifest.get("segments", 1)),
                   bool(manifest.get("wall_time_untimed", False)))

    def fields(self, segment_s: float) -> dict[str, Any]:
        """The manifest keys ``wall_time_s``, ``segments`` and ``wall_time_untimed``."""
        return {"wall_time_s": round(self.earlier_s + segment_s, 3), "segments": self.segments + 1,
                **({"wall_time_untimed": True} if self.untimed else {})}


class SeedRun(contextlib.AbstractContextManager["SeedRun"]):
    """``with SeedRun(...) as run:`` :meth:`decide`, :meth:`start`, the work, :meth:`finish`.
    Owns the folder, its lock, the run ``--force`` keeps aside and the failure record; rank 0
    alone locks and writes."""

    def __init__(self, folder: RunFolder, recipe: Recipe, seed: int, dist: DistContext) -> None:
        self.folder, self.recipe, self.seed, self.dist = folder, recipe, seed, dist
        self.resumed = False
        self.held = contextlib.ExitStack()  # left before the lock is let go
        self._manifest: dict[str, Any] = {}
        self._changed = False  # start() has begun changing the folder
        self._timed, self._started = WallTime(), 0.0
        self._kept_aside = False

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self.held:  # the lock goes last
            if exc is None or not self._changed:
                return
            if self.dist.is_main:
                self._record_failure(exc)
            if isinstance(exc, Interrupted):
                raise KeyboardInterrupt(str(exc)) from None

    def decide(self, plan: Callable[[], T], empty: T) -> T:
        """Rank 0 locks the folder and calls ``plan``; every rank gets its answer or error."""
        error: PairreproError | None = None
        answer = empty
        if self.dist.is_main:
            try:
                self.held.enter_context(self.folder.lock())
                answer = plan()
            except PairreproError as exc:
                error = exc
        shared = None if error is None else (type(error), error.message, error.hint)
        answer, problem = broadcast_object((answer, shared), self.dist)
        if error is not None:
            raise error
        if problem is not None:
            raise problem[0](problem[1], hint=problem[2])
        return answer

    def start(self, action: str, manifest: dict[str, Any], timed: WallTime,
              started: float) -> None:
        """The first writes: ``--force``'s old run moves aside, then ``result.json``
        (``running``), the config and the manifest. ``started``: this segment's
        ``time.perf_counter()``."""
        self._manifest, self._timed, self._started = manifest, timed, started
        self._changed = True
        self.resumed = action == "resume"
        if self.dist.is_main:
            if action == "replace":
                self._kept_aside = True  # set first: a move that fails half-way is undone
                self.folder.move_aside()
            # pid + host in a running result: a crash (kill -9, OOM, power) leaves "running"
            # behind, which a report shows as stale once this process is gone
            self._write_result("running")
            self.folder.write_config(self.recipe.to_toml())
            self.folder.write_manifest(manifest)
        barrier(self.dist)

    def drop_replaced(self) -> None:
        """The new run has a checkpoint: the run ``--force`` replaced may go."""
        if self._kept_aside:
            self.folder.drop_aside()
            self._kept_aside = False

    def finish(self, chosen_epoch: int, history: list[dict[str, Any]],
               metrics: dict[str, dict[str, float]]) -> dict[str, Any]:
        """Write the finished manifest and ``result.json``; returns the result."""
        self._changed = False  # trained and scored: what follows records no failure
        train_time = sum(h["train_time_s"] for h in history)
        train_items = sum(h["train_pairs"] for h in history)
        self._manifest.update({
            "chosen_epoch": chosen_epoch, "epochs_run": len(history), **self._wall_time(),
            "train_time_s": round(train_time, 3),
            "pairs_per_s": round(train_items / train_time, 1) if train_time else None,
            "resumed": self.resumed})
        result: dict[str, Any] = {"recipe": self.recipe.name, "seed": self.seed}
        if self.dist.is_main:
            self.folder.write_manifest(self._manifest)
            best = self.folder.checkpoint("best")  # eval refuses another best.pt copied in
            result = self._write_result("finished", chosen_epoch, metrics, best_sha256=(
                sha256_file(best) if best.is_file() else None))
        barrier(self.dist)
        return result

    def _wall_time(self) -> dict[str, Any]:
        return self._timed.fields(time.perf_counter() - self._started)

    def _write_result(self, status: str, chosen_epoch: int | None = None,
                      metrics: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return self.folder.write_result(self.recipe.name, self.seed, status,
                                        self.recipe.select_metric, chosen_epoch, metrics,
                                        **extra)

    def _record_failure(self, exc: BaseException) -> None:
        """Quiet when this cannot be written: the original error is what the user needs."""
        if self._kept_aside:
            with contextlib.suppress(StorageError):
                self.folder.restore_aside()
            return
        with contextlib.suppress(StorageError):
            self.folder.write_manifest({**self._manifest, **self._wall_time()})
        with contextlib.suppress(StorageError):
            if isinstance(exc, Interrupted | KeyboardInterrupt):
                self._write_result("interrupted", message=str(exc) or "interrupted")
            else:
                self._write_result("failed", error=str(exc) if isinstance(exc, PairreproError)
                                   else f"{type(exc).__name__}: {exc}")
