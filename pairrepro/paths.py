"""Where things live: the data home, manifests, recipes, readers, runs, results, the mirror."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml

PROJECT_DIR = Path(__file__).resolve().parent.parent


def packaged(name: str) -> Path:
    """A file or folder of the package, e.g. ``report/ladders``: importlib.resources' path."""
    return Path(str(resources.files("pairrepro").joinpath(name)))


def shipped(name: str) -> Path:
    """A shipped data folder (``recipes``, ``results``...): the wheel's copy, else the checkout."""
    return copy if (copy := packaged(f"shipped/{name}")).is_dir() else PROJECT_DIR / name


def project_relative(path: str | Path) -> str:
    """``path`` as a record names it (no machine's folders): relative to the project folder
    inside it, ``$PAIRREPRO_HOME/...`` inside the data home, else as given."""
    resolved = Path(path).resolve()
    for root, shown in ((PROJECT_DIR, ""), (home().resolve(), "$PAIRREPRO_HOME/")):
        if resolved.is_relative_to(root):
            return shown + str(resolved.relative_to(root))
    return str(path)


def home() -> Path:
    """Data home: ``$PAIRREPRO_HOME`` or ``~/.cache/pairrepro`` (XDG cache dir respected)."""
    if env := os.environ.get("PAIRREPRO_HOME"):
        folder = Path(env).expanduser()
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"PAIRREPRO_HOME={env}: {folder} is not a folder",
                              hint="point PAIRREPRO_HOME at a folder (it is created if absent)")
        return folder
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pairrepro"


def raw_dir(dataset: str) -> Path:
    """Folder holding a dataset's files as published (sha256-checked)."""
    return home() / "raw" / dataset


def prepared_dir(dataset: str, variant: str | None = None) -> Path:
    """Folder holding ``{split}.parquet``, ``vocab.txt`` and ``stats.json`` of one variant."""
    return home() / "prepared" / (f"{dataset}-{variant}" if variant else dataset)


def manifests_dir() -> Path:
    """The dataset manifests (``data_manifests/*.toml``); ``$PAIRREPRO_MANIFESTS`` overrides."""
    return Path(os.environ.get("PAIRREPRO_MANIFESTS", shipped("data_manifests")))


def recipes_dir() -> Path:
    """The recipe folder (``recipes/*.toml``); ``$PAIRREPRO_RECIPES`` overrides."""
    return Path(os.environ.get("PAIRREPRO_RECIPES", shipped("recipes")))


def toml_files(folder: Path) -> dict[str, Path]:
    """``folder``'s TOML files by name, and the user's own ones beside the settings file."""
    mine = user_config_path().parent / folder.name
    return {p.stem: p for d in (mine, folder) for p in sorted(d.glob("*.toml"))}


def reader_dirs() -> list[Path]:
    """``$PAIRREPRO_READERS`` (a list like ``$PATH``): folders of readers outside the package."""
    return [Path(p).expanduser() for p in os.environ.get("PAIRREPRO_READERS", "").split(
        os.pathsep) if p]


DEFAULT_RUNS = "runs"


def runs_dir() -> Path:
    """Where training runs are written; ``$PAIRREPRO_RUNS`` overrides (default ``./runs``)."""
    return Path(os.environ.get("PAIRREPRO_RUNS", DEFAULT_RUNS))


def results_dir() -> Path:
    """The reference runs (``results/``, tracked in git); ``$PAIRREPRO_RESULTS`` overrides."""
    return Path(os.environ.get("PAIRREPRO_RESULTS", shipped("results")))


MIRROR_ENV = "PAIRREPRO_MIRROR"


def user_config_path() -> Path:
    """The optional user settings file, ``$XDG_CONFIG_HOME/pairrepro/config.toml``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "pairrepro" / "config.toml"


def mirror_setting() -> tuple[Path, str] | None:
    """The mirror folder and where it was set: ``$PAIRREPRO_MIRROR`` (empty: none), else
    ``mirror`` in :func:`user_config_path`; none by default."""
    if (env := os.environ.get(MIRROR_ENV)) is not None:
        return (Path(env).expanduser(), f"${MIRROR_ENV}") if env else None
    config = user_config_path()
    if config.is_file():
        from pairrepro.schema import Schema, validate

        class UserConfig(Schema):
            mirror: str = ""

        settings = validate(UserConfig, read_toml(config), str(config))
        if settings.mirror:
            return config.parent / Path(settings.mirror).expanduser(), f"{config}: mirror"
    return None


def mirror_dir() -> Path | None:
    return setting[0] if (setting := mirror_setting()) else None
