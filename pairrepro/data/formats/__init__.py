"""Readers, one per published format. Each turns raw files into the canonical pair table.

A reader module ``pairrepro/data/formats/<name>.py`` defines::

    def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult

and may define ``read_variant(raw_root, variant) -> dict[str, ReaderResult]`` when the
splits are built together (Yahoo: one construction, then an 8:1:1 split); ``prepare``
then calls that instead.

It declares the options it reads as ``Options``, a :class:`ReaderOptions` model (set
variant-wide or per split; ``SplitOptions`` when the per-split ones differ): the manifest
schema takes exactly those keys, so a misspelt option fails when the manifest is loaded.
``raw_root`` is ``$PAIRREPRO_HOME/raw/<dataset>``; file paths
in ``split.files`` are relative to it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

import pandas as pd
from pydantic import Field

from pairrepro.errors import ConfigError
from pairrepro.schema import Schema


class ReaderOptions(Schema):
    """Base of a reader's options model: no option at all."""


class LabelOptions(ReaderOptions):
    """Options of readers mapping label names through :class:`_common.LabelMapper`."""

    # name in the file -> name in the label map (SciTail's derived copy: not_entailment)
    label_aliases: dict[str, str] = Field(default_factory=dict)


@dataclass
class MalformedRow:
    """A row that could not be read: where it is and why (reported, never silently lost)."""

    file: str
    line: int
    reason: str


@dataclass
class ReaderResult:
    """Canonical pairs of one split, plus what was dropped and why."""

    pairs: pd.DataFrame
    malformed: list[MalformedRow] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # documented rule -> count


def get_reader(name: str) -> ModuleType:
    """Import reader module ``name`` (a :class:`ConfigError` if there is none)."""
    try:
        return importlib.import_module(f"pairrepro.data.formats.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"pairrepro.data.formats.{name}":
            raise
        raise ConfigError(f"no reader named {name!r} (pairrepro/data/formats/{name}.py)") from None
