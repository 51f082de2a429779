"""Run many (recipe, seed) trainings: one after another in this process, as a local pool of
processes (``reproduce --jobs N``), or as a Slurm job array through submitit
(``reproduce --launcher slurm``).

A run is a :class:`RunSpec`; every launcher answers with one :class:`RunOutcome` per spec and
never stops because one run failed. Each run trains with ``resume=True``: a finished seed is
left alone and an interrupted or pre-empted one continues from its checkpoint.

Threads: a run on CPU is given ``cores // runs sharing the machine`` torch threads
(:func:`default_threads`); two runs of 2 threads each on 2 cores were measured ~13× slower
per CPU second than with one thread each (issue 17). The count is set before training and
recorded in the manifest (``cpu_threads``).

Logs: a pool or Slurm run writes its output to ``runs/<recipe>/logs/seed-<n>.<launcher>.log``
(:meth:`~pairrepro.train.run_folder.RunFolder.log_path`); submitit keeps its own bootstrap
logs and pickles under ``runs/.submitit/<job id>/``.

Slurm resources (GPUs, memory, time, CPUs) come from the recipe and, when present, from its
preflight figures ``bench/preflight/<recipe>.json`` (:func:`recipe_resources`), then a
``[slurm]`` table of a user file (``--slurm-config``), then ``--slurm-*`` options.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from pairrepro import paths
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.io import read_toml
from pairrepro.schema import Schema, validate
from pairrepro.train.run_folder import DamagedRunError, RunFolder, read_run

LAUNCHERS = ("local", "slurm", "submitit-local")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
PREFLIGHT_DIR = paths.PROJECT_DIR / "bench" / "preflight"
POLL_S = 1.0
# after SIGTERM in a Slurm job, how long to wait for the requeue signal (pre-emption sends
# SIGTERM, then USR2); a plain scancel sends no USR2 and the run stays ``interrupted``
REQUEUE_WAIT_S = 30.0


@dataclass(frozen=True)
class RunSpec:
    """One training run: seed ``seed`` of the recipe ``recipe`` (file ``source``)."""

    recipe: str
    source: str
    seed: int
    epochs: int = 0  # the recipe's [train] epochs, for the live table's progress and ETA
    select_metric: str = ""

    @property
    def label(self) -> str:
        return f"{self.recipe} seed {self.seed}"


@dataclass
class RunOutcome:
    """How one run ended: ``finished``, ``failed`` (with ``exit_code`` and ``reason``),
    ``interrupted`` (130: ``--resume`` continues), ``not started`` (stopped before its turn)
    or ``submitted`` (a Slurm job not waited for)."""

    spec: RunSpec
    status: str
    exit_code: int = 0
    reason: str = ""
    log: str = ""
    job_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"recipe": self.spec.recipe, "seed": self.spec.seed, "status": self.status,
                "exit_code": self.exit_code, "reason": self.reason, "log": self.log,
                "job_id": self.job_id}


Notify = Callable[[str, str], None]


def _quiet(_kind: str, _message: str) -> None:
    return None


# --------------------------------------------------------------------------- threads
def available_cores() -> int:
    """CPUs this process may run on (its affinity mask, which Slurm and taskset restrict;
    a cgroup CPU quota lowers it further)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    return max(1, cores)


