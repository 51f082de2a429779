"""Training throughput (pairs/s, forward + backward + Adam step) of CSRAN, CIN and ESIM.

Batches follow SNLI's shape: premise lengths around 14 tokens and hypothesis lengths around 8
(CIN Table 1), batch 64, a 20,000-word vocabulary of random strings (so the character
encoders see realistic word lengths). Models use the papers' sizes (300-d embeddings; CSRAN
as in the authors' logged run; CIN with 150 hidden units and 300-wide layers; ESIM 300).
``csran_trecqa`` is CSRAN as the TrecQA gap ladder's last step trains it
(recipes/csran_trecqa_es_tuned_no_em_all_negatives_big.toml: the paper's layer sizes, 50-d
vectors, two output classes) on TrecQA TRAIN-ALL's shape: questions around 8 tokens,
answers around 29.

    .venv/bin/python bench/bench_csran_cin.py                    # CPU, 1 thread
    .venv/bin/python bench/bench_csran_cin.py --small             # reduced sizes
    .venv/bin/python bench/bench_csran_cin.py --record            # + bench/records/
    .venv/bin/python bench/bench_csran_cin.py --models csran_trecqa --profile 5  # time by op
    .venv/bin/python bench/bench_csran_cin.py --models csran_trecqa --padded-ab    # bf16 encoders

On CUDA the LSTMs run as cuDNN kernels over packed sequences (``run_rnn``); CIN's
per-example convolution is one batched matmul over unfolded windows.

Next to pairs/s (the reference figure: the papers' and ``bench/figures.toml``'s unit) every
model prints, in fp32 and in bf16 autocast (loss in fp32), from the same run and under the
protocol of bench/protocol.py (pinned core, interleaved equal-length blocks, load recorded
and judged): FLOPs per step and per pair, FLOP/s, the shares of the same-shape fp32 GEMM
(:data:`GEMM_SHAPES`: the shape of the model's LSTM products at this batch) and of the
machine's best GEMM (bench/flops.py), and the peak memory of one training step at the
paper's batch size (:data:`PAPER_BATCH`; fresh process, VmHWM) in both precisions. Every
timed step trains on the same batch, so each block does the same work and the minimum over
blocks compares like with like.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flops import (
    Yardsticks,
    bench_precisions,
    describe_precisions,
    fresh_process_peak,
    open_model_bench,
    precisions_record,
    summary,
    yardsticks,
)
from protocol import Load, Machine, add_common_arguments, print_profile

from pairrepro.models.base import ModelContext, build_model

FULL: dict[str, dict[str, Any]] = {
    "csran": {"hidden": 200, "layers": 3, "aggr_layers": 2, "out_hidden": 300},
    "cin": {"hidden": 150, "dim": 300, "layers": 2, "window": 3, "kmax": 4, "char_dim": 15},
    "esim": {"hidden": 300},
    "csran_trecqa": {"hidden": 200, "layers": 3, "aggr_layers": 2, "aggr_hidden": 200,
                     "out_hidden": 300, "char_hidden": 128, "highway_layers": 2},
}
SMALL: dict[str, dict[str, Any]] = {
    "csran": {"hidden": 50, "layers": 3, "aggr_layers": 1, "out_hidden": 100,
              "char_dim": 10, "char_hidden": 32},
    "cin": {"hidden": 50, "dim": 100, "layers": 2, "window": 3, "kmax": 4, "char_dim": 10,
            "char_filters": 32},
    "esim": {"hidden": 100},
    "csran_trecqa": {"hidden": 64, "layers": 3, "aggr_layers": 2, "aggr_hidden": 64,
                     "out_hidden": 100, "char_hidden": 32, "highway_layers": 2},
}


@dataclass(frozen=True)
class Shape:
    """What a bench entry trains on: the registered model, mean lengths of the two texts,
    the embedding width at paper sizes (``--small``: 100) and the number of outputs."""

    model: str
    lengths: tuple[float, float]
    embed_dim: int
    outputs: int


SNLI = (14.0, 8.0)
SHAPES = {"csran": Shape("csran", SNLI, 300, 3), "cin": Shape("cin", SNLI, 300, 3),
          "esim": Shape("esim", SNLI, 300, 3),
          "csran_trecqa": Shape("csran", (8.3, 29.0), 50, 2)}


def make_vocab(size: int, rng: random.Random) -> list[str]:
    """``<pad>``, ``<unk>`` and ``size - 2`` random lower-case words of 2-12 letters."""
    words = {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 12)))
             for _ in range(size * 2)}
    return ["<pad>", "<unk>", *sorted(words)[: size - 2]]


def make_batch(batch: int, mean_len: float, vocab_size: int, gen: torch.Generator
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids ``[B, T]`` and mask with lengths ~ Poisson(mean_len - 1) + 1."""
    lengths = torch.poisson(torch.full((batch,), mean_len - 1.0), generator=gen).long() + 1
    width = int(lengths.max())
    mask = torch.arange(width)[None] < lengths[:, None]
    ids = torch.randint(2, vocab_size, (batch, width), generator=gen) * mask
    return ids, mask


