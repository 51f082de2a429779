"""Dataset manifests (``data_manifests/<name>.toml``) as validated objects, and which splits
and variants the raw files here can serve."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from pairrepro import paths
from pairrepro.errors import ConfigError, DataError
from pairrepro.fileio import read_toml
from pairrepro.schema import Schema, validate

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _sha256(value: str) -> str:
    if value and not _SHA256.fullmatch(value):
        raise ValueError('expected 64 lower-case hex digits, or "" when unknown')
    return value


def _inside(value: str) -> str:
    pure = PurePosixPath(value)
    if not value or pure.is_absolute() or any(p == ".." or p.startswith(".") for p in pure.parts):
        # names starting with "." are fetch's own (.fetched.json, .x.partial, staging)
        raise ValueError("expected a relative path inside raw/<dataset>/ with no part "
                         "starting with '.'")
    return value


RawPath = Annotated[str, AfterValidator(_inside)]
Sha256 = Annotated[str, AfterValidator(_sha256)]
Size = Annotated[int, Field(ge=0)]


class MemberSpec(Schema):
    """A file inside an archive (``[[files.members]]``); ``sha256 = ""``: not pinned."""

    path: RawPath
    sha256: Sha256 = ""
    size: Size = 0


class FileSpec(Schema):
    """One published file; ``path`` is relative to ``raw/<name>/`` and ``<mirror>/<name>/``."""

    path: RawPath
    url: str = ""
    alt_urls: list[str] = Field(default_factory=list)
    hf_hub: str = ""
    sha256: Sha256 = ""
    size: Size = 0
    archive: Literal["", "zip", "tar", "tar.gz"] = ""
    splits: list[str] = Field(default_factory=list)
    note: str = ""
    members: list[MemberSpec] = Field(default_factory=list)

    @field_validator("members")
    @classmethod
    def _members_need_an_archive(cls, members: list[MemberSpec],
                                 info: ValidationInfo) -> list[MemberSpec]:
        if members and not info.data.get("archive"):
            raise ValueError('only an archive (archive = "zip" | "tar" | "tar.gz") has members')
        return members


class Expected(Schema):
    """Counts a split must have after reading."""

    pairs: Size | None = None
    groups: Size | None = None
    questions: Size | None = None  # groups + queries dropped for having no candidate
    positive: Size | None = None
    labels: dict[str, Size] | None = None


class PlanningEstimate(Schema):
    """The size the planner assumes while the split is not prepared (the paper's counts)."""

    pairs: Annotated[int, Field(ge=1)]
    source: Annotated[str, Field(min_length=1)]  # the published count and the arithmetic


class Holdout(Schema):
    """A dev split carved out of a published one: whole groups, or every pair of a first text."""

    from_: str = Field(alias="from")
    to: str
    fraction: float
    seed: int = 13
    by: Literal["group", "left"] = "group"


def _no_positive(value: str) -> str:
    from pairrepro.metrics import NO_POSITIVE_MODES

    if value not in NO_POSITIVE_MODES:
        raise ValueError(f"expected one of {', '.join(NO_POSITIVE_MODES)}")
    return value


TokenizerName = Literal["regex", "whitespace"]


class VariantOptions(Schema):
    """Variant-wide options of any reader; the reader's own ``Options`` are added to these."""

    description: str = ""
    tokenizer: TokenizerName = "regex"
    lowercase: bool = True
    numbers: str = ""
    vocab_split: str = "train"
    task: Literal["classification", "ranking"] | None = None
    label_map: list[str] = Field(default_factory=list)
    holdout: Holdout | None = None
    lexical_only: bool = False
    reader: str = ""  # other than the manifest's (the hub variant's hub_parquet)
    no_positive: Annotated[str, AfterValidator(_no_positive)] = "skip"


class SplitFields(Schema):
    """The keys of every ``[variants.<v>.splits.<s>]`` table besides the reader's options."""

    files: list[RawPath]
    expected: Expected = Expected()
    planning: PlanningEstimate | None = None


HUB_DIR = "hub"


class HubSpec(Schema):
    """Where a dataset is on the Hugging Face hub (``[hub]``) and how its columns map."""

    id: str
    config: str | None = None
    revision: str = ""  # "": the hub's default branch
    # our split name -> the hub's split name (validation, validation_matched, ...)
    splits: dict[str, str]
    columns: dict[Literal["left", "right", "label", "pair_id"], str]
    # the hub's label value (as a string) -> a label_map name; "" drops the pair by rule
    labels: dict[str, str]

    def file(self, split: str) -> str:
        return f"{HUB_DIR}/{split}.parquet"

    @field_validator("columns")
    @classmethod
    def _needs_the_pair(cls, columns: dict[str, str]) -> dict[str, str]:
        absent = [key for key in ("left", "right", "label") if key not in columns]
        if absent:
            raise ValueError(f"missing {', '.join(absent)} (expected left, right, label and "
                             "optionally pair_id)")
        return columns


class ManifestFields(Schema):
    """The top-level keys of a manifest (``variants`` is added per reader)."""

    name: str
    title: str
    task: Literal["classification", "ranking"]
    reader: str
    licence: str = ""
    homepage: str = ""
    citation: str = ""
    public: bool = True
    notes: str = ""
    label_map: list[str] = Field(default_factory=list)
    default_variant: str = ""
    files: list[FileSpec] = Field(default_factory=list)
    hub: HubSpec | None = None

    @model_validator(mode="after")
    def _default_is_a_variant(self) -> ManifestFields:
        variants = getattr(self, "variants", {})  # the field each reader's model adds
        if self.default_variant and variants and self.default_variant not in variants:
            raise ValueError(f"default_variant {self.default_variant!r} is not a variant "
                             f"({', '.join(variants)})")
        return self


def reader_options(reader: str) -> tuple[type[Schema], type[Schema]]:
    """Reader ``reader``'s options models: (variant-wide, per split)."""
    from pairrepro.data.formats import ReaderOptions, find_reader

    module = find_reader(reader)  # None: no reader, so no option (getattr's default)
    options = getattr(module, "Options", ReaderOptions)
    return options, getattr(module, "SplitOptions", options)


@functools.cache
def variant_model(reader: str) -> type[VariantOptions]:
    variant_options, split_options = reader_options(reader)
    split = create_model(f"{reader}.Split", __base__=(SplitFields, split_options))
    return create_model(  # type: ignore[no-any-return]
        f"{reader}.Variant", __base__=(VariantOptions, variant_options),
        splits=(dict[str, split], {}))  # type: ignore[valid-type]


@functools.cache
def manifest_model(reader: str) -> type[ManifestFields]:
    """The schema of a manifest read by ``reader``: a misspelt option is an error at load."""
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"{reader}.Manifest", __base__=ManifestFields,
        variants=(dict[str, variant_model(reader)], {}))  # type: ignore[valid-type]


