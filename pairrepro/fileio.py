"""Atomic writers (nothing half-written is read back), TOML reader and writer, ``sha256_file``."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pairrepro.errors import ConfigError, StorageError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.<name>.*.partial``), renamed onto it on success;
    a link, FIFO, device or folder there is a :class:`StorageError`, never replaced."""
    target = Path(path)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise StorageError(f"{target}: not a regular file (a link, FIFO, device or folder): "
                           "not replaced", hint="name a regular file, or remove it first")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where its folder should be: as a path through a file
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(target.parent)) from None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    # mkstemp creates 0600 whatever the umask; a file written here gets what open() would give
    umask = os.umask(0o022)  # reading the umask means setting it: set it straight back
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a file (UTF-8 text, or ``mode`` "wb") that appears under ``path`` once written."""
    encoding = None if "b" in mode else "utf-8"
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding) as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (sorted keys, 2-space indent, trailing newline)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file (BOM skipped); bad bytes or TOML are a :class:`ConfigError` naming the line."""
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


def sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


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
