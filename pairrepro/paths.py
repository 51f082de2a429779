"""Where things live: the data home, the bundled manifests, recipes and runs."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_DIR = PACKAGE_DIR.parent


def project_relative(path: str | Path) -> str:
    """``path`` relative to the project folder when it lies inside it (what committed files
    such as ``bench/preflight/*.json`` record, the same on every clone), else as given."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to(PROJECT_DIR):
        return str(resolved.relative_to(PROJECT_DIR))
    return str(path)


def home() -> Path:
    """Data home: ``$PAIRREPRO_HOME`` or ``~/.cache/pairrepro`` (XDG cache dir respected)."""
    if env := os.environ.get("PAIRREPRO_HOME"):
        folder = Path(env).expanduser()
        if folder.exists() and not folder.is_dir():
            from pairrepro.errors import ConfigError

            raise ConfigError(f"PAIRREPRO_HOME={env}: {folder} is not a folder",
                              hint="point PAIRREPRO_HOME at a folder (it is created if absent)")
        return folder
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pairrepro"


def raw_dir(dataset: str) -> Path:
    """Folder holding a dataset's files as published (sha256-checked)."""
    return home() / "raw" / dataset


def prepared_dir(dataset: str, variant: str | None = None) -> Path:
    """Folder holding ``{split}.parquet``, ``vocab.txt`` and ``stats.json`` of one variant."""
    name = f"{dataset}-{variant}" if variant else dataset
    return home() / "prepared" / name


def manifests_dir() -> Path:
    """The dataset manifests (``data_manifests/*.toml``); ``$PAIRREPRO_MANIFESTS`` overrides."""
    return Path(os.environ.get("PAIRREPRO_MANIFESTS", PROJECT_DIR / "data_manifests"))


def recipes_dir() -> Path:
    """The recipe folder (``recipes/*.toml``); ``$PAIRREPRO_RECIPES`` overrides."""
    return Path(os.environ.get("PAIRREPRO_RECIPES", PROJECT_DIR / "recipes"))


DEFAULT_RUNS = "runs"


def runs_dir() -> Path:
    """Where training runs are written; ``$PAIRREPRO_RUNS`` overrides (default ``./runs``)."""
    return Path(os.environ.get("PAIRREPRO_RUNS", DEFAULT_RUNS))


def results_dir() -> Path:
    """The project's reference runs (``results/<recipe>/seed-<n>/``, tracked in git; what a
    fresh clone's report shows); ``$PAIRREPRO_RESULTS`` overrides."""
    return Path(os.environ.get("PAIRREPRO_RESULTS", PROJECT_DIR / "results"))


def mirror_dir() -> Path | None:
    """Local mirror folder from ``$PAIRREPRO_MIRROR``, if set."""
    env = os.environ.get("PAIRREPRO_MIRROR")
    return Path(env).expanduser() if env else None
