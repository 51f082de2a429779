"""``pairrepro fetch NAME --source hub``: the manifest's ``[hub]`` dataset, loaded through
``datasets``, written as one parquet file per split under ``raw/<name>/hub/`` for the
``hub_parquet`` reader (``--from DIR``: a local folder laid out as a hub repository)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pairrepro import fileio, paths
from pairrepro.data.fetch_record import FetchReport, FileResult, merge_record
from pairrepro.data.manifests import HUB_DIR, HubSpec, Manifest
from pairrepro.errors import ConfigError, DataError, DownloadError

SOURCE_RECORD = "source.json"
_COMMIT = re.compile(r"@([0-9a-f]{40})/")
_INSTEAD = ("--from DIR (a local copy of the hub repository) or fetch without --source hub "
            "(mirror, --from the official files)")


def _load(spec: HubSpec, location: str) -> tuple[Any, dict[str, list[str]], str]:
    """The dataset, the data files it resolved per split, and the builder's fingerprint."""
    try:
        import datasets
    except ImportError as exc:  # declared in pyproject; a broken environment still gets a hint
        raise ConfigError("the `datasets` package is not installed",
                          hint="pip install 'datasets>=2.14'") from exc
    if not Path(location).exists() and not datasets.config.HF_DATASETS_OFFLINE:
        _require_hub_host(location, spec)
    try:
        builder = datasets.load_dataset_builder(location, spec.config,
                                                revision=spec.revision or None)
        builder.download_and_prepare()
        loaded = builder.as_dataset()
    except yaml.YAMLError as exc:  # the dataset card's front matter (README.md)
        raise DataError(
            f"{location}: the YAML header of its README.md (the dataset card that declares "
            f"the configs) cannot be read: {' '.join(str(exc).split())}",
            hint="fix the YAML between the leading '---' lines of README.md, or fetch "
                 "without --source hub (mirror, --from the official files)") from None
    except (ConnectionError, FileNotFoundError, OSError, ValueError) as exc:
        if Path(location).exists():  # a local copy: nothing was downloaded, its files are wrong
            raise DataError(
                f"{location}: the local copy cannot be read as the hub dataset (config "
                f"{spec.config!r}): {type(exc).__name__}: {_first_line(exc)}",
                hint="check its README.md (the dataset card: a YAML header with configs, each "
                     "with a config_name and its data_files) and the files it names, or fetch "
                     "without --source hub (mirror, --from the official files)") from exc
        offline = datasets.config.HF_DATASETS_OFFLINE
        raise DownloadError(
            f"cannot load {location!r} (config {spec.config!r}) from the Hugging Face hub"
            f"{' (HF_DATASETS_OFFLINE is set)' if offline else ''}: "
            f"{type(exc).__name__}: {_first_line(exc)}",
            hint=(f"with internet, unset HF_DATASETS_OFFLINE; without it, {_INSTEAD}"
                  if offline else f"check the hub id and the network, or use {_INSTEAD}")
        ) from exc
    data_files = {str(split): [str(f) for f in files]
                  for split, files in (builder.config.data_files or {}).items()}
    return loaded, data_files, str(builder.hash or "")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""


