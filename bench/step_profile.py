"""One steady-state training step of every trained model: the ops it dispatches, the calls in
it that make the host wait for a GPU, and its host and device time.

A step is the training loop's own (``Trainer.train_step``) on the recipe's batch of random
words at the dataset's lengths (preflight's ``--stand-in`` data), after two warm-up steps, so
that the optimiser's state exists. For each model it measures

* ``ops``: the aten operators the step dispatches on this device (a ``TorchDispatchMode``
  counts them);
* ``syncs``: the calls that make the host wait for the device: a device value read on the
  host (``.item()``, ``.cpu()``, ``.tolist()``, ``bool(t)``, ``torch.equal``), an op whose
  output size depends on device values (``unique``, ``nonzero``, ``masked_select``), and a
  blocking copy from the host to the device (CUDA waits for the stream before it). On a CPU
  nothing waits, so the step is also run with the model and the batch on PyTorch's ``meta``
  device, where every such call is seen (and answered with a stand-in value so the step goes
  on): the CPU-side count of what would sync on CUDA. ``host_reads`` are ``.item()`` calls
  on tensors that live on the host whatever the device (the optimisers' step counters,
  a packed sequence's batch sizes):
  they never wait. On CUDA ``sync_debug`` also counts the warnings of
  ``torch.cuda.set_sync_debug_mode("warn")`` over a step: CUDA's own count of real syncs;
* ``host_ms``: the time until ``train_step`` returns (the host's work: on a GPU, with no
  sync in the step, the time to queue the step), ``step_ms`` until the device has finished
  it (the same on a CPU), the minimum over ``--repeats`` steps; on CUDA ``kernels`` and
  ``device_ms`` (the kernels' time) from ``torch.profiler`` over one step.

``--record`` appends the run to ``bench/records/step_profile.json`` (one run per device).

    python bench/step_profile.py --record                   # every model on this CPU
    python bench/step_profile.py --device cuda --record     # on a GPU (bench/gpu_check.sh)
    python bench/step_profile.py --models nbow,esim         # some models, not recorded
    python bench/step_profile.py --models nbow --set train.batch_size=4   # gpu_check --dry-run
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_rates import model_recipes
from protocol import RECORDS, LoadMonitor, begin, write_record

from pairrepro.config import load_recipe
from pairrepro.data.batches import EpochPlan, PairBatch
from pairrepro.device import device_name, resolve_precision, seed_everything
from pairrepro.paths import recipes_dir
from pairrepro.runs import RunFolder
from pairrepro.train.loop import Trainer

SCRIPT = "step_profile"
WARMUP_STEPS = 2  # the first creates the optimiser's state; the second is already steady
aten = torch.ops.aten
# ops whose output size is a function of the values of their input: the host must wait for
# them to know it
VALUE_SIZED = {aten._unique2.default: "unique", aten.unique_dim.default: "unique",
               aten.unique_consecutive.default: "unique", aten.nonzero.default: "nonzero",
               aten.masked_select.default: "masked_select"}


def _on_device(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type != "cpu"


def _meta_stand_in(func: Any, args: tuple, kwargs: dict) -> Any:
    """What a host read of a meta tensor returns so the step can go on: ones (a valid
    length, index or count), every element distinct for ``unique``, every one selected."""
    first = args[0]
    if func is aten._local_scalar_dense.default:
        return True if first.dtype == torch.bool else 1
    if func in (aten._to_copy.default, aten.copy_.default):
        like = args[1] if func is aten.copy_.default else first
        out = torch.ones(like.shape, dtype=kwargs.get("dtype") or like.dtype)
        return args[0].copy_(out) if func is aten.copy_.default else out
    if func in (aten.nonzero.default, aten.masked_select.default):
        shape = (first.numel(), first.dim()) if func is aten.nonzero.default else (
            torch.broadcast_shapes(first.shape, args[1].shape).numel(),)
        return first.new_empty(shape, dtype=torch.long if len(shape) == 2 else first.dtype)
    if func in VALUE_SIZED:  # unique: every element distinct, in place
        flat = first.reshape(-1)
        return (flat.clone(), first.new_empty(first.shape, dtype=torch.long),
                first.new_empty(flat.shape, dtype=torch.long))
    raise NotImplementedError(f"no meta stand-in for {func}")


@contextmanager
def _autocast_knows_meta() -> Iterator[None]:
    """torch's autocast has no meta device, which the grid models name when they turn it off
    around their sweeps: it is answered as for the CPU."""
    autocast, enabled = torch.autocast, torch.is_autocast_enabled

    def cpu(device: Any) -> Any:
        return "cpu" if str(device) == "meta" else device

    torch.autocast = lambda device_type, *a, **k: autocast(cpu(device_type), *a, **k)
    torch.is_autocast_enabled = lambda *device: enabled(*map(cpu, device))
    try:
        yield
    finally:
        torch.autocast, torch.is_autocast_enabled = autocast, enabled


class SyncSpy(TorchDispatchMode):
    """Counts the ops dispatched and, by kind, the calls that make the host wait for the
    device (``syncs``) and the reads of host-resident scalars (``host_reads``); on ``meta``
    it answers each sync with :func:`_meta_stand_in`."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.syncs: Counter[str] = Counter()
        self.host_reads = 0

    def _sync_kind(self, func: Any, args: tuple, kwargs: dict) -> str | None:
        if func in VALUE_SIZED:
            return VALUE_SIZED[func] if _on_device(args[0]) else None
        if func in (aten._local_scalar_dense.default, aten.equal.default):
            if any(_on_device(a) for a in args):
                return "item"
            self.host_reads += 1
            return None
        if func is aten._to_copy.default:
            src, dst = args[0], kwargs.get("device") or args[0].device
            dst_type = torch.device(dst).type
        elif func is aten.copy_.default:
            src, dst_type = args[1], args[0].device.type
        else:
            return None
        if src.device.type != "cpu" and dst_type == "cpu":
            return "to_host"
        if src.device.type == "cpu" and dst_type != "cpu" and not kwargs.get(
                "non_blocking", len(args) > 2 and args[2]):
            return "blocking_to_device"
        return None

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        self.ops += 1
        kind = self._sync_kind(func, args, kwargs)
        if kind is not None:
            self.syncs[kind] += 1
            if any(t.device.type == "meta" for t in tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor)) and kind != "blocking_to_device":
                return _meta_stand_in(func, args, kwargs)
        return func(*args, **kwargs)


