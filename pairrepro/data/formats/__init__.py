"""Readers, one per published format, each turning raw files into the canonical pair table
(the contract a reader meets: docs/adding-a-dataset.md)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
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
    :func:`pairrepro.paths.reader_dirs` that has it."""
    module_name = f"{__name__}.{name}"
    if not name.isidentifier():
        return None
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
    for folder in paths.reader_dirs():
        file = folder / f"{name}.py"
        if file.is_file():
            spec = importlib.util.spec_from_file_location(module_name, file)
            assert spec is not None and spec.loader is not None  # a .py file always has both
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module  # before running it, as import does
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
            return module
    return None


def get_reader(name: str) -> ModuleType:
    module = find_reader(name)
    if module is None:
        raise ConfigError(f"no reader named {name!r} (pairrepro/data/formats/{name}.py)",
                          hint="add the module there, or put <name>.py in a folder named by "
                               "$PAIRREPRO_READERS")
    return module
