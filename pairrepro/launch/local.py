"""Launch runs on this machine: one after another in this process, or a pool of ``jobs``
``pairrepro train`` processes, each pinned to ``cores // jobs`` threads; on CUDA, packed onto
the devices as their preflight peak memory allows (:class:`DeviceShares`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pairrepro.device import THREAD_VARIABLES, default_threads, set_threads
from pairrepro.errors import ConfigError
from pairrepro.launch.spec import (
    LiveRow,
    Notify,
    RunOutcome,
    RunSpec,
    continues,
    display,
    failed_reason,
    run_inline,
    silent,
)
from pairrepro.planning.gpus import USABLE_SHARE, device_need_mb
from pairrepro.planning.preflight_record import preflight_record
from pairrepro.runs import RunFolder


def child_command(spec: RunSpec, threads: int, device: str | None, runs_dir: Path
                  ) -> list[str]:
    """The ``pairrepro train`` command line a pool process runs for ``spec``."""
    return [sys.executable, "-c", "from pairrepro.cli import main; main()",
            "--quiet", "train", spec.source, "--seeds", str(spec.seed),
            *(["--resume"] if continues(spec, runs_dir) else []), "--threads", str(threads),
            *(["--device", device] if device else [])]


class DeviceShares:
    """The CUDA devices a pool shares: a run takes its ``device_need_mb`` (a whole device
    without one, or when it needs more) of the first with that much of its
    :data:`USABLE_SHARE` left."""

    def __init__(self, memory_mb: dict[int, float]) -> None:
        self.size = {index: mb * USABLE_SHARE for index, mb in memory_mb.items()}
        self.free = dict(self.size)

    def take(self, need_mb: float | None) -> tuple[int, float] | None:
        """(device index, share taken), or None while no device has room."""
        shares = ((i, min(need_mb or size, size)) for i, size in self.size.items())
        place = next(((i, share) for i, share in shares if share <= self.free[i]), None)
        if place:
            self.free[place[0]] -= place[1]
        return place


def cuda_shares(device: str | None) -> DeviceShares | None:
    """The shares of ``--device cuda`` (every visible device) or ``cuda:N``; else None."""
    if not (device or "").startswith("cuda"):
        return None
    import torch

    found = torch.device(device or "")
    indices = [found.index] if found.index is not None else range(torch.cuda.device_count())
    return DeviceShares({i: torch.cuda.get_device_properties(i).total_memory / 2**20
                         for i in indices})


def run_local(specs: list[RunSpec], runs_dir: Path, jobs: int = 1, device: str | None = None,
              threads: int | None = None, live: bool = False, quiet: bool = True,
              notify: Notify = silent) -> list[RunOutcome]:
    """Train every spec, ``jobs`` at a time (``threads`` each, default cores // jobs). A failed
    run stops no other; Ctrl-C stops the running ones and re-raises ``KeyboardInterrupt``."""
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: expected 1 or more")
    threads = threads or default_threads(jobs)
    if jobs == 1:
        set_threads(threads)
        outcomes = []
        for spec in specs:
            notify("training", f"training {spec.label} ({threads} thread(s))")
            if (outcome := run_inline(spec, runs_dir, device, quiet)).status == "failed":
                notify("failed", f"{spec.label} failed (exit {outcome.exit_code}): "
                                 f"{outcome.reason}")
            outcomes.append(outcome)
        return outcomes
    return _pool(specs, runs_dir, jobs, threads, device, live, notify)


def _pool(specs: list[RunSpec], runs_dir: Path, jobs: int, threads: int,
          device: str | None, live: bool, notify: Notify) -> list[RunOutcome]:
    from pairrepro.train.loop import sigterm_as_interrupt

    rows = [LiveRow(spec) for spec in specs]
    outcomes: dict[int, RunOutcome] = {}
    running: dict[int, tuple[subprocess.Popen[bytes], Path, tuple[int, float] | None]] = {}
    shares = cuda_shares(device)
    queue = list(range(len(specs)))
    env = {**os.environ, "PAIRREPRO_RUNS": str(runs_dir),
           **{name: str(threads) for name in THREAD_VARIABLES}}
    title = f"{len(specs)} run(s), {jobs} at a time, {threads} thread(s) each"
    with sigterm_as_interrupt(), display(rows, title, live) as redraw:
        try:
            while queue or running:
                while queue and len(running) < jobs:
                    spec = specs[queue[0]]
                    place = shares.take(device_need_mb(preflight_record(spec.recipe))) \
                        if shares else None
                    if shares and not place:
                        break  # until a running one ends
                    i = queue.pop(0)
                    log = RunFolder.of(runs_dir, spec.recipe, spec.seed).log_path("local")
                    log.parent.mkdir(parents=True, exist_ok=True)
                    with open(log, "ab") as out:  # the child keeps its own descriptor
                        on = f"cuda:{place[0]}" if place else device
                        process = subprocess.Popen(child_command(spec, threads, on, runs_dir),
                                                   stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, env=env)
                    running[i] = (process, log, place)
                    rows[i].status, rows[i].started = "running", time.monotonic()
                    notify("training", f"started {spec.label} (pid {process.pid}, log {log})")
                time.sleep(LiveRow.POLL_S)
                for i, (process, log, place) in list(running.items()):
                    rows[i].poll(runs_dir)
                    if (code := process.poll()) is None:
                        continue
                    del running[i]
                    if shares and place:
                        shares.free[place[0]] += place[1]
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
    reason = (f"killed by signal {signal.Signals(-code).name}" if code < 0
              else failed_reason(spec, runs_dir, log))
    return RunOutcome(spec, "failed", code if code > 0 else 1, reason, str(log))


def _stop(running: dict[int, tuple[subprocess.Popen[bytes], Path, object]],
          grace_s: float = 120.0) -> None:
    """SIGTERM every running child and wait; one alive after ``grace_s`` is killed."""
    for process, *_ in running.values():
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process, *_ in running.values():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()