# the yardstick GEMM per model: [batch, input] @ [input, 4·hidden], the shape of its LSTM
# products (per time step: cuDNN-less CPU LSTMs run one such product per step and direction)
GEMM_SHAPES: dict[str, tuple[int, int, int]] = {
    "csran": (64, 300, 800), "cin": (64, 300, 600), "esim": (64, 300, 1200),
    "csran_trecqa": (64, 400, 800)}
# recipes/<model>.toml (ESIM: the paper's; CSRAN on TrecQA: the ladder's batch)
PAPER_BATCH = {"csran": 128, "cin": 64, "esim": 32, "csran_trecqa": 64}


def setup(name: str, small: bool, device: torch.device, batches: int, batch: int,
          vocab: list[str]) -> tuple[torch.nn.Module, torch.optim.Optimizer,
                                     list[tuple[torch.Tensor, ...]]]:
    """Entry ``name``'s model at paper (or ``small``) sizes, its Adam optimiser and
    ``batches`` seeded batches of its shape."""
    shape = SHAPES[name]
    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=100 if small else shape.embed_dim,
                       num_outputs=shape.outputs, vocab=vocab)
    model = build_model(shape.model, ctx, (SMALL if small else FULL)[name]).to(device).train()
    optim = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(batches):
        left, lm = make_batch(batch, shape.lengths[0], len(vocab), gen)
        right, rm = make_batch(batch, shape.lengths[1], len(vocab), gen)
        labels = torch.randint(0, shape.outputs, (batch,), generator=gen)
        data.append(tuple(t.to(device) for t in (left, lm, right, rm, labels)))
    return model, optim, data


def train_step(model: torch.nn.Module, optim: torch.optim.Optimizer,
               batch: tuple[torch.Tensor, ...], step: bool = True, amp: bool = False) -> None:
    """Forward (bf16 autocast with ``amp``), an fp32 loss, backward and (with ``step``) an
    Adam step on one batch."""
    left, lm, right, rm, labels = batch
    with torch.autocast(left.device.type, dtype=torch.bfloat16, enabled=amp):
        logits = model(left, lm, right, rm)
    loss = torch.nn.functional.cross_entropy(logits.float(), labels)
    optim.zero_grad(set_to_none=True)
    loss.backward()
    if step:
        optim.step()


def bench(name: str, device: torch.device, args: argparse.Namespace, vocab: list[str],
          machine: Machine, best: Yardsticks) -> dict[str, object]:
    """fp32 and bf16 figures of one model (bench/flops.py's ``bench_precisions``), after
    ``args.warmup`` untimed steps; every step trains on the same seeded batch."""
    model, optim, data = setup(name, args.small, device, 1, args.batch, vocab)
    for _ in range(args.warmup):
        train_step(model, optim, data[0])

    def step_for(amp: bool) -> Any:
        return lambda: train_step(model, optim, data[0], amp=amp)

    return bench_precisions(step_for, GEMM_SHAPES[name], device, best, machine, args.rounds,
                            args.bf16_cap)


def peak_memory_gb(name: str, small: bool, batch: int, amp: bool, timeout_s: float
                   ) -> float | None:
    """Peak RSS growth (GB) of one training step at ``batch`` pairs, in a fresh process
    (``None``: past ``timeout_s``)."""
    code = (f"import random, bench_csran_cin as b; vocab = b.make_vocab(20_000, "
            f"random.Random(0)); m, o, d = b.setup({name!r}, {small}, torch.device('cpu'), "
            f"1, {batch}, vocab)")
    peak = fresh_process_peak(code, f"b.train_step(m, o, d[0], amp={amp})",
                              timeout_s=timeout_s)
    return None if peak is None else peak / 1e9