def default_threads(runs: int = 1) -> int:
    """Torch threads for one of ``runs`` runs sharing this machine: cores // runs, at least 1."""
    return max(1, available_cores() // max(1, runs))


def set_threads(threads: int) -> None:
    """Use ``threads`` torch intra-op threads in this process, and tell OpenMP/MKL the same
    (for the processes it starts)."""
    import torch

    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch.set_num_threads(threads)


# --------------------------------------------------------------------------- one run
def _failure(spec: RunSpec, exc: BaseException) -> RunOutcome:
    if isinstance(exc, PairreproError):
        return RunOutcome(spec, "failed", exc.exit_code, exc.message)
    return RunOutcome(spec, "failed", 1, f"{type(exc).__name__}: {exc}")


def run_inline(spec: RunSpec, runs_dir: Path, device: str | None = None,
               quiet: bool = False) -> RunOutcome:
    """Train ``spec`` in this process (``resume=True``); errors become a failed outcome,
    Ctrl-C/SIGTERM still propagates (a checkpoint was saved)."""
    from pairrepro.train import runner

    try:
        runner.train_recipe(spec.source, [], [spec.seed], resume=True, device=device,
                            quiet=quiet, runs_dir=runs_dir)
    except PairreproError as exc:
        return _failure(spec, exc)
    return RunOutcome(spec, "finished")


def _failed_reason(spec: RunSpec, runs_dir: Path, log: Path) -> str:
    """Why a run failed: its result.json ``error``, else the last ``error:`` line of its log."""
    with contextlib.suppress(DamagedRunError):
        error = RunFolder.of(runs_dir, spec.recipe, spec.seed).read_result().get("error")
        if error:
            return str(error).splitlines()[0]
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
        errors = [line for line in lines if line.startswith("error:")]
        if errors:
            return errors[-1].removeprefix("error:").strip()
        if lines:
            return lines[-1][:200]
    return "no error recorded"


def child_command(spec: RunSpec, threads: int, device: str | None) -> list[str]:
    """The ``pairrepro train`` command line a pool process runs for ``spec``."""
    command = [sys.executable, "-c", "from pairrepro.cli.app import main; main()",
               "--quiet", "train", spec.source, "--seeds", str(spec.seed), "--resume",
               "--threads", str(threads)]
    return [*command, "--device", device] if device else command


# --------------------------------------------------------------------------- live table
@dataclass
class _Live:
    """What the live table shows of one run, read from its run folder (polling)."""

    spec: RunSpec
    status: str = "queued"
    started: float = 0.0
    first_epoch: int | None = None  # epochs already done when this launch started it
    epoch: int = 0
    dev: float | None = None
    eta_s: float | None = None

    def poll(self, runs_dir: Path) -> None:
        folder = RunFolder.of(runs_dir, self.spec.recipe, self.spec.seed)
        try:
            history = folder.read_metrics()
        except DamagedRunError:
            return
        if history:
            last = history[-1]
            self.epoch = int(last.get("epoch", 0))
            dev = last.get("dev", {})
            value = dev.get(self.spec.select_metric) if isinstance(dev, dict) else None
            self.dev = float(value) if isinstance(value, int | float) else None
        if self.first_epoch is None:
            self.first_epoch = self.epoch
        done_here = self.epoch - self.first_epoch
        if done_here > 0 and self.spec.epochs:
            per_epoch = (time.monotonic() - self.started) / done_here
            self.eta_s = per_epoch * max(0, self.spec.epochs - self.epoch)


def _fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else (
        f"{seconds // 60}m{seconds % 60:02d}s")


def live_table(rows: list[_Live], title: str) -> Any:
    """The rich table of every run: recipe, seed, status, epoch, dev metric, ETA."""
    from rich.table import Table

    table = Table(title=title)
    for name in ("recipe", "seed", "status", "epoch", "dev", "ETA"):
        table.add_column(name, justify="right" if name in ("seed", "epoch", "dev") else "left")
    colour = {"finished": "green", "failed": "red", "interrupted": "yellow"}
    for row in rows:
        spec = row.spec
        epochs = f"{row.epoch}/{spec.epochs}" if spec.epochs else str(row.epoch)
        dev = f"{spec.select_metric} {row.dev:.4f}" if row.dev is not None else ""
        status = row.status.split(" ")[0]
        shown = f"[{colour[status]}]{row.status}[/]" if status in colour else row.status
        table.add_row(spec.recipe, str(spec.seed), shown, epochs, dev,
                      _fmt_eta(row.eta_s) if row.status == "running" else "")
    return table


@contextlib.contextmanager
def _display(rows: list[_Live], title: str, live: bool) -> Iterator[Callable[[], None]]:
    """A rich Live display of ``rows`` on stderr (a no-op when ``live`` is False); yields the
    function that redraws it."""
    if not live:
        yield lambda: None
        return
    from rich.live import Live

    from pairrepro.cli.common import err_console

    with Live(live_table(rows, title), console=err_console, refresh_per_second=2,
              transient=False) as display:
        yield lambda: display.update(live_table(rows, title))


# --------------------------------------------------------------------------- local pool
def run_local(specs: list[RunSpec], runs_dir: Path, jobs: int = 1, device: str | None = None,
              threads: int | None = None, live: bool = False, quiet: bool = True,
              notify: Notify = _quiet) -> list[RunOutcome]:
    """Train every spec; ``jobs`` at a time, each with ``threads`` torch threads (default:
    cores // jobs). ``jobs == 1`` trains in this process (its own progress bars); more runs
    are ``pairrepro train`` processes, drawn as one live table when ``live``.

    A failed run does not stop the others. Ctrl-C/SIGTERM stops the running ones (each saves a
    checkpoint), starts no more, and re-raises ``KeyboardInterrupt``.
    """
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: expected 1 or more")
    threads = threads or default_threads(jobs)
    if jobs == 1:
        set_threads(threads)
        outcomes = []
        for spec in specs:
            notify("training", f"training {spec.label} ({threads} thread(s))")
            outcome = run_inline(spec, runs_dir, device, quiet)
            if outcome.status == "failed":
                notify("failed", f"{spec.label} failed (exit {outcome.exit_code}): "
                                 f"{outcome.reason}")
            outcomes.append(outcome)
        return outcomes
    return _pool(specs, runs_dir, jobs, threads, device, live, notify)


def _pool(specs: list[RunSpec], runs_dir: Path, jobs: int, threads: int,
          device: str | None, live: bool, notify: Notify) -> list[RunOutcome]:
    from pairrepro.train.loop import sigterm_as_interrupt

    rows = [_Live(spec) for spec in specs]
    outcomes: dict[int, RunOutcome] = {}
    running: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
    queue = list(range(len(specs)))
    env = {**os.environ, "PAIRREPRO_RUNS": str(runs_dir),
           **{name: str(threads) for name in THREAD_VARIABLES}}
    title = f"{len(specs)} run(s), {jobs} at a time, {threads} thread(s) each"
    with sigterm_as_interrupt(), _display(rows, title, live) as redraw:
        try:
            while queue or running:
                while queue and len(running) < jobs:
                    i = queue.pop(0)
                    spec = specs[i]
                    log = RunFolder.of(runs_dir, spec.recipe, spec.seed).log_path("local")
                    log.parent.mkdir(parents=True, exist_ok=True)
                    with open(log, "ab") as out:  # the child keeps its own descriptor
                        process = subprocess.Popen(child_command(spec, threads, device),
                                                   stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, env=env)
                    running[i] = (process, log)
                    rows[i].status, rows[i].started = "running", time.monotonic()
                    notify("training", f"started {spec.label} (pid {process.pid}, log {log})")
                time.sleep(POLL_S)
                for i, (process, log) in list(running.items()):
                    rows[i].poll(runs_dir)
                    code = process.poll()
                    if code is None:
                        continue
                    del running[i]
                    outcomes[i] = _ended(specs[i], code, runs_dir, log)
                    rows[i].status = outcomes[i].status + (
                        f" (exit {code})" if outcomes[i].status == "failed" else "")
                    if outcomes[i].status == "failed":
                        notify("failed", f"{specs[i].label} failed (exit {code}): "
                                         f"{outcomes[i].reason}; log {log}")
                redraw()
        except KeyboardInterrupt:
            _stop(running)
            raise
    return [outcomes[i] for i in range(len(specs))]


def _ended(spec: RunSpec, code: int, runs_dir: Path, log: Path) -> RunOutcome:
    if code == 0:
        return RunOutcome(spec, "finished", 0, "", str(log))
    if code in (130, -signal.SIGINT, -signal.SIGTERM):
        return RunOutcome(spec, "interrupted", 130, "interrupted: --resume continues",
                          str(log))
    if code < 0:
        reason = f"killed by signal {signal.Signals(-code).name}"
    else:
        reason = _failed_reason(spec, runs_dir, log)
    return RunOutcome(spec, "failed", code if code > 0 else 1, reason, str(log))


def _stop(running: dict[int, tuple[subprocess.Popen[bytes], Path]],
          grace_s: float = 120.0) -> None:
    """Ask every running child to stop (SIGTERM: it checkpoints at the next step) and wait;
    a child still alive after ``grace_s`` is killed."""
    for process, _ in running.values():
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process, _ in running.values():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()


# --------------------------------------------------------------------------- Slurm
class SlurmSettings(Schema):
    """Resources of one Slurm job (the ``[slurm]`` table of ``--slurm-config``; every key
    optional there)."""

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
    """The ``[slurm]`` table of ``path``, validated (unknown keys and wrong types are a
    ConfigError naming the file and key); only the keys it sets."""
    if not path.is_file():
        raise ConfigError(f"--slurm-config {path}: no such file",
                          hint="a TOML file with a [slurm] table, e.g. partition = \"gpu\"")
    data = validate(_SlurmFile, read_toml(path), str(path)).slurm
    validate(SlurmSettings, data, f"{path}: [slurm]", sections=False)
    return data


def read_preflight(recipe: str, folder: Path | None = None) -> dict[str, Any]:
    """``bench/preflight/<recipe>.json`` (pairs/s, peak memory, seconds per epoch) or {} when
    absent or unreadable: resources then fall back to defaults."""
    import json

    path = (folder or PREFLIGHT_DIR) / f"{recipe}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _number(data: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def recipe_resources(recipe: Any, device: str | None = None,
                     preflight_dir: Path | None = None) -> dict[str, Any]:
    """Default Slurm resources of one recipe: a GPU unless it trains on CPU; memory and time
    from its preflight figures (1.5× the measured peak memory + 2 GB; 1.5× the estimated
    training time + 30 min), else 16 GB and 24 h."""
    wanted = device or recipe.train.device
    out: dict[str, Any] = {"gpus_per_node": 0 if wanted == "cpu" else 1}
    figures = read_preflight(recipe.name, preflight_dir)
    peak_gb = _number(figures, "peak_memory_gb", "peak_mem_gb")
    peak_mb = _number(figures, "peak_mb", "peak_memory_mb", "peak_rss_mb")
    if peak_gb is None and peak_mb is not None:
        peak_gb = peak_mb / 1024
    if peak_gb is not None:
        out["mem_gb"] = int(peak_gb * 1.5 + 2.999)
    epoch_s = _number(figures, "epoch_s", "seconds_per_epoch")
    pairs_per_s, train_pairs = (_number(figures, "pairs_per_s"),
                                _number(figures, "train_pairs"))
    if epoch_s is None and pairs_per_s and train_pairs:
        epoch_s = train_pairs / pairs_per_s
    if epoch_s is not None:
        out["timeout_min"] = int(epoch_s * recipe.train.epochs * 1.5 / 60) + 30
    return out


