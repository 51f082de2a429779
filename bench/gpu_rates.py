"""Training rates on a GPU for the plan: every trained model's recipe at its own (the paper's)
sizes and batch, in fp32 and bf16, and one epoch of the TrecQA ladder's paper-size CSRAN.
The second and third steps of ``bench/gpu_check.sh``.

A rate is the training loop's own step on one fixed batch of the recipe's batch size, timed
over a block of steps read back as the loop reads them (every ``sync_every`` steps, not after
each), after two warm-up steps (``step_profile.SteadyStep``), on random words at the dataset's
lengths (preflight's ``--stand-in``), so no dataset or vectors need to be here. The epoch
is ``pairrepro train`` of :data:`EPOCH_RECIPE` for one epoch (random vectors of the recipe's
width stand in for GloVe: the same work), on the TrecQA prepared under ``$PAIRREPRO_HOME``.
Each run is appended to ``bench/records/gpu_rates.json`` (``--records``); the plan
(``pairrepro report all --plan --gpu h100``) reads the latest run of each GPU.

    python3 bench/gpu_rates.py                    # CUDA: every model, then the epoch
    python3 bench/gpu_rates.py --dry-run          # CPU: two models at batch 4, a tiny epoch
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from protocol import RECORDS, LoadMonitor, write_record

from pairrepro.config import load_recipe
from pairrepro.device import device_name, resolve_precision
from pairrepro.errors import PairreproError
from pairrepro.models.base import available_models
from pairrepro.paths import recipes_dir
from pairrepro.planning.gpus import gpu_key

SCRIPT = "gpu_rates"
PRECISIONS = ("fp32", "bf16")
EPOCH_RECIPE = "csran_trecqa_es_tuned_no_em_all_negatives_big"
# --dry-run: the same steps on a CPU in seconds: two small models at a tiny batch, and the
# epoch's CSRAN at toy sizes on a few pairs
DRY_MODELS = ("nbow", "esim")
DRY_BATCH = 4
DRY_EPOCH = ["model.hidden=8", "model.aggr_hidden=8", "model.out_hidden=8",
             "model.char_hidden=8", "model.char_dim=4", "data.max_train_pairs=64",
             "train.batch_size=16", "train.eval_batch_size=64"]


@functools.cache
def model_recipes() -> dict[str, str]:
    """One recipe per trained model: the recipe named as the model, else the first of its
    recipes by name."""
    trained = {name for name, cls in available_models().items() if cls.needs_training}
    found: dict[str, str] = {}
    for path in sorted(recipes_dir().glob("*.toml")):
        model = load_recipe(path).model.name
        if model in trained and (model not in found or path.stem == model):
            found[model] = path.stem
    return dict(sorted(found.items()))


def measure(recipe_name: str, precision: str, device: torch.device, steps: int,
            overrides: list[str], budget_s: float) -> dict[str, Any]:
    """``{pairs_per_s, batch, step_s}`` of one recipe in one precision, ``{unsupported}``
    where this device cannot run the precision (bf16 on a CPU without bf16 units), or
    ``{error}`` where the model fails here. The steps are read back as the training loop
    reads them (``step_profile.SteadyStep.loop_rate``: every ``sync_every`` steps), after
    a warm-up; ``budget_s`` caps the steps timed."""
    from step_profile import SteadyStep

    try:
        resolve_precision(precision, device)
    except PairreproError as exc:
        return {"unsupported": exc.message.splitlines()[0][:200]}
    try:
        run = SteadyStep.build(recipe_name, device, precision, overrides)
        start = time.monotonic()
        run.warm_up()
        warm_s = (time.monotonic() - start) / 2
        timed = max(1, min(steps, int(budget_s / 2 / max(warm_s, 1e-6))))
        step_s = run.loop_rate(timed)
    except (PairreproError, RuntimeError) as exc:  # RuntimeError: CUDA out of memory
        return {"error": str(getattr(exc, "message", exc)).splitlines()[0][:200]}
    return {"pairs_per_s": run.pairs / step_s, "batch": run.pairs, "step_s": step_s,
            "steps": timed}


def rates(device: torch.device, models: dict[str, str], steps: int, overrides: list[str],
          deadline: float) -> list[dict[str, Any]]:
    """Every model's rates in both precisions until ``deadline`` (time.monotonic()); the
    models left are listed as not measured."""
    out = []
    for model, recipe in models.items():
        row: dict[str, Any] = {"model": model, "recipe": recipe}
        for precision in PRECISIONS:
            left = deadline - time.monotonic()
            row[precision] = ({"error": "out of time"} if left <= 0 else
                              measure(recipe, precision, device, steps, overrides,
                                      min(60.0, left)))
            figure = row[precision]
            print(f"  {model:<20} {recipe:<28} {precision}: "
                  + (f"{figure['pairs_per_s']:.1f} pairs/s (batch {figure['batch']})"
                     if "pairs_per_s" in figure else
                     "; ".join(f"{k} ({v})" for k, v in figure.items())), flush=True)
        out.append(row)
    return out


def epoch(device: torch.device, dry_run: bool, timeout_s: float) -> dict[str, Any]:
    """One epoch of :data:`EPOCH_RECIPE` through ``pairrepro train`` in a fresh process:
    its wall seconds, training pairs/s and test MAP, or why it did not finish."""
    sets = ["train.epochs=1", 'embeddings.source="random"', *(DRY_EPOCH if dry_run else [])]
    precision = "fp32" if dry_run else "bf16"
    with tempfile.TemporaryDirectory() as runs:
        command = [sys.executable, "-m", "pairrepro", "--quiet", "train", EPOCH_RECIPE,
                   "--seeds", "1", "--device", device.type, "--precision", precision,
                   *(arg for s in sets for arg in ("--set", s))]
        env = {**os.environ, "PAIRREPRO_RUNS": runs}
        start = time.monotonic()
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return {"recipe": EPOCH_RECIPE, "error": f"no epoch within {timeout_s:.0f} s"}
        seconds = time.monotonic() - start
        folder = Path(runs) / EPOCH_RECIPE / "seed-1"
        if done.returncode != 0 or not (folder / "result.json").is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"recipe": EPOCH_RECIPE, "error": f"exit {done.returncode}: "
                    + " / ".join(tail)}
        log = [json.loads(line) for line in
               (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    return {"recipe": EPOCH_RECIPE, "precision": precision, "overrides": sets,
            "wall_s": seconds, "pairs_per_s": log[-1].get("pairs_per_s"),
            "train_time_s": log[-1].get("train_time_s"),
            "test_map": result["metrics"].get("test", {}).get("map")}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help=f"on the CPU: {', '.join(DRY_MODELS)} at batch {DRY_BATCH}, a "
                             "toy epoch (checks the steps, measures nothing)")
    parser.add_argument("--models", default="", help="comma-separated (default: every one)")
    parser.add_argument("--steps", type=int, default=0, help="steps per rate (default 20, 2)")
    parser.add_argument("--budget", type=float, default=170.0,
                        help="seconds for all the rates (models left are not measured)")
    parser.add_argument("--epoch-timeout", type=float, default=200.0)
    parser.add_argument("--records", type=Path, default=RECORDS,
                        help="folder of gpu_rates.json (default bench/records)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    device = torch.device("cpu" if args.dry_run else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_rates: no CUDA GPU visible (use --dry-run to check the steps on a CPU)",
              file=sys.stderr)
        return 2
    monitor = LoadMonitor(threads=torch.get_num_threads()).start()
    name = device_name(device)
    print(f"{name}, torch {torch.__version__}, load now {os.getloadavg()[0]:.2f}", flush=True)
    models = model_recipes()
    wanted = args.models.split(",") if args.models else list(DRY_MODELS if args.dry_run
                                                                 else models)
    unknown = sorted(set(wanted) - set(models))
    if unknown:
        print(f"gpu_rates: --models: no recipe for {', '.join(unknown)} (known: "
              f"{', '.join(models)})", file=sys.stderr)
        return 2
    steps = args.steps or (2 if args.dry_run else 20)
    overrides = [f"train.batch_size={DRY_BATCH}"] if args.dry_run else []
    print(f"rates, {steps} steps each, stand-in words at each dataset's lengths:", flush=True)
    found = rates(device, {m: models[m] for m in wanted}, steps, overrides,
                  time.monotonic() + args.budget)
    print(f"one epoch of {EPOCH_RECIPE}:", flush=True)
    trained = epoch(device, args.dry_run, args.epoch_timeout)
    print(f"  {json.dumps(trained)}", flush=True)
    load = monitor.stop()
    print(load.describe(), flush=True)
    run = {"device": device.type, "device_name": name, "gpu": gpu_key(name),
           "dry_run": args.dry_run, "torch": torch.__version__, "steps": steps,
           "overrides": overrides, "models": found, "epoch": trained,
           "load": {"load_start": load.load_start, "load_end": load.load_end,
                    "others_cores": load.others_cores}}
    print(f"recorded in {write_record(SCRIPT, run, args.records)}")
    failed = [f"{row['model']} {p}" for row in found for p in PRECISIONS if "error" in row[p]]
    failed += ["the epoch"] if "error" in trained else []
    if failed:
        print(f"gpu_rates: not measured: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