def _require_hub_host(location: str, spec: HubSpec) -> None:
    """Fail at once when the hub's host cannot be resolved (the client would retry ~30 s)."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    host = urlsplit(constants.ENDPOINT).hostname or constants.ENDPOINT
    try:
        socket.getaddrinfo(host, 443)
    except OSError as exc:
        raise DownloadError(
            f"cannot load {location!r} (config {spec.config!r}) from the Hugging Face hub: "
            f"{host} cannot be resolved ({exc.strerror or exc}); no network, so not retried",
            hint="with a copy in the Hugging Face cache, set HF_DATASETS_OFFLINE=1; otherwise "
                 + _INSTEAD) from None


def _convert(manifest: Manifest, spec: HubSpec, hub_split: str, dataset: Any
             ) -> tuple[pa.Table, list[str]]:
    cols, present = spec.columns, list(dataset.column_names)
    absent = [hub for hub in cols.values() if hub not in present]
    if absent:
        raise DataError(
            f"{manifest.source}: [hub] columns: hub split {hub_split!r} of {spec.id} has no "
            f"column {', '.join(map(repr, absent))}",
            hint=f"its columns are: {', '.join(present)}; fix [hub] columns")
    ids = ([str(v) for v in dataset[cols["pair_id"]]] if "pair_id" in cols
           else [f"{hub_split}-{i}" for i in range(dataset.num_rows)])
    keys = [str(v) for v in dataset[cols["label"]]]  # as [hub] labels spells them
    columns = {"pair_id": ids, "left": dataset[cols["left"]], "right": dataset[cols["right"]],
               "label": [spec.labels.get(k) for k in keys], "hub_label": keys}
    # a ClassLabel has the hub's own names per index
    names = getattr(dataset.features.get(cols["label"]), "names", None) or []
    warnings = [f"[hub] labels maps {key} to {ours!r}; the hub calls class {key} "
                f"{names[int(key)]!r}" for key, ours in spec.labels.items()
                if ours and key.isdigit() and int(key) < len(names) and names[int(key)] != ours]
    table = pa.table({key: pa.array(values, pa.string()) for key, values in columns.items()})
    return table, warnings


def fetch_hub(manifest: Manifest, from_path: Path | None = None) -> FetchReport:
    """Write ``manifest``'s hub dataset (or the folder ``from_path``) to the raw folder."""
    if manifest.hub is None:
        from pairrepro.data.manifests import available_datasets, load_manifest

        have = [n for n in available_datasets() if load_manifest(n).hub is not None]
        raise ConfigError(
            f"dataset {manifest.name!r} has no [hub] table in {manifest.source}",
            hint=f"--source hub works for: {', '.join(have) or '(none)'}; "
                 f"fetch {manifest.name} without --source hub")
    spec = manifest.hub
    location = str(from_path) if from_path is not None else spec.id
    loaded, data_files, fingerprint = _load(spec, location)
    revisions = sorted({m.group(1) for files in data_files.values() for f in files
                        for m in [_COMMIT.search(f)] if m})
    revision = revisions[0] if len(revisions) == 1 else (spec.revision or "")
    origin = f"hub:{spec.id}@{revision or fingerprint}" if from_path is None \
        else f"hub-folder:{from_path}"
    root = paths.raw_dir(manifest.name)
    report = FetchReport(manifest.name, root)
    splits: dict[str, Any] = {}
    for ours, theirs in spec.splits.items():
        rel = spec.file(ours)
        if theirs not in loaded:
            report.files.append(FileResult(rel, "missing", splits=[ours],
                                           error=f"the hub has no split {theirs!r} "
                                                 f"(it has {', '.join(loaded)})"))
            continue
        dataset = loaded[theirs]
        table, warnings = _convert(manifest, spec, theirs, dataset)
        report.warnings.extend(w for w in warnings if w not in report.warnings)
        target = root / rel
        with fileio.atomic_path(target) as tmp:
            pq.write_table(table, tmp)
        digest = fileio.sha256_file(target)
        report.files.append(FileResult(rel, "fetched", origin, digest, target.stat().st_size,
                                       False, [ours]))
        splits[ours] = {"hub_split": theirs, "rows": dataset.num_rows, "file": rel,
                        "sha256": digest, "fingerprint": dataset._fingerprint,
                        "data_files": data_files.get(theirs, [])}
    report.splits_present = [s for s in spec.splits if s in splits]
    report.splits_missing = [s for s in spec.splits if s not in splits]
    if not splits:
        raise DataError(f"{location}: none of the hub splits {', '.join(spec.splits.values())} "
                        f"is there (it has {', '.join(loaded)})",
                        hint=f"fix [hub] splits in {manifest.source}")
    source = {"id": spec.id, "config": spec.config, "location": location,
              "revision": revision, "revision_asked": spec.revision,
              "fingerprint": fingerprint, "data_files": data_files, "splits": splits}
    fileio.write_json(root / HUB_DIR / SOURCE_RECORD, source)
    merge_record(manifest, report, hub=source)
    return report
