"""Benchmark ``preprocess`` on SNLI-sized input: pairs/s and peak memory.

Generates SNLI-style jsonl files (every field of the official release, parse trees
included, so lines are as long as the real ones) with 110k and 550k pairs in a temporary
folder, then runs the real path (``prepare_dataset`` with the ``snli`` reader and a
manifest like SNLI's) once per size in a fresh subprocess, so that each peak RSS is
that run's own. Memory must grow no faster than the output: the extra peak memory at
550k pairs may be at most ``5 x 1.25`` times the one at 110k.

    .venv/bin/python bench/bench_preprocess.py [--pairs 550000] [--small 110000]

Target: >= 50,000 pairs/s on one core.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pairrepro.fileio import sha256_file

TARGET_PAIRS_PER_S = 50_000
WORDS = [
    "a", "man", "woman", "child", "dog", "cat", "ball", "park", "street", "beach", "plays",
    "runs", "sits", "walks", "near", "the", "in", "on", "with", "young", "old", "red", "blue",
    "big", "small", "two", "three", "people", "are", "is", "playing", "holding", "looking", "at",
    "while", "wearing", "shirt", "hat", "water", "grass", "outside", "inside", "group", "of",
    "together", "front",
]
LABELS = ["entailment", "neutral", "contradiction"]

MANIFEST = """
name = "snlibench"
title = "generated SNLI-style data for the preprocess benchmark"
task = "classification"
reader = "snli"
label_map = ["entailment", "neutral", "contradiction"]
default_variant = "default"

[[files]]
path = "train.jsonl"
splits = ["train"]

[variants.default]
tokenizer = "regex"
lowercase = true

[variants.default.splits.train]
files = ["train.jsonl"]
expected = {{ pairs = {pairs} }}
"""


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def _parse(sentence: str) -> str:
    tokens = [*sentence[:-1].split(), "."]
    return "( " + " ".join(f"( {t} )" for t in tokens) + " )"


def generate(path: Path, pairs: int, seed: int = 0) -> None:
    """Write ``pairs`` SNLI-style jsonl lines (about 1% with gold label '-')."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(pairs):
            s1, s2 = _sentence(rng, rng.randint(6, 20)), _sentence(rng, rng.randint(3, 12))
            gold = rng.choice(LABELS) if rng.random() > 0.01 else "-"
            row = {
                "annotator_labels": [gold], "captionID": f"{i // 3}.jpg#0",
                "gold_label": gold, "pairID": f"{i // 3}.jpg#0r{i % 3}",
                "sentence1": s1, "sentence1_binary_parse": _parse(s1),
                "sentence1_parse": "(ROOT " + _parse(s1) + ")",
                "sentence2": s2, "sentence2_binary_parse": _parse(s2),
                "sentence2_parse": "(ROOT " + _parse(s2) + ")",
            }
            handle.write(json.dumps(row) + "\n")


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(workdir: Path, pairs: int) -> None:
    """Run one preprocess in this process and print a JSON line with the measurements."""
    os.environ["PAIRREPRO_HOME"] = str(workdir / f"home-{pairs}")
    os.environ["PAIRREPRO_MANIFESTS"] = str(workdir / f"manifests-{pairs}")
    from pairrepro.data.preprocess import prepare_dataset  # import cost is not measured

    baseline = _peak_rss_mb()
    start, cpu_start = time.perf_counter(), time.process_time()
    stats = prepare_dataset("snlibench", strict=False, progress=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    kept = stats["splits"]["train"]["pairs"]
    # pairs/s is per CPU second of this (single-threaded, pinned) process, so that other
    # load on a shared machine does not count against it; wall time is reported beside it
    print(json.dumps({"pairs_in": pairs, "pairs_kept": kept, "seconds": seconds,
                      "cpu_seconds": cpu, "pairs_per_s": pairs / cpu,
                      "wall_pairs_per_s": pairs / seconds, "baseline_mb": baseline,
                      "peak_mb": _peak_rss_mb()}))


def run(pairs: int, workdir: Path) -> dict:
    """Generate the input for ``pairs`` pairs and measure one preprocess of it."""
    raw = workdir / f"home-{pairs}" / "raw" / "snlibench"
    raw.mkdir(parents=True)
    manifests = workdir / f"manifests-{pairs}"
    manifests.mkdir()
    generate(raw / "train.jsonl", pairs)
    # fetch leaves a record with each file's sha256 (preprocess copies it into stats.json);
    # write it as fetch would, so the timed run does what it does after a real fetch
    record = {"dataset": "snlibench", "files": [
        {"path": "train.jsonl", "sha256": sha256_file(raw / "train.jsonl")}]}
    (raw / ".fetched.json").write_text(json.dumps(record), encoding="utf-8")
    with open(raw / "train.jsonl", encoding="utf-8") as handle:
        kept = sum(1 for line in handle if '"gold_label": "-"' not in line)
    (manifests / "snlibench.toml").write_text(MANIFEST.format(pairs=kept), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    # the child inherits the core main() pinned this process to (bench/protocol.py)
    out = subprocess.run([sys.executable, __file__, "--child", str(workdir), str(pairs)],
                         check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=550_000)
    parser.add_argument("--small", type=int, default=110_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), int(args.child[1]))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from protocol import LoadMonitor, begin

    begin(1)
    monitor = LoadMonitor(1).start()
    with tempfile.TemporaryDirectory(prefix="pairrepro-bench-") as tmp:
        results = [run(n, Path(tmp)) for n in (args.small, args.pairs)]
    load = monitor.stop()
    for r in results:
        print(f"{r['pairs_in']:>9,} pairs: {r['cpu_seconds']:6.2f} CPU s "
              f"{r['pairs_per_s']:>9,.0f} pairs/s (wall {r['seconds']:.2f} s, "
              f"{r['wall_pairs_per_s']:,.0f}/s)  peak RSS {r['peak_mb']:7.1f} MB "
              f"(baseline {r['baseline_mb']:.1f} MB)")
    small, big = results
    growth_small = small["peak_mb"] - small["baseline_mb"]
    growth_big = big["peak_mb"] - big["baseline_mb"]
    size_ratio = big["pairs_in"] / small["pairs_in"]
    mem_ratio = growth_big / max(growth_small, 1e-9)
    print(f"memory above baseline: {growth_small:.1f} MB -> {growth_big:.1f} MB "
          f"(x{mem_ratio:.2f} for x{size_ratio:.1f} pairs)")
    ok_speed = big["pairs_per_s"] >= TARGET_PAIRS_PER_S
    ok_memory = mem_ratio <= size_ratio * 1.25
    print(f"speed target {TARGET_PAIRS_PER_S:,} pairs/s: {'met' if ok_speed else 'MISSED'}; "
          f"memory linear in the output: {'yes' if ok_memory else 'NO'}")
    print(load.describe())
    return 0 if ok_speed and ok_memory else 1


if __name__ == "__main__":
    sys.exit(main())
