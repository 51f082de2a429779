"""Shared measuring code of the ``bench/`` scripts: FLOPs, FLOP/s and the share of a GEMM.

The benchmark machine is shared and loaded, so an absolute speed says little on its own.
Every script that times a model therefore prints, from the same run:

* the FLOPs of one step, counted by torch's flop counter
  (:class:`torch.utils.flop_counter.FlopCounterMode`: matrix products and convolutions,
  forward and backward; elementwise work counts zero);
* the achieved FLOP/s (those FLOPs over the median step time);
* the share of the throughput of a plain matrix product of a given shape, timed
  *interleaved* with the model (one model step, then a block of GEMMs of about the same
  duration, repeated; medians of each), so both see the same load.

Peak memory is measured in a fresh process (:func:`fresh_process_peak`), with the kernel's
high-water mark reset just before the measured step, so the peak belongs to that step alone.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so a wall-clock interval covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` (forward and backward if ``fn`` runs both)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def gemm(shape: tuple[int, int, int], device: torch.device,
         dtype: torch.dtype = torch.float32) -> tuple[Callable[[], None], int]:
    """A ``[M, K] @ [K, N]`` product into a preallocated output, and its FLOPs ``2·M·K·N``."""
    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen, dtype=dtype).to(device)
    b = torch.randn(k, n, generator=gen, dtype=dtype).to(device)
    out = torch.empty(m, n, dtype=dtype, device=device)

    def run() -> None:
        torch.mm(a, b, out=out)

    return run, 2 * m * k * n


@dataclass
class Share:
    """One model's figures, all from one interleaved measurement."""

    flops: int  # per step
    step_s: float  # median seconds per step
    gemm_shape: tuple[int, int, int]
    gemm_flops_per_s: float  # median throughput of the reference GEMM

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.step_s

    @property
    def share(self) -> float:
        """Achieved FLOP/s as a fraction of the same-run GEMM's."""
        return self.flops_per_s / self.gemm_flops_per_s

    def describe(self) -> str:
        m, k, n = self.gemm_shape
        return (f"{self.flops / 1e9:.2f} GFLOP/step, {self.flops_per_s / 1e9:.1f} GFLOP/s = "
                f"{self.share:.0%} of a {m}x{k} @ {k}x{n} GEMM "
                f"({self.gemm_flops_per_s / 1e9:.1f} GFLOP/s, same run)")

    def as_dict(self) -> dict[str, object]:
        return {"flops_per_step": self.flops, "step_s": self.step_s,
                "flops_per_s": self.flops_per_s, "gemm_shape": list(self.gemm_shape),
                "gemm_flops_per_s": self.gemm_flops_per_s, "share_of_gemm": self.share}


def measure(step: Callable[[], object], gemm_shape: tuple[int, int, int],
            device: torch.device, rounds: int = 5, flops: int | None = None) -> Share:
    """Median step time of ``step`` and of a ``gemm_shape`` GEMM, timed alternately.

    ``step`` is called once untimed (warm-up) and, unless ``flops`` is given, once under
    the flop counter. Each round times one step, then as many GEMMs as take about as long.
    """
    step()
    if flops is None:
        flops = count_flops(step)
    ref, ref_flops = gemm(gemm_shape, device)
    ref()
    sync(device)
    start = time.perf_counter()
    ref()
    sync(device)
    one_gemm = max(time.perf_counter() - start, 1e-6)
    step_times, gemm_times = [], []
    reps = 1
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        sync(device)
        step_times.append(time.perf_counter() - start)
        reps = max(1, min(10_000, round(step_times[-1] / one_gemm)))
        start = time.perf_counter()
        for _ in range(reps):
            ref()
        sync(device)
        gemm_times.append((time.perf_counter() - start) / reps)
        one_gemm = gemm_times[-1]
    return Share(flops, statistics.median(step_times), gemm_shape,
                 ref_flops / statistics.median(gemm_times))


def fresh_process_peak(setup: str, step: str, threads: int = 1) -> float:
    """Bytes by which one ``step`` raises the resident memory of a fresh Python process.

    ``setup`` and ``step`` are Python source run in the project root with ``bench/`` on the
    path. The kernel's high-water mark (``VmHWM``) is reset after ``setup`` (writing 5 to
    ``/proc/self/clear_refs``), so a setup that peaked higher than the step cannot hide it;
    the figure is ``VmHWM`` after the step minus ``VmRSS`` before it.
    """
    code = "\n".join([
        "import sys, torch",
        f"torch.set_num_threads({threads})",
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})",
        "def vm(key):",
        "    for line in open('/proc/self/status'):",
        "        if line.startswith(key):",
        "            return int(line.split()[1]) * 1024",  # kB
        setup,
        "open('/proc/self/clear_refs', 'w').write('5')",
        "before = vm('VmRSS')",
        step,
        "print(vm('VmHWM') - before)",
    ])
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])
