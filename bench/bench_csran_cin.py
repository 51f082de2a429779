"""Training throughput (pairs/s, forward + backward + Adam step) of CSRAN, CIN and ESIM.

Batches follow SNLI's shape: premise lengths around 14 tokens and hypothesis lengths around 8
(CIN Table 1), batch 64, a 20,000-word vocabulary of random strings (so the character
encoders see realistic word lengths). Models use the papers' sizes (300-d embeddings; CSRAN
as in the authors' logged run; CIN with 150 hidden units and 300-wide layers; ESIM 300).

    .venv/bin/python bench/bench_csran_cin.py                    # CPU, and CUDA when present
    .venv/bin/python bench/bench_csran_cin.py --device cpu --steps 5 --small

On CUDA the LSTMs run as cuDNN kernels over packed sequences (``run_rnn``) under bf16
autocast; CIN's per-example convolution is one batched matmul over unfolded windows.

Next to pairs/s (the reference figure: the papers' and ``bench/figures.toml``'s unit) every
model prints, from the same run (bench/flops.py): FLOPs per step and per pair, FLOP/s, the
share of a same-shape GEMM's throughput (:data:`GEMM_SHAPES`: the shape of the model's
LSTM products at this batch, timed interleaved with the model) and the peak memory of one
training step at the paper's batch size (:data:`PAPER_BATCH`; fresh process, VmHWM).
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flops import Share, count_flops, fresh_process_peak, measure

from pairrepro.models.base import ModelContext
from pairrepro.models.registry import build_model

FULL: dict[str, dict[str, Any]] = {
    "csran": {"hidden": 200, "layers": 3, "aggr_layers": 2, "out_hidden": 300},
    "cin": {"hidden": 150, "dim": 300, "layers": 2, "window": 3, "kmax": 4, "char_dim": 15},
    "esim": {"hidden": 300},
}
SMALL: dict[str, dict[str, Any]] = {
    "csran": {"hidden": 50, "layers": 3, "aggr_layers": 1, "out_hidden": 100,
              "char_dim": 10, "char_hidden": 32},
    "cin": {"hidden": 50, "dim": 100, "layers": 2, "window": 3, "kmax": 4, "char_dim": 10,
            "char_filters": 32},
    "esim": {"hidden": 100},
}


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
    "csran": (64, 300, 800), "cin": (64, 300, 600), "esim": (64, 300, 1200)}
PAPER_BATCH = {"csran": 128, "cin": 64, "esim": 32}  # recipes/<model>.toml (ESIM: the paper's)


def setup(name: str, hparams: dict[str, Any], device: torch.device, batches: int, batch: int,
          embed_dim: int, vocab: list[str]) -> tuple[torch.nn.Module, torch.optim.Optimizer,
                                                     list[tuple[torch.Tensor, ...]]]:
    """The model, its Adam optimiser and ``batches`` seeded SNLI-shaped batches."""
    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=embed_dim, num_outputs=3, vocab=vocab)
    model = build_model(name, ctx, hparams).to(device).train()
    optim = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(batches):
        left, lm = make_batch(batch, 14.0, len(vocab), gen)
        right, rm = make_batch(batch, 8.0, len(vocab), gen)
        labels = torch.randint(0, 3, (batch,), generator=gen)
        data.append(tuple(t.to(device) for t in (left, lm, right, rm, labels)))
    return model, optim, data


def train_step(model: torch.nn.Module, optim: torch.optim.Optimizer,
               batch: tuple[torch.Tensor, ...], step: bool = True) -> None:
    """Forward, backward and (with ``step``) an Adam step on one batch."""
    left, lm, right, rm, labels = batch
    with torch.autocast(left.device.type, dtype=torch.bfloat16,
                        enabled=left.device.type == "cuda"):
        logits = model(left, lm, right, rm)
    loss = torch.nn.functional.cross_entropy(logits.float(), labels)
    optim.zero_grad(set_to_none=True)
    loss.backward()
    if step:
        optim.step()


def bench(name: str, hparams: dict[str, Any], device: torch.device, steps: int, warmup: int,
          batch: int, embed_dim: int, vocab: list[str]) -> tuple[float, Share]:
    """Pairs per second and the FLOP figures over ``steps`` timed training steps (each one
    followed by a GEMM block, see bench/flops.py), after ``warmup`` untimed ones."""
    model, optim, data = setup(name, hparams, device, warmup + steps, batch, embed_dim, vocab)
    for b in data[:warmup]:
        train_step(model, optim, b)
    # batches differ in length: the FLOPs of a step are the mean over the timed batches
    flops = statistics.mean(count_flops(lambda b=b: train_step(model, optim, b, step=False))
                            for b in data[warmup:])
    timed = iter(data[warmup:] * 2)  # measure() runs one untimed warm-up step first
    share = measure(lambda: train_step(model, optim, next(timed)), GEMM_SHAPES[name], device,
                    rounds=steps, flops=round(flops))
    return batch / share.step_s, share


def peak_memory_gb(name: str, small: bool, batch: int) -> float:
    """Peak RSS growth (GB) of one training step at ``batch`` pairs, in a fresh process."""
    code = (f"import random, bench_csran_cin as b; vocab = b.make_vocab(20_000, "
            f"random.Random(0)); m, o, d = b.setup({name!r}, "
            f"(b.SMALL if {small} else b.FULL)[{name!r}], torch.device('cpu'), 1, {batch}, "
            f"{100 if small else 300}, vocab)")
    return fresh_process_peak(code, "b.train_step(m, o, d[0])") / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: CPU, then CUDA when available")
    parser.add_argument("--models", default="csran,cin,esim")
    parser.add_argument("--steps", type=int, default=0, help="timed steps (0: 5 CPU, 50 CUDA)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    parser.add_argument("--skip-memory", action="store_true", help="no peak-memory step")
    parser.add_argument("--small", action="store_true", help="reduced sizes (quick CPU check)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    devices = ([torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available()
                                        else [])
               if args.device == "auto" else [torch.device(args.device)])
    embed_dim = 100 if args.small else 300
    vocab = make_vocab(20_000, random.Random(0))
    sizes = SMALL if args.small else FULL
    print(f"torch {torch.__version__}, batch {args.batch}, SNLI lengths (14 / 8), "
          f"{'small' if args.small else 'paper'} sizes, embed {embed_dim}")
    for device in devices:
        steps = args.steps or (50 if device.type == "cuda" else 5)
        label = torch.cuda.get_device_name(device) if device.type == "cuda" else (
            f"cpu x{torch.get_num_threads()} threads")
        for name in args.models.split(","):
            rate, share = bench(name, sizes[name], device, steps, args.warmup, args.batch,
                                embed_dim, vocab)
            print(f"{label:28s} {name:6s} {rate:10.1f} pairs/s (train, {steps} steps); "
                  f"{share.flops / args.batch / 1e9:.3f} GFLOP/pair")
            print(f"{'':28s} {'':6s} {share.describe()}")
            if device.type == "cpu" and not args.skip_memory:
                gb = peak_memory_gb(name, args.small, PAPER_BATCH[name])
                print(f"{'':28s} {'':6s} peak memory, batch {PAPER_BATCH[name]}: {gb:.2f} GB "
                      "(peak RSS growth (VmHWM) of one training step, fresh process, 1 thread)")


if __name__ == "__main__":
    main()
