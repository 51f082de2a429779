"""bench/gpu_check.sh, the GPU check, as far as a CPU allows: its --dry-run runs every
step (tests/test_cuda.py, a step profile, the models' rates, one epoch of the TrecQA CSRAN) at
tiny sizes and records them; a dry run's record never becomes a measured GPU figure of the plan."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from synth_prepared import write_synthetic

from pairrepro.planning.gpus import load_gpu_rates

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_check.sh"
sys.path.insert(0, str(ROOT / "bench"))  # bench/ is not a package

from gpu_rates import DRY_BATCH, DRY_MODELS, EPOCH_RECIPE  # noqa: E402


def test_the_dry_run_runs_every_step_on_the_cpu_and_records_them(data_home: Path,
                                                                  tmp_path: Path) -> None:
    # TrecQA's prepared folder, stood in for by a synthetic ranking set of the same layout
    write_synthetic(data_home, n_train=20, n_eval=10, n_queries=24, n_eval_queries=8)
    shutil.copytree(data_home / "prepared" / "synthetic-ranking",
                    data_home / "prepared" / "trecqa-clean")
    records = tmp_path / "records"
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--records", str(records)],
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                          text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "== tests/test_cuda.py" in done.stdout and "every step passed" in done.stdout
    assert re.search(r"^nbow +\d+ +0 ", done.stdout, re.MULTILINE)  # the step profile's row
    (run,) = json.loads((records / "gpu_rates.json").read_text())["runs"]
    assert run["dry_run"] is True and run["device"] == "cpu" and run["gpu"] == ""
    assert [row["model"] for row in run["models"]] == list(DRY_MODELS)
    for row in run["models"]:
        assert row["fp32"]["pairs_per_s"] > 0 and row["fp32"]["batch"] == DRY_BATCH
        assert "pairs_per_s" in row["bf16"] or "unsupported" in row["bf16"], row
    assert run["epoch"]["recipe"] == EPOCH_RECIPE and run["epoch"]["pairs_per_s"] > 0
    together = run["models"][0]["shared"]  # two preflight processes on the one device
    assert together["runs"] == 2 and together["pairs_per_s"] == sum(together["each"]) > 0
    assert run["epoch"]["test_map"] is not None
    # a dry run is never a GPU's measured rate, even under a GPU's name
    fake = records / "as_if_h100.json"
    fake.write_text(json.dumps({"runs": [{**run, "gpu": "h100"}]}))
    assert load_gpu_rates("h100", fake) == {}


def test_a_wrong_option_exits_2_naming_the_options() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--fast"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 2 and "--dry-run" in done.stderr


def test_the_steps_time_limits_add_up_to_at_most_nine_and_a_half_minutes() -> None:
    """Each step runs under `timeout`: their limits together are the script's promise, and
    the step profile's, the rates' and the epoch's own budgets fit inside their step's."""
    text = SCRIPT.read_text(encoding="utf-8")
    limits = [int(x) for x in re.findall(r'^step "[^"]+" (\d+) ', text, re.MULTILINE)]
    assert len(limits) == 3 and sum(limits) <= 9.5 * 60, limits
    profile = re.search(r"--device cuda --budget (\d+)", text)
    budget = re.search(r"gpu_rates.py .*--budget (\d+)", text)
    epoch = re.search(r"--epoch-timeout (\d+)", text)
    assert profile and int(profile[1]) < limits[1]
    assert budget and epoch and int(budget[1]) + int(epoch[1]) < limits[2]


def test_records_without_a_folder_exits_2_as_the_header_says() -> None:
    """`--records` as the last word exited 1 (bash's own `${2:?}` error)."""
    assert "2 a wrong option" in SCRIPT.read_text(encoding="utf-8")
    for words in (["--records"], ["--records", "--dry-run"]):
        done = subprocess.run(["bash", str(SCRIPT), *words], capture_output=True, text=True,
                              timeout=30, check=False)
        assert done.returncode == 2 and "--records needs a folder" in done.stderr, words
    assert "2 a wrong option" in subprocess.run(["bash", str(SCRIPT), "--help"],
                                                capture_output=True, text=True,
                                                timeout=30, check=True).stdout
