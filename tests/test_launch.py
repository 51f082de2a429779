"""Launchers (issue 17): ``train --threads``, ``reproduce --jobs N`` (a local pool) and
``--launcher slurm`` (submitit; tested through its local executor, the same code path)."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
import torch
from synth_prepared import write_synthetic
from typer.testing import CliRunner

from pairrepro import device, paths
from pairrepro.cli.app import app
from pairrepro.config import load_recipe
from pairrepro.errors import ConfigError
from pairrepro.launch import local, slurm
from pairrepro.launch.spec import LiveRow, RunSpec, specs_of
from pairrepro.planning import gpus
from pairrepro.runs import RunFolder

BASE = (paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml").read_text()


def tiny_recipe(folder: Path, name: str, epochs: int = 2, extra: str = "",
                dataset: str = "synthetic", variant: str = "nli") -> Path:
    """The demo recipe made tiny (16-d), ``epochs`` long, without early stopping."""
    text = (BASE.replace("dim = 32", "dim = 16").replace("hidden = 48", "hidden = 16")
            .replace("mlp_hidden = 64", "mlp_hidden = 16").replace("epochs = 5", f"epochs = "
                                                                   f"{epochs}")
            .replace("patience = 2", "patience = 0")
            .replace('dataset = "synthetic"', f'dataset = "{dataset}"')
            .replace('variant = "nli"', f'variant = "{variant}"'))
    if extra:
        text = text.replace("[train]\n", f"[train]\n{extra}\n")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture
def synth(data_home: Path) -> Path:
    write_synthetic(data_home, n_train=300, n_eval=90, n_queries=40, n_eval_queries=20)
    return data_home


@pytest.fixture(autouse=True)
def one_thread() -> None:
    """Tests here change torch's thread count; put conftest's 1 back afterwards."""
    yield
    torch.set_num_threads(1)


def manifest(runs: Path, recipe: str, seed: int = 1) -> dict:
    return RunFolder.of(runs, recipe, seed).read_manifest()


# --------------------------------------------------------------------------- threads
def test_default_threads_divide_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "available_cores", lambda: 8)
    assert [device.default_threads(n) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]


def test_train_threads_option_and_default_are_recorded(synth: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tiny_recipe(tmp_path / "recipes", "tiny", epochs=1)
    runs = paths.runs_dir()
    runner = CliRunner()
    result = runner.invoke(app, ["--quiet", "train", str(recipe), "--threads", "2"])
    assert result.exit_code == 0, result.output
    assert manifest(runs, "tiny")["cpu_threads"] == 2
    # default: the machine's cores (3 here) divided by the runs sharing it (1; torchrun: its
    # processes on this node)
    monkeypatch.setattr(device, "available_cores", lambda: 3)
    result = runner.invoke(app, ["--quiet", "train", str(recipe), "--force"])
    assert result.exit_code == 0, result.output
    assert manifest(runs, "tiny")["cpu_threads"] == 3
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    monkeypatch.setenv("WORLD_SIZE", "1")  # not a real DDP launch: one process
    result = runner.invoke(app, ["--quiet", "train", str(recipe), "--force"])
    assert result.exit_code == 0, result.output
    assert manifest(runs, "tiny")["cpu_threads"] == 1


def test_exit_status_of_a_pool_process_becomes_the_outcome(tmp_path: Path) -> None:
    spec = RunSpec("r", "r.toml", 1)
    log = tmp_path / "r.log"
    log.write_text("loading\nerror: recipes/r.toml: [data] dataset: 'nope' is unknown\n")
    assert local._ended(spec, 0, tmp_path, log).status == "finished"
    assert (local._ended(spec, 130, tmp_path, log).status,
            local._ended(spec, -15, tmp_path, log).exit_code) == ("interrupted", 130)
    failed = local._ended(spec, 2, tmp_path, log)
    assert (failed.status, failed.exit_code) == ("failed", 2)
    assert failed.reason == "recipes/r.toml: [data] dataset: 'nope' is unknown"
    killed = local._ended(spec, -9, tmp_path, log)
    assert (killed.status, killed.reason) == ("failed", "killed by signal SIGKILL")


# --------------------------------------------------------------------------- local pool
def test_reproduce_jobs_runs_a_pool_and_a_failed_run_does_not_stop_the_others(
        synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two recipes of CSRAN Table 2 (SNLI; synthetic NLI data prepared under that name), one
    of which fails in its first epoch (a ranking metric on a classification task): with
    --jobs 2 the good one's two seeds finish, the summary names the failure and its exit
    code, the table is rendered, and the exit code is 6."""
    recipes = tmp_path / "recipes"
    row = '[recipe]\nreproduces = [{paper = "csran", table = 2, row = "CSRAN"}]\n'
    for name, extra in (("good", ""), ("bad", 'select_metric = "map"')):
        path = tiny_recipe(recipes, name, epochs=2, dataset="snli", variant="syn")
        text = path.read_text().replace("[recipe]\n", row, 1).replace(
            'select_metric = "accuracy"', extra or 'select_metric = "accuracy"')
        path.write_text(text)
    prepared = synth / "prepared"
    (prepared / "synthetic-nli").rename(prepared / "snli-syn")
    monkeypatch.setenv("PAIRREPRO_RECIPES", str(recipes))
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["--quiet", "reproduce", "csran", "--table", "2",
                                      "--seeds", "1,2", "--jobs", "2", "--threads", "1",
                                      "--runs", str(runs), "--format", "md"])
    assert result.exit_code == 6, result.output
    text = " ".join(result.output.split())
    assert "bad seed 1: failed (exit 2)" in text and "bad seed 2: failed (exit 2)" in text
    assert "select_metric" in text and "2 of 4 run(s) did not finish" in text
    for seed in (1, 2):
        good = RunFolder.of(runs, "good", seed)
        assert good.read_result()["status"] == "finished"
        assert good.read_manifest()["cpu_threads"] == 1
        assert good.log_path("local").is_file()
        assert RunFolder.of(runs, "bad", seed).read_result()["status"] == "failed"
    assert "| CSRAN" in result.output  # the table is still rendered


