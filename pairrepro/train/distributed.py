"""Distributed data parallel (torchrun): process group, rank info, gathering on rank 0.

Under ``torchrun`` the environment holds ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.
Every rank builds the same epoch order (same seed) and processes a strided shard of each
global batch (:func:`pairrepro.data.batches.shard`), so the recipe's batch size stays the
effective batch size. Evaluation is sharded the same way and the outputs are gathered so
that rank 0 (which alone writes files) computes the metrics over every pair.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist


@dataclass
class DistContext:
    """This process's place in the job (``world_size == 1``: not distributed)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_type: str) -> DistContext:
    """Join the process group when launched by torchrun (nccl on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext()
    ctx = DistContext(rank=int(os.environ["RANK"]), world_size=world,
                      local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo",
                                rank=ctx.rank, world_size=world)
    return ctx


def _comm_device() -> torch.device:
    """nccl only moves CUDA tensors; gloo moves CPU ones."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: list[float], ctx: DistContext) -> list[float]:
    """Sum numbers over ranks (identity when not distributed)."""
    if not ctx.enabled:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=_comm_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.cpu().tolist()


def gather_rows(rows: np.ndarray, outputs: np.ndarray, ctx: DistContext) -> tuple[
        np.ndarray, np.ndarray]:
    """Concatenate every rank's ``(rows, outputs)``; every rank receives the result."""
    if not ctx.enabled:
        return rows, outputs
    parts: list[tuple[np.ndarray, np.ndarray] | None] = [None] * ctx.world_size
    dist.all_gather_object(parts, (rows, outputs))
    return (np.concatenate([p[0] for p in parts if p is not None]),
            np.concatenate([p[1] for p in parts if p is not None]))


def barrier(ctx: DistContext) -> None:
    """Wait for every rank (no-op when not distributed)."""
    if ctx.enabled:
        dist.barrier()


def broadcast_flag(flag: bool, ctx: DistContext) -> bool:
    """Rank 0's value of ``flag`` on every rank (e.g. 'stop now' after Ctrl-C)."""
    if not ctx.enabled:
        return flag
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int64, device=_comm_device())
    dist.broadcast(tensor, src=0)
    return bool(tensor.item())


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's picklable ``obj`` on every rank (identity when not distributed)."""
    if not ctx.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def cleanup(ctx: DistContext) -> None:
    """Leave the process group."""
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()