def slurm_settings(recipe: Any, device: str | None, file_values: dict[str, Any],
                   options: dict[str, Any], preflight_dir: Path | None = None
                   ) -> SlurmSettings:
    """Resources of ``recipe``'s jobs: recipe/preflight defaults, then the ``[slurm]`` file
    values, then the ``--slurm-*`` options that were given (None: not given)."""
    merged = {**recipe_resources(recipe, device, preflight_dir), **file_values,
              **{k: v for k, v in options.items() if v is not None}}
    return validate(SlurmSettings, merged, f"slurm resources of {recipe.name}",
                    sections=False)


def executor_parameters(settings: SlurmSettings, name: str) -> dict[str, Any]:
    """submitit ``update_parameters`` keywords for ``settings``."""
    params: dict[str, Any] = {
        "name": name, "timeout_min": settings.timeout_min, "mem_gb": settings.mem_gb,
        "gpus_per_node": settings.gpus_per_node, "cpus_per_task": settings.cpus_per_task,
        "tasks_per_node": 1, "nodes": 1, "slurm_array_parallelism": settings.array_parallelism,
    }
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(settings, key):
            params[f"slurm_{key}"] = getattr(settings, key)
    if settings.additional:
        params["slurm_additional_parameters"] = dict(settings.additional)
    return params


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (fd, *saved):
            os.close(descriptor)