@dataclass
class SplitSpec:
    """How a reader builds one split (``options``: the reader's own, set on the split)."""

    name: str
    files: list[str]
    expected: dict[str, Any] = field(default_factory=dict)
    options: Schema = field(default_factory=Schema)  # no reader option set
    planning: PlanningEstimate | None = None


@dataclass
class VariantSpec:

    name: str
    splits: dict[str, SplitSpec] = field(default_factory=dict)
    options: VariantOptions = field(default_factory=VariantOptions)


class Manifest(ManifestFields):
    """A validated manifest, with the file it was read from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    variants: dict[str, VariantSpec] = Field(default_factory=dict)
    source: str = ""

    @property
    def never_published(self) -> bool:
        """Declared only so that tables citing it can say why (e.g. ``reuters_sc``)."""
        return not self.public and not self.files

    def require_published(self) -> None:
        if self.never_published:
            raise DataError(
                f"dataset {self.name!r} was never published: there is no file to fetch or "
                "prepare, and no recipe can use it",
                hint=f"{self.licence} ({self.source})" if self.licence else self.source)

    def variant(self, name: str | None) -> VariantSpec:
        """A variant by name (``None``: the default one)."""
        key = name or self.default_variant or next(iter(self.variants), "")
        if key not in self.variants:
            raise ConfigError(
                f"dataset {self.name!r} has no variant {key!r}",
                hint=f"variants: {', '.join(self.variants) or '(none)'}",
            )
        return self.variants[key]

    def pin(self, path: str) -> str:
        """The sha256 pinned for raw file ``path`` (a file or an archive member), or ""."""
        return next((entry.sha256 for spec in self.files for entry in (spec, *spec.members)
                     if entry.path == path), "")


def parse_manifest(raw: dict[str, Any], source: str) -> Manifest:
    """Validate a manifest dict against its reader's schema; errors name ``source``."""
    reader = raw.get("reader") if isinstance(raw, dict) else None
    reader = reader if isinstance(reader, str) else ""
    checked: Any = validate(manifest_model(reader), raw, source)
    split_model = reader_options(reader)[1]

    def reader_part(smodel: Schema) -> Schema:  # the split's options, without its other keys
        own = set(split_model.model_fields)
        return split_model.model_construct(own & smodel.model_fields_set,
                                           **{key: getattr(smodel, key) for key in own})

    variants = {}
    for vname, vmodel in checked.variants.items():
        splits = {
            sname: SplitSpec(sname, list(smodel.files),
                             smodel.expected.model_dump(exclude_unset=True),
                             reader_part(smodel), smodel.planning)
            for sname, smodel in vmodel.splits.items()}
        variants[vname] = VariantSpec(vname, splits, vmodel)
    top = {name: getattr(checked, name) for name in ManifestFields.model_fields}
    return Manifest.model_construct(**top, variants=variants, source=source)


