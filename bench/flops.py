"""Shared measuring code of the ``bench/`` scripts: FLOPs, FLOP/s and shares of two GEMMs.

Every script that times a model prints, from the same run and under the protocol of
``bench/protocol.py`` (pinned core, equal-length interleaved blocks, minimum of each, load
recorded and judged):

* the FLOPs of one step, counted by torch's flop counter
  (:class:`torch.utils.flop_counter.FlopCounterMode`: matrix products and convolutions,
  forward and backward; elementwise work counts zero);
* the achieved FLOP/s (those FLOPs over the fastest block's seconds per step), in fp32 and
  in bf16 autocast (the loss in fp32);
* its share of two yardsticks: a plain fp32 matrix product of the model's own shape, timed
  in blocks interleaved with the model, and the machine's best GEMM (:func:`yardsticks`:
  a large square product in bf16 where the CPU has real bf16 units, else in fp32), so a
  share is never judged against a slow reference.

Where bf16 is emulated (no AMX or AVX512-BF16: a bf16 GEMM tens of times slower than fp32),
a bf16 step that would take longer than a cap is not run (:func:`bf16_skip`): the output
says so and why, instead of spending minutes on a figure no one would train at.

Peak memory is measured in a fresh process (:func:`fresh_process_peak`), with the kernel's
high-water mark reset just before the measured step, so the peak belongs to that step alone.

    .venv/bin/python bench/flops.py      # the machine and its GEMM yardsticks
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from protocol import RECORDS, Load, LoadMonitor, Machine, begin, interleave, write_record

ROOT = Path(__file__).resolve().parents[1]
BEST_SIZE = 1024  # the square GEMM of the machine's best rate


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
    a = torch.randn(m, k, generator=gen).to(device, dtype)
    b = torch.randn(k, n, generator=gen).to(device, dtype)
    out = torch.empty(m, n, dtype=dtype, device=device)

    def run() -> None:
        torch.mm(a, b, out=out)

    return run, 2 * m * k * n


def shape_name(shape: tuple[int, int, int]) -> str:
    m, k, n = shape
    return f"{m}x{k} @ {k}x{n}"


@dataclass
class Yardsticks:
    """The machine's best GEMM: timed at the start of a run and again in a short block of
    every model's measurement; the fastest block so far is the machine's rate (a transient
    slowdown at the start must not flatter every later share)."""

    best_flops_per_s: float
    best_label: str  # shape and dtype
    fp32_square_flops_per_s: float  # the same square product in fp32 (equal to best without
    # bf16 units)
    load: Load
    run: Callable[[], None] | None = None
    flops: int = 0

    def update(self, seconds: list[float]) -> None:
        """Take the blocks' per-call ``seconds`` of :attr:`run` into the best rate."""
        if seconds:
            self.best_flops_per_s = max(self.best_flops_per_s, self.flops / min(seconds))

    def describe(self) -> str:
        return (f"best GEMM {self.best_label}: {self.best_flops_per_s / 1e9:.1f} GFLOP/s "
                f"(fp32 {self.fp32_square_flops_per_s / 1e9:.1f})")


def yardsticks(machine: Machine, device: torch.device, rounds: int = 4,
               block_s: float = 0.25) -> Yardsticks:
    """The best GEMM (a :data:`BEST_SIZE`-square product in ``machine.best_dtype``, or bf16
    on CUDA) against the fp32 one, in interleaved blocks, minimum of each."""
    size = (BEST_SIZE,) * 3
    dtype = torch.bfloat16 if device.type == "cuda" else machine.best_dtype
    best, flops = gemm(size, device, dtype)
    fp32, _ = gemm(size, device)
    best(), fp32()
    monitor = LoadMonitor(torch.get_num_threads()).start()
    timing = interleave(best, fp32, rounds, block_s, sync=lambda: sync(device))
    return Yardsticks(flops / timing.step_s,
                      f"{shape_name(size)} {str(dtype).removeprefix('torch.')}",
                      flops / timing.ref_s, monitor.stop(), best, flops)


