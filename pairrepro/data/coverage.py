"""Which splits and variants the raw files here can serve.

A manifest file serves the splits it is tagged with (``splits``); a variant's split needs
every file its reader reads (the same rule as ``preprocess``). A split is *unreadable* when
no variant can read it from the files here (TrecQA's test needs the jacana file whatever
else is tagged test). Variants read from the hub's parquet files (``fetch --source hub``)
are the hub fetch's concern, not the official files'.
"""

from __future__ import annotations

from pathlib import Path

from pairrepro import paths
from pairrepro.data.formats._common import missing_files
from pairrepro.data.manifests import HUB_DIR, Manifest


def file_splits(manifest: Manifest) -> list[str]:
    """The split names the manifest's (official) files are tagged with, in manifest order."""
    return list(dict.fromkeys(s for spec in manifest.files for s in spec.splits))


def declared_splits(manifest: Manifest) -> list[str]:
    """:func:`file_splits`, then the hub's split names that no file declares (what the
    fetch record reports on: either source may bring a split)."""
    hub = manifest.hub.splits if manifest.hub else {}
    return list(dict.fromkeys([*file_splits(manifest), *hub]))


def variant_gaps(manifest: Manifest, root: Path) -> tuple[dict[str, dict[str, list[str]]],
                                                          list[str]]:
    """``(variant -> split -> files it reads that are not under root, only for splits
    lacking some; split names that no variant can read from the files here)``."""
    missing: dict[str, dict[str, list[str]]] = {}
    readable: set[str] = set()
    named: list[str] = []
    for variant in manifest.variants.values():
        if reads_hub(manifest, variant.name):
            continue
        for split, spec in variant.splits.items():
            named += [split] if split not in named else []
            absent = missing_files(root, spec.files)
            if absent:
                missing.setdefault(variant.name, {})[split] = absent
            else:
                readable.add(split)
    return missing, [s for s in named if s not in readable]


def variant_missing(manifest: Manifest, variant: str | None) -> list[str]:
    """The raw files ``variant`` (``None``: the default) reads that are not here, each once;
    ``[]`` when ``preprocess`` can write every split of it."""
    root = paths.raw_dir(manifest.name)
    spec = manifest.variant(variant)
    return list(dict.fromkeys(rel for split in spec.splits.values()
                              for rel in missing_files(root, split.files)))


def reads_hub(manifest: Manifest, variant: str | None) -> bool:
    """Whether ``variant`` reads the hub's parquet files (``fetch --source hub``)."""
    return all(s.files and all(f.startswith(HUB_DIR + "/") for f in s.files)
               for s in manifest.variant(variant).splits.values())


def ready_variants(manifest: Manifest) -> list[str]:
    """The variants every split of which has all its raw files here (``preprocess`` can
    write them whole), in manifest order."""
    return [name for name, spec in manifest.variants.items()
            if spec.splits and not variant_missing(manifest, name)]
