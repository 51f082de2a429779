"""The bench protocol (bench/protocol.py) with injected timings and loads: interleaved
equal-length blocks keep the fastest block of each side, and a run at a load above the
machine's cores, or with others on the bench's core, is not a reference measurement."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def protocol() -> Iterator[ModuleType]:  # bench/ is not a package
    spec = importlib.util.spec_from_file_location("bench_protocol", ROOT / "bench" / "protocol.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_protocol"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_protocol"]


class FakeClock:
    """A clock that only moves when a fake function runs."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[str] = []

    def __call__(self) -> float:
        return self.now

    def fn(self, name: str, durations: list[float]) -> Callable[[], None]:
        times = iter(durations)

        def run() -> None:
            self.calls.append(name)
            self.now += next(times)
        return run


def test_interleave_keeps_the_fastest_block_of_each_side(protocol: ModuleType) -> None:
    clock = FakeClock()
    # the model step: 2 s, once 3 s (a loaded moment), once 1.5 s (the quiet one); the GEMM
    # 0.125 s a call, 0.25 s in the loaded block, 0.09375 s in the quiet one (binary
    # fractions: the fake clock adds them exactly)
    step = clock.fn("step", [2.0, 3.0, 1.5, 2.0])
    gemm = clock.fn("gemm", [0.125] * 16 + [0.25] * 8 + [0.09375] * 16 + [0.125] * 12)
    timing = protocol.interleave(step, gemm, rounds=4, block_s=1.0, clock=clock)
    assert timing.step == [2.0, 3.0, 1.5, 2.0]
    assert timing.ref == [0.125, 0.25, 0.09375, 0.125]
    assert (timing.step_s, timing.ref_s) == (1.5, 0.09375)  # the fastest blocks, not means
    # equal lengths: the first GEMM block lasted as long as its step block (2 s, 16 calls)
    assert clock.calls[:18] == ["step"] + ["gemm"] * 16 + ["gemm"]
    # the order alternates: round 2 starts with a GEMM block as long as the last step
    # block (2 s: 8 loaded calls), then one step
    assert clock.calls[17:26] == ["gemm"] * 8 + ["step"]


def test_interleave_gives_the_extra_gemm_a_short_block_each_round(protocol: ModuleType) -> None:
    clock = FakeClock()
    timing = protocol.interleave(clock.fn("step", [1.0] * 3), clock.fn("gemm", [0.5] * 6),
                                 rounds=3, block_s=1.0, clock=clock,
                                 extra=clock.fn("best", [0.1, 0.05] * 10), extra_s=0.2)
    assert len(timing.extra) == 3 and min(timing.extra) < 0.1


def _load(protocol: ModuleType, start: float, end: float, ours: float) -> Any:
    return protocol.judge(protocol.Load(cores=2, threads=1, our_cores=[0], load_start=start,
                                        load_end=end, others_cores=1.0, others_on_ours=ours))


def test_a_quiet_core_is_a_reference_measurement(protocol: ModuleType) -> None:
    # one training job on the other core: load 2 on 2 cores (2.3 with a passing command),
    # the bench's core its own
    load = _load(protocol, 1.9, 2.3, 0.02)
    assert load.reference and not load.reasons
    assert "reference measurement" in load.describe()


@pytest.mark.parametrize(("start", "end", "ours", "why"), [
    (2.1, 2.6, 0.02, "load 2.60 above the machine's 2 cores"),
    (1.0, 1.5, 0.25, "took 25% of the bench's core"),
])
def test_load_or_others_on_our_core_mark_a_run_not_reference(
        protocol: ModuleType, start: float, end: float, ours: float, why: str) -> None:
    load = _load(protocol, start, end, ours)
    assert not load.reference
    assert why in "; ".join(load.reasons)
    assert "NOT a reference measurement" in load.describe()