def test_pool_never_runs_more_than_jobs_at_once(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes replaced by ``sleep``: at most ``jobs`` are alive at any poll."""
    import subprocess

    alive: list[subprocess.Popen] = []
    peak = [0]
    real = subprocess.Popen

    def popen(command: list[str], **kwargs: object) -> subprocess.Popen:
        process = real(["sleep", "0.3"], **kwargs)
        alive.append(process)
        peak[0] = max(peak[0], sum(p.poll() is None for p in alive))
        return process

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(LiveRow, "POLL_S", 0.05)
    specs = [RunSpec("r", "r.toml", seed) for seed in range(5)]
    outcomes = local.run_local(specs, tmp_path, jobs=2, threads=1)
    assert [o.status for o in outcomes] == ["finished"] * 5 and peak[0] == 2


def test_cuda_pool_packs_runs_onto_a_device_as_their_preflight_peaks_allow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs 6 --device cuda``: ESIM's committed record (peak_mb) + the CUDA context makes
    two runs fit 90% of a 4,200 MB device, three of them 8,000 MB; a recipe without a record
    has a device to itself. Processes replaced by ``sleep``; the devices are stated."""
    import subprocess

    peak = json.loads((paths.PROJECT_DIR / "bench/preflight/esim.json").read_text())["peak_mb"]
    need = peak + gpus.CONTEXT_MB
    assert gpus.runs_per_device(need, 4200) == int(0.9 * 4200 // need) == 2
    assert gpus.runs_per_device(None, 4200) == 1 and gpus.runs_per_device(need, 100) == 1
    alive: list[tuple[subprocess.Popen, str]] = []
    most: dict[str, int] = {}
    real = subprocess.Popen

    def popen(command: list[str], **kwargs: object) -> subprocess.Popen:
        process = real(["sleep", "0.3"], **kwargs)
        alive.append((process, command[command.index("--device") + 1]))
        for on in {d for _, d in alive}:
            most[on] = max(most.get(on, 0), sum(p.poll() is None for p, d in alive if d == on))
        return process

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(LiveRow, "POLL_S", 0.05)
    specs = [RunSpec("esim", "esim.toml", seed) for seed in range(5)]
    for memory, expected in (({0: 4200.0}, {"cuda:0": 2}),
                             ({0: 4200.0, 1: 8000.0}, {"cuda:0": 2, "cuda:1": 3})):
        alive.clear(), most.clear()
        monkeypatch.setattr(local, "cuda_shares", lambda device, m=memory: local.DeviceShares(m))
        outcomes = local.run_local(specs, tmp_path, jobs=6, device="cuda", threads=1)
        assert [o.status for o in outcomes] == ["finished"] * 5 and most == expected
    alive.clear(), most.clear()
    specs = [RunSpec("no_record", "no_record.toml", seed) for seed in range(3)]
    assert local.run_local(specs, tmp_path, jobs=3, device="cuda", threads=1)
    assert most == {"cuda:0": 1, "cuda:1": 1}  # one run on each device at a time


def test_a_pool_of_no_jobs_is_refused_rather_than_waiting_forever(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--jobs 0"):
        local.run_local([RunSpec("r", "r.toml", 1)], tmp_path, jobs=0)


# --------------------------------------------------------------------------- Slurm
def test_slurm_time_and_memory_come_from_the_committed_preflight_record(
        data_home: Path) -> None:
    """TC-LSTM's record as committed (bench/preflight/tc_lstm.json: pairs_per_s, peak_mb,
    measured on a CPU) and SNLI's training pairs (nothing prepared here: the manifest's
    549,367, the SNLI paper's 550,152 less its 785 pairs without a gold label)."""
    record = json.loads((paths.PROJECT_DIR / "bench" / "preflight" / "tc_lstm.json")
                        .read_text())
    recipe = load_recipe(paths.PROJECT_DIR / "recipes" / "tc_lstm.toml")
    epoch_s = 549_367 / record["pairs_per_s"]
    assert slurm.recipe_resources(recipe, "cpu") == {
        "gpus_per_node": 0, "mem_gb": int(record["peak_mb"] / 1024 * 1.5 + 2.999),
        "timeout_min": int(epoch_s * recipe.train.epochs * 1.5 / 60) + 30}
    # a GPU job takes no time limit from a CPU figure (it would ask for days): the default
    gpu = slurm.slurm_settings(recipe, "cuda", {})
    assert (gpu.gpus_per_node, gpu.timeout_min) == (1, slurm.SlurmSettings().timeout_min)


def test_slurm_resources_without_a_record_then_the_config_file(tmp_path: Path) -> None:
    recipe = load_recipe(paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml")
    # no preflight record: a GPU unless the device is cpu, defaults otherwise
    assert slurm.recipe_resources(recipe, None, tmp_path) == {"gpus_per_node": 1}
    config = tmp_path / "slurm.toml"
    config.write_text('[slurm]\npartition = "gpu"\nmem_gb = 32\ntimeout_min = 90\n')
    settings = slurm.slurm_settings(recipe, "cpu", slurm.load_slurm_config(config), tmp_path)
    assert (settings.partition, settings.mem_gb, settings.timeout_min,
            settings.gpus_per_node) == ("gpu", 32, 90, 0)
    params = slurm.executor_parameters(settings, "pairrepro")
    assert params["slurm_partition"] == "gpu" and params["timeout_min"] == 90
    config.write_text("[slurm]\nmem = 32\n")
    with pytest.raises(ConfigError,
                       match=r"(?s)slurm.toml: \[slurm\]: mem: unknown key.*allowed keys: part"):
        slurm.load_slurm_config(config)


def test_slurm_on_cuda_sends_jobs_runs_to_each_array_job_to_share_its_gpu(
        synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs 2 --device cuda``: five seeds become array jobs of 2, 2 and 1, each asking
    for host memory for its runs (a fake executor records what is submitted); an array job
    of two runs trains both through the local pool (here on the CPU: the same path)."""
    recipe = load_recipe(tiny_recipe(tmp_path / "recipes", "tiny", epochs=1))
    submitted: list[tuple[dict, list]] = []

    class Executor:
        def __init__(self, folder: Path, cluster: str) -> None:
            self.params: dict = {}

        def update_parameters(self, **params: object) -> None:
            self.params.update(params)

        def map_array(self, fn: object, items: list) -> list:
            submitted.append((self.params, items))
            return [type("Job", (), {"job_id": str(i)})() for i in range(len(items))]

    monkeypatch.setattr(slurm.submitit, "AutoExecutor", Executor)
    settings = {"tiny": slurm.slurm_settings(recipe, "cuda", {"mem_gb": 3})}
    pairs = slurm.submit_slurm(specs_of(recipe, [1, 2, 3, 4, 5]), tmp_path, settings, "cuda",
                               jobs=2)
    ((params, chunks),) = submitted
    assert [[s.seed for s in chunk] for chunk in chunks] == [[1, 2], [3, 4], [5]]
    assert params["mem_gb"] == 6 and params["gpus_per_node"] == 1
    assert [(spec.seed, job.job_id) for spec, job in pairs] == [
        (1, "0"), (2, "0"), (3, "1"), (4, "1"), (5, "2")]
    outcomes = slurm.SlurmRun(tmp_path / "runs", "cpu", threads=1)(specs_of(recipe, [1, 2]))
    assert [(o.spec.seed, o.status) for o in outcomes] == [(1, "finished"), (2, "finished")]


EPOCHS = 30


def _slurm_answers() -> bool:
    import shutil
    import subprocess

    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.parametrize("cluster", ["local", pytest.param("slurm", marks=pytest.mark.skipif(
    not _slurm_answers(), reason="no Slurm controller answers `sinfo -h` here: this case runs "
                                 "where one does (a cluster's login node, or slurmctld and "
                                 "slurmd started on this machine); the local case ran the "
                                 "same job function"))])
def test_slurm_array_through_submitit_resumes_a_preempted_job(synth: Path, tmp_path: Path,
                                                              cluster: str) -> None:
    """Two seeds as one submitit array (``local``: submitit's local executor, the Slurm job
    function in local processes; ``slurm``: a real Slurm). Seed 1 is pre-empted after its
    first epoch: it checkpoints, requeues itself, and the new process resumes from that
    checkpoint."""
    pytest.importorskip("submitit")
    # enough epochs that the signal after the first one always lands mid-run, on any machine
    recipe = load_recipe(tiny_recipe(tmp_path / "recipes", "tiny", epochs=EPOCHS))
    runs = tmp_path / "runs"
    specs = specs_of(recipe, [1, 2])
    small = {"timeout_min": 30, "cpus_per_task": 1, "mem_gb": 1}  # fits a 2-CPU test node
    settings = {"tiny": slurm.slurm_settings(recipe, "cpu", small)}
    submitted = slurm.submit_slurm(specs, runs, settings, device="cpu", cluster=cluster)
    assert [spec.seed for spec, _ in submitted] == [1, 2]
    first = RunFolder.of(runs, "tiny", 1)
    deadline = time.monotonic() + 300
    while not first.read_metrics():
        assert time.monotonic() < deadline and not submitted[0][1].done(), \
            submitted[0][1].paths.stdout.read_text() if submitted[0][1].paths.stdout.exists() \
            else "job ended before its first epoch"
        time.sleep(0.5)
    # SIGUSR2 to the job's process: what Slurm sends on pre-emption or time-out (submitit's
    # local executor sends it to the same process before its time limit)
    log = first.log_path(f"slurm-{submitted[0][1].job_id}")
    if cluster == "slurm":
        submitted[0][1]._interrupt()  # scancel --signal SIGTERM, then USR2: a pre-emption
    else:
        pid = int(re.search(r"\(pid (\d+)\)", log.read_text()).group(1))
        os.kill(pid, signal.SIGUSR2)
    outcomes = slurm.wait_slurm(submitted, runs)
    assert [o.status for o in outcomes] == ["finished", "finished"], outcomes
    assert Path(outcomes[0].log) == log and log.parent == runs / "tiny" / "logs"  # with the run
    assert log.read_text().count("pairrepro: tiny seed 1 in job") == 2  # started twice
    assert first.read_manifest()["resumed"] is True
    epochs = [line["epoch"] for line in first.read_metrics()]
    assert epochs == list(range(1, EPOCHS + 1))  # every epoch once: continued, not restarted
    assert RunFolder.of(runs, "tiny", 2).read_manifest()["resumed"] is False