@dataclass
class Share:
    """One model's figures in one precision, all from one interleaved measurement."""

    precision: str  # "fp32" | "bf16"
    flops: int  # per step
    step_s: float  # fastest block's seconds per step
    gemm_shape: tuple[int, int, int]
    gemm_flops_per_s: float  # the same-shape fp32 GEMM, fastest block
    best_flops_per_s: float  # the machine's best GEMM (:func:`yardsticks`)
    load: Load
    blocks: int = 0

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.step_s

    @property
    def share(self) -> float:
        """Achieved FLOP/s as a fraction of the same-shape fp32 GEMM's."""
        return self.flops_per_s / self.gemm_flops_per_s

    @property
    def share_of_best(self) -> float:
        return self.flops_per_s / self.best_flops_per_s

    def describe(self) -> str:
        return (f"{self.precision}: {self.flops / 1e9:.2f} GFLOP/step, {self.step_s:.3f} s/step"
                f", {self.flops_per_s / 1e9:.1f} GFLOP/s = {self.share:.0%} of the same-shape "
                f"fp32 GEMM ({shape_name(self.gemm_shape)}: {self.gemm_flops_per_s / 1e9:.1f} "
                f"GFLOP/s), {self.share_of_best:.0%} of the machine's best "
                f"({self.best_flops_per_s / 1e9:.1f}); min of {self.blocks} interleaved blocks")

    def as_dict(self) -> dict[str, object]:
        return {"precision": self.precision, "flops_per_step": self.flops,
                "step_s": self.step_s, "flops_per_s": self.flops_per_s,
                "gemm_shape": list(self.gemm_shape), "gemm_flops_per_s": self.gemm_flops_per_s,
                "share_of_gemm": self.share, "best_flops_per_s": self.best_flops_per_s,
                "share_of_best": self.share_of_best, "blocks": self.blocks,
                "load": self.load.__dict__}


def measure(step: Callable[[], object], gemm_shape: tuple[int, int, int],
            device: torch.device, best: Yardsticks, precision: str = "fp32", rounds: int = 3,
            flops: int | None = None, min_block_s: float = 0.5) -> Share:
    """``step`` against the same-shape fp32 GEMM in ``rounds`` interleaved block pairs
    (each at least ``min_block_s`` long, one step at least). ``step`` is called once untimed
    first: under the flop counter unless ``flops`` is given (that call is the warm-up).
    """
    if flops is None:
        flops = count_flops(step)
    else:
        step()
    sync(device)
    ref, ref_flops = gemm(gemm_shape, device)
    ref()
    monitor = LoadMonitor(torch.get_num_threads()).start()
    timing = interleave(step, ref, rounds, min_block_s, sync=lambda: sync(device),
                        extra=best.run)
    best.update(timing.extra)
    return Share(precision, flops, timing.step_s, gemm_shape, ref_flops / timing.ref_s,
                 best.best_flops_per_s, monitor.stop(), len(timing.step))


def bf16_skip(machine: Machine, device: torch.device, flops: int,
              gemm_shape: tuple[int, int, int], cap_s: float) -> str:
    """Why a bf16 step of ``flops`` is not timed here ("" when it is): on emulated bf16 the
    step is predicted from the same-shape GEMM's rate under autocast (a 0.2 s probe)."""
    if device.type == "cuda" or machine.bf16_native:
        return ""
    m, k, n = gemm_shape
    args = (torch.randn(m, k), torch.randn(n, k))  # x and w: a linear layer's autocast path
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.nn.functional.linear(*args)
        calls, start = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - start < 0.2:
            torch.nn.functional.linear(*args)
            calls += 1
    rate = calls * 2 * m * k * n / (time.perf_counter() - start)
    predicted = flops / rate
    if predicted <= cap_s:
        return ""
    return (f"skipped: bf16 emulated on this CPU ({machine.bf16_slowdown:.0f}x slower than "
            f"fp32 GEMM; this shape under autocast {rate / 1e9:.1f} GFLOP/s), a step would "
            f"take about {predicted:.0f} s (cap {cap_s:.0f} s)")


