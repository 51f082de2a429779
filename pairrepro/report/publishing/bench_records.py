"""The model benchmark table of docs/benchmarks.md from ``bench/records/<script>.json``:
reference measurements only, the latest two of a model side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pairrepro.planning import BENCH_DIR
from pairrepro.planning.gpus import GpuRate, load_gpu_rates
from pairrepro.report.tables.numbers import markdown_table

RECORDS = BENCH_DIR / "records"
SCRIPTS = ("bench_grid", "bench_csran_cin")
SHARES = ("share_of_gemm", "share_of_best")


def _runs(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(script, run)`` for every reference run recorded in ``folder``, oldest first."""
    out = []
    for script in SCRIPTS:
        path = folder / f"{script}.json"
        if path.is_file():
            runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
            out += [(script, run) for run in runs if run.get("reference")]
    return out


def _machine_key(run: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two runs' figures comparable: the CPU, its kernel-picking ISA, torch."""
    m = run["machine"]
    return m["cpu"], m["cores"], " ".join(m["flags"]), m["torch"], m["bf16_native"]


def _machines(runs: list[dict[str, Any]]) -> dict[tuple[Any, ...], str]:
    """Each machine of ``runs`` -> a letter, its fixed facts and its bf16 probe's range."""
    out = {}
    for letter, key in zip("ABCDEFGH", sorted({_machine_key(r) for r in runs}), strict=False):
        cpu, cores, flags, torch, native = key
        ratios = [r["machine"]["bf16_probe"] / r["machine"]["fp32_probe"] for r in runs
                  if _machine_key(r) == key]
        bf16 = (f"bf16 units: a bf16 GEMM {min(ratios):.1f}-{max(ratios):.1f}x fp32's"
                if native else
                f"no bf16 units (a bf16 GEMM {1 / max(ratios):.0f}-{1 / min(ratios):.0f}x "
                "slower than fp32: emulated)")
        out[key] = f"{letter}: {cpu}, {cores} cores, ISA {flags}, torch {torch}; {bf16}"
    return out


def _precision(fig: dict[str, Any]) -> str:
    if "skipped" in fig:
        return "skipped (emulated)"
    mark = " (emulated, one block)" if "note" in fig else ""
    return (f"{fig['pairs_per_s']:.1f} pairs/s, {fig['share_of_gemm']:.0%} / "
            f"{fig['share_of_best']:.0%}{mark}")


def _speed_up(model: dict[str, Any]) -> str:
    """bf16 pairs/s over fp32's, both from the same run ("" where bf16 was not timed)."""
    fp32, bf16 = model["fp32"], model["bf16"]
    if "pairs_per_s" not in fp32 or "pairs_per_s" not in bf16 or "note" in bf16:
        return ""
    return f"{bf16['pairs_per_s'] / fp32['pairs_per_s']:.2f}x"


def _load(model: dict[str, Any]) -> str:
    loads = [model[p]["load"] for p in ("fp32", "bf16") if "load" in model[p]]
    worst = max(max(x["load_start"], x["load_end"]) for x in loads)
    others = max(x["others_on_ours"] for x in loads)
    rest = max(x["others_cores"] for x in loads)
    return f"{worst:.2f}, others {others:.0%} of its core, {rest:.1f} cores in all"


def _memory(model: dict[str, Any]) -> str:
    memory = {k: v for k, v in model.get("peak_memory_gb", {}).items() if k != "method"}
    return ", ".join(f"{k}: {'-' if v is None else f'{v:.2f} GB'}" for k, v in memory.items())


def _agreement(rows: list[dict[str, Any]]) -> str:
    """The largest relative difference of a share between the two latest runs."""
    if len(rows) < 2:
        return "one run"
    worst = 0.0
    for precision in ("fp32", "bf16"):
        a, b = rows[-2][precision], rows[-1][precision]
        if "skipped" in a or "skipped" in b or "note" in a or "note" in b:
            continue  # emulated bf16 is a one-block look, not a figure to compare
        worst = max([worst, *(abs(a[s] - b[s]) / max(a[s], b[s]) for s in SHARES)])
    return f"{worst:.0%}"


def bench_markdown(folder: Path | None = None) -> str:
    if not (runs := _runs(folder or RECORDS)):
        return ("No reference benchmark run is recorded yet (`bench/bench_grid.py --record`, "
                "`bench/bench_csran_cin.py --record` on a quiet core).\n")
    machines = _machines([run for _, run in runs])
    lines = ["Reference runs only (`bench/records/`); machines: "
             + "; ".join(machines.values()) + ".",
             "Each figure is pairs/s, then the share of the same-shape fp32 GEMM / of the "
             "machine's best GEMM, timed in interleaved blocks (minimum of each) on one "
             "pinned core. Load: the 1-minute load average (the bench's own thread included)"
             " and the other processes' share of the bench's core and their CPU in all (a "
             "job on another core still shares the L3 cache and memory bandwidth: a "
             "memory-bound step slows where an L2-sized GEMM does not).", "",
             *markdown_table(["model", "batch", "machine, run (threads, load)", "fp32", "bf16",
                              "bf16 speed-up", "peak memory, paper's batch",
                              "shares of the machine's last two runs differ by"])]
    by_model: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for _, run in runs:  # figures compare only on one machine
        for model in run["models"]:
            by_model.setdefault((model["model"], machines[_machine_key(run)]), []).append(
                (run, model))
    for (name, machine), entries in sorted(by_model.items(), key=lambda kv: kv[0][1]):
        latest = entries[-2:]
        agree = _agreement([m for _, m in latest])
        for run, model in latest:
            best = run["yardsticks"]
            lines.append(f"| {name} | {model['batch']} | {machine[0]}, {run['measured']} "
                         f"({run['threads']} thread, load {_load(model)}; best GEMM "
                         f"{best['best']} {best['best_flops_per_s'] / 1e9:.1f} GFLOP/s) | "
                         f"{_precision(model['fp32'])} | {_precision(model['bf16'])} | "
                         f"{_speed_up(model)} | {_memory(model)} | {agree} |")
    return "\n".join(lines) + "\n"


def gpu_rates_markdown(gpu: str = "h100") -> str:
    """The training rates ``bench/gpu_check.sh`` recorded on GPU ``gpu``, a row per model
    and the one-epoch figure, each with the run that measured it (the plan's figures)."""
    if not (rates := load_gpu_rates(gpu)):
        return f"No rate is recorded on `{gpu}` yet (`bench/gpu_check.sh` on that GPU).\n"
    subjects: dict[str, dict[str, GpuRate]] = {}  # a model's rates sit under two keys
    for rate in rates.values():
        subjects.setdefault(rate.subject, {})[rate.precision] = rate
    lines = [f"Recorded on `{gpu}` (`bench/records/gpu_rates.json`): the training loop's step"
             " at the recipe's sizes and batch on random words of the dataset's lengths (runs "
             "before 2026-11-29: preflight's median of 6 steps, each read back; since: 20 "
             "steps read back as the loop reads them, every 50); the epoch is `pairrepro "
             "train` for one epoch (random vectors standing in for GloVe), pairs/s over its "
             "training time.", "",
             *markdown_table(["what", "fp32 pairs/s", "bf16 pairs/s", "measured"], [
                 [subject, *(f"{by_precision[p].pairs_per_s:.1f}" if p in by_precision else "-"
                             for p in ("fp32", "bf16")),
                  "; ".join(sorted({rate.run for rate in by_precision.values()}))]
                 for subject, by_precision in sorted(subjects.items(),
                                                     key=lambda kv: kv[0].startswith("one"))])]
    return "\n".join(lines) + "\n"


def _change(figures: list[dict[str, dict[str, Any]]], model: str, key: str) -> str:
    """``model``'s ``key`` in each run, as "A → B" (its error where it failed)."""
    got = [f.get(model, {}).get(key, f.get(model, {}).get("error", "-")) for f in figures]
    return " → ".join(v if isinstance(v, str) else "-" if v is None else f"{v:,}"
                      if isinstance(v, int) else f"{v:,.2f}" for v in got)


def step_profile_markdown(folder: Path | None = None) -> str:
    """``bench/records/step_profile.json``: per device, its last two runs (before and after a
    change) as "A → B", a row per model: ops, syncs, host reads and the step's times."""
    path = (folder or RECORDS) / "step_profile.json"
    by_device: dict[str, list[dict[str, Any]]] = {}
    for run in json.loads(path.read_text(encoding="utf-8"))["runs"] if path.is_file() else []:
        by_device.setdefault(run["device"], []).append(run)
    lines: list[str] = [] if by_device else ["No step profile is recorded yet.\n"]
    keys = ("ops", "syncs", "host_reads", "host_ms", "device_ms")
    for device, runs in by_device.items():
        figures = [{m["model"]: m for m in run["models"]} for run in runs[-2:]]
        lines += [f"On `{device}` ({runs[-1]['machine']['cpu']}, {runs[-1]['device_name']}): "
                  + "; ".join(f"{chr(65 + i)} = {r['label'] or 'run'}, {r['measured']}, "
                              f"{'' if r['reference'] else 'not '}a reference measurement"
                              for i, r in enumerate(runs[-2:])) + ".", "",
                  *markdown_table(["model", *(k.replace("_", " ") for k in keys)],
                                  ([m, *(_change(figures, m, k) for k in keys)]
                                   for m in figures[-1])), ""]
    return "\n".join(lines)
