"""Benchmark of the 2-D recurrence engine (pairrepro/models/grid.py).

Forward + backward of four-stacked, four-direction TC-LSTMs (e = 100, d = 50)
on a batch of 32 pairs with n = m = 32, timed for the wavefront engine and for
the cell-by-cell reference of tests/grid_reference.py in the same run; then the
peak memory of one training step on a 32×32 grid at batch 128 (in a fresh
process on CPU, so the high-water mark is this step's own).

    .venv/bin/python bench/bench_grid.py                 # CPU
    .venv/bin/python bench/bench_grid.py --device cuda   # adds the projected SNLI epoch time
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the reference lives with the tests

from grid_reference import reference_forward  # noqa: E402

from pairrepro.models.base import ModelContext  # noqa: E402
from pairrepro.models.registry import build_model  # noqa: E402

SNLI_TRAIN_PAIRS = 550_152
VOCAB = 1000


def make_model(device: torch.device, layers: int, hidden: int,
               checkpoint: bool = False) -> torch.nn.Module:
    ctx = ModelContext(vocab_size=VOCAB, embed_dim=100, num_outputs=3)
    model = build_model("tc_lstm", ctx, {"hidden": hidden, "directions": 4, "layers": layers,
                                         "pool_p": 1, "pool_q": 1, "fc_hidden": 50,
                                         "checkpoint": checkpoint})
    return model.to(device)


def make_batch(batch: int, length: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    left = torch.randint(2, VOCAB, (batch, length), generator=gen).to(device)
    right = torch.randint(2, VOCAB, (batch, length), generator=gen).to(device)
    labels = torch.randint(0, 3, (batch,), generator=gen).to(device)
    return left, left != 0, right, right != 0, labels


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_step(fn: object, iters: int, device: torch.device, warmup: int = 1) -> float:
    """Mean seconds of ``fn()`` (a forward + backward) over ``iters`` calls."""
    for _ in range(warmup):
        fn()  # type: ignore[operator]
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()  # type: ignore[operator]
    _sync(device)
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


def peak_memory(device: torch.device, batch: int, length: int, layers: int,
                hidden: int, amp: bool, checkpoint: bool = False) -> dict[str, float]:
    """Peak memory (bytes) of one forward + backward at ``batch`` pairs of ``length`` words."""
    if device.type == "cuda":
        model = make_model(device, layers, hidden, checkpoint)
        data = make_batch(batch, length, device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        engine_step(model, data, amp)
        _sync(device)
        return {"peak_bytes": float(torch.cuda.max_memory_allocated(device) - base),
                "method": "torch.cuda.max_memory_allocated"}  # type: ignore[dict-item]
    # CPU: a fresh process, so ru_maxrss (a high-water mark) belongs to this step alone
    code = (
        "import resource, sys, torch; torch.set_num_threads(1);"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r});"
        "import bench_grid as b;"
        f"m = b.make_model(torch.device('cpu'), {layers}, {hidden}, {checkpoint});"
        f"d = b.make_batch({batch}, {length}, torch.device('cpu'));"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "b.engine_step(m, d);"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "print((after - before) * 1024)"  # ru_maxrss is in KiB on Linux
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return {"peak_bytes": float(out.stdout.strip().splitlines()[-1]),
            "method": "ru_maxrss delta in a fresh process"}  # type: ignore[dict-item]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--ref-iters", type=int, default=1)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast (engine only)")
    parser.add_argument("--memory-batch", type=int, default=128)
    parser.add_argument("--checkpoint", action="store_true",
                        help="time the engine with per-block gradient checkpointing")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = make_model(device, args.layers, args.hidden, args.checkpoint)
    data = make_batch(args.batch, args.length, device)
    result: dict[str, object] = {
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "threads": torch.get_num_threads(), "batch": args.batch, "n": args.length,
        "m": args.length, "layers": args.layers, "hidden": args.hidden, "amp": args.amp,
        "checkpoint": args.checkpoint,
    }
    engine_s = time_step(lambda: engine_step(model, data, args.amp), args.iters, device)
    result["engine_s_per_step"] = engine_s
    result["engine_pairs_per_s"] = args.batch / engine_s
    if not args.skip_reference:
        ref_s = time_step(lambda: reference_step(model, data), args.ref_iters, device, warmup=0)
        result["reference_s_per_step"] = ref_s
        result["reference_pairs_per_s"] = args.batch / ref_s
        result["speedup"] = ref_s / engine_s
        # the reference as the tests use it on ragged batches: one pair at a time
        one = tuple(t[:1] for t in data)
        pair_s = time_step(lambda: reference_step(model, one), args.ref_iters, device, warmup=0)
        result["reference_per_pair_s"] = pair_s
        result["speedup_vs_per_pair"] = pair_s * args.batch / engine_s
    result["projected_snli_epoch_min"] = SNLI_TRAIN_PAIRS / (args.batch / engine_s) / 60
    mem = peak_memory(device, args.memory_batch, args.length, args.layers, args.hidden, args.amp)
    result["memory_batch"] = args.memory_batch
    result["peak_memory_gb"] = mem["peak_bytes"] / 1e9
    result["memory_method"] = mem["method"]
    mem_ckpt = peak_memory(device, args.memory_batch, args.length, args.layers, args.hidden,
                           args.amp, checkpoint=True)
    result["peak_memory_checkpoint_gb"] = mem_ckpt["peak_bytes"] / 1e9
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"device {result['device']} (threads {result['threads']}), four-stacked TC-LSTMs, "
          f"4 directions, d={args.hidden}, batch {args.batch}, n=m={args.length}")
    print(f"engine     {engine_s:8.3f} s/step  {args.batch / engine_s:9.1f} pairs/s")
    if "speedup" in result:
        print(f"reference  {result['reference_s_per_step']:8.3f} s/step  "
              f"{result['reference_pairs_per_s']:9.1f} pairs/s")
        print(f"speedup    {result['speedup']:8.1f}x (target >= 10x)")
        print(f"reference, one pair at a time: {result['reference_per_pair_s']:.3f} s/pair -> "
              f"speedup {result['speedup_vs_per_pair']:.1f}x")
    print(f"SNLI epoch ({SNLI_TRAIN_PAIRS} pairs) at this speed: "
          f"{result['projected_snli_epoch_min']:.1f} min")
    print(f"peak memory, batch {args.memory_batch}, 32x32 grid: "
          f"{result['peak_memory_gb']:.2f} GB ({mem['method']}; target well under 8 GB); "
          f"with checkpoint = true: {result['peak_memory_checkpoint_gb']:.2f} GB")


if __name__ == "__main__":
    main()
