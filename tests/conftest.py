"""Shared fixtures: the ../shared mirror (skips with a reason when absent, never on CI),
an isolated data home, and single-threaded torch so tests behave on 2 shared cores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

PROJECT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PAIRREPRO_SHARED", PROJECT.parent / "shared"))
DATASETS = SHARED / "datasets"


@pytest.fixture
def shared_datasets() -> Path:
    """The real dataset mirror; on a user's machine without it the test is skipped."""
    if not DATASETS.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the dataset mirror at {DATASETS}")
        pytest.skip(f"needs the dataset mirror at {DATASETS} (set PAIRREPRO_SHARED)")
    return DATASETS


@pytest.fixture
def shared_dir() -> Path:
    """The whole ../shared folder (papers, spec, datasets)."""
    if not SHARED.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have ../shared at {SHARED}")
        pytest.skip(f"needs ../shared at {SHARED} (set PAIRREPRO_SHARED)")
    return SHARED


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty $PAIRREPRO_HOME (and runs folder) for one test."""
    home = tmp_path / "home"
    monkeypatch.setenv("PAIRREPRO_HOME", str(home))
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs"))
    return home
