"""Dataset manifests: ``data_manifests/<name>.toml`` read into typed, validated objects.

A manifest is data, not code (see ARCHITECTURE.md for the full layout): where the
files come from and their sha256, the licence, the label map, the reader, and the
variants with the files each split needs and the counts expected after reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError, DataError
from pairrepro.io import read_toml


@dataclass
class FileSpec:
    """One published file: ``path`` is relative to ``raw/<name>/`` and ``<mirror>/<name>/``."""

    path: str
    url: str = ""
    alt_urls: list[str] = field(default_factory=list)
    hf_hub: str = ""
    sha256: str = ""
    size: int = 0
    archive: str = ""  # "" | "zip" | "tar" | "tar.gz"
    splits: list[str] = field(default_factory=list)
    note: str = ""
    # For an archive: the paths (relative to raw/<name>/) it provides once extracted.
    members: list[str] = field(default_factory=list)


@dataclass
class SplitSpec:
    """How a reader builds one split: the files it reads, reader options, expected counts."""

    name: str
    files: list[str]
    expected: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class VariantSpec:
    name: str
    description: str = ""
    splits: dict[str, SplitSpec] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # variant-wide reader options


@dataclass
class Manifest:
    name: str
    title: str
    task: str  # "classification" | "ranking"
    reader: str
    licence: str = ""
    homepage: str = ""
    citation: str = ""
    public: bool = True
    notes: str = ""
    label_map: list[str] = field(default_factory=list)
    default_variant: str = ""
    files: list[FileSpec] = field(default_factory=list)
    variants: dict[str, VariantSpec] = field(default_factory=dict)
    source: str = ""

    @property
    def never_published(self) -> bool:
        """Declared only so that tables citing it can say why: not public, and no file at all
        (e.g. ``reuters_sc``: its authors never released it)."""
        return not self.public and not self.files

    def require_published(self) -> None:
        """Raise :class:`DataError` (exit 3) for a dataset whose data was never published."""
        if self.never_published:
            raise DataError(
                f"dataset {self.name!r} was never published: there is no file to fetch or "
                "prepare, and no recipe can use it",
                hint=f"{self.licence} ({self.source})" if self.licence else self.source)

    def variant(self, name: str | None) -> VariantSpec:
        """A variant by name (``None``: the default one), with an error listing the choices."""
        key = name or self.default_variant or next(iter(self.variants), "")
        if key not in self.variants:
            raise ConfigError(
                f"dataset {self.name!r} has no variant {key!r}",
                hint=f"variants: {', '.join(self.variants) or '(none)'}",
            )
        return self.variants[key]

    def file(self, path: str) -> FileSpec:
        for spec in self.files:
            if spec.path == path:
                return spec
        raise DataError(f"{self.source}: no [[files]] entry with path {path!r}")


_TOP_KEYS = {"name", "title", "task", "reader", "licence", "homepage", "citation", "public",
             "notes", "label_map", "default_variant", "files", "variants"}


def _check_keys(where: str, values: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}",
                          hint=f"allowed: {', '.join(sorted(allowed))}")


def parse_manifest(raw: dict[str, Any], source: str) -> Manifest:
    """Validate a manifest dict (errors name ``source`` and the key)."""
    _check_keys(source, raw, _TOP_KEYS)
    for key in ("name", "title", "task", "reader"):
        if key not in raw:
            raise ConfigError(f"{source}: missing key {key!r}")
    if raw["task"] not in ("classification", "ranking"):
        raise ConfigError(f"{source}: task: {raw['task']!r} is not 'classification' or 'ranking'")
    file_keys = set(FileSpec.__dataclass_fields__)
    files = []
    for i, entry in enumerate(raw.get("files", [])):
        _check_keys(f"{source}: files[{i}]", entry, file_keys)
        if "path" not in entry:
            raise ConfigError(f"{source}: files[{i}]: missing key 'path'")
        files.append(FileSpec(**entry))
    variants = {}
    for vname, vraw in raw.get("variants", {}).items():
        vraw = dict(vraw)
        splits_raw = vraw.pop("splits", {})
        description = vraw.pop("description", "")
        splits = {}
        for sname, sraw in splits_raw.items():
            sraw = dict(sraw)
            where = f"{source}: variants.{vname}.splits.{sname}"
            if "files" not in sraw:
                raise ConfigError(f"{where}: missing key 'files'")
            files_for_split = sraw.pop("files")
            expected = sraw.pop("expected", {})
            splits[sname] = SplitSpec(sname, files_for_split, expected, sraw)
        variants[vname] = VariantSpec(vname, description, splits, vraw)
    top = {k: v for k, v in raw.items() if k not in ("files", "variants")}
    return Manifest(**top, files=files, variants=variants, source=source)


def available_datasets() -> list[str]:
    """Names of every dataset with a manifest."""
    return sorted(p.stem for p in paths.manifests_dir().glob("*.toml"))


def load_manifest(name: str) -> Manifest:
    """Read ``data_manifests/<name>.toml`` (a :class:`ConfigError` lists the known names)."""
    path: Path = paths.manifests_dir() / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown dataset {name!r}",
                          hint=f"known datasets: {', '.join(available_datasets())}")
    return parse_manifest(read_toml(path), str(path))