def _requeue_signal() -> signal.Signals:
    """The signal submitit uses for pre-emption and time-outs (``SUBMITIT_PREEMPT_SIGNAL``)."""
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    return signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]


def _checkpointable_base() -> type:
    try:
        from submitit.helpers import Checkpointable
    except ImportError:  # submitit is a dependency; without it only the Slurm launcher is lost
        return object
    return Checkpointable


class SlurmRun(_checkpointable_base()):  # type: ignore[misc]
    """The function each array job runs: train one spec with ``resume=True``.

    Pre-emption and time-out: Slurm (or submitit's local executor) sends SIGUSR2 (after a
    SIGTERM on pre-emption). The run turns it into SIGTERM, which the trainer handles like
    Ctrl-C (a checkpoint at the next step, status ``interrupted``); then submitit's handler
    calls :meth:`checkpoint` (``helpers.Checkpointable``: the same call again) and requeues
    the job, which resumes from that checkpoint. A SIGTERM without SIGUSR2 within
    :data:`REQUEUE_WAIT_S` (``scancel``) leaves the run ``interrupted``."""

    def __init__(self, runs_dir: Path, device: str | None = None,
                 threads: int | None = None) -> None:
        self.runs_dir = Path(runs_dir).absolute()
        self.device = device
        self.threads = threads  # None: the job's CPUs (SLURM_CPUS_PER_TASK, affinity)

    def __call__(self, spec: RunSpec) -> dict[str, Any]:
        job_id = os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID", "")
        try:
            import submitit

            job_id = submitit.JobEnvironment().job_id
        except (ImportError, RuntimeError):
            pass
        log = RunFolder.of(self.runs_dir, spec.recipe, spec.seed).log_path(f"slurm-{job_id}")
        preempted: list[tuple[int, Any]] = []
        sig = _requeue_signal()
        submitit_handler = signal.getsignal(sig)

        def on_preempt(signum: int, frame: Any) -> None:
            preempted.append((signum, frame))
            os.kill(os.getpid(), signal.SIGTERM)  # the trainer: checkpoint, then stop

        set_threads(self.threads or int(os.environ.get("SLURM_CPUS_PER_TASK", "0"))
                    or default_threads(1))
        previous = signal.signal(sig, on_preempt)
        try:
            with _output_to(log):
                print(f"pairrepro: {spec.label} in job {job_id} on {os.uname().nodename} "
                      f"(pid {os.getpid()})", flush=True)
                outcome = run_inline(spec, self.runs_dir, self.device, quiet=True)
        except KeyboardInterrupt:
            # Slurm pre-empts with SIGTERM first, then the requeue signal: the run has
            # checkpointed on SIGTERM; wait a little for the signal that says "requeue"
            deadline = time.monotonic() + REQUEUE_WAIT_S
            while not preempted and time.monotonic() < deadline:
                time.sleep(0.2)
            signal.signal(sig, previous)
            if preempted and callable(submitit_handler):
                submitit_handler(*preempted[0])  # checkpoint() + requeue + exit
            raise
        finally:
            signal.signal(sig, previous)
        outcome.log, outcome.job_id = str(log), job_id
        return outcome.to_json()


