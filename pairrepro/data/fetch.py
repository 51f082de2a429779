"""Getting a dataset's published files into ``raw/<name>/``: local copies, the mirror, then
URLs. A fetched file is trusted while its size and mtime are those recorded; a partly available
dataset is fetched as far as it goes, and only no split at all is an error."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from pairrepro import fileio, paths
from pairrepro.data.archives import extract_members, safe_extract
from pairrepro.data.download import install_download, verify_file
from pairrepro.data.fetch_record import (
    FetchReport,
    FileResult,
    merge_record,
    read_record,
    record_entry,
    write_record,
)
from pairrepro.data.manifests import FileSpec, Manifest, file_splits, load_manifest, variant_gaps
from pairrepro.errors import ChecksumError, ConfigError, DataError, DownloadError

#: Sizes of the built-in synthetic data: NLI pairs per split, ranking queries per split.
SYNTHETIC_SIZES = {"nli": {"train": 6000, "dev": 600, "test": 600},
                   "ranking": {"train": 800, "dev": 150, "test": 150}}
SYNTHETIC_NEGATIVES = 4
SYNTHETIC_SEED = 13


def _generate_synthetic(manifest: Manifest, force: bool) -> FetchReport:
    from pairrepro.data import synthetic

    root = paths.raw_dir(manifest.name)
    report = FetchReport(manifest.name, root)
    previous = read_record(manifest.name) or {}
    seeded = previous.get("seed") == SYNTHETIC_SEED and previous.get("sizes") == SYNTHETIC_SIZES
    for kind, sizes in SYNTHETIC_SIZES.items():
        for split, n in sizes.items():
            rel = f"{kind}/{split}.jsonl"
            target = root / rel
            kept = target.is_file() and seeded and not force
            if not kept:
                table = (synthetic.generate_nli(n, seed=SYNTHETIC_SEED, split=split)
                         if kind == "nli" else
                         synthetic.generate_ranking(n, negatives=SYNTHETIC_NEGATIVES,
                                                    seed=SYNTHETIC_SEED, split=split))
                with fileio.atomic_open(target) as handle:
                    table.to_json(handle, orient="records", lines=True, force_ascii=False)
            report.files.append(FileResult(rel, "present" if kept else "generated", "generated",
                                           fileio.sha256_file(target), target.stat().st_size,
                                           False, [split]))
    report.splits_present = ["train", "dev", "test"]
    write_record(manifest.name, {
        "seed": SYNTHETIC_SEED, "sizes": SYNTHETIC_SIZES,
        "files": [record_entry(root, r) for r in report.files], "extracted": {},
        "splits_present": report.splits_present, "splits_missing": [],
    })
    return report


def fetch_dataset(name: str, mirror: Path | None = None, from_path: Path | None = None,
                  force: bool = False, progress: bool = False, verify: bool = False) -> FetchReport:
    """Fetch every available file of dataset ``name``; files fetched before are kept unless
    ``force``. Raises :class:`ChecksumError` for a corrupt file no other source replaced,
    :class:`DownloadError` / :class:`DataError` when no split could be had."""
    manifest = load_manifest(name)
    manifest.require_published()  # before any option check: nothing could ever help
    if manifest.name == "synthetic":
        return _generate_synthetic(manifest, force)
    if not manifest.files:
        raise DataError(
            f"dataset {name!r} has no files that can be fetched",
            hint=manifest.notes or manifest.licence or "see the manifest " + manifest.source)
    from_path = resolve_from(manifest, from_path)
    mirror = resolve_mirror(mirror)
    record = (None if force else read_record(name)) or {}
    root = paths.raw_dir(name)
    run = _FetchRun(manifest, root, verify, FetchReport(name, root),
                    {entry["path"]: entry for entry in record.get("files", [])},
                    dict(record.get("extracted", {})))
    run.take_local(from_path, mirror)
    run.download_missing(progress)
    run.recheck_members()
    run.extract_archives()
    return run.finish()


SOURCES = ("files", "hub")


def fetch_from(name: str, source: str = "files", mirror: Path | None = None,
               from_path: Path | None = None, force: bool = False, progress: bool = False,
               verify: bool = False) -> FetchReport:
    """``pairrepro fetch --source``: :func:`fetch_dataset` for ``files``, else the hub."""
    if source not in SOURCES:
        raise ConfigError(f"--source {source!r}: expected one of {', '.join(SOURCES)}")
    if source == "files":
        return fetch_dataset(name, mirror=mirror, from_path=from_path, force=force,
                             progress=progress, verify=verify)
    if mirror is not None:
        raise ConfigError("--mirror does not apply to --source hub",
                          hint="the hub source reads the hub (or --from DIR, a local copy of "
                               "the hub repository); drop --mirror or --source hub")
    from pairrepro.data.hub import fetch_hub  # datasets and its imports only when asked for

    manifest = load_manifest(name)
    manifest.require_published()
    if from_path is not None:
        from_path = from_path.expanduser().resolve()
        if not from_path.is_dir():
            raise ConfigError(f"--from {from_path}: not a folder laid out as a hub repository",
                              hint="give the folder holding README.md (YAML configs) and the "
                                   "parquet files")
    return fetch_hub(manifest, from_path)


def resolve_from(manifest: Manifest, from_path: Path | None) -> Path | None:
    if from_path is None:
        return None
    from_path = from_path.expanduser().resolve()
    if not from_path.exists():
        raise ConfigError(f"--from {from_path}: no such file or folder",
                          hint="give the file or folder you downloaded (for licence-gated "
                               f"data see: pairrepro datasets; "
                               f"{manifest.homepage or manifest.name})")
    names = [PurePosixPath(s.path).name for s in manifest.files]
    if from_path.is_file() and from_path.name not in names:
        raise ConfigError(
            f"--from {from_path}: the file name matches no file of dataset {manifest.name!r}",
            hint="expected one of: " + ", ".join(names))
    return from_path


def resolve_mirror(mirror: Path | None) -> Path | None:
    setting = (mirror, "--mirror") if mirror is not None else paths.mirror_setting()
    if setting is None:
        return None
    folder = setting[0].expanduser().resolve()
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"mirror folder {folder} ({setting[1]}) {what}",
                          hint="give --mirror DIR (or $PAIRREPRO_MIRROR) a folder laid out "
                          "<DIR>/<dataset>/<file>; PAIRREPRO_MIRROR= (empty) uses the "
                          "official URLs")
    return folder


def local_candidates(name: str, spec: FileSpec, from_path: Path | None,
                     mirror: Path | None) -> list[tuple[str, Path]]:
    """``(origin, path)`` of the local places where ``spec`` may be, best first."""
    found: list[tuple[str, Path]] = []
    base = PurePosixPath(spec.path).name
    if from_path is not None:
        if from_path.is_file():
            if from_path.name == base:
                found.append((f"from:{from_path}", from_path))
        else:
            for cand in (from_path / spec.path, from_path / name / spec.path, from_path / base):
                if cand.is_file():
                    found.append((f"from:{cand}", cand))
                    break
    if mirror is not None and (cand := mirror / name / spec.path).is_file():
        found.append((f"mirror:{cand}", cand))
    return found


def recheck_recorded(target: Path, entry: dict[str, Any], pin: str, verify: bool,
                     warnings: list[str]) -> tuple[str, int, bool]:
    """``(sha256, size, verified)`` of a recorded file, re-hashed unless size and mtime are the
    record's (or with ``verify``)."""
    stat = target.stat()
    if (not verify and stat.st_size == entry.get("size")
            and stat.st_mtime_ns == entry.get("mtime_ns")):
        return entry["sha256"], entry["size"], bool(entry.get("verified"))
    digest = fileio.sha256_file(target)
    if pin and digest != pin:
        raise ChecksumError(
            f"{target}: changed since it was fetched: sha256 {digest}, expected {pin}",
            hint="fetch it again (pairrepro fetch NAME --force)")
    if not pin and digest != entry.get("sha256"):
        warnings.append(f"{target}: changed since it was fetched (sha256 {entry.get('sha256')}"
                        f" -> {digest}); not pinned, so the new hash is recorded, unverified")
    return digest, stat.st_size, bool(pin)


