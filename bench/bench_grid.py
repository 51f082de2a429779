"""Benchmark of the 2-D recurrence engine (pairrepro/models/grid.py).

Forward + backward of four-stacked, four-direction TC-LSTMs (e = 100, d = 50) and of
two-layer DF-LSTMs (e = 100, d = 100, K = 9; the SNLI sizes) on a batch of 32 pairs with
n = m = 32. For each model, in fp32 and in bf16 autocast, from the same run and under the
protocol of bench/protocol.py (pinned core, interleaved equal-length blocks, load recorded and
judged): FLOPs per step, FLOP/s, the shares of the same-shape fp32 GEMM and of the machine's
best GEMM (bench/flops.py), and the peak memory of one training step (in a fresh process on
CPU, so the high-water mark is this step's own) at the paper's batch size (32). Optional: the
speedup over the cell-by-cell reference of tests/grid_reference.py (``--reference``) and the
memory with per-block checkpointing and, for TC-LSTMs, at batch 128 (``--memory-full``).

    .venv/bin/python bench/bench_grid.py                 # CPU, 1 thread, fp32 and bf16
    .venv/bin/python bench/bench_grid.py --record        # + bench/records/bench_grid.json
    .venv/bin/python bench/bench_grid.py --device cuda   # adds the projected SNLI epoch time
    .venv/bin/python bench/bench_grid.py --micro         # torch.tanh against 2 sigmoid(2x) - 1
    .venv/bin/python bench/bench_grid.py --launches      # kernel launches per diagonal (GPU path)
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the reference lives with the tests
sys.path.insert(0, str(ROOT / "bench"))

from flops import (  # noqa: E402
    Yardsticks,
    bench_precisions,
    describe_precisions,
    fresh_process_peak,
    open_model_bench,
    precisions_record,
    summary,
    sync,
    yardsticks,
)
from grid_reference import reference_forward  # noqa: E402
from protocol import Machine, add_common_arguments, write_record  # noqa: E402

from pairrepro.models import clstm, grid, gridkernels  # noqa: E402
from pairrepro.models.base import ModelContext, build_model  # noqa: E402

SNLI_TRAIN_PAIRS = 550_152
VOCAB = 1000
# the GEMM whose throughput is the yardstick: the shape of issue 18's measurement
GEMM_SHAPE = (512, 350, 200)
# peak memory is measured at the recipes' (the papers') batch size, 32; with --memory-full for
# TC-LSTMs also at 128 (issue 18's figure)
PAPER_BATCH = 32
MEMORY_BATCHES = {"tc_lstm_4stack": (32, 128), "df_lstm": (32,)}
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "tc_lstm_4stack": ("tc_lstm", {"hidden": 50, "directions": 4, "layers": 4, "pool_p": 1,
                                   "pool_q": 1, "fc_hidden": 50}),
    "df_lstm": ("df_lstm", {"hidden": 100, "memory": 9, "layers": 2}),
}


def make_model(device: torch.device, key: str = "tc_lstm_4stack", checkpoint: bool = False,
               **overrides: Any) -> torch.nn.Module:
    """One of :data:`MODELS` (e = 100, 3 outputs), with hyper-parameter ``overrides``."""
    name, hparams = MODELS[key]
    ctx = ModelContext(vocab_size=VOCAB, embed_dim=100, num_outputs=3)
    model = build_model(name, ctx, {**hparams, "checkpoint": checkpoint, **overrides})
    return model.to(device)


def make_batch(batch: int, length: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    left = torch.randint(2, VOCAB, (batch, length), generator=gen).to(device)
    right = torch.randint(2, VOCAB, (batch, length), generator=gen).to(device)
    labels = torch.randint(0, 3, (batch,), generator=gen).to(device)
    return left, left != 0, right, right != 0, labels


def time_step(fn: Any, iters: int, device: torch.device) -> float:
    """Mean seconds of ``fn()`` over ``iters`` calls (for the slow reference: no warm-up)."""
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - start) / iters


def engine_step(model: torch.nn.Module, batch: tuple[torch.Tensor, ...],
                amp: bool = False) -> None:
    left, lm, right, rm, labels = batch
    model.zero_grad(set_to_none=True)
    with torch.autocast(device_type=left.device.type, dtype=torch.bfloat16, enabled=amp):
        loss = torch.nn.functional.cross_entropy(model(left, lm, right, rm), labels)
    loss.backward()


def reference_step(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> None:
    left, _, right, _, labels = batch
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(reference_forward(model, left, right), labels)
    loss.backward()


def peak_memory(device: torch.device, key: str, batch: int, length: int, amp: bool,
                checkpoint: bool = False, timeout_s: float | None = None
                ) -> tuple[float | None, str]:
    """Peak memory (bytes) of one forward + backward at ``batch`` pairs of ``length`` words
    (``None``: the step ran past ``timeout_s``)."""
    if device.type == "cuda":
        model = make_model(device, key, checkpoint)
        data = make_batch(batch, length, device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        engine_step(model, data, amp)
        sync(device)
        return (float(torch.cuda.max_memory_allocated(device) - base),
                "torch.cuda.max_memory_allocated")
    setup = (f"import bench_grid as b; m = b.make_model(torch.device('cpu'), {key!r}, "
             f"{checkpoint}); d = b.make_batch({batch}, {length}, torch.device('cpu'))")
    return (fresh_process_peak(setup, f"b.engine_step(m, d, {amp})", timeout_s=timeout_s),
            "peak RSS growth (VmHWM) in a fresh process, 1 thread")


def memory_figures(key: str, args: argparse.Namespace, device: torch.device,
                   bf16: bool) -> dict[str, Any]:
    """Peak memory (GB) per precision at the paper's batch; with ``--memory-full`` also with
    checkpointing and at :data:`MEMORY_BATCHES`. bf16 only where its step was timed."""
    batches = ([args.memory_batch] if args.memory_batch else
               MEMORY_BATCHES[key] if args.memory_full else (PAPER_BATCH,))
    out: dict[str, Any] = {}
    for batch in batches:
        for precision in ("fp32", "bf16") if bf16 else ("fp32",):
            for ckpt in (False, True) if args.memory_full else (False,):
                peak, out["method"] = peak_memory(device, key, batch, args.length,
                                                  precision == "bf16", ckpt,
                                                  timeout_s=args.memory_timeout)
                label = f"batch {batch} {precision}" + (" checkpoint" if ckpt else "")
                out[label] = None if peak is None else peak / 1e9
    return out


def bench_model(key: str, args: argparse.Namespace, device: torch.device, machine: Machine,
                best: Yardsticks) -> dict[str, Any]:
    torch.manual_seed(0)
    model = make_model(device, key, args.checkpoint)
    data = make_batch(args.batch, args.length, device)

    def step_for(amp: bool) -> Any:
        return lambda: engine_step(model, data, amp)

    measured = bench_precisions(step_for, GEMM_SHAPE, device, best, machine, args.rounds,
                                args.bf16_cap)
    result: dict[str, Any] = {"model": key, "batch": args.batch, "n": args.length,
                              "measured": measured,
                              **precisions_record(measured, args.batch)}
    if args.reference:
        fp32_s = result["fp32"]["step_s"]
        ref_s = time_step(lambda: reference_step(model, data), args.ref_iters, device)
        result["reference_s_per_step"] = ref_s
        result["speedup"] = ref_s / fp32_s
        one = tuple(t[:1] for t in data)  # the reference as the tests use it: pair by pair
        result["reference_per_pair_s"] = time_step(lambda: reference_step(model, one),
                                                   args.ref_iters, device)
        result["speedup_vs_per_pair"] = result["reference_per_pair_s"] * args.batch / fp32_s
    result["projected_snli_epoch_min"] = (SNLI_TRAIN_PAIRS / result["fp32"]["pairs_per_s"]
                                          / 60)
    result["peak_memory_gb"] = memory_figures(key, args, device,
                                              "skipped" not in result["bf16"])
    return result


def micro(device: torch.device, rows: int = 4096, width: int = 250) -> None:
    """Why the fused sweeps compute tanh as 2 σ(2x) − 1 on CPU: both forms, and sigmoid
    alone, on a ``[rows, width]`` tensor (a diagonal's gates), median of 20 calls each."""
    x = torch.randn(rows, width, device=device)
    out = torch.empty_like(x)
    forms = {"torch.tanh": lambda: torch.tanh(x, out=out),
             "2 sigmoid(2x) - 1": lambda: torch.mul(x, 2, out=out).sigmoid_().mul_(2).sub_(1),
             "torch.sigmoid": lambda: torch.sigmoid(x, out=out)}
    for name, fn in forms.items():
        fn()
        times = []
        for _ in range(20):
            start = time.perf_counter()
            fn()
            sync(device)
            times.append(time.perf_counter() - start)
        print(f"{name:18s} {statistics.median(times) * 1e6:8.0f} us on [{rows}, {width}]")
    error = (torch.tanh(x.double()) - (2 * torch.sigmoid(2 * x) - 1).double()).abs().max()
    print(f"largest difference from tanh in float64: {error.item():.1e}")


class LaunchCount(TorchDispatchMode):
    """Counts the operators that would launch a device kernel: not views, not allocations,
    not on empty tensors (a CPU-side count: no GPU needed)."""

    SKIP = frozenset({"empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided",
                      "detach", "lift_fresh"})

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        tensors = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not func.is_view and name not in self.SKIP and any(t.numel() for t in tensors):
            self.ops[name] += 1
        return out


def launches(args: argparse.Namespace) -> None:
    """Kernel launches per diagonal of one training step of each model on the path a GPU
    takes, counted on CPU tensors: C kernels off, TC's gradients summed after the sweep, and
    ``torch.tanh`` where the CPU computes ``2 σ(2x) − 1``."""
    batch = make_batch(args.batch, args.length, torch.device("cpu"))
    counts: list[dict[str, Any]] = []
    for key in args.models.split(","):
        model = make_model(torch.device("cpu"), key)
        diagonals = (2 * args.length - 1) * len(model.blocks)
        for amp in (False, True):
            with mock.patch.object(gridkernels, "usable", lambda *a: False), \
                    mock.patch.object(clstm, "PER_DIAGONAL_SUMS", set(), create=True), \
                    mock.patch.object(grid, "tanh_", lambda x, out=None: torch.tanh(
                        x, out=x if out is None else out)), LaunchCount() as count:
                engine_step(model, batch, amp)
            total = sum(count.ops.values())
            top = ", ".join(f"{k} {v / diagonals:.1f}" for k, v in count.ops.most_common(8))
            print(f"{key} {'bf16' if amp else 'fp32'}: {total} launches a step, "
                  f"{total / diagonals:.1f} per diagonal of a block ({top})", flush=True)
            counts.append({"model": key, "precision": "bf16" if amp else "fp32",
                           "launches_per_step": total, "diagonals": diagonals,
                           "per_diagonal": round(total / diagonals, 1), "ops": dict(count.ops)})
    if args.record:
        write_record("grid_launches", {"batch": args.batch, "length": args.length,
                                       "label": args.label, "models": counts})


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated keys")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--reference", action="store_true",
                        help="also time the cell-by-cell reference (slow)")
    parser.add_argument("--ref-iters", type=int, default=1)
    parser.add_argument("--memory-batch", type=int, default=0,
                        help="batch of the peak-memory step (0: the paper's, 32)")
    parser.add_argument("--memory-full", action="store_true",
                        help="memory also with checkpointing and at MEMORY_BATCHES")
    parser.add_argument("--launches", action="store_true",
                        help="only count kernel launches per diagonal (the GPU's path); with "
                             "--record, into bench/records/grid_launches.json")
    parser.add_argument("--label", default="", help="with --launches --record: the run's label")
    parser.add_argument("--micro", action="store_true",
                        help="only time tanh against its sigmoid form")
    parser.add_argument("--checkpoint", action="store_true",
                        help="time the engine with per-block gradient checkpointing")
    add_common_arguments(parser, "bench_grid")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.launches:
        launches(args)
        return
    run = open_model_bench(args)
    if args.micro:
        micro(run.device)
        return
    best = yardsticks(run.machine, run.device)
    print(f"device {run.label}, batch {args.batch}, n=m={args.length}, forward+backward; "
          f"{best.describe()}", flush=True)
    elementwise = gridkernels.status()  # built here, so no model's first step pays for it
    print(f"elementwise cell work: {elementwise}", flush=True)
    results = []
    for key in args.models.split(","):
        results.append(bench_model(key, args, run.device, run.machine, best))
        print_result(results[-1], args.length)  # as each model finishes: slow when loaded
    print(summary(results, best), flush=True)
    if args.record:
        for r in results:
            del r["measured"]
        run.record("bench_grid", args, best, results, elementwise=elementwise)


