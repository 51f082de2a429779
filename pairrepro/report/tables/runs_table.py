"""``pairrepro report runs``: one line per run, read from the run folders; a damaged folder is
a ``damaged`` line naming the file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pairrepro.report.tables.numbers import markdown_table
from pairrepro.runs import DamagedRunError, RunInfo, all_runs, resume_command, resume_overrides

RANKING_METRICS = ("map", "mrr")


@dataclass
class RunLine:
    """One finished run as a table line (numbers kept raw; :func:`format_line` prints)."""

    run: str
    dataset: str
    variant: str = ""
    dev: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] = field(default_factory=dict)
    chosen_epoch: int | None = None
    epochs_run: int | None = None
    wall_time_s: float | None = None
    pairs_per_s: float | None = None
    pairs_per_epoch: int | None = None
    cpu_threads: int | None = None
    device: str = ""
    commit: str = ""
    dirty: bool | None = None
    sha256_train: str = ""
    sha256_test: str = ""
    # saved re-scorings (``pairrepro eval --save``): "<split>@<variant>" -> metrics
    evals: dict[str, dict[str, float]] = field(default_factory=dict)
    # or "damaged", or a stopped run's status; ``problem`` says why, or how to continue
    status: str = "finished"
    problem: str = ""
    wall_time_note: str = ""  # what the wall time covers when the run was resumed


def _wall_time_note(manifest: dict[str, Any]) -> str:
    """What ``wall_time_s`` covers for a resumed run ("" for a run never resumed)."""
    if not manifest.get("resumed"):
        return ""
    if "segments" not in manifest:
        return "last segment only"
    return f"{manifest['segments']} segments" + (
        ", one untimed" if manifest.get("wall_time_untimed") else "")


def _damaged_line(run: RunInfo, problem: str) -> RunLine:
    dataset = run.manifest.get("dataset") or run.config.get("data", {}).get("dataset", "")
    return RunLine(run=run.path, dataset=str(dataset), commit=run.commit, status="damaged",
                   problem=problem)


def run_line(run: RunInfo) -> RunLine:
    if run.status == "damaged":
        return _damaged_line(run, run.problem)
    try:
        log, evals = run.folder.read_metrics(), run.folder.read_evals()
    except DamagedRunError as exc:
        return _damaged_line(run, exc.message)
    manifest = run.manifest
    git = manifest.get("git") if isinstance(manifest.get("git"), dict) else {}
    sha = manifest.get("prepared_sha256") or {}
    train_split = run.config.get("data", {}).get("train_split", "train")
    test_split = (run.config.get("data", {}).get("test_splits") or ["test"])[0]
    trained = manifest.get("epochs_run")
    # the last epoch's training pairs (sampling can make them fewer than the split's)
    last_pairs = log[-1].get("train_pairs") if log else None
    return RunLine(
        run=run.path, dataset=str(manifest.get("dataset", "")),
        variant=str(manifest.get("variant", "")), wall_time_s=manifest.get("wall_time_s"),
        dev=run.metrics.get("dev", {}), test=run.metrics.get("test", {}),
        chosen_epoch=run.chosen_epoch, epochs_run=trained,
        pairs_per_s=manifest.get("pairs_per_s") if trained else None,
        pairs_per_epoch=(int(last_pairs) if isinstance(last_pairs, int | float) else None)
        if trained else manifest.get("train_pairs"),
        cpu_threads=manifest.get("cpu_threads"), device=str(manifest.get("device", "")),
        commit=str(git.get("commit") or run.commit or ""), dirty=git.get("dirty"),
        sha256_train=str(sha.get(f"{train_split}.parquet", "")),
        sha256_test=str(sha.get(f"{test_split}.parquet", "")),
        evals={name: record.get("metrics", {}) for name, record in evals.items()},
        wall_time_note=_wall_time_note(manifest))


# a run that stopped with its last.pt on disk: ``train --resume`` continues it
RESUMABLE = ("interrupted", "stale")


def _stopped_line(run: RunInfo, runs_dir: Path) -> RunLine:
    """A run that did not finish: where its last checkpoint stands and how to continue."""
    line = _damaged_line(run, "")
    line.status = run.status
    try:
        progress = run.folder.read_progress()
    except DamagedRunError as exc:
        line.problem = exc.message
        return line
    has_checkpoint = run.folder.checkpoint("last").is_file()
    if progress:
        where = (f"at epoch {progress['epochs_done'] + 1}, step {progress['step']} of "
                 f"{progress['steps']}" if progress["step"] else f"after epoch "
                 f"{progress['epochs_done']}") + f" (last checkpoint {progress['saved']})"
    else:
        where = "with a checkpoint" if has_checkpoint else "before its first checkpoint"
    line.problem = f"{run.status} {where}"
    if run.status in RESUMABLE:
        line.problem += "; continue: " + resume_command(
            run.recipe, str(run.seed), resume_overrides(run), runs_dir=runs_dir,
            flags=["--tensorboard"] if run.folder.tensorboard_dir.is_dir() else [])
    return line


def collect(runs_dir: Path, dataset: str = "") -> list[RunLine]:
    """Every finished, damaged or stopped run under ``runs_dir`` (of ``dataset``), by path."""
    runs = all_runs(runs_dir)
    lines = [run_line(r) for r in runs if r.status in ("finished", "damaged")]
    lines += [_stopped_line(r, runs_dir) for r in runs if r.status in (*RESUMABLE, "failed")]
    return [x for x in sorted(lines, key=lambda x: x.run)
            if not dataset or x.dataset == dataset or (x.status == "damaged" and not x.dataset)]


def _scores(metrics: dict[str, float]) -> str:
    if all(m in metrics for m in RANKING_METRICS):
        return " / ".join(f"{metrics[m]:.3f}" for m in RANKING_METRICS)
    accuracy = f"{metrics['accuracy']:.3f}" if "accuracy" in metrics else ""
    if "f1" in metrics:
        return f"{metrics['f1']:.3f}" + (f" (acc {accuracy})" if accuracy else "")
    return accuracy


HEADERS = ["run", "dev MAP / MRR (or F1)", "test MAP / MRR (or F1)", "test tie share",
           "chosen epoch / run", "wall time", "train pairs/s", "pairs per epoch", "threads",
           "commit", "prepared sha256 (train / test)", "saved re-scorings"]


def format_line(line: RunLine) -> list[str]:
    """The printed cells of a line, in :data:`HEADERS` order."""
    if line.status != "finished":
        text = line.problem if line.status != "damaged" else f"damaged: {line.problem}"
        return [line.run, text, *[""] * (len(HEADERS) - 2)]
    tie = line.test.get("tie_share")
    commit = line.commit[:7] + ("+dirty" if line.dirty else "") if line.commit else "unknown"
    return [line.run, _scores(line.dev), _scores(line.test), "" if tie is None else f"{tie:.3f}",
            f"{line.chosen_epoch if line.chosen_epoch is not None else '?'} / "
            f"{line.epochs_run if line.epochs_run is not None else 0}",
            "" if line.wall_time_s is None else f"{line.wall_time_s:.0f} s"
            + (f" ({line.wall_time_note})" if line.wall_time_note else ""),
            "" if not line.pairs_per_s else f"{line.pairs_per_s:.0f}",
            "" if line.pairs_per_epoch is None else f"{line.pairs_per_epoch:,}",
            "" if line.cpu_threads is None or line.device.startswith("cuda")
            else str(line.cpu_threads),
            commit, f"{line.sha256_train[:10]} / {line.sha256_test[:10]}",
            "; ".join(f"{name} {_scores(metrics)}" for name, metrics in line.evals.items())]


def to_markdown(lines: list[RunLine]) -> str:
    rows = [[f"`{cells[0]}`", *cells[1:]] for cells in map(format_line, lines)]
    return "\n".join(markdown_table(HEADERS, rows)) + "\n"


def to_json(lines: list[RunLine]) -> list[dict[str, Any]]:
    return [asdict(line) for line in lines]