def bench_precisions(step_for: Callable[[bool], Callable[[], object]],
                     gemm_shape: tuple[int, int, int], device: torch.device, best: Yardsticks,
                     machine: Machine, rounds: int, bf16_cap_s: float,
                     flops: int | None = None) -> dict[str, object]:
    """fp32 and bf16 :class:`Share` of one model, from one run: ``step_for(amp)`` builds the
    training step (``amp``: bf16 autocast). bf16 reuses fp32's FLOP count (autocast changes
    dtypes, not products) and is skipped where :func:`bf16_skip` says so."""
    fp32 = measure(step_for(False), gemm_shape, device, best, "fp32", rounds, flops)
    out: dict[str, object] = {"flops_per_step": fp32.flops, "fp32": fp32}
    reason = bf16_skip(machine, device, fp32.flops, gemm_shape, bf16_cap_s)
    if reason:
        out["bf16"] = reason
    else:
        emulated = not machine.bf16_native and device.type == "cpu"
        # emulated bf16 gets one block pair: a capped look, not a figure to tune against
        bf16 = measure(step_for(True), gemm_shape, device, best, "bf16",
                       1 if emulated else rounds, fp32.flops)
        out["bf16"] = bf16
        if emulated:
            out["bf16_note"] = "emulated bf16 (no bf16 units): not a rate to train at"
    return out


def describe_precisions(result: dict[str, object], batch: int, indent: str = "  ") -> str:
    """The fp32 / bf16 lines of :func:`bench_precisions`' result (with pairs/s at ``batch``)."""
    lines = []
    for precision in ("fp32", "bf16"):
        share = result[precision]
        if isinstance(share, Share):
            lines.append(f"{indent}{share.describe()}; {batch / share.step_s:.1f} pairs/s")
        else:
            lines.append(f"{indent}{precision}: {share}")
    fp32, bf16 = result["fp32"], result["bf16"]
    if isinstance(fp32, Share) and isinstance(bf16, Share):
        lines.append(f"{indent}bf16 speed-up over fp32: {fp32.step_s / bf16.step_s:.2f}x"
                     + (f" ({result['bf16_note']})" if "bf16_note" in result else ""))
    return "\n".join(lines)


def precisions_record(result: dict[str, object], batch: int) -> dict[str, object]:
    """JSON-ready :func:`bench_precisions` result; ``reference`` only when every measured
    precision was taken at a reference load."""
    out: dict[str, object] = {"flops_per_step": result["flops_per_step"],
                              "flops_per_pair": int(result["flops_per_step"]) / batch}
    loads = []
    for precision in ("fp32", "bf16"):
        share = result[precision]
        if isinstance(share, Share):
            out[precision] = {**share.as_dict(), "pairs_per_s": batch / share.step_s}
            loads.append(share.load.reference)
        else:
            out[precision] = {"skipped": share}
    if "bf16_note" in result:
        out["bf16"]["note"] = result["bf16_note"]  # type: ignore[index]
    out["reference"] = all(loads)
    return out


