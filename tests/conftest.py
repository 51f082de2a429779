"""Shared fixtures: the ../shared mirror (skips with a reason when absent, never on CI),
an isolated data home, and single-threaded torch so tests behave on 2 shared cores."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from pairrepro.device import THREAD_VARIABLES

if TYPE_CHECKING:
    from pairrepro.planning.paper_tables import Column
    from pairrepro.report.analyses.readings import ReadingsFile
    from pairrepro.runs import RunInfo

torch.set_num_threads(1)

PROJECT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PAIRREPRO_SHARED") or PROJECT.parent / "shared")
# the dataset mirror: $PAIRREPRO_MIRROR (as the CLI reads it), else <shared>/datasets
# absolute: tests link to it from temporary folders (a relative path would dangle there)
DATASETS = Path(os.environ.get("PAIRREPRO_MIRROR") or SHARED / "datasets").expanduser().resolve()
if DATASETS.is_dir():  # pairrepro has no default mirror: the tests (and what they run) name theirs
    os.environ.setdefault("PAIRREPRO_MIRROR", str(DATASETS))
#: Start of the reason of every skip for a missing ../shared folder (counted in the summary).
SKIP_PREFIX = "needs ../shared: "


def _require(folder: Path, what: str) -> Path:
    """``folder``, or skip the test (fail it on CI, where it must exist)."""
    if not folder.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have {what} at {folder}")
        pytest.skip(f"{SKIP_PREFIX}{what} at {folder}")
    return folder


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say in one line why tests were skipped, counted by reason (its words before the first
    ':' or '('), and how to run those that want ../shared: else a bare "N skipped"."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r.longrepr, tuple)]
    kinds = Counter(re.split(r"[:(]", str(r.longrepr[2]).removeprefix("Skipped: "), maxsplit=1)[0]
                    .strip() for r in skipped)
    if kinds:
        terminalreporter.write_line(f"{len(skipped)} skipped: " + "; ".join(
            f"{count} {why}" for why, count in kinds.most_common()), yellow=True)
    reasons = [r for r in skipped if SKIP_PREFIX in str(r.longrepr[2])]
    if reasons:
        terminalreporter.write_line(
            f"{len(reasons)} test(s) skipped: they read the real dataset files or papers, "
            f"not found at {DATASETS} / {SHARED}. Point PAIRREPRO_MIRROR at the dataset "
            "mirror (or PAIRREPRO_SHARED at the folder holding datasets/, papers/, spec/) to "
            "run them; on CI (CI=true) they fail instead.", yellow=True)


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's ``~/.config/pairrepro/config.toml`` (a default mirror) never reaches a test:
    its settings would change what fetch reads."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-config"))


@pytest.fixture(autouse=True)
def _process_state_restored() -> Iterator[None]:
    """A test that trains in this process (``train`` sets threads for the machine and asks
    for deterministic kernels) leaves no global state behind: two OpenMP threads on a core
    that another process also uses made a later CIN test ~50x slower."""
    environment = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    yield
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)


@pytest.fixture
def shared_datasets() -> Path:
    """The real dataset mirror; on a user's machine without it the test is skipped."""
    return _require(DATASETS, "the dataset mirror")


@pytest.fixture
def shared_dir() -> Path:
    """The whole ../shared folder (papers, spec, datasets)."""
    return _require(SHARED, "../shared")


@pytest.fixture
def manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private manifests folder (the real ones are copied in, tests add their own)."""
    folder = tmp_path / "manifests"
    shutil.copytree(PROJECT / "data_manifests", folder)
    monkeypatch.setenv("PAIRREPRO_MANIFESTS", str(folder))
    return folder


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty $PAIRREPRO_HOME (and runs folder) for one test."""
    home = tmp_path / "home"
    monkeypatch.setenv("PAIRREPRO_HOME", str(home))
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs"))
    return home


@pytest.fixture
def raw_from_mirror(shared_datasets: Path, data_home: Path) -> Callable[[str], Path]:
    """``raw_from_mirror(name)``: ``$PAIRREPRO_HOME/raw/<name>`` laid out as ``pairrepro
    fetch`` leaves it, as a link to the mirror's folder (nothing is copied)."""

    def link(name: str) -> Path:
        root = data_home / "raw" / name
        root.parent.mkdir(parents=True, exist_ok=True)
        root.symlink_to(shared_datasets / name, target_is_directory=True)
        return root

    return link


@pytest.fixture
def one_seed_results(tmp_path: Path) -> Callable[[str], Path]:
    """``one_seed_results(recipe)``: the reference runs linked into a folder of their own, with
    ``recipe`` cut to its seed 1 (a step or row of one trained model)."""
    reference = PROJECT / "results"

    def cut(recipe: str) -> Path:
        results = tmp_path / "results"
        results.mkdir()
        for folder in reference.iterdir():
            (results / folder.name).symlink_to(folder)
        (results / recipe).unlink()
        (results / recipe).mkdir()
        (results / recipe / "seed-1").symlink_to(reference / recipe / "seed-1")
        return results

    return cut


@pytest.fixture
def csran_cell() -> Callable[[str, int, str], tuple[Column, float, ReadingsFile, list[RunInfo]]]:
    """``csran_cell(recipe, table, metric)``: the CSRAN row's ``metric`` cell of CSRAN's Table
    ``table`` as the protocol readings take it: (column, published value, the readings that
    apply, the committed runs of ``recipe``)."""

    from pairrepro.planning.paper_tables import load_paper
    from pairrepro.report.analyses.readings import readings_for
    from pairrepro.report.tables.numbers import parse_published
    from pairrepro.runs import find_runs

    def cell(recipe: str, table: int, metric: str
             ) -> tuple[Column, float, ReadingsFile, list[RunInfo]]:
        paper = load_paper("csran").table(table)
        column = next(c for c in paper.columns if c.metric == metric)
        published = parse_published(next(r for r in paper.rows
                                         if r.label == "CSRAN").values[column.key])
        spec = readings_for(column, paper.dataset)
        assert spec is not None and published is not None
        return column, published, spec, find_runs(PROJECT / "results", recipe)

    return cell