def available_datasets() -> list[str]:
    return sorted(paths.toml_files(paths.manifests_dir()))


def load_manifest(name: str) -> Manifest:
    if (path := paths.toml_files(paths.manifests_dir()).get(name)) is None:
        raise ConfigError(f"unknown dataset {name!r}",
                          hint=f"known datasets: {', '.join(available_datasets())}")
    return parse_manifest(read_toml(path), str(path))


def find_raw_file(raw_root: Path, rel: str) -> Path | None:
    """The raw file ``rel``, or its twin with/without ``.gz``; ``None`` when neither exists."""
    for name in (rel, rel[:-3] if rel.endswith(".gz") else rel + ".gz"):
        if (raw_root / name).is_file():
            return raw_root / name
    return None


def missing_files(raw_root: Path, files: list[str]) -> list[str]:
    return [rel for rel in files if find_raw_file(raw_root, rel) is None]


def file_splits(manifest: Manifest) -> list[str]:
    return list(dict.fromkeys(s for spec in manifest.files for s in spec.splits))


def declared_splits(manifest: Manifest) -> list[str]:
    """:func:`file_splits`, then the hub's split names that no file declares."""
    hub = manifest.hub.splits if manifest.hub else {}
    return list(dict.fromkeys([*file_splits(manifest), *hub]))


def variant_gaps(manifest: Manifest, root: Path) -> tuple[dict[str, dict[str, list[str]]],
                                                          list[str]]:
    """``(variant -> split -> its files not under root; splits no variant can read)``."""
    missing: dict[str, dict[str, list[str]]] = {}
    readable: set[str] = set()
    named: list[str] = []
    for variant in manifest.variants.values():
        if reads_hub(manifest, variant.name):
            continue
        for split, spec in variant.splits.items():
            named += [split] if split not in named else []
            if absent := missing_files(root, spec.files):
                missing.setdefault(variant.name, {})[split] = absent
            else:
                readable.add(split)
    return missing, [s for s in named if s not in readable]


def variant_missing(manifest: Manifest, variant: str | None) -> list[str]:
    """The raw files ``variant`` (``None``: the default) reads that are not here, each once."""
    root = paths.raw_dir(manifest.name)
    spec = manifest.variant(variant)
    return list(dict.fromkeys(rel for split in spec.splits.values()
                              for rel in missing_files(root, split.files)))


def reads_hub(manifest: Manifest, variant: str | None) -> bool:
    return all(s.files and all(f.startswith(HUB_DIR + "/") for f in s.files)
               for s in manifest.variant(variant).splits.values())


def ready_variants(manifest: Manifest) -> list[str]:
    """The variants every split of which has all its raw files here."""
    return [name for name, spec in manifest.variants.items()
            if spec.splits and not variant_missing(manifest, name)]