def summary(results: list[dict[str, object]], best: Yardsticks) -> str:
    """A table of every model's fp32 and bf16 figures of this run, the shares of best taken
    against the run's final best GEMM (the fastest block of the whole run); updates the
    ``results`` (as :func:`precisions_record` gave them) to that best."""
    lines = [f"summary (best GEMM over the run: {best.best_label}, "
             f"{best.best_flops_per_s / 1e9:.1f} GFLOP/s):",
             f"  {'model':16s} {'precision':9s} {'pairs/s':>9s} {'GFLOP/s':>8s} "
             f"{'same-shape':>10s} {'best':>6s}  load"]
    for r in results:
        for precision in ("fp32", "bf16"):
            figures = r[precision]
            assert isinstance(figures, dict)
            if "skipped" in figures:
                lines.append(f"  {r['model']!s:16s} {precision:9s} skipped (emulated bf16)")
                continue
            figures["best_flops_per_s"] = best.best_flops_per_s
            figures["share_of_best"] = figures["flops_per_s"] / best.best_flops_per_s
            load = figures["load"]
            verdict = "reference" if load["reference"] else "NOT reference"
            lines.append(
                f"  {r['model']!s:16s} {precision + ('*' if 'note' in figures else ''):9s} "
                f"{figures['pairs_per_s']:9.1f} {figures['flops_per_s'] / 1e9:8.1f} "
                f"{figures['share_of_gemm']:10.0%} {figures['share_of_best']:6.0%}  "
                f"{max(load['load_start'], load['load_end']):.2f}, others "
                f"{load['others_on_ours']:.0%} of our core: {verdict}")
    if any("note" in r["bf16"] for r in results):  # type: ignore[operator]
        lines.append("  * bf16 emulated (no bf16 units on this CPU): one block, not a rate "
                     "to train at")
    return "\n".join(lines)


def fresh_process_peak(setup: str, step: str, threads: int = 1,
                       timeout_s: float | None = None) -> float | None:
    """Bytes by which one ``step`` raises the resident memory of a fresh Python process
    (``None`` if it ran past ``timeout_s``).

    ``setup`` and ``step`` are Python source run in the project root with ``bench/`` on the
    path. The kernel's high-water mark (``VmHWM``) is reset after ``setup`` (writing 5 to
    ``/proc/self/clear_refs``), so a setup that peaked higher than the step cannot hide it;
    the figure is ``VmHWM`` after the step minus ``VmRSS`` before it. torch's CPU allocator
    keeps no peak statistics (``torch.cpu`` has no ``max_memory_allocated``), and
    ``ru_maxrss`` cannot be reset after the setup, hence the kernel's counter.
    """
    code = "\n".join([
        "import os, sys, torch",
        "from pairrepro.device import set_threads",
        f"set_threads({threads})",  # as a training run: freed memory kept
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
    try:
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, cwd=ROOT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    return float(out.stdout.strip().splitlines()[-1])


@dataclass
class ModelBench:
    """What a model bench (``bench_grid.py``, ``bench_csran_cin.py``) opens with: its device
    and the device's name, the machine, and the cores it was pinned to."""

    device: torch.device
    label: str  # "cpu" or the CUDA device's name
    machine: Machine
    cores: list[int]

    def record(self, script: str, args: argparse.Namespace, best: Yardsticks,
               models: list[dict[str, Any]], **extra: object) -> None:
        """Append this run to ``records/<script>.json``: the machine, threads, cores,
        ``extra``, the best GEMM and its load, each model's figures, and the run's
        *reference measurement* verdict (every model's); say where it went."""
        path = write_record(script, {
            "device": self.label, "machine": self.machine.as_dict(), "threads": args.threads,
            "cores": self.cores, **extra,
            "yardsticks": {"best": best.best_label, "best_flops_per_s": best.best_flops_per_s,
                           "load": best.load.__dict__},
            "reference": all(m["reference"] for m in models), "models": models})
        print(f"recorded in {path.relative_to(RECORDS.parents[1])}")


def open_model_bench(args: argparse.Namespace) -> ModelBench:
    """A model bench's start: pin and print the machine (:func:`begin`) for ``args.threads``
    on ``args.device``."""
    device = torch.device(args.device)
    machine, cores = begin(args.threads)
    label = "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device)
    return ModelBench(device, label, machine, cores)


def main() -> None:
    import argparse

    from protocol import detect_machine, pin

    parser = argparse.ArgumentParser(description="the machine and its GEMM yardsticks")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    cores = pin(args.threads)
    machine = detect_machine()
    print(f"machine: {machine.describe()}")
    print(f"threads {args.threads}, pinned to core(s) {','.join(map(str, cores))}")
    best = yardsticks(machine, torch.device("cpu"))
    print(best.describe())
    print(best.load.describe())


if __name__ == "__main__":
    main()
