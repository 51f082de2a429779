"""The timing protocol every ``bench/`` script follows, so that load cannot bias a figure.

A figure measured on a shared machine moves with what else runs there: time-slicing
stretches a short GEMM block more than a multi-second model step, so a "share of a GEMM"
taken under load rises with the load. The protocol therefore

* pins a one-thread bench to one core (:func:`pin`, the least busy one), so the scheduler
  cannot move it onto a core another process is using;
* times the model step and its GEMM yardstick in **equal-length interleaved blocks**
  (:func:`interleave`, the order alternating each round) and keeps the **minimum** of each:
  load only ever adds time, so the least-disturbed block is the closest to the machine's
  own speed, and both sides get the same number of chances at a quiet moment;
* records the load (:class:`LoadMonitor`): the 1-minute load average at start and end, the
  CPU the *other* processes used machine-wide and on the bench's own cores (from
  ``/proc/stat`` and ``/proc/self/stat``), and marks the run a **reference measurement**
  only when every runnable thread had a core (load average ≤ the machine's cores, plus
  :data:`LOAD_MARGIN` for commands that come and go; the average counts the bench's own
  threads) and others took at most :data:`MAX_OTHERS_ON_OUR_CORES` of the bench's cores
  (:func:`judge`);
* says which machine it is (:class:`Machine`: CPU model, ISA flags, whether bf16 runs on
  real matrix units or is emulated, from a short GEMM probe), because the best GEMM of one
  machine is bf16 (AMX, AVX512-BF16) and of another fp32.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import torch

from pairrepro.device import cpu_flags, cpu_model, set_threads

# ISA flags that decide the GEMM rates: printed with the machine
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile",
             "amx_bf16")
# a run is a reference measurement only if other processes took at most this share of the
# bench's own cores (the rest of the machine may be busy: it does not slow a pinned bench)
MAX_OTHERS_ON_OUR_CORES = 0.10
# and if the 1-minute load average stayed within the machine's cores plus this margin: the
# average also counts commands of a second or two (a `ps`, a linter) that never held a core
# long, which the share of the bench's own core above measures directly
LOAD_MARGIN = 0.5
# bf16 counts as native when its GEMM is no more than this much slower than fp32's (a real
# bf16 unit is faster; emulation on AVX2 is ~50-80x slower)
EMULATED_SLOWDOWN = 2.0


def gemm_rate(dtype: torch.dtype, size: int = 256, seconds: float = 0.2,
              autocast: bool = False) -> float:
    """FLOP/s of a ``size``-square matmul in ``dtype`` over about ``seconds`` (one call at
    least), the quick probe that tells native bf16 from emulated."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(dtype)
    b = torch.randn(size, size, generator=gen).to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        torch.mm(a, b)
        calls, start = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - start < seconds:
            torch.mm(a, b)
            calls += 1
    return calls * 2 * size ** 3 / (time.perf_counter() - start)


@dataclass(frozen=True)
class Machine:
    """What the figures were measured on."""

    cpu: str
    flags: tuple[str, ...]  # the :data:`ISA_FLAGS` this CPU has
    cores: int  # logical CPUs of the machine
    torch: str
    capability: str  # torch's CPU kernel level (AVX2, AVX512, ...)
    mkldnn_bf16: bool  # oneDNN's own answer
    fp32_probe: float  # FLOP/s of the probe GEMM
    bf16_probe: float

    @property
    def bf16_slowdown(self) -> float:
        """How many times slower a bf16 GEMM is than an fp32 one (< 1: faster)."""
        return self.fp32_probe / self.bf16_probe

    @property
    def bf16_native(self) -> bool:
        return self.bf16_slowdown <= EMULATED_SLOWDOWN

    @property
    def best_dtype(self) -> torch.dtype:
        """The dtype of this machine's fastest GEMM: bf16 on real bf16 units, else fp32."""
        return (torch.bfloat16 if self.bf16_native and self.bf16_probe > self.fp32_probe
                else torch.float32)

    def describe(self) -> str:
        bf16 = ("native" if self.bf16_native else
                f"emulated, {self.bf16_slowdown:.0f}x slower than fp32")
        return (f"{self.cpu}, {self.cores} cores, ISA {' '.join(self.flags) or 'none listed'}"
                f" (torch {self.torch}, {self.capability} kernels); bf16 GEMM {bf16} "
                f"(probe: fp32 {self.fp32_probe / 1e9:.0f}, bf16 {self.bf16_probe / 1e9:.1f} "
                f"GFLOP/s; oneDNN bf16 {'yes' if self.mkldnn_bf16 else 'no'})")

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "bf16_native": self.bf16_native,
                "best_dtype": str(self.best_dtype).removeprefix("torch.")}


