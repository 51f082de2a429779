"""What a fetch got, and the ``raw/<name>/.fetched.json`` record ``preprocess`` checks."""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import __version__, fileio, paths
from pairrepro.data.manifests import Manifest, declared_splits
from pairrepro.errors import DataError

RECORD_NAME = ".fetched.json"


@dataclass
class FileResult:
    path: str
    status: str  # "fetched" | "present" | "generated" | "missing" | "not needed"
    source: str = ""  # "from:<path>", "mirror:<path>", "<url>", "generated", "" when missing
    sha256: str = ""
    size: int = 0
    verified: bool = False  # True: matched the manifest's sha256
    splits: list[str] = field(default_factory=list)
    error: str = ""


@dataclass
class FetchReport:
    dataset: str
    raw_dir: Path
    files: list[FileResult] = field(default_factory=list)
    splits_present: list[str] = field(default_factory=list)
    splits_missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: variant -> split -> the files it reads that are not here (only splits lacking some)
    variants_missing: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: split names of the variants that no variant can read from the files here
    splits_unreadable: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every declared split is here, and some variant can read every split named."""
        return not self.splits_missing and not self.splits_unreadable

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "raw_dir": str(self.raw_dir), "complete": self.complete}


def read_record(name: str) -> dict[str, Any] | None:
    path = paths.raw_dir(name) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        return fileio.read_json(path)
    except ValueError as exc:
        raise DataError(f"{path}: unreadable fetch record ({exc})",
                        hint=f"run: pairrepro fetch {name} --force") from exc


def record_entry(root: Path, result: FileResult) -> dict[str, Any]:
    stat = (root / result.path).stat()
    return {"path": result.path, "source": result.source, "sha256": result.sha256,
            "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "verified": result.verified,
            "splits": result.splits}


def write_record(name: str, fields: dict[str, Any]) -> None:
    stamp = {"dataset": name, "fetched_at": _dt.datetime.now(_dt.UTC).isoformat(
        timespec="seconds"), "pairrepro": __version__}
    fileio.write_json(paths.raw_dir(name) / RECORD_NAME, {**fields, **stamp})


def merge_record(manifest: Manifest, report: FetchReport, **extra: Any) -> None:
    """Write ``report``'s record, keeping the entries of files this fetch did not touch."""
    root = report.raw_dir
    previous = read_record(manifest.name) or {}
    touched = {r.path for r in report.files}
    kept = [e for e in previous.get("files", [])
            if isinstance(e, dict) and e.get("path") not in touched
            and (root / str(e.get("path"))).is_file()]
    present = {*report.splits_present, *(s for e in kept for s in e.get("splits", []))}
    declared = declared_splits(manifest)
    fields = {key: value for key, value in previous.items()
              if key not in ("files", "splits_present", "splits_missing")}
    fields.update({
        "manifest": manifest.source,
        "files": kept + [record_entry(root, r) for r in report.files
                         if r.status in ("fetched", "present")],
        "splits_present": [s for s in declared if s in present],
        "splits_missing": [s for s in declared if s not in present], **extra})
    write_record(manifest.name, fields)


def fetch_status(name: str) -> dict[str, Any]:
    record = read_record(name)
    if record is None:
        return {"fetched": False, "splits_present": [], "splits_missing": []}
    return {"fetched": True, "splits_present": record.get("splits_present", []),
            "splits_missing": record.get("splits_missing", []),
            "fetched_at": record.get("fetched_at", "")}
