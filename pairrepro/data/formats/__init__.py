"""Readers, one per published format, each turning raw files into the canonical pair table
(the contract a reader meets: docs/adding-a-dataset.md)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

import pandas as pd
from pydantic import Field

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.schema import Schema


class ReaderOptions(Schema):
    """Base of a reader's options model: no option at all."""


class LabelOptions(ReaderOptions):
    # name in the file -> name in the label map (SciTail's derived copy: not_entailment)
    label_aliases: dict[str, str] = Field(default_factory=dict)


@dataclass
class MalformedRow:
    file: str
    line: int
    reason: str


@dataclass
class ReaderResult:
    pairs: pd.DataFrame
    malformed: list[MalformedRow] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # documented rule -> count


def find_reader(name: str) -> ModuleType | None:
    """Reader module ``name``: ``formats/<name>.py``, else ``<name>.py`` in the first folder of
    :func:`pairrepro.paths.reader_dirs` that has it (imported as a module of this package)."""
    if not name.isidentifier():
        return None
    module_name = f"{__name__}.{name}"
    # after the package's own folder, the folders import also looks in for its modules
    __path__[1:] = [str(folder.absolute()) for folder in paths.reader_dirs()]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
    return None


def get_reader(name: str) -> ModuleType:
    module = find_reader(name)
    if module is None:
        raise ConfigError(f"no reader named {name!r} (pairrepro/data/formats/{name}.py)",
                          hint="add the module there, or put <name>.py in a folder named by "
                               "$PAIRREPRO_READERS")
    return module