def detect_machine() -> Machine:
    """This machine, with a 0.4 s fp32-vs-bf16 GEMM probe (run after :func:`pin`)."""
    cpu, flags = cpu_model(), cpu_flags()
    try:
        mkldnn = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        mkldnn = False
    return Machine(cpu=cpu, flags=tuple(f for f in ISA_FLAGS if f in flags),
                   cores=os.cpu_count() or 1, torch=torch.__version__,
                   capability=torch.backends.cpu.get_cpu_capability(), mkldnn_bf16=mkldnn,
                   fp32_probe=gemm_rate(torch.float32), bf16_probe=gemm_rate(torch.bfloat16))


# --- load -----------------------------------------------------------------------------------

def cpu_jiffies() -> dict[int, tuple[int, int]]:
    """``{cpu: (busy, total)}`` jiffies since boot from ``/proc/stat``; steal time counts as
    busy (on a VM the host taking the core slows the bench like any other process)."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu":
            v = [int(x) for x in values[:8]]  # user nice system idle iowait irq softirq steal
            out[int(name[3:])] = (sum(v) - v[3] - v[4], sum(v))
    return out


def self_jiffies() -> int:
    """CPU jiffies of this process and its waited-for children (utime stime cutime cstime)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])


@dataclass
class Load:
    """What else ran while a bench measured, and whether its figures are a reference."""

    cores: int  # of the machine
    threads: int  # the bench's
    our_cores: list[int]  # the cores the bench was pinned to (all when not pinned)
    load_start: float  # 1-minute load average
    load_end: float
    others_cores: float  # CPU used by other processes, machine-wide, in cores
    others_on_ours: float  # share of the bench's cores that other processes took
    reference: bool = False
    reasons: list[str] = field(default_factory=list)

    def describe(self) -> str:
        verdict = ("reference measurement" if self.reference else
                   "NOT a reference measurement: " + "; ".join(self.reasons))
        return (f"load {self.load_start:.2f} -> {self.load_end:.2f} (1-min average, "
                f"{self.cores} cores); other processes {self.others_cores:.2f} cores "
                f"machine-wide, {self.others_on_ours:.0%} of the bench's core(s) "
                f"{','.join(map(str, self.our_cores))}; {self.threads} thread(s): {verdict}")


def judge(load: Load) -> Load:
    """``load`` with ``reference`` and ``reasons`` set by the protocol's rule."""
    reasons = []
    worst = max(load.load_start, load.load_end)
    if worst > load.cores + LOAD_MARGIN:
        reasons.append(f"load {worst:.2f} above the machine's {load.cores} cores "
                       f"(+{LOAD_MARGIN}: runnable threads waited for a core)")
    if load.others_on_ours > MAX_OTHERS_ON_OUR_CORES:
        reasons.append(f"other processes took {load.others_on_ours:.0%} of the bench's "
                       f"core(s) (at most {MAX_OTHERS_ON_OUR_CORES:.0%})")
    load.reference, load.reasons = not reasons, reasons
    return load