def padded_ab(name: str, args: argparse.Namespace, vocab: list[str]) -> None:
    """bf16 training steps with CSRAN's encoders on padded input (what trains) against packed
    input (what fp32 runs), in interleaved blocks of two steps, the minimum of each."""
    import pairrepro.models.csran as csran

    model, optim, data = setup(name, args.small, torch.device("cpu"), 1, args.batch, vocab)
    paths = {"padded": csran._encode, "packed": lambda *a: csran.run_rnn(*a)[0]}
    best = dict.fromkeys(paths, float("inf"))
    try:
        for block in range(args.rounds + 1):  # the first block of each: a warm-up
            for label, encode in paths.items():
                csran._encode = encode
                start = time.perf_counter()
                for _ in range(2):
                    train_step(model, optim, data[0], amp=True)
                if block:
                    best[label] = min(best[label], (time.perf_counter() - start) / 2)
    finally:
        csran._encode = paths["padded"]
    print(f"{name} bf16 encoders: padded {best['padded']:.3f} s/step, packed "
          f"{best['packed']:.3f} s/step (min of {args.rounds} interleaved blocks): padded "
          f"{best['packed'] / best['padded']:.2f}x as fast", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(SHAPES),
                        help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--warmup", type=int, default=0,
                        help="untimed steps before the measurement's own warm-up step")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--skip-memory", action="store_true", help="no peak-memory step")
    parser.add_argument("--small", action="store_true", help="reduced sizes (quick CPU check)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="instead of timing, profile STEPS training steps of each model "
                             "(bf16 where the CPU has bf16 units, else fp32; --fp32 forces it)")
    parser.add_argument("--fp32", action="store_true", help="with --profile: profile fp32")
    parser.add_argument("--padded-ab", action="store_true",
                        help="instead of timing, bf16 steps with CSRAN's encoders on padded "
                             "against packed input (csran models only)")
    add_common_arguments(parser, "bench_csran_cin")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    run = open_model_bench(args)
    best = yardsticks(run.machine, run.device)
    vocab = make_vocab(20_000, random.Random(0))
    print(f"torch {torch.__version__}, {run.label}, batch {args.batch}, "
          f"{'small' if args.small else 'paper'} sizes; {best.describe()}", flush=True)
    results = []
    for name in args.models.split(","):
        if name not in SHAPES:
            raise SystemExit(f"--models: unknown {name!r} (choose from {', '.join(SHAPES)})")
        shape = SHAPES[name]
        if args.padded_ab:
            padded_ab(name, args, vocab)
            continue
        if args.profile:
            amp = run.machine.bf16_native and not args.fp32
            print(f"{name}, {'bf16 autocast' if amp else 'fp32'}:")
            model, optim, data = setup(name, args.small, run.device, 1, args.batch, vocab)
            print_profile(partial(train_step, model, optim, data[0], amp=amp), args.profile,
                          model)
            continue
        measured = bench(name, run.device, args, vocab, run.machine, best)
        result = {"model": name, "batch": args.batch, **precisions_record(measured, args.batch)}
        print(f"{name}: {result['flops_per_pair'] / 1e9:.3f} GFLOP/pair (lengths "
              f"{shape.lengths[0]:g} / {shape.lengths[1]:g}, embed "
              f"{100 if args.small else shape.embed_dim})")
        print(describe_precisions(measured, args.batch))
        if run.device.type == "cpu" and not args.skip_memory:
            batch, memory = PAPER_BATCH[name], {}
            for precision in ("fp32", "bf16"):
                if "skipped" in result[precision]:
                    continue
                memory[f"batch {batch} {precision}"] = peak_memory_gb(
                    name, args.small, batch, precision == "bf16", args.memory_timeout)
            result["peak_memory_gb"] = memory
            print("  peak memory, " + ", ".join(
                f"{k}: {'past the time limit' if v is None else f'{v:.2f} GB'}"
                for k, v in memory.items())
                + " (peak RSS growth (VmHWM) of one training step, fresh process, 1 thread)")
        for precision in ("fp32", "bf16"):
            if "load" in result[precision]:
                print(f"  {precision} {Load(**result[precision]['load']).describe()}",
                      flush=True)
        results.append(result)
    if results:
        print(summary(results, best), flush=True)
    if args.record and results:
        run.record("bench_csran_cin", args, best, results,
                   sizes="small" if args.small else "paper")


if __name__ == "__main__":
    main()
