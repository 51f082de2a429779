"""Benchmark of the 2-D recurrence engine (pairrepro/models/grid.py).

Forward + backward of four-stacked, four-direction TC-LSTMs (e = 100, d = 50) and of
two-layer DF-LSTMs (e = 100, d = 100, K = 9; the SNLI sizes) on a batch of 32 pairs with
n = m = 32. For each model, from the same run (see bench/flops.py): FLOPs per step, FLOP/s,
the share of a same-shape GEMM's throughput (timed interleaved with the model), the speedup
over the cell-by-cell reference of tests/grid_reference.py, and the peak memory of one
training step (in a fresh process on CPU, so the high-water mark is this step's own) at the
paper's batch size (32) and, for TC-LSTMs, at batch 128 (issue 18's figure), with and without
per-block checkpointing.

    .venv/bin/python bench/bench_grid.py                 # CPU, 2 threads
    .venv/bin/python bench/bench_grid.py --device cuda   # adds the projected SNLI epoch time
    .venv/bin/python bench/bench_grid.py --micro         # torch.tanh against 2 sigmoid(2x) - 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the reference lives with the tests
sys.path.insert(0, str(ROOT / "bench"))

from flops import fresh_process_peak, measure, sync  # noqa: E402
from grid_reference import reference_forward  # noqa: E402

from pairrepro.models.base import ModelContext  # noqa: E402
from pairrepro.models.registry import build_model  # noqa: E402

SNLI_TRAIN_PAIRS = 550_152
VOCAB = 1000
# the GEMM whose throughput is the yardstick: the shape of issue 18's measurement
GEMM_SHAPE = (512, 350, 200)
# peak memory is measured at the recipes' (the papers') batch size, 32, and for TC-LSTMs also
# at 128 (issue 18's figure)
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
                checkpoint: bool = False) -> tuple[float, str]:
    """Peak memory (bytes) of one forward + backward at ``batch`` pairs of ``length`` words."""
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
    return (fresh_process_peak(setup, "b.engine_step(m, d)"),
            "peak RSS growth (VmHWM) in a fresh process, 1 thread")


def bench_model(key: str, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    torch.manual_seed(0)
    model = make_model(device, key, args.checkpoint)
    data = make_batch(args.batch, args.length, device)
    share = measure(lambda: engine_step(model, data, args.amp), GEMM_SHAPE, device,
                    rounds=args.rounds)
    result: dict[str, Any] = {"model": key, **share.as_dict(),
                              "pairs_per_s": args.batch / share.step_s,
                              "flops_per_pair": share.flops / args.batch}
    if not args.skip_reference:
        ref_s = time_step(lambda: reference_step(model, data), args.ref_iters, device)
        result["reference_s_per_step"] = ref_s
        result["speedup"] = ref_s / share.step_s
        one = tuple(t[:1] for t in data)  # the reference as the tests use it: pair by pair
        result["reference_per_pair_s"] = time_step(lambda: reference_step(model, one),
                                                   args.ref_iters, device)
        result["speedup_vs_per_pair"] = (result["reference_per_pair_s"] * args.batch
                                         / share.step_s)
    result["projected_snli_epoch_min"] = SNLI_TRAIN_PAIRS / result["pairs_per_s"] / 60
    result["peak_memory_gb"] = {}  # batch -> [without, with checkpointing]
    for batch in ([args.memory_batch] if args.memory_batch else MEMORY_BATCHES[key]):
        peaks = []
        for ckpt in (False, True):
            peak, result["memory_method"] = peak_memory(device, key, batch, args.length,
                                                        args.amp, ckpt)
            peaks.append(peak / 1e9)
        result["peak_memory_gb"][batch] = peaks
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated keys")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved model / GEMM rounds (medians)")
    parser.add_argument("--ref-iters", type=int, default=1)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast (engine only)")
    parser.add_argument("--memory-batch", type=int, default=0,
                        help="batch of the peak-memory step (0: MEMORY_BATCHES)")
    parser.add_argument("--micro", action="store_true",
                        help="only time tanh against its sigmoid form")
    parser.add_argument("--checkpoint", action="store_true",
                        help="time the engine with per-block gradient checkpointing")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.micro:
        micro(device)
        return
    label = str(device) if device.type == "cpu" else torch.cuda.get_device_name(device)
    if not args.json:
        print(f"device {label} (threads {torch.get_num_threads()}), batch {args.batch}, "
              f"n=m={args.length}, forward+backward", flush=True)
    results = []
    for key in args.models.split(","):
        results.append(bench_model(key, args, device))
        if not args.json:  # as each model finishes: a loaded machine makes this slow
            print_result(results[-1], args.length)
    if args.json:
        print(json.dumps({"device": label, "threads": torch.get_num_threads(),
                          "batch": args.batch, "n": args.length, "m": args.length,
                          "results": results}, indent=2))


def print_result(r: dict[str, Any], length: int) -> None:
    """The figures of one model, as text."""
    m, k, n = r["gemm_shape"]
    print(f"{r['model']}: {r['flops_per_step'] / 1e9:.2f} GFLOP/step "
          f"({r['flops_per_pair'] / 1e9:.3f} GFLOP/pair), {r['step_s']:.3f} s/step, "
          f"{r['pairs_per_s']:.1f} pairs/s")
    print(f"  {r['flops_per_s'] / 1e9:.1f} GFLOP/s = {r['share_of_gemm']:.0%} of a "
          f"{m}x{k} @ {k}x{n} GEMM ({r['gemm_flops_per_s'] / 1e9:.1f} GFLOP/s, same run; "
          "target >= 50%)")
    if "speedup" in r:
        print(f"  {r['speedup']:.1f}x faster than the cell-by-cell reference batched over "
              f"pairs ({r['reference_s_per_step']:.2f} s/step), "
              f"{r['speedup_vs_per_pair']:.1f}x than it pair by pair")
    print(f"  SNLI epoch ({SNLI_TRAIN_PAIRS} pairs) at this speed: "
          f"{r['projected_snli_epoch_min']:.1f} min")
    for batch, (plain, ckpt) in r["peak_memory_gb"].items():
        print(f"  peak memory, batch {batch}, {length}x{length} grid: {plain:.2f} GB, with "
              f"checkpoint = true {ckpt:.2f} GB ({r['memory_method']}; limit 8 GB)")
    print(end="", flush=True)


if __name__ == "__main__":
    main()
