"""The wheel built from this tree works outside the checkout: installed into a fresh virtual
environment and run from an empty folder, it knows the datasets, recipes, paper tables and
reference runs (setup.py puts the data folders into it; pairrepro/paths.py finds them there).

The fresh environment reuses this interpreter's installed packages (torch and the rest) through
a ``.pth`` line, so nothing is downloaded: a path line adds that folder to ``sys.path`` without
reading its own ``.pth`` files, so the editable install of the checkout does not come along."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pairrepro.fileio import read_json

PROJECT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh venv holding only the wheel built from this tree."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(PROJECT), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(root / "dist")], check=True)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True)
    wheel = next((root / "dist").glob("pairrepro-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", "--ignore-installed", str(wheel)], check=True)
    # after the install: pip would otherwise take the checkout's install for this one
    Path(purelib.stdout.strip(), "reuse.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


@pytest.fixture
def outside(tmp_path: Path) -> dict[str, str]:
    """An environment pointing nowhere near the checkout (cwd: an empty folder)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PAIRREPRO_") and k != "PYTHONPATH"}
    return {**env, "PAIRREPRO_HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "NO_COLOR": "1"}


def _run(bin_dir: Path, env: dict[str, str], cwd: Path, *args: str) -> str:
    done = subprocess.run([str(bin_dir / "pairrepro"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pairrepro {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_wheel_knows_its_data_and_reference_runs(installed: Path, outside: dict[str, str],
                                                      tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    where = subprocess.run([str(installed / "python"), "-c", "import pairrepro; print("
                            "pairrepro.__file__)"], cwd=empty, env=outside, capture_output=True,
                           text=True, check=True).stdout
    assert Path(where).is_relative_to(installed.parent), where  # not the checkout
    datasets = {d["name"] for d in json.loads(_run(installed, outside, empty, "--json",
                                                   "datasets"))}
    assert datasets == {p.stem for p in (PROJECT / "data_manifests").glob("*.toml")}
    tables = json.loads(_run(installed, outside, empty, "--json", "report", "csran",
                             "--table", "6"))
    row = next(r for r in tables[0]["rows"] if r["label"] == "CSRAN")
    seeds = [read_json(p)["metrics"]["test"]["map"]
             for p in sorted((PROJECT / "results" / "csran_trecqa").glob("seed-*/result.json"))]
    assert row["cells"]["map"]["source"] == "reference" and len(seeds) == 3
    assert row["cells"]["map"]["mean"] == pytest.approx(statistics.mean(seeds))
    assert not (empty / "runs").exists() and os.listdir(empty) == []


def test_the_wheel_fetches_prepares_and_trains_a_recipe_by_name(
        installed: Path, outside: dict[str, str], tmp_path: Path, shared_datasets: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _run(installed, outside, empty, "fetch", "trecqa", "--mirror", str(shared_datasets))
    _run(installed, outside, empty, "preprocess", "trecqa", "--variant", "clean")
    _run(installed, outside, empty, "train", "bm25_trecqa")
    mine = read_json(empty / "runs" / "bm25_trecqa" / "seed-1" / "result.json")
    reference = read_json(PROJECT / "results" / "bm25_trecqa" / "seed-1" / "result.json")
    assert mine["status"] == "finished"
    assert mine["metrics"]["test"]["map"] == pytest.approx(reference["metrics"]["test"]["map"])
