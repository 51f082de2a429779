"""Distributed data parallel (torchrun: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``): process
group, rank info, gathering on rank 0. Every rank builds the same epoch order and takes a
strided shard of each global batch (:func:`pairrepro.data.batches.shard`), so the recipe's
batch size stays the effective one; evaluation is sharded alike and gathered, so rank 0, which
alone writes files, scores every pair.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from pairrepro.train.device import resolve_device


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


def init_distributed(device: str) -> tuple[torch.device, DistContext]:
    """This process's device (``device`` resolved) and place in the job. Launched by
    torchrun, a CUDA rank takes the GPU of its ``LOCAL_RANK`` and every rank joins the
    process group (nccl on CUDA, gloo on CPU)."""
    device_t = resolve_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return device_t, DistContext()
    ctx = DistContext(rank=int(os.environ["RANK"]), world_size=world,
                      local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    if device_t.type == "cuda":
        device_t = resolve_device("cuda", ctx.local_rank)
        torch.cuda.set_device(device_t)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_t.type == "cuda" else "gloo",
                                rank=ctx.rank, world_size=world)
    return device_t, ctx


#: The key of :func:`record_error`'s entry in an error file (beside torchelastic's own).
ERROR_KEY = "pairrepro"


def record_error(message: str, exit_code: int) -> None:
    """Leave this rank's error where its launcher reads it: the file torchelastic names in
    ``TORCHELASTIC_ERROR_FILE`` (set for every rank by torchrun and :func:`launch_ranks`),
    in its format, so that torchrun's own report quotes it too. Nothing outside torchrun."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    now = time.time()
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"message": message, "timestamp": int(now),
                   ERROR_KEY: {"exit_code": exit_code, "time": now}}, handle)


@dataclass
class RankFailure:
    """How a job of :func:`launch_ranks` failed: the rank whose failure it reports, its exit
    code, and its message where that rank recorded one and rank 0 did not print it."""

    rank: int
    exit_code: int
    message: str | None = None


def launch_ranks(nproc: int, args: list[str]) -> RankFailure | None:
    """Run ``python -m pairrepro ARGS`` as ``nproc`` ranks on this machine, as ``torchrun
    --standalone --nproc-per-node NPROC`` does; None when every rank finished, else the job's
    failure (:func:`reported_failure`: ``message`` only for an error no rank printed).
    torchrun's agent logging is off while the ranks run: its ``ChildFailedError`` traceback
    would bury what is a user error."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.disable(logging.CRITICAL)  # this process only runs the agent meanwhile
    try:
        run(parse_args(["--standalone", f"--nproc-per-node={nproc}", "-m", "pairrepro",
                        *args]))
    except ChildFailedError as exc:
        return reported_failure(exc.failures)
    finally:
        logging.disable(logging.NOTSET)
    return None


def reported_failure(failures: dict[int, Any]) -> RankFailure:
    """The failure a job reports from torchelastic's per-rank ``ProcessFailure``: the earliest
    error a rank recorded (:func:`record_error`; rank 0 on a tie, or when rank 0 printed that
    message, then left out), else torchelastic's first, by exit code (128 + N: signal N)."""
    recorded = {rank: failure for rank, failure in failures.items()
                if isinstance(failure.error_file_data.get(ERROR_KEY), dict)}
    if not recorded:  # a crash or a signal: what the ranks printed is all there is
        rank = min(failures, key=lambda r: (failures[r].timestamp, r))
        code = failures[rank].exitcode
        return RankFailure(rank, code if code > 0 else 128 - code if code < 0 else 1)
    rank = min(recorded, key=lambda r: (recorded[r].error_file_data[ERROR_KEY]["time"], r))
    message = recorded[rank].message
    printed = 0 in recorded and recorded[0].message == message
    if printed:  # the ranks met the same error, which rank 0 printed: name rank 0, whichever
        rank = 0  # rank happened to record it first (a race between processes)
    return RankFailure(rank, int(recorded[rank].error_file_data[ERROR_KEY]["exit_code"]),
                       None if printed else message)


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


def leave_process_group() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_initialized():
        dist.destroy_process_group()