@dataclass
class SteadyStep:
    """A trainer at the recipe's batch on stand-in data, and the batch it steps on."""

    trainer: Trainer
    plan: EpochPlan
    position: int
    folder: tempfile.TemporaryDirectory
    host_batch: PairBatch | None = None

    @classmethod
    def build(cls, recipe_name: str, device: torch.device, precision: str = "fp32",
              overrides: list[str] | None = None, seed: int = 1) -> SteadyStep:
        from pairrepro.train.preflight import _pick_batch, build_recipe_model, preflight_data
        from pairrepro.train.setup import recipe_task

        sets = [*(overrides or []), f'train.precision="{precision}"']
        recipe = load_recipe(recipes_dir() / f"{recipe_name}.toml", sets)
        resolved = resolve_precision(precision, device if device.type != "meta"
                                     else torch.device("cpu"))
        seed_everything(seed, recipe.train.deterministic)
        run_recipe, prepared, data, _ = preflight_data(recipe, seed, stand_in=True)
        model, _ = build_recipe_model(run_recipe, prepared, data.num_classes, seed,
                                      with_embeddings=False)
        folder = tempfile.TemporaryDirectory()
        trainer = Trainer(run_recipe, model, data, RunFolder(Path(folder.name) / "run"), seed,
                          device, show_progress=False, precision=resolved)
        plan = EpochPlan(data.train, recipe.train.batch_size, seed, 0, recipe_task(recipe),
                         recipe.task.negatives,
                         max_negatives_per_query=recipe.task.max_negatives_per_query)
        return cls(trainer, plan, _pick_batch(plan), folder)

    @property
    def pairs(self) -> int:
        return int(self.plan.collate(self.position).num_pairs)

    def step(self) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The loop's step: the batch, collated ahead on the host, copied to the device (the
        copy is the loop's, in the step's time), then ``train_step``."""
        if self.host_batch is None:
            self.host_batch = self.plan.collate(self.position)
        batch = self.host_batch.to(self.trainer.device)
        if self.trainer.device.type != "meta":
            return self.trainer.train_step(batch)
        with _autocast_knows_meta():
            return self.trainer.train_step(batch)

    def warm_up(self) -> SteadyStep:
        """The steps before the steady one (on meta spied, which answers its host reads)."""
        for _ in range(WARMUP_STEPS):
            with SyncSpy() if self.trainer.device.type == "meta" else nullcontext():
                self.step()
        return self

    def loop_rate(self, steps: int) -> float:
        """Seconds per step over ``steps`` steps read back as the training loop reads them:
        the sums stay on the device and are read every ``sync_every`` steps and at the end
        (the only waits for the device)."""
        device, every = self.trainer.device, self.trainer.sync_every
        loss_acc = torch.zeros((), device=device)
        start = time.perf_counter()
        for done in range(1, steps + 1):
            loss_acc += self.step()[0]
            if done % every == 0 or done == steps:
                float(loss_acc)
        return (time.perf_counter() - start) / steps


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def spied(run: SteadyStep) -> SyncSpy:
    """One steady step under :class:`SyncSpy`."""
    with SyncSpy() as spy:
        run.step()
    return spy


def timed(run: SteadyStep, repeats: int) -> tuple[float, float]:
    """The least ``(host_ms, step_ms)`` of ``repeats`` steps."""
    host, whole = [], []
    device = run.trainer.device
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        run.step()
        host.append(time.perf_counter() - start)
        _synchronize(device)
        whole.append(time.perf_counter() - start)
    return min(host) * 1e3, min(whole) * 1e3


def cuda_profile(run: SteadyStep) -> dict[str, Any]:
    """Kernels, their time and CUDA's own sync count over one step."""
    from torch.profiler import ProfilerActivity, profile

    device = run.trainer.device
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run.step()
        _synchronize(device)
    kernels = [e for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run.step()
            _synchronize(device)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    waits = [w for w in caught if "synchroniz" in str(w.message)]
    return {"kernels": len(kernels),
            "device_ms": sum(e.time_range.elapsed_us() for e in kernels) / 1e3,
            "sync_debug": len(waits),
            "sync_debug_first": str(waits[0].message)[:200] if waits else None}


def profile_model(model: str, recipe: str, device: torch.device, precision: str,
                  repeats: int, overrides: list[str]) -> dict[str, Any]:
    """One model's entry of the record."""
    run = SteadyStep.build(recipe, device, precision, overrides).warm_up()
    counted = spied(run)
    host_ms, step_ms = timed(run, repeats)
    entry: dict[str, Any] = {"model": model, "recipe": recipe, "pairs": run.pairs,
                             "precision": run.trainer.precision, "ops": counted.ops,
                             "host_ms": round(host_ms, 3), "step_ms": round(step_ms, 3),
                             "device_ms": None}
    if device.type == "cuda":
        where = counted
        entry.update(cuda_profile(run))
    else:  # what would wait on a GPU: the same step on the meta device
        where = spied(SteadyStep.build(recipe, torch.device("meta"), precision,
                                       overrides).warm_up())
        entry["ops_meta"] = where.ops
    entry["syncs"] = sum(where.syncs.values())
    entry["sync_kinds"] = dict(sorted(where.syncs.items()))
    entry["host_reads"] = where.host_reads
    return entry


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--models", default="", help="comma-separated (default: every one)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--repeats", type=int, default=2, help="timed steps (the least)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        help="a recipe override for every model (e.g. train.batch_size=4)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="seconds for all the models (those left are not measured; 0: no "
                             "limit)")
    parser.add_argument("--records", type=Path, default=RECORDS,
                        help=f"folder of {SCRIPT}.json (default bench/records)")
    parser.add_argument("--label", default="", help="a note kept in the record (before/after)")
    parser.add_argument("--record", action="store_true",
                        help=f"append this run to bench/records/{SCRIPT}.json")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("step_profile: no CUDA GPU visible", file=sys.stderr)
        return 2
    machine, _ = begin(args.threads)
    models = model_recipes()
    wanted = args.models.split(",") if args.models else list(models)
    unknown = sorted(set(wanted) - set(models))
    if unknown:
        print(f"step_profile: --models: no recipe for {', '.join(unknown)} (known: "
              f"{', '.join(models)})", file=sys.stderr)
        return 2
    monitor = LoadMonitor(threads=args.threads).start()
    print(f"{'model':<20} {'ops':>7} {'syncs':>6} {'host reads':>10} {'host ms':>9} "
          f"{'device ms':>9}  sync kinds", flush=True)
    rows = []
    deadline = time.monotonic() + (args.budget or float("inf"))
    for model in wanted:
        if time.monotonic() > deadline:
            rows.append({"model": model, "recipe": models[model], "error": "out of time"})
            continue
        try:
            row = profile_model(model, models[model], device, args.precision, args.repeats,
                                args.overrides)
        except Exception as exc:  # a model that fails here is recorded, the others go on
            row = {"model": model, "recipe": models[model],
                   "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            print(f"{model:<20} {row['error']}", flush=True)
        else:
            device_ms = "-" if row["device_ms"] is None else f"{row['device_ms']:.2f}"
            print(f"{model:<20} {row['ops']:>7} {row['syncs']:>6} {row['host_reads']:>10} "
                  f"{row['host_ms']:>9.2f} {device_ms:>9}  {row['sync_kinds']}", flush=True)
        rows.append(row)
    load = monitor.stop()
    print(load.describe())
    if args.record:
        run = {"device": device.type, "device_name": device_name(device),
               "machine": machine.as_dict(), "torch": torch.__version__, "label": args.label,
               "precision": args.precision, "threads": args.threads,
               "overrides": args.overrides, "repeats": args.repeats,
               "syncs_counted_on": "meta" if device.type == "cpu" else device.type,
               "reference": load.reference, "load": asdict(load), "models": rows}
        print(f"recorded in {write_record(SCRIPT, run, args.records)}")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