def submit_slurm(specs: list[RunSpec], runs_dir: Path, settings: dict[str, SlurmSettings],
                 device: str | None = None, cluster: str = "slurm",
                 notify: Notify = _quiet) -> list[tuple[RunSpec, Any]]:
    """Submit every spec as one job of a submitit array (one array per distinct resource
    set: ``settings`` maps a recipe name to its resources); returns (spec, job) pairs.
    ``cluster="local"`` runs the same code through submitit's local executor."""
    try:
        import submitit
    except ImportError:
        raise ConfigError("--launcher slurm needs the submitit package",
                          hint="pip install 'submitit>=1.5' (a dependency of pairrepro)") from None
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
        executor.update_parameters(**executor_parameters(resources, "pairrepro"))
        # submitit's local executor starts the whole array at once on this machine
        threads = None if cluster == "slurm" else default_threads(len(group))
        jobs = executor.map_array(SlurmRun(runs_dir, device, threads), group)
        for spec, job in zip(group, jobs, strict=True):
            notify("training", f"submitted {spec.label}: job {job.job_id}")
            submitted.append((spec, job))
    return submitted


def wait_slurm(submitted: list[tuple[RunSpec, Any]], runs_dir: Path, live: bool = False,
               notify: Notify = _quiet) -> list[RunOutcome]:
    """Wait for submitted jobs (polling the run folders for the live table); one outcome each.
    A job that requeues itself keeps its id and is waited for until it ends."""
    rows = [_Live(spec, status="submitted", started=time.monotonic())
            for spec, _ in submitted]
    outcomes: dict[int, RunOutcome] = {}
    with _display(rows, f"{len(submitted)} Slurm job(s)", live) as redraw:
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
                time.sleep(POLL_S)
    return [outcomes[i] for i in range(len(submitted))]


def _job_outcome(spec: RunSpec, job: Any, runs_dir: Path) -> RunOutcome:
    try:
        result = job.result()
    except Exception as exc:  # submitit's FailedJobError/UncompletedJobError: a crash
        reason = _failed_reason(spec, runs_dir, Path(job.paths.stdout))
        first = str(exc).strip().splitlines()
        return RunOutcome(spec, "failed", 1, reason if reason != "no error recorded" else (
            first[0] if first else type(exc).__name__), str(job.paths.stdout), job.job_id)
    return RunOutcome(spec, str(result["status"]), int(result["exit_code"]),
                      str(result["reason"]), str(result["log"]), str(job.job_id))


def summary_lines(outcomes: list[RunOutcome]) -> list[str]:
    """One line per run that did not finish: recipe, seed, status, exit code and reason."""
    return [f"{o.spec.label}: {o.status} (exit {o.exit_code}): {o.reason}"
            + (f" [log {o.log}]" if o.log else "")
            for o in outcomes if o.status not in ("finished", "submitted")]


def specs_of(recipe: Any, seeds: list[int]) -> list[RunSpec]:
    """One :class:`RunSpec` per seed of a loaded recipe."""
    return [RunSpec(recipe.name, str(recipe.source), seed, recipe.train.epochs,
                    recipe.select_metric) for seed in seeds]