@dataclass
class _FetchRun:
    """One fetch of one dataset; its public methods are its steps, in this order."""

    manifest: Manifest
    root: Path
    verify: bool
    report: FetchReport
    known: dict[str, dict[str, Any]]  # the previous fetch's record by path
    extracted: dict[str, list[str]]
    results: dict[str, FileResult] = field(default_factory=dict)
    members: dict[str, FileResult] = field(default_factory=dict)
    checksum_errors: dict[str, ChecksumError] = field(default_factory=dict)
    # (file, URL, error) of every failed download of a file a split needs
    download_errors: list[tuple[str, str, DownloadError]] = field(default_factory=list)
    fresh_archives: list[FileSpec] = field(default_factory=list)

    def settle(self, spec: FileSpec, result: FileResult) -> None:
        """``spec``'s outcome; an archive fetched now, or here but never extracted, is queued."""
        self.results[spec.path] = result
        fresh = result.status == "fetched" or (result.status == "present"
                                               and spec.path not in self.extracted)
        if spec.archive and fresh:
            self.fresh_archives.append(spec)

    def covered(self) -> set[str]:
        return {s for r in self.results.values() if r.status in ("fetched", "present")
                for s in r.splits}

    def take_local(self, from_path: Path | None, mirror: Path | None) -> None:
        """What is here and still matches its record, then ``--from``, then the mirror."""
        for spec in self.manifest.files:
            target = self.root / spec.path
            entry = self.known.get(spec.path)
            if (target.is_file() and entry
                    and (not spec.sha256 or entry["sha256"] == spec.sha256)):
                try:
                    present = recheck_recorded(target, entry, spec.sha256, self.verify,
                                               self.report.warnings)
                except ChecksumError as exc:  # deleted and reported (exit 5), not replaced now
                    target.unlink()
                    error = ChecksumError(f"{exc.message}; the changed copy was deleted",
                                          hint=f"fetch it again: pairrepro fetch "
                                               f"{self.manifest.name} (with --mirror / --from "
                                               "as before)")
                    self.checksum_errors[spec.path] = error
                    self.settle(spec, FileResult(spec.path, "missing", splits=list(spec.splits),
                                                   error=error.message))
                else:
                    self.settle(spec, FileResult(spec.path, "present", entry["source"],
                                                   *present, list(spec.splits)))
                continue
            for origin, source in local_candidates(self.manifest.name, spec, from_path,
                                                   mirror):
                try:  # verified before it gets its name
                    with fileio.atomic_path(target) as tmp:
                        shutil.copyfile(source, tmp)
                        digest, verified = verify_file(tmp, spec, str(source))
                except ChecksumError as exc:
                    self.checksum_errors[spec.path] = exc
                    continue
                self.settle(spec, FileResult(spec.path, "fetched", origin, digest,
                                               target.stat().st_size, verified,
                                               list(spec.splits)))
                self.checksum_errors.pop(spec.path, None)
                break

    def download_missing(self, progress: bool) -> None:
        """HTTP for what is still missing and still needed."""
        for spec in self.manifest.files:
            if spec.path in self.results:
                continue
            if spec.splits and set(spec.splits) <= self.covered():
                self.settle(spec, FileResult(spec.path, "not needed", splits=list(spec.splits)))
                continue
            self.settle(spec, self._download(spec, progress))

    def _download(self, spec: FileSpec, progress: bool) -> FileResult:
        target = self.root / spec.path
        urls = [u for u in (spec.url, *spec.alt_urls) if u]
        result = FileResult(spec.path, "missing", splits=list(spec.splits))
        if not urls:
            result.error = "no download URL (give the file with --from PATH)"
        for url in urls:
            try:
                digest, verified = install_download(url, target, spec, progress)
            except (ChecksumError, DownloadError) as exc:
                if isinstance(exc, ChecksumError):
                    self.checksum_errors[spec.path] = exc
                elif spec.splits:
                    self.download_errors.append((spec.path, url, exc))
                result.error = exc.message
                continue
            self.checksum_errors.pop(spec.path, None)
            return FileResult(spec.path, "fetched", url, digest, target.stat().st_size,
                              verified, list(spec.splits))
        return result

    def recheck_members(self) -> None:
        """Members extracted earlier are kept while still as recorded, else re-extracted."""
        for spec in self.manifest.files:
            if spec.path not in self.results or spec in self.fresh_archives:
                continue
            for member in spec.members:
                entry, target = self.known.get(member.path), self.root / member.path
                if entry is None or not target.is_file():
                    continue
                try:
                    present = recheck_recorded(target, entry, member.sha256, self.verify,
                                               self.report.warnings)
                except ChecksumError as exc:
                    self.report.warnings.append(f"{exc.message}; extracting it again")
                    self.fresh_archives.append(spec)
                    break
                self.members[member.path] = FileResult(member.path, "present",
                                                       entry["source"], *present, [])

    def extract_archives(self) -> None:
        for spec in self.fresh_archives:
            try:
                if spec.members:
                    current = {**self.known, **{r.path: {"verified": r.verified}
                                                for r in self.results.values()
                                                if r.status in ("fetched", "present")}}
                    archive = self.results.get(spec.path)
                    found, notes = extract_members(
                        self.root / spec.path, self.root, spec, current,
                        archive_verified=bool(archive and archive.verified))
                    self.members.update((r.path, r) for r in found)
                    self.report.warnings.extend(notes)
                    self.extracted[spec.path] = [r.path for r in found]
                else:  # the manifest names no member: every file, each checked, none pinned
                    self.extracted[spec.path] = safe_extract(self.root / spec.path, self.root,
                                                             spec.archive)
            except (DataError, ChecksumError):
                # a hostile or broken archive is never kept where a later run could trust it
                (self.root / spec.path).unlink(missing_ok=True)
                raise

    def finish(self) -> FetchReport:
        manifest, report, name = self.manifest, self.report, self.manifest.name
        report.files = ([self.results[s.path] for s in manifest.files]
                        + list(self.members.values()))
        report.variants_missing, report.splits_unreadable = variant_gaps(manifest, self.root)
        present = self.covered()
        declared = file_splits(manifest)
        report.splits_present = [s for s in declared if s in present]
        report.splits_missing = [s for s in declared if s not in present]
        report.warnings.extend(exc.message for exc in self.checksum_errors.values())
        if any(r.status in ("fetched", "present") for r in report.files):
            merge_record(manifest, report, extracted=self.extracted)
        if self.checksum_errors:
            raise next(iter(self.checksum_errors.values()))
        if declared and not report.splits_present:
            if self.download_errors:
                raise self._nothing_downloaded()
            raise DataError(
                f"nothing of dataset {name!r} could be fetched: no local copy and no download "
                "URL",
                hint=(manifest.licence if not manifest.public else
                      "give the files with --from PATH or a mirror with --mirror DIR"))
        return report

    def _nothing_downloaded(self) -> DownloadError:
        name = self.manifest.name
        files = dict.fromkeys(path for path, _, _ in self.download_errors)
        hosts = list(dict.fromkeys(urlparse(url).hostname or url
                                   for _, url, _ in self.download_errors))
        shown = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        first = self.download_errors[0][2].message
        return DownloadError(
            f"nothing of dataset {name!r} could be fetched: {len(files)} file(s) could not be "
            f"downloaded from {shown} (the first: {first})",
            hint=f"no network here? fetch from a local mirror, a folder laid out "
                 f"DIR/{name}/<file path>: export PAIRREPRO_MIRROR=DIR (make: MIRROR=DIR), or "
                 f"pairrepro fetch {name} --mirror DIR; files you downloaded yourself: --from "
                 "PATH")