class LoadMonitor:
    """Records :class:`Load` over a measurement: ``start()``, measure, ``stop()``."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.cores = os.cpu_count() or 1

    def start(self) -> LoadMonitor:
        self._load = os.getloadavg()[0]
        self._cpus, self._self = cpu_jiffies(), self_jiffies()
        return self

    def stop(self) -> Load:
        cpus, own = cpu_jiffies(), self_jiffies() - self._self
        ours = sorted(os.sched_getaffinity(0))
        busy = {c: cpus[c][0] - self._cpus[c][0] for c in cpus}
        total = {c: cpus[c][1] - self._cpus[c][1] for c in cpus}
        all_total = max(sum(total.values()), 1)
        others = max(sum(busy.values()) - own, 0) / all_total * len(cpus)
        our_total = max(sum(total[c] for c in ours), 1)
        others_ours = max(sum(busy[c] for c in ours) - own, 0) / our_total
        return judge(Load(self.cores, self.threads, ours, self._load, os.getloadavg()[0],
                          others, others_ours))


def pin(threads: int, sample_s: float = 0.3) -> list[int]:
    """Set up the process as a training run does (``set_threads``: torch's threads, freed
    memory kept); a one-thread bench is pinned to the least busy core (sampled over
    ``sample_s``), so it keeps one core and the scheduler moves others off it. Returns the
    cores the process may run on."""
    set_threads(threads)
    if threads == 1 and hasattr(os, "sched_setaffinity"):
        before = cpu_jiffies()
        time.sleep(sample_s)
        after = cpu_jiffies()
        allowed = os.sched_getaffinity(0)
        idle = {c: (after[c][1] - before[c][1]) - (after[c][0] - before[c][0])
                for c in after if c in allowed}
        os.sched_setaffinity(0, {max(idle, key=idle.__getitem__)})
    return sorted(os.sched_getaffinity(0))


# --- interleaved blocks ---------------------------------------------------------------------

@dataclass
class Timing:
    """Per-call seconds of a step, its yardstick and an optional extra GEMM, per block."""

    step: list[float]
    ref: list[float]
    block_s: float
    extra: list[float] = field(default_factory=list)

    @property
    def step_s(self) -> float:
        return min(self.step)

    @property
    def ref_s(self) -> float:
        return min(self.ref)


def _block(fn: Callable[[], object], length: float, clock: Callable[[], float],
           sync: Callable[[], None]) -> float:
    """Mean seconds per call of ``fn`` called until ``length`` seconds have passed (once at
    least)."""
    calls, start = 0, clock()
    while True:
        fn()
        sync()
        calls += 1
        elapsed = clock() - start
        if elapsed >= length:
            return elapsed / calls


def interleave(step: Callable[[], object], ref: Callable[[], object], rounds: int,
               block_s: float, clock: Callable[[], float] = time.perf_counter,
               sync: Callable[[], None] = lambda: None,
               extra: Callable[[], object] | None = None, extra_s: float = 0.2) -> Timing:
    """``rounds`` pairs of equal-length blocks, the order alternating each round so neither
    side always follows the other: a step block (``step`` repeated for ``block_s`` seconds,
    once at least: a long step sets the length) and a ``ref`` block as long as the latest
    step block. ``extra`` (the machine's best GEMM, a property of the machine rather than of
    the step) gets a short ``extra_s`` block after each pair. Call ``step`` and ``ref`` once
    beforehand (warm-up)."""
    timing = Timing([], [], block_s)
    length = block_s
    for r in range(rounds):
        if r % 2 == 0:
            start = clock()
            timing.step.append(_block(step, block_s, clock, sync))
            length = max(block_s, clock() - start)
            timing.ref.append(_block(ref, length, clock, sync))
        else:
            start = clock()
            timing.ref.append(_block(ref, length, clock, sync))
            timing.step.append(_block(step, clock() - start, clock, sync))
        if extra is not None:
            timing.extra.append(_block(extra, extra_s, clock, sync))
    return timing


# --- the run's header and record ------------------------------------------------------------

RECORDS = Path(__file__).resolve().parent / "records"
KEEP_RUNS = 4  # runs kept per script: the README shows the latest reference ones


def add_common_arguments(parser: argparse.ArgumentParser, script: str) -> None:
    """The options every model bench takes: device, threads, interleaved rounds, the bf16
    cap, the peak-memory time limit, --record."""
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved model / GEMM block pairs (minimum of each)")
    parser.add_argument("--bf16-cap", type=float, default=5.0,
                        help="where bf16 is emulated, skip a bf16 step predicted longer (s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--memory-timeout", type=float, default=120.0)
    parser.add_argument("--record", action="store_true",
                        help=f"append this run to bench/records/{script}.json")


def begin(threads: int) -> tuple[Machine, list[int]]:
    """Pin, detect the machine and print both: the first lines of every bench's output."""
    cores = pin(threads)
    machine = detect_machine()
    print(f"machine: {machine.describe()}")
    print(f"threads {threads}, pinned to core(s) {','.join(map(str, cores))} "
          f"(load now {os.getloadavg()[0]:.2f})", flush=True)
    return machine, cores


