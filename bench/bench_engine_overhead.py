"""Engine overhead: pairs/s of the full training loop vs a bare hand-written loop.

Both loops train ``bilstm_max`` on the synthetic NLI data with the same batches (the
engine's seeded, length-bucketed epoch order) and the same optimiser settings; they
alternate epoch by epoch, ``--repeats`` times, so machine noise hits both alike. The
engine's pairs/s is measured twice: over its training phase (what metrics.jsonl reports)
and over the whole epoch including the dev evaluation, selection and checkpoints.

    .venv/bin/python bench/bench_engine_overhead.py --repeats 3 --label after

Target: the engine's training phase stays within 10% of the bare loop. ``--label`` appends
the run, labelled, to ``records/bench_engine_overhead.json`` (before and after a change).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).resolve().parent))
from protocol import LoadMonitor, begin, write_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="epochs of each loop")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--label", default="", help="record the run under this label")
    args = parser.parse_args()
    begin(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAIRREPRO_HOME"] = str(Path(tmp) / "home")
        from pairrepro.config import load_recipe
        from pairrepro.data.batches import EpochPlan
        from pairrepro.data.fetch import fetch_dataset
        from pairrepro.data.preprocess import prepare_dataset
        from pairrepro.device import resolve_device, seed_everything
        from pairrepro.paths import PROJECT_DIR
        from pairrepro.runs import RunFolder
        from pairrepro.tasks import CLASSIFICATION
        from pairrepro.train.loop import Trainer
        from pairrepro.train.setup import build_recipe_model, load_task_data

        fetch_dataset("synthetic")
        prepare_dataset("synthetic", "nli", progress=False)
        recipe = load_recipe(PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml",
                             [f"train.batch_size={args.batch_size}", "train.patience=0",
                              "train.epochs=1000"])
        device = resolve_device(args.device)
        seed_everything(1, recipe.train.deterministic)
        prepared, data = load_task_data(recipe, 1)
        model, _ = build_recipe_model(recipe, prepared, data.num_classes, 1)
        bare_model = copy.deepcopy(model).to(device)
        trainer = Trainer(recipe, model, data, RunFolder(Path(tmp) / "run"), 1, device,
                          show_progress=False)
        bare_opt = torch.optim.Adam(bare_model.parameters(), lr=recipe.optim.lr)
        progress = Progress(disable=True)

        def bare_epoch(epoch: int) -> float:
            plan = EpochPlan(data.train, recipe.train.batch_size, 1, epoch, CLASSIFICATION)
            bare_model.train()
            start = time.perf_counter()
            for pos in range(len(plan)):
                b = plan.collate(pos).to(device)
                loss = F.cross_entropy(bare_model(b.left, b.left_mask, b.right, b.right_mask),
                                       b.labels)
                bare_opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(bare_model.parameters(), recipe.optim.clip_norm)
                bare_opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            return plan.num_items / (time.perf_counter() - start)

        engine_train, engine_whole, bare = [], [], []
        monitor = LoadMonitor(args.threads).start()
        for rep in range(args.repeats):
            start = time.perf_counter()
            trainer._run_epoch(progress)  # the engine's epoch: train, dev eval, checkpoints
            whole = time.perf_counter() - start
            line = trainer.state.history[-1]
            engine_train.append(line["pairs_per_s"])
            engine_whole.append(line["train_pairs"] / whole)
            bare.append(bare_epoch(rep))
            print(f"epoch {rep + 1}: engine {engine_train[-1]:8.0f} pairs/s (train phase), "
                  f"{engine_whole[-1]:8.0f} (whole epoch) | bare {bare[-1]:8.0f} pairs/s")
        e, w, b = (statistics.median(x) for x in (engine_train, engine_whole, bare))
        print(f"median over {args.repeats}: engine {e:.0f} pairs/s, engine whole epoch "
              f"{w:.0f}, bare {b:.0f}")
        print(f"ratio engine/bare: {e / b:.3f} (train phase), {w / b:.3f} (whole epoch); "
              f"target >= 0.90 -> {'OK' if e / b >= 0.9 else 'SLOW'}")
        load = monitor.stop()
        print(load.describe())
        if args.label:
            write_record("bench_engine_overhead", {
                "label": args.label, "threads": args.threads, "device": args.device,
                "batch_size": args.batch_size, "engine_pairs_per_s": engine_train,
                "engine_whole_epoch_pairs_per_s": engine_whole, "bare_pairs_per_s": bare,
                "reference": load.reference, "load": asdict(load)})


if __name__ == "__main__":
    main()
