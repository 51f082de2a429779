"""Where things live (the data home, the bundled manifests, recipes and runs) and how files are
read and written there: atomically, so that nothing half-written is ever read back."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pairrepro.errors import ConfigError

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


def reader_dirs() -> list[Path]:
    """Folders of readers kept outside the package (``<DIR>/<reader>.py``), searched after
    ``pairrepro/data/formats/``: ``$PAIRREPRO_READERS``, a list like ``$PATH``."""
    return [Path(p).expanduser() for p in os.environ.get("PAIRREPRO_READERS", "").split(
        os.pathsep) if p]


DEFAULT_RUNS = "runs"


def runs_dir() -> Path:
    """Where training runs are written; ``$PAIRREPRO_RUNS`` overrides (default ``./runs``)."""
    return Path(os.environ.get("PAIRREPRO_RUNS", DEFAULT_RUNS))


def results_dir() -> Path:
    """The project's reference runs (``results/<recipe>/seed-<n>/``, tracked in git; what a
    fresh clone's report shows); ``$PAIRREPRO_RESULTS`` overrides."""
    return Path(os.environ.get("PAIRREPRO_RESULTS", PROJECT_DIR / "results"))


MIRROR_ENV = "PAIRREPRO_MIRROR"


def user_config_path() -> Path:
    """The user's settings file: ``$XDG_CONFIG_HOME/pairrepro/config.toml`` (default
    ``~/.config/pairrepro/config.toml``); optional."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "pairrepro" / "config.toml"


def checkout_mirror() -> Path:
    """``shared/datasets`` beside the checkout (``../shared/datasets`` from its root): where
    this project's machines keep the dataset mirror."""
    return PROJECT_DIR.parent / "shared" / "datasets"


def mirror_setting() -> tuple[Path, str] | None:
    """The mirror folder and where it was set: ``$PAIRREPRO_MIRROR`` (empty: none), else
    ``mirror`` in :func:`user_config_path`, else an existing :func:`checkout_mirror`."""
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
    if checkout_mirror().is_dir():
        return checkout_mirror(), "shared/datasets beside the checkout"
    return None


def mirror_dir() -> Path | None:
    """The local mirror folder of :func:`mirror_setting`, or ``None``."""
    setting = mirror_setting()
    return setting[0] if setting else None


def _umask() -> int:
    """The process umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.<name>.partial``: no glob for the final name
    sees it), renamed onto ``path`` only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    # mkstemp creates 0600 whatever the umask; a file written here gets what open() would give
    os.fchmod(fd, 0o666 & ~_umask())
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w",
                encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a file for writing that appears under ``path`` only once fully written."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding) as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write text atomically."""
    with atomic_open(path) as handle:
        handle.write(text)


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (sorted keys, 2-space indent, trailing newline)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a TOML file (a UTF-8 byte-order mark skipped); invalid TOML or bytes is a
    :class:`ConfigError` naming the file, line and column (a missing file: FileNotFoundError)."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        line = exc.object[:exc.start].count(b"\n") + 1
        column = exc.start - (exc.object.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{p}: not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at line "
                          f"{line}, column {column}",
                          hint="TOML files are UTF-8: save it as UTF-8 (e.g. iconv -f latin1 "
                               "-t utf-8), or check that it is the text file meant") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc


def sha256_file(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


# TOML's short escapes; every other control character (U+0000-U+001F, U+007F) is \uXXXX
_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n",
                 "\f": "\\f", "\r": "\\r"}
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_string(value: str) -> str:
    """``value`` as a TOML basic string that ``tomllib`` reads back unchanged."""
    return '"' + "".join(
        _TOML_ESCAPES.get(ch) or (f"\\u{ord(ch):04X}" if ord(ch) < 0x20 or ord(ch) == 0x7F
                                  else ch) for ch in value) + '"'


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    if value is None:
        return '""'
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dumps_toml(data: dict[str, Any]) -> str:
    """Write a two-level dict (sections of scalars, lists and inline tables) as TOML."""
    lines: list[str] = []
    for section, values in data.items():
        if not isinstance(values, dict):
            lines.insert(0, f"{_toml_key(section)} = {_toml_value(values)}")
            continue
        lines.append(f"[{_toml_key(section)}]")
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in values.items()]
        lines.append("")
    return "\n".join(lines)