def write_record(script: str, run: dict[str, object], folder: Path = RECORDS) -> Path:
    """Append ``run`` to ``folder/<script>.json`` (the last :data:`KEEP_RUNS` runs), with
    the time and command; ``run`` holds its own ``reference`` verdict."""
    path = folder / f"{script}.json"
    runs = json.loads(path.read_text(encoding="utf-8"))["runs"] if path.exists() else []
    run = {"measured": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), **run}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"script": script, "runs": [*runs, run][-KEEP_RUNS:]},
                              indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def print_profile(step: Callable[[], None], steps: int, model: torch.nn.Module,
                  rows: int = 15) -> None:
    """Where a training step's time goes: ``steps`` steps under torch's profiler (after one
    untimed step) print the operators by self time and each top-level submodule's forward
    time (a module list's: each item's), per step and as a share of the step. The
    profiler's own overhead is in every figure, so the shares, not the milliseconds, are the
    result."""
    from torch.profiler import ProfilerActivity, profile, record_function

    step()
    open_ranges: list[record_function] = []

    def enter(name: str) -> Callable[..., None]:
        def hook(*_: object) -> None:
            open_ranges.append(record_function(f"forward: {name}"))
            open_ranges[-1].__enter__()
        return hook

    def leave(*_: object) -> None:
        open_ranges.pop().__exit__(None, None, None)

    # a module list is never called: its items are
    parts = [(name, child) for name, child in model.named_children()
             if not isinstance(child, torch.nn.ModuleList | torch.nn.ModuleDict)]
    parts += [(f"{name}.{inner}", part) for name, child in model.named_children()
              if isinstance(child, torch.nn.ModuleList | torch.nn.ModuleDict)
              for inner, part in child.named_children()]
    handles = [hook for name, part in parts
               for hook in (part.register_forward_pre_hook(enter(name)),
                            part.register_forward_hook(leave))]
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                step()
    finally:
        for handle in handles:
            handle.remove()
    events = prof.key_averages()
    ops = sorted((e for e in events if not e.key.startswith("forward: ")),
                 key=lambda e: -e.self_cpu_time_total)
    step_us = sum(e.self_cpu_time_total for e in ops) / steps
    print(f"profile of {steps} steps: {step_us / 1e3:,.1f} ms per step (profiler included)")
    print(f"  {'operator':<48} {'ms/step':>9} {'share':>6} {'calls/step':>10}")
    for e in ops[:rows]:
        print(f"  {e.key[:48]:<48} {e.self_cpu_time_total / steps / 1e3:9.2f} "
              f"{e.self_cpu_time_total / steps / step_us:6.1%} {e.count / steps:10.1f}")
    modules = sorted((e for e in events if e.key.startswith("forward: ")),
                     key=lambda e: -e.cpu_time_total)
    print(f"  {'forward of submodule (backward not attributed)':<48} {'ms/step':>9} {'share':>6}")
    for e in modules:
        print(f"  {e.key.removeprefix('forward: ')[:48]:<48} "
              f"{e.cpu_time_total / steps / 1e3:9.2f} {e.cpu_time_total / steps / step_us:6.1%}",
              flush=True)
