"""``pairrepro fetch --source``: the published files or the hub, chosen here so that neither
imports the other."""

from __future__ import annotations

from pathlib import Path

from pairrepro.data.fetch import fetch_dataset
from pairrepro.data.fetch_record import FetchReport
from pairrepro.data.manifests import load_manifest
from pairrepro.errors import ConfigError

SOURCES = ("files", "hub")


def fetch_from(name: str, source: str = "files", mirror: Path | None = None,
               from_path: Path | None = None, force: bool = False, progress: bool = False,
               verify: bool = False) -> FetchReport:
    """Fetch dataset ``name`` from ``source`` (options: :func:`fetch_dataset`'s)."""
    if source not in SOURCES:
        raise ConfigError(f"--source {source!r}: expected one of {', '.join(SOURCES)}")
    if source == "files":
        return fetch_dataset(name, mirror=mirror, from_path=from_path, force=force,
                             progress=progress, verify=verify)
    if mirror is not None:
        raise ConfigError("--mirror does not apply to --source hub",
                          hint="the hub source reads the hub (or --from DIR, a local copy of "
                               "the hub repository); drop --mirror or --source hub")
    from pairrepro.data.hub import fetch_hub

    manifest = load_manifest(name)
    manifest.require_published()
    if from_path is not None:
        from_path = from_path.expanduser().resolve()
        if not from_path.is_dir():
            raise ConfigError(f"--from {from_path}: not a folder laid out as a hub repository",
                              hint="give the folder holding README.md (YAML configs) and the "
                                   "parquet files")
    return fetch_hub(manifest, from_path)