def print_result(r: dict[str, Any], length: int) -> None:
    """The figures of one model, as text."""
    print(f"{r['model']}: {r['flops_per_step'] / 1e9:.2f} GFLOP/step "
          f"({r['flops_per_pair'] / 1e9:.3f} GFLOP/pair), batch {r['batch']} (target: fp32 "
          ">= 50% of the same-shape GEMM)")
    print(describe_precisions(r["measured"], r["batch"]))
    if "speedup" in r:
        print(f"  {r['speedup']:.1f}x faster than the cell-by-cell reference batched over "
              f"pairs ({r['reference_s_per_step']:.2f} s/step), "
              f"{r['speedup_vs_per_pair']:.1f}x than it pair by pair")
    print(f"  SNLI epoch ({SNLI_TRAIN_PAIRS} pairs) at the fp32 speed: "
          f"{r['projected_snli_epoch_min']:.1f} min")
    memory = dict(r["peak_memory_gb"])
    method = memory.pop("method")
    print("  peak memory, " + ", ".join(
        f"{label}: {'past the time limit' if gb is None else f'{gb:.2f} GB'}"
        for label, gb in memory.items()) + f", {length}x{length} grid ({method})")
    for precision in ("fp32", "bf16"):
        if "load" in r[precision]:
            print(f"  {precision} {describe_load(r[precision]['load'])}")
    print(end="", flush=True)


def describe_load(load: dict[str, Any]) -> str:
    from protocol import Load

    return Load(**load).describe()


if __name__ == "__main__":
    main()