def test_monitor_counts_only_other_processes(protocol: ModuleType,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # two cores, 100 jiffies each; the bench (pinned to core 0) used 90 of core 0's, other
    # processes 5 more there and 60 on core 1
    stats = iter([{0: (0, 0), 1: (0, 0)}, {0: (95, 100), 1: (60, 100)}])
    own = iter([1000, 1090])
    loads = iter([(1.5, 1.0, 1.0), (1.8, 1.0, 1.0)])
    monkeypatch.setattr(protocol, "cpu_jiffies", lambda: next(stats))
    monkeypatch.setattr(protocol, "self_jiffies", lambda: next(own))
    monkeypatch.setattr(protocol.os, "getloadavg", lambda: next(loads))
    monkeypatch.setattr(protocol.os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(protocol.os, "cpu_count", lambda: 2)
    load = protocol.LoadMonitor(threads=1).start().stop()
    assert load.others_on_ours == pytest.approx(0.05)
    assert load.others_cores == pytest.approx(0.65)
    assert (load.load_start, load.load_end) == (1.5, 1.8)
    assert load.reference


def test_emulated_bf16_keeps_fp32_as_the_best_gemm(protocol: ModuleType) -> None:
    def machine(fp32: float, bf16: float) -> Any:
        return protocol.Machine(cpu="x", flags=(), cores=2, torch="t", capability="AVX2",
                                mkldnn_bf16=False, fp32_probe=fp32, bf16_probe=bf16)

    avx2 = machine(84e9, 1.2e9)  # this project's AMD EPYC: bf16 emulated
    assert not avx2.bf16_native and avx2.best_dtype == torch.float32
    assert "emulated, 70x slower" in avx2.describe()
    amx = machine(200e9, 1.4e12)  # an AMX machine: bf16 is the best GEMM
    assert amx.bf16_native and amx.best_dtype == torch.bfloat16


def _run(pairs_per_s: float, reference: bool, load: float) -> dict[str, Any]:
    quiet = {"load_start": load, "load_end": load, "others_on_ours": 0.01, "others_cores": 1.0,
             "reference": reference}
    fp32 = {"pairs_per_s": pairs_per_s, "share_of_gemm": pairs_per_s / 100,
            "share_of_best": pairs_per_s / 110, "load": quiet}
    return {"measured": "2026-11-25 09:00 UTC", "threads": 1, "reference": reference,
            "machine": {"cpu": "AMD EPYC", "cores": 2, "flags": ["avx2"], "torch": "2.13",
                        "bf16_native": False, "fp32_probe": 84e9, "bf16_probe": 1.2e9},
            "yardsticks": {"best": "1024x1024 @ 1024x1024 float32", "best_flops_per_s": 8e10},
            "models": [{"model": "csran", "batch": 64, "fp32": fp32,
                        "bf16": {"skipped": "emulated"},
                        "peak_memory_gb": {"batch 128 fp32": 1.18}}]}


def test_readme_table_shows_reference_runs_only(tmp_path: Path) -> None:
    from pairrepro.report.publishing.bench_records import bench_markdown

    assert "No reference benchmark run" in bench_markdown(tmp_path)
    runs = [_run(23.0, True, 2.1), _run(99.0, False, 3.4), _run(24.0, True, 2.2)]
    (tmp_path / "bench_csran_cin.json").write_text(json.dumps({"runs": runs}))
    table = bench_markdown(tmp_path)
    assert "23.0 pairs/s" in table and "24.0 pairs/s" in table
    assert "99.0" not in table and "3.40" not in table  # the loaded run is left out
    assert "AMD EPYC, 2 cores" in table and "1 thread, load 2.10" in table
    assert "| 4% |" in table  # the two reference runs' shares: 0.23 against 0.24
    assert "skipped (emulated)" in table


def test_readme_table_compares_runs_only_on_one_machine(tmp_path: Path) -> None:
    """Machines of this kind differ (AVX2 only, AVX512-BF16, AMX): a run on another CPU is its
    own row group, never set against the last run of another machine; bf16's speed-up is
    bf16 pairs/s over fp32's from the same run."""
    from pairrepro.report.publishing.bench_records import bench_markdown

    old, new = _run(23.0, True, 2.1), _run(30.0, True, 2.0)
    new["machine"].update(flags=["avx512_bf16"], bf16_native=True, bf16_probe=470e9)
    new["models"][0]["bf16"] = {**new["models"][0]["fp32"], "pairs_per_s": 75.0}
    (tmp_path / "bench_csran_cin.json").write_text(json.dumps({"runs": [old, new]}))
    table = bench_markdown(tmp_path)
    assert "A: AMD EPYC, 2 cores, ISA avx2" in table
    assert "B: AMD EPYC, 2 cores, ISA avx512_bf16" in table
    assert table.count("| one run |") == 2  # 23 against 30 would be a 23% "disagreement"
    assert "| 2.50x |" in table


def test_step_profile_section_sets_each_devices_last_two_runs_side_by_side(tmp_path: Path
                                                                          ) -> None:
    """Hand-made records: an older CPU run is left out, the last two are "A → B" per model,
    a failed model shows its error, and a GPU run is its own table."""
    from pairrepro.report.publishing.bench_records import step_profile_markdown

    def run(device: str, label: str, esim: dict, reference: bool = True) -> dict:
        return {"device": device, "device_name": device, "label": label,
                "measured": "2026-11-29 09:00 UTC", "reference": reference,
                "machine": {"cpu": "Xeon"}, "models": [
                    {"model": "nbow", "ops": 214, "syncs": 1, "host_reads": 7,
                     "host_ms": 43.4, "device_ms": None}, {"model": "esim", **esim}]}

    assert "No step profile" in step_profile_markdown(tmp_path)
    esim = {"ops": 8237, "syncs": 12, "host_reads": 31, "host_ms": 546.0, "device_ms": None}
    runs = [run("cpu", "oldest", {**esim, "ops": 1}), run("cpu", "before", esim),
            run("cpu", "after", {**esim, "ops": 8233, "syncs": 0}, reference=False),
            run("cuda", "after", {"error": "out of time"})]
    (tmp_path / "step_profile.json").write_text(json.dumps({"runs": runs}))
    text = step_profile_markdown(tmp_path)
    cpu, cuda = text.split("On `cuda`")
    assert "A = before" in cpu and "B = after" in cpu and "oldest" not in cpu
    assert "B = after, 2026-11-29 09:00 UTC, not a reference measurement" in cpu
    assert "| esim | 8,237 → 8,233 | 12 → 0 | 31 → 31 | 546.00 → 546.00 | - → - |" in cpu
    assert "| nbow | 214 → 214 | 1 → 1 |" in cpu
    assert "| esim | out of time | out of time |" in cuda


def test_profile_names_the_heavy_operator_and_submodule(
        protocol: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """A step whose time is all in one submodule's matmuls: the profile ranks that operator
    and that submodule first, names a module list's items, and leaves no hook behind."""

    class Slow(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(20):
                x = torch.mm(x, x) / 256
            return x

    class Fast(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fast, self.slow = Fast(), Slow()
            self.stack = torch.nn.ModuleList([Fast()])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.stack[0](self.slow(self.fast(x)))

    model, x = Model(), torch.randn(256, 256)
    protocol.print_profile(lambda: model(x), 2, model, rows=3)
    out = capsys.readouterr().out.splitlines()
    operators = out[out.index(next(line for line in out if "calls/step" in line)) + 1:]
    assert operators[0].split()[0] == "aten::mm" and float(operators[0].split()[3]) == 20.0
    modules = out[out.index(next(line for line in out if "forward of submodule" in line)) + 1:]
    assert modules[0].split()[0] == "slow"
    assert sorted(line.split()[0] for line in modules) == ["fast", "slow", "stack.0"]
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
