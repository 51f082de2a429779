"""Slurm job arrays through submitit (``reproduce --launcher slurm``); resources from the
recipe, its preflight record, then the ``--slurm-config`` ``[slurm]`` table."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import submitit
from pydantic import Field
from submitit.helpers import Checkpointable

from pairrepro.console import get_err_console
from pairrepro.device import default_threads
from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml
from pairrepro.launch.local import run_local
from pairrepro.launch.spec import (
    LiveRow,
    Notify,
    RunOutcome,
    RunSpec,
    display,
    failed_reason,
    silent,
)
from pairrepro.planning.plan import train_pairs
from pairrepro.planning.preflight_record import preflight_record
from pairrepro.runs import RunFolder, read_run
from pairrepro.schema import Schema, validate

# after SIGTERM in a Slurm job, how long to wait for the requeue signal (pre-emption sends
# SIGTERM, then USR2); a plain scancel sends no USR2 and the run stays ``interrupted``
REQUEUE_WAIT_S = 30.0


class SlurmSettings(Schema):
    """Resources of one Slurm job (``--slurm-config``'s ``[slurm]`` table)."""

    partition: str = ""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    gpus_per_node: int = Field(default=0, ge=0)
    cpus_per_task: int = Field(default=4, ge=1)
    mem_gb: int = Field(default=16, ge=1)
    timeout_min: int = Field(default=24 * 60, ge=1)
    array_parallelism: int = Field(default=64, ge=1)
    # any other sbatch option, as submitit's slurm_additional_parameters (e.g. {mail_type="END"})
    additional: dict[str, str | int] = Field(default_factory=dict)


class _SlurmFile(Schema):
    slurm: dict[str, Any] = Field(default_factory=dict)


def load_slurm_config(path: Path) -> dict[str, Any]:
    """The keys the ``[slurm]`` table of ``path`` sets, validated."""
    if not path.is_file():
        raise ConfigError(f"--slurm-config {path}: no such file",
                          hint="a TOML file with a [slurm] table, e.g. partition = \"gpu\"")
    data = validate(_SlurmFile, read_toml(path), str(path)).slurm
    validate(SlurmSettings, data, f"{path}: [slurm]", sections=False)
    return data


def recipe_resources(recipe: Any, device: str | None = None,
                     preflight_dir: Path | None = None) -> dict[str, Any]:
    """Default resources from the recipe's preflight record: memory 1.5x its ``peak_mb`` +
    2 GB; time 1.5x its epochs + 30 min, only from a record on the job's own hardware."""
    wanted = device or recipe.train.device
    out: dict[str, Any] = {"gpus_per_node": 0 if wanted == "cpu" else 1}
    if (record := preflight_record(recipe.name, preflight_dir)) is None:
        return out
    if record.get("peak_mb"):
        out["mem_gb"] = int(record["peak_mb"] / 1024 * 1.5 + 2.999)
    hardware = "cpu" if wanted == "cpu" else "gpu"
    if record["hardware"] == hardware and (pairs := train_pairs(recipe)[0]):
        epoch_s = pairs / float(record["pairs_per_s"])
        out["timeout_min"] = int(epoch_s * recipe.train.epochs * 1.5 / 60) + 30
    return out


def slurm_settings(recipe: Any, device: str | None, file_values: dict[str, Any],
                   preflight_dir: Path | None = None) -> SlurmSettings:
    """Resources of ``recipe``'s jobs: its defaults, then the ``[slurm]`` file's values."""
    merged = {**recipe_resources(recipe, device, preflight_dir), **file_values}
    return validate(SlurmSettings, merged, f"slurm resources of {recipe.name}",
                    sections=False)


def executor_parameters(settings: SlurmSettings, name: str) -> dict[str, Any]:
    return {
        "name": name, "timeout_min": settings.timeout_min, "mem_gb": settings.mem_gb,
        "gpus_per_node": settings.gpus_per_node, "cpus_per_task": settings.cpus_per_task,
        "tasks_per_node": 1, "nodes": 1, "slurm_array_parallelism": settings.array_parallelism,
        **{f"slurm_{key}": getattr(settings, key)
           for key in ("partition", "account", "qos", "constraint") if getattr(settings, key)},
        **({"slurm_additional_parameters": dict(settings.additional)}
           if settings.additional else {}),
    }


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to ``log``."""
    def point(sources: tuple[int, int]) -> None:  # descriptors 1 and 2 at ``sources``
        sys.stdout.flush()
        sys.stderr.flush()
        for target, source in enumerate(sources, 1):
            os.dup2(source, target)

    log.parent.mkdir(parents=True, exist_ok=True)
    saved = (os.dup(1), os.dup(2))
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        point((fd, fd))
        yield
    finally:
        point(saved)
        for descriptor in (fd, *saved):
            os.close(descriptor)


class SlurmRun(Checkpointable):
    """What each array job runs: its specs, several on its GPU as ``local``'s pool packs them.
    Pre-emption or time-out (SIGUSR2) checkpoints and requeues it; a SIGTERM alone
    (``scancel``) leaves it ``interrupted``."""

    def __init__(self, runs_dir: Path, device: str | None = None,
                 threads: int | None = None) -> None:
        self.runs_dir = Path(runs_dir).absolute()
        self.device = device
        self.threads = threads  # None: the job's CPUs (SLURM_CPUS_PER_TASK, affinity)

    def __call__(self, specs: list[RunSpec]) -> list[RunOutcome]:
        job_id = os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID", "")
        with contextlib.suppress(RuntimeError):  # not started by submitit
            job_id = submitit.JobEnvironment().job_id
        spec = specs[0]  # the job's log is in its first run's folder
        log = RunFolder.of(self.runs_dir, spec.recipe, spec.seed).log_path(f"slurm-{job_id}")
        preempted: list[tuple[int, Any]] = []
        # the signal submitit uses for pre-emption and time-outs
        name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
        sig = signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]

        def on_preempt(signum: int, frame: Any) -> None:
            preempted.append((signum, frame))
            os.kill(os.getpid(), signal.SIGTERM)  # the trainer: checkpoint, then stop

        # the job's CPUs (else its affinity's) shared by its runs
        threads = self.threads or int(os.environ.get("SLURM_CPUS_PER_TASK", "0")) // len(specs)
        previous = signal.signal(sig, on_preempt)  # submitit's handler
        try:
            with _output_to(log):
                # the job's log header: plain text, whole, whatever the log's width
                get_err_console().print(f"pairrepro: {', '.join(s.label for s in specs)} "
                                        f"in job {job_id} on "
                                        f"{os.uname().nodename} (pid {os.getpid()})",
                                        markup=False, highlight=False, soft_wrap=True)
                outcomes = run_local(specs, self.runs_dir, len(specs), self.device,
                                     threads or None)
        except KeyboardInterrupt:
            # Slurm pre-empts with SIGTERM first, then the requeue signal: the run has
            # checkpointed on SIGTERM; wait a little for the signal that says "requeue"
            deadline = time.monotonic() + REQUEUE_WAIT_S
            while not preempted and time.monotonic() < deadline:
                time.sleep(0.2)
            signal.signal(sig, previous)
            if preempted and callable(previous):
                previous(*preempted[0])  # checkpoint() + requeue + exit
            raise
        finally:
            signal.signal(sig, previous)
        for outcome in outcomes:
            outcome.log, outcome.job_id = outcome.log or str(log), job_id
        return outcomes


def submit_slurm(specs: list[RunSpec], runs_dir: Path, settings: dict[str, SlurmSettings],
                 device: str | None = None, cluster: str = "slurm",
                 notify: Notify = silent, jobs: int = 1) -> list[tuple[RunSpec, Any]]:
    """Submit the specs as submitit arrays, one per resource set (``settings`` by recipe);
    on CUDA, ``jobs`` specs to an array job, sharing its GPU; (spec, job) pairs."""
    folder = Path(runs_dir).absolute() / ".submitit" / "%j"
    groups: dict[str, tuple[SlurmSettings, list[RunSpec]]] = {}
    for spec in specs:  # one array per distinct resource set (an array shares them)
        resources = settings[spec.recipe]
        groups.setdefault(resources.model_dump_json(), (resources, []))[1].append(spec)
    submitted: list[tuple[RunSpec, Any]] = []
    for resources, group in groups.values():
        try:
            executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
        except RuntimeError as exc:  # no sbatch on this machine
            raise ConfigError(f"--launcher slurm: {exc}",
                              hint="run on a Slurm login node (sbatch on PATH), or use "
                                   "--launcher local --jobs N") from None
        size = jobs if (device or "").startswith("cuda") else 1
        chunks = [group[i: i + size] for i in range(0, len(group), size)]
        executor.update_parameters(**{**executor_parameters(resources, "pairrepro"),
                                      "mem_gb": resources.mem_gb * len(chunks[0])})
        # submitit's local executor starts the whole array at once on this machine
        threads = None if cluster == "slurm" else default_threads(len(group))
        for chunk, job in zip(chunks, executor.map_array(SlurmRun(runs_dir, device, threads),
                                                         chunks), strict=True):
            for spec in chunk:
                notify("training", f"submitted {spec.label}: job {job.job_id}")
                submitted.append((spec, job))
    return submitted


def wait_slurm(submitted: list[tuple[RunSpec, Any]], runs_dir: Path, live: bool = False,
               notify: Notify = silent) -> list[RunOutcome]:
    """Wait for submitted jobs, requeued ones included; one outcome each."""
    rows = [LiveRow(spec, status="submitted", started=time.monotonic())
            for spec, _ in submitted]
    outcomes: dict[int, RunOutcome] = {}
    with display(rows, f"{len(submitted)} Slurm job(s)", live) as redraw:
        while len(outcomes) < len(submitted):
            for i, (spec, job) in enumerate(submitted):
                if i in outcomes:
                    continue
                rows[i].poll(runs_dir)
                if read_run(RunFolder.of(runs_dir, spec.recipe, spec.seed).path
                            ).status == "running":
                    rows[i].status = "running"
                if not job.done():
                    continue
                outcomes[i] = _job_outcome(spec, job, runs_dir)
                rows[i].status = outcomes[i].status
                if outcomes[i].status == "failed":
                    notify("failed", f"{spec.label} failed (job {job.job_id}, exit "
                                     f"{outcomes[i].exit_code}): {outcomes[i].reason}")
            redraw()
            if len(outcomes) < len(submitted):
                time.sleep(LiveRow.POLL_S)
    return [outcomes[i] for i in range(len(submitted))]


def _job_outcome(spec: RunSpec, job: Any, runs_dir: Path) -> RunOutcome:
    try:
        outcome = next(o for o in job.result() if o.spec == spec)
        return dataclasses.replace(outcome, job_id=str(job.job_id))
    except Exception as exc:  # submitit's FailedJobError/UncompletedJobError: a crash
        reason = failed_reason(spec, runs_dir, Path(job.paths.stdout))
        first = str(exc).strip().splitlines()
        return RunOutcome(spec, "failed", 1, reason if reason != "no error recorded" else (
            first[0] if first else type(exc).__name__), str(job.paths.stdout), job.job_id)


