"""Getting a dataset's published files into ``$PAIRREPRO_HOME/raw/<name>/``.

Sources, in this order (see :func:`fetch_dataset`):

1. ``--from PATH``: a file or a folder the user gives (licence-gated data, manual downloads);
2. a mirror folder (``--mirror DIR`` or ``$PAIRREPRO_MIRROR``) laid out as
   ``<DIR>/<dataset>/<path as in the manifest>``;
3. the official URL, then the alternative URLs, over HTTP(S).

Every file is checked against the manifest's sha256 (or size when no hash is known)
*before* it appears under its final name: a download grows in ``.<name>.partial``
(resumed with an HTTP ``Range`` request after a cut connection) and is renamed only
once verified; a corrupt file is deleted and raises :class:`ChecksumError`.
Archives: only the members the manifest names (``[[files.members]]``) are extracted, into a
hidden staging folder, each hashed while written and checked against its own pin, then moved
into place; an unpinned member is recorded ``verified = false`` with the hash of its bytes,
never over a verified file. Any entry that would land outside the dataset folder (or on the
record) is refused. A ``.fetched.json`` record lists every file and member, its source,
sha256, size, mtime and whether a pin verified it; a later run re-hashes a file whose size
or mtime changed (``--verify``: every file), and ``preprocess`` checks the bytes it reads
against it.

A dataset that is only partly available (SNLI dev/test in the mirror but no train)
is fetched as far as it goes: the report names the splits that are missing. Only when
no split at all could be had is it an error.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import http.client
import os
import shutil
import stat
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from pairrepro import __version__, io, paths
from pairrepro.data.formats._common import missing_files
from pairrepro.data.manifests import HUB_DIR, FileSpec, Manifest, load_manifest
from pairrepro.errors import ChecksumError, ConfigError, DataError, DownloadError

RECORD_NAME = ".fetched.json"
#: Prefix of the hidden folder an archive's members are extracted into before being moved.
STAGING = ".staging-"
CHUNK = 1 << 16
#: Seconds to wait for a server before giving up on a connection or a read.
HTTP_TIMEOUT = 30.0
#: Attempts per URL when a connection is cut midway (each resumes where the last stopped).
HTTP_ATTEMPTS = 3
USER_AGENT = f"pairrepro/{__version__} (+dataset fetch)"

#: Sizes of the built-in synthetic data: NLI pairs per split, ranking queries per split.
SYNTHETIC_NLI = {"train": 6000, "dev": 600, "test": 600}
SYNTHETIC_RANKING = {"train": 800, "dev": 150, "test": 150}
SYNTHETIC_NEGATIVES = 4
SYNTHETIC_SEED = 13


@dataclass
class FileResult:
    """What happened to one manifest file."""

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
    """The outcome of :func:`fetch_dataset`."""

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
        """Every declared split is here, and every split a variant names can be read by at
        least one variant (TrecQA's test needs the jacana file whatever else is tagged test)."""
        return not self.splits_missing and not self.splits_unreadable

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["raw_dir"] = str(self.raw_dir)
        data["complete"] = self.complete
        return data


# --------------------------------------------------------------------------- helpers


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _partial_path(target: Path) -> Path:
    """Deterministic name of an unfinished download (hidden, ``.partial``: never read)."""
    return target.with_name(f".{target.name}.partial")


def verify_file(path: Path, spec: FileSpec, origin: str) -> tuple[str, bool]:
    """Check ``path`` against ``spec``; return ``(sha256, verified)``.

    Raises :class:`ChecksumError` naming ``origin`` (the file as the user knows it), the
    expected and the actual value. With no sha256 in the manifest the size is checked
    when known, and the hash is only recorded.
    """
    actual = io.sha256_file(path)
    if spec.sha256:
        if actual != spec.sha256.lower():
            raise ChecksumError(
                f"{origin}: sha256 mismatch for {spec.path!r}: expected {spec.sha256}, "
                f"got {actual}; the file was deleted",
                hint="the source is corrupt or a different version; fetch it again "
                "(--force) or from another source (--mirror / --from)",
            )
        return actual, True
    if spec.size:
        size = path.stat().st_size
        if size != spec.size:
            raise ChecksumError(
                f"{origin}: size mismatch for {spec.path!r}: expected {spec.size} bytes, "
                f"got {size}; the file was deleted",
                hint="fetch it again (--force) or from another source (--mirror / --from)",
            )
    return actual, False


def _install_copy(source: Path, target: Path, spec: FileSpec, origin: str) -> tuple[str, bool]:
    """Copy a local file into place; verified before it gets its final name."""
    with io.atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
        return verify_file(tmp, spec, origin)


# --------------------------------------------------------------------------- HTTP


def _progress_bar(label: str, total: int | None, enabled: bool) -> Any:
    if not enabled:
        return nullcontext(None)
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                        TransferSpeedColumn(), TimeRemainingColumn(), transient=True)
    progress.add_task(label, total=total)
    return progress


def _open_url(url: str, offset: int, timeout: float) -> Any:
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    return urllib.request.urlopen(request, timeout=timeout)


def _copy_stream(response: IO[bytes], handle: IO[bytes], bar: Any) -> None:
    while chunk := response.read(CHUNK):
        handle.write(chunk)
        if bar is not None:
            bar.advance(bar.task_ids[0], len(chunk))


def download(url: str, target: Path, *, size: int = 0, progress: bool = False,
             timeout: float | None = None, attempts: int | None = None) -> Path:
    """Download ``url`` into the partial file of ``target`` and return that partial path.

    The bytes accumulate in ``.<target name>.partial``; when it already holds a part
    (an earlier run or a connection cut in this one), the request asks for the rest
    with ``Range: bytes=<n>-``. A server that ignores the range gets a fresh start.
    The caller verifies the partial file and renames it (see :func:`fetch_dataset`).
    Raises :class:`DownloadError` naming the URL on HTTP errors, refused connections
    and timeouts.
    """
    if not url.startswith(("http://", "https://")):
        raise DownloadError(f"unsupported URL {url!r} (only http and https)")
    timeout = HTTP_TIMEOUT if timeout is None else timeout
    attempts = HTTP_ATTEMPTS if attempts is None else attempts
    partial = _partial_path(target)
    partial.parent.mkdir(parents=True, exist_ok=True)
    hint = "no network? use --mirror DIR (a folder laid out <DIR>/<dataset>/<file>) or " \
           "--from PATH (a file or folder you downloaded yourself)"
    last_error = ""
    for _attempt in range(max(1, attempts)):
        offset = partial.stat().st_size if partial.exists() else 0
        if size and offset == size:
            return partial  # a previous run got every byte; only the check remains
        try:
            response = _open_url(url, offset, timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and offset:  # our partial is longer than the file: restart
                partial.unlink()
                last_error = f"HTTP 416 for {url}"
                continue
            raise DownloadError(f"HTTP {exc.code} {exc.reason} for {url}", hint=hint) from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise DownloadError(f"cannot download {url}: {reason}", hint=hint) from exc
        with response:
            resumed = offset and response.status == 206
            if offset and not resumed:
                offset = 0  # the server sent the whole file: start over
            length = response.headers.get("Content-Length")
            total = (offset + int(length)) if length and length.isdigit() else (size or None)
            try:
                with open(partial, "ab" if resumed else "wb") as handle, \
                        _progress_bar(target.name, total, progress) as bar:
                    if bar is not None:
                        bar.advance(bar.task_ids[0], offset)
                    _copy_stream(response, handle, bar)
            except (OSError, http.client.HTTPException) as exc:
                # a cut connection: keep what arrived and resume on the next attempt
                last_error = f"connection to {url} broke after " \
                             f"{partial.stat().st_size if partial.exists() else 0} bytes: {exc}"
                time.sleep(0.1)
                continue
        got = partial.stat().st_size
        if total is not None and got < total:
            last_error = f"{url}: got {got} of {total} bytes"
            continue
        return partial
    raise DownloadError(f"download of {url} did not complete: {last_error}",
                        hint=f"run the same command again to resume; {hint}")


def _install_download(url: str, target: Path, spec: FileSpec, progress: bool,
                      timeout: float | None) -> tuple[str, bool]:
    partial = download(url, target, size=spec.size, progress=progress, timeout=timeout)
    try:
        checked = verify_file(partial, spec, url)
    except ChecksumError:
        partial.unlink(missing_ok=True)
        raise
    with open(partial, "rb") as handle:  # durable before the rename makes it visible
        os.fsync(handle.fileno())
    os.replace(partial, target)
    return checked


# --------------------------------------------------------------------------- archives


def _check_member(archive: Path, name: str, dest: Path) -> Path:
    """The path a member would be written to, or a :class:`DataError` naming it."""
    def refuse(reason: str) -> DataError:
        return DataError(f"{archive}: refusing to extract member {name!r}: {reason}",
                         hint="the archive is malformed or hostile; get it from another source")

    if not name or "\x00" in name:
        raise refuse("empty or invalid name")
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or (pure.parts and pure.parts[0].endswith(":")):
        raise refuse("absolute path")
    if ".." in pure.parts:
        raise refuse("'..' would leave the target folder")
    if pure.parts and (pure.parts[0] == RECORD_NAME or pure.parts[0].startswith(STAGING)):
        raise refuse("it would overwrite fetch's own record or staging folder")
    out = (dest / pure).resolve()
    root = dest.resolve()
    if out != root and root not in out.parents:
        raise refuse("it would land outside the target folder")
    return out


def _members_zip(archive: Path, dest: Path) -> Iterator[tuple[str, Path, bool, Any]]:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        checked = []
        for info in infos:
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise DataError(f"{archive}: refusing to extract member {info.filename!r}: "
                                "symbolic link", hint="get the archive from another source")
            checked.append((info, _check_member(archive, info.filename, dest)))
        for info, out in checked:
            yield info.filename, out, info.is_dir(), (lambda i=info: zf.open(i))


def _members_tar(archive: Path, dest: Path) -> Iterator[tuple[str, Path, bool, Any]]:
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        checked = []
        for member in members:
            if member.issym() or member.islnk():
                kind = "symbolic link" if member.issym() else "hard link"
                raise DataError(f"{archive}: refusing to extract member {member.name!r}: {kind}",
                                hint="get the archive from another source")
            if not (member.isfile() or member.isdir()):
                raise DataError(f"{archive}: refusing to extract member {member.name!r}: "
                                "not a regular file or folder",
                                hint="get the archive from another source")
            checked.append((member, _check_member(archive, member.name, dest)))
        for member, out in checked:
            yield member.name, out, member.isdir(), (lambda m=member: tf.extractfile(m))


def safe_extract(archive: Path, dest: Path, kind: str) -> list[str]:
    """Extract ``archive`` (``zip``, ``tar`` or ``tar.gz``) under ``dest``.

    Every member is checked before anything is written: absolute paths, ``..``,
    symbolic and hard links, devices are refused with a :class:`DataError` naming
    the member. Files are written atomically. Returns the extracted file paths
    relative to ``dest`` (POSIX style).
    """
    if kind == "zip":
        members = _members_zip(archive, dest)
    elif kind in ("tar", "tar.gz", "tgz"):
        members = _members_tar(archive, dest)
    else:
        raise ConfigError(f"unknown archive kind {kind!r} for {archive}",
                          hint="use 'zip', 'tar' or 'tar.gz' in the manifest")
    written: list[str] = []
    root = dest.resolve()
    try:
        for _name, out, is_dir, opener in members:
            if is_dir:
                out.mkdir(parents=True, exist_ok=True)
                continue
            with opener() as src, io.atomic_open(out, "wb") as handle:
                shutil.copyfileobj(src, handle, CHUNK)
            written.append(out.relative_to(root).as_posix())
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise DataError(f"{archive}: not a readable {kind} archive: {exc}",
                        hint="delete it and fetch again (--force)") from exc
    return written


def _archive_entries(archive: Path, dest: Path, kind: str
                     ) -> Iterator[tuple[str, Path, bool, Any]]:
    if kind == "zip":
        return _members_zip(archive, dest)
    if kind in ("tar", "tar.gz", "tgz"):
        return _members_tar(archive, dest)
    raise ConfigError(f"unknown archive kind {kind!r} for {archive}",
                      hint="use 'zip', 'tar' or 'tar.gz' in the manifest")


def _copy_hashed(source: IO[bytes], target: Path) -> tuple[str, int]:
    """Copy a stream into a new file; the sha256 and size of the bytes copied."""
    digest, size = hashlib.sha256(), 0
    with open(target, "wb") as handle:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    return digest.hexdigest(), size


def extract_members(archive: Path, root: Path, spec: FileSpec,
                    keep: dict[str, dict[str, Any]], archive_verified: bool = False
                    ) -> tuple[list[FileResult], list[str]]:
    """Extract the members ``spec`` names from ``archive`` into ``root``; nothing else.

    Members are written into a hidden staging folder while hashed, each checked against its
    own pin (sha256, else size; a mismatch is a :class:`ChecksumError` and nothing is moved),
    then moved into place one by one (``os.replace``). A member without a pin is kept as
    ``verified = False`` with the hash of its bytes, except where ``keep`` (the fetch record)
    holds a verified file at that path: unverified bytes never replace a verified file.
    Members of an archive whose own pin verified it (``archive_verified``) are verified by
    that chain: the archive's bytes fix theirs. Returns one :class:`FileResult` per member
    found, and warnings. An archive holding none of the named members is a
    :class:`DataError`."""
    wanted = {m.path: m for m in spec.members}
    staging = root / f"{STAGING}{PurePosixPath(spec.path).name}"
    shutil.rmtree(staging, ignore_errors=True)
    staged: list[tuple[str, Path, str, int, bool]] = []
    warnings: list[str] = []
    try:
        try:
            for name, _out, is_dir, opener in _archive_entries(archive, staging, spec.archive):
                rel = PurePosixPath(name).as_posix().removeprefix("./")
                if is_dir or rel not in wanted:
                    continue  # only what the manifest names is written
                member = wanted[rel]
                tmp = staging / rel
                tmp.parent.mkdir(parents=True, exist_ok=True)
                with opener() as src:
                    digest, size = _copy_hashed(src, tmp)
                origin = f"{archive} member {rel!r}"
                if member.sha256 and digest != member.sha256:
                    raise ChecksumError(
                        f"{origin}: sha256 mismatch: expected {member.sha256}, got {digest}; "
                        "nothing was extracted",
                        hint="the archive is corrupt or another version; fetch it again "
                             "(--force) or from another source (--mirror / --from)")
                if not member.sha256 and member.size and size != member.size:
                    raise ChecksumError(f"{origin}: size mismatch: expected {member.size} "
                                        f"bytes, got {size}; nothing was extracted",
                                        hint="fetch the archive again (--force)")
                staged.append((rel, tmp, digest, size,
                               bool(member.sha256) or archive_verified))
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
            raise DataError(f"{archive}: not a readable {spec.archive} archive: {exc}",
                            hint="delete it and fetch again (--force)") from exc
        if not staged:
            raise DataError(f"{archive}: none of the expected members is in the archive: "
                            + ", ".join(wanted),
                            hint="it is not the archive the manifest describes; get it from "
                                 "another source (--mirror / --from)")
        results = []
        for rel, tmp, digest, size, verified in staged:
            target = root / rel
            previous = keep.get(rel, {})
            if not verified and previous.get("verified") and target.is_file():
                warnings.append(f"{rel}: kept the verified file; the unpinned copy in "
                                f"{spec.path} (sha256 {digest}) was not used")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            results.append(FileResult(rel, "fetched", f"archive:{spec.path}", digest, size,
                                      verified, []))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found = {r[0] for r in staged}
    absent = [m for m in wanted if m not in found]
    if absent:
        warnings.append(f"{spec.path}: expected member(s) not in the archive: "
                        + ", ".join(absent))
    return results, warnings


# --------------------------------------------------------------------------- sources


def _local_candidates(name: str, spec: FileSpec, from_path: Path | None,
                      mirror: Path | None) -> list[tuple[str, Path]]:
    """Local places where ``spec`` may be, in order of preference."""
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
    if mirror is not None:
        cand = mirror / name / spec.path
        if cand.is_file():
            found.append((f"mirror:{cand}", cand))
    return found


def read_record(name: str) -> dict[str, Any] | None:
    """The ``.fetched.json`` record of a dataset, or ``None`` when it was never fetched."""
    path = paths.raw_dir(name) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        return io.read_json(path)
    except ValueError as exc:
        raise DataError(f"{path}: unreadable fetch record ({exc})",
                        hint=f"run: pairrepro fetch {name} --force") from exc


def locate_file(name: str, rel: str) -> Path | None:
    """The local copy of a raw file, accepting ``x.gz`` for ``x`` and ``x`` for ``x.gz``.

    The official SNLI zip gives ``snli_1.0_dev.jsonl`` where the mirror has
    ``snli_1.0_dev.jsonl.gz``; readers open either (gzip by suffix).
    """
    root = paths.raw_dir(name)
    options = [rel, rel[:-3]] if rel.endswith(".gz") else [rel, rel + ".gz"]
    for option in options:
        if (root / option).is_file():
            return root / option
    return None


def _record_entry(root: Path, result: FileResult) -> dict[str, Any]:
    """A file of the fetch record; size and mtime let a later run see it was changed."""
    stat = (root / result.path).stat()
    return {"path": result.path, "source": result.source, "sha256": result.sha256,
            "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "verified": result.verified,
            "splits": result.splits}


def _recheck(target: Path, entry: dict[str, Any], pin: str, verify: bool,
             warnings: list[str]) -> tuple[str, int, bool] | None:
    """``(sha256, size, verified)`` of a file fetch recorded, trusting the record only while
    the file's size and mtime are those recorded (else, or with ``verify``, it is hashed
    again). A pinned file whose bytes changed is a :class:`ChecksumError`; an unpinned one
    gets its new hash recorded (unverified) and a warning. ``None``: hash unknown."""
    stat = target.stat()
    if (not verify and stat.st_size == entry.get("size")
            and stat.st_mtime_ns == entry.get("mtime_ns")):
        return entry["sha256"], entry["size"], bool(entry.get("verified"))
    digest = io.sha256_file(target)
    if pin and digest != pin:
        raise ChecksumError(
            f"{target}: changed since it was fetched: sha256 {digest}, expected {pin}",
            hint="fetch it again (pairrepro fetch NAME --force)")
    if not pin and digest != entry.get("sha256"):
        warnings.append(f"{target}: changed since it was fetched (sha256 {entry.get('sha256')}"
                        f" -> {digest}); not pinned, so the new hash is recorded, unverified")
    return digest, stat.st_size, bool(pin)


def _from_hub(files: list[str]) -> bool:
    return bool(files) and all(f.startswith(HUB_DIR + "/") for f in files)


def merge_record(manifest: Manifest, report: FetchReport, **extra: Any) -> None:
    """Write the ``.fetched.json`` of ``report`` over the previous one, keeping the previous
    entries of files this fetch did not touch (the official files and the hub's parquet
    files come from separate fetches); a split is present when either source has it."""
    root = report.raw_dir
    previous = read_record(manifest.name) or {}
    touched = {r.path for r in report.files}
    kept = [e for e in previous.get("files", [])
            if isinstance(e, dict) and e.get("path") not in touched
            and (root / str(e.get("path"))).is_file()]
    present = {*report.splits_present, *(s for e in kept for s in e.get("splits", []))}
    declared = [*_declared_splits(manifest),
                *(s for s in (manifest.hub.splits if manifest.hub else {})
                  if s not in _declared_splits(manifest))]
    record = {key: value for key, value in previous.items()
              if key not in ("files", "splits_present", "splits_missing")}
    record.update({
        "dataset": manifest.name, "fetched_at": _now(), "pairrepro": __version__,
        "manifest": manifest.source,
        "files": kept + [_record_entry(root, r) for r in report.files
                         if r.status in ("fetched", "present")],
        "splits_present": [s for s in declared if s in present],
        "splits_missing": [s for s in declared if s not in present], **extra})
    io.write_json(root / RECORD_NAME, record)


def ready_variants(manifest: Manifest) -> list[str]:
    """The variants every split of which has all its raw files here (``preprocess`` can
    write them whole), in manifest order."""
    root = paths.raw_dir(manifest.name)
    return [name for name, variant in manifest.variants.items()
            if variant.splits and all(not missing_files(root, split.files)
                                      for split in variant.splits.values())]


def _variant_completeness(manifest: Manifest, root: Path, report: FetchReport) -> None:
    """Fill ``variants_missing`` and ``splits_unreadable`` from the files each variant's
    reader reads (the same rule as ``preprocess``: a split needs all of its files). Variants
    read from the hub's parquet files (``fetch --source hub``) are not this fetch's concern."""
    readable: set[str] = set()
    named: list[str] = []
    for variant in manifest.variants.values():
        if all(_from_hub(s.files) for s in variant.splits.values()):
            continue
        for split, spec in variant.splits.items():
            named += [split] if split not in named else []
            absent = missing_files(root, spec.files)
            if absent:
                report.variants_missing.setdefault(variant.name, {})[split] = absent
            else:
                readable.add(split)
    report.splits_unreadable = [s for s in named if s not in readable]


def _declared_splits(manifest: Manifest) -> list[str]:
    seen: list[str] = []
    for spec in manifest.files:
        for split in spec.splits:
            if split not in seen:
                seen.append(split)
    return seen


def _generate_synthetic(manifest: Manifest, force: bool) -> FetchReport:
    """Write the seeded synthetic NLI and ranking sets as canonical JSON lines."""
    from pairrepro.data import synthetic

    root = paths.raw_dir(manifest.name)
    report = FetchReport(manifest.name, root)
    previous = read_record(manifest.name) or {}
    seeded = previous.get("seed") == SYNTHETIC_SEED and previous.get("sizes") == {
        "nli": SYNTHETIC_NLI, "ranking": SYNTHETIC_RANKING}
    for kind, sizes in (("nli", SYNTHETIC_NLI), ("ranking", SYNTHETIC_RANKING)):
        for split, n in sizes.items():
            rel = f"{kind}/{split}.jsonl"
            target = root / rel
            if target.is_file() and seeded and not force:
                report.files.append(FileResult(rel, "present", "generated",
                                               io.sha256_file(target), target.stat().st_size,
                                               False, [split]))
                continue
            if kind == "nli":
                table = synthetic.generate_nli(n, seed=SYNTHETIC_SEED, split=split)
            else:
                table = synthetic.generate_ranking(n, negatives=SYNTHETIC_NEGATIVES,
                                                   seed=SYNTHETIC_SEED, split=split)
            with io.atomic_open(target) as handle:
                table.to_json(handle, orient="records", lines=True, force_ascii=False)
            report.files.append(FileResult(rel, "generated", "generated",
                                           io.sha256_file(target), target.stat().st_size,
                                           False, [split]))
    report.splits_present = ["train", "dev", "test"]
    io.write_json(root / RECORD_NAME, {
        "dataset": manifest.name, "fetched_at": _now(), "pairrepro": __version__,
        "seed": SYNTHETIC_SEED, "sizes": {"nli": SYNTHETIC_NLI, "ranking": SYNTHETIC_RANKING},
        "files": [_record_entry(root, r) for r in report.files], "extracted": {},
        "splits_present": report.splits_present, "splits_missing": [],
    })
    return report


# --------------------------------------------------------------------------- main entry


def fetch_dataset(name: str, mirror: Path | None = None, from_path: Path | None = None,
                  force: bool = False, progress: bool = False,
                  timeout: float | None = None, verify: bool = False) -> FetchReport:
    """Fetch every available file of dataset ``name`` into ``paths.raw_dir(name)``
    (the hub source is ``data/sources.py``'s other choice).

    ``mirror`` defaults to ``$PAIRREPRO_MIRROR``. Files already fetched (as the record
    says, same sha256) are kept unless ``force``. A split is present when at least one
    file that serves it was obtained (archives count once extracted); files serving
    only splits that are already present are not downloaded. Returns a
    :class:`FetchReport`; raises :class:`ChecksumError` for a corrupt file that no
    other source replaced, :class:`DownloadError` / :class:`DataError` when no split
    at all could be obtained. Files already here are trusted while their size and mtime are
    those recorded; ``verify`` hashes every one again.
    """
    manifest = load_manifest(name)
    manifest.require_published()  # before any option check: nothing could ever help
    if manifest.name == "synthetic":
        return _generate_synthetic(manifest, force)
    from_path = from_path.expanduser().resolve() if from_path is not None else None
    if from_path is not None and not from_path.exists():
        raise ConfigError(f"--from {from_path}: no such file or folder",
                          hint="give the file or folder you downloaded (for licence-gated "
                               f"data see: pairrepro datasets; {manifest.homepage or name})")
    mirror = mirror if mirror is not None else paths.mirror_dir()
    mirror = mirror.expanduser().resolve() if mirror is not None else None
    if mirror is not None and not mirror.is_dir():
        raise ConfigError(f"mirror folder {mirror} does not exist",
                          hint="give --mirror DIR (or $PAIRREPRO_MIRROR) a folder laid out "
                          "<DIR>/<dataset>/<file>")
    if not manifest.files:
        raise DataError(
            f"dataset {name!r} has no files that can be fetched",
            hint=manifest.notes or manifest.licence or "see the manifest " + manifest.source)
    root = paths.raw_dir(name)
    record = (None if force else read_record(name)) or {}
    known = {entry["path"]: entry for entry in record.get("files", [])}
    extracted: dict[str, list[str]] = dict(record.get("extracted", {}))
    if from_path is not None and from_path.is_file() and not any(
            PurePosixPath(s.path).name == from_path.name for s in manifest.files):
        raise ConfigError(
            f"--from {from_path}: the file name matches no file of dataset {name!r}",
            hint="expected one of: " + ", ".join(PurePosixPath(s.path).name
                                                   for s in manifest.files))

    report = FetchReport(name, root)
    results: dict[str, FileResult] = {}
    checksum_errors: dict[str, ChecksumError] = {}
    download_errors: list[DownloadError] = []
    fresh_archives: list[FileSpec] = []

    def obtained(spec: FileSpec, result: FileResult) -> None:
        results[spec.path] = result
        if spec.archive and (result.status == "fetched" or spec.path not in extracted):
            fresh_archives.append(spec)

    # 1. what is already here, then local sources (--from, mirror)
    for spec in manifest.files:
        target = root / spec.path
        entry = known.get(spec.path)
        if target.is_file() and entry and (not spec.sha256 or entry["sha256"] == spec.sha256):
            try:
                present = _recheck(target, entry, spec.sha256, verify, report.warnings)
            except ChecksumError as exc:
                checksum_errors[spec.path] = exc
                target.unlink()  # a corrupt copy is never kept where it could be read
                present = None
            if present is not None:
                obtained(spec, FileResult(spec.path, "present", entry["source"],
                                          present[0], present[1], present[2],
                                          list(spec.splits)))
                continue
        for origin, source in _local_candidates(name, spec, from_path, mirror):
            try:
                digest, verified = _install_copy(source, target, spec, str(source))
            except ChecksumError as exc:
                checksum_errors[spec.path] = exc
                continue
            obtained(spec, FileResult(spec.path, "fetched", origin, digest,
                                      target.stat().st_size, verified, list(spec.splits)))
            checksum_errors.pop(spec.path, None)
            break

    def covered() -> set[str]:
        return {s for r in results.values() if r.status in ("fetched", "present")
                for s in r.splits}

    # 2. HTTP for what is still missing and still needed
    for spec in manifest.files:
        if spec.path in results:
            continue
        target = root / spec.path
        urls = [u for u in (spec.url, *spec.alt_urls) if u]
        if spec.splits and set(spec.splits) <= covered():
            results[spec.path] = FileResult(spec.path, "not needed", splits=list(spec.splits))
            continue
        result = FileResult(spec.path, "missing", splits=list(spec.splits))
        if not urls:
            result.error = "no download URL (give the file with --from PATH)"
        for url in urls:
            try:
                digest, verified = _install_download(url, target, spec, progress, timeout)
            except ChecksumError as exc:
                checksum_errors[spec.path] = exc
                result.error = exc.message
                continue
            except DownloadError as exc:
                if spec.splits:
                    download_errors.append(exc)
                result.error = exc.message
                continue
            result = FileResult(spec.path, "fetched", url, digest, target.stat().st_size,
                                verified, list(spec.splits))
            checksum_errors.pop(spec.path, None)
            break
        if result.status == "fetched":
            obtained(spec, result)
        else:
            results[spec.path] = result

    # 3. archives: extract what was fetched (or never extracted)
    members: dict[str, FileResult] = {}
    for spec in manifest.files:  # members extracted earlier: still what was recorded?
        if spec.path not in results or spec in fresh_archives:
            continue
        for member in spec.members:
            entry, target = known.get(member.path), root / member.path
            if entry is None or not target.is_file():
                continue
            try:
                present = _recheck(target, entry, member.sha256, verify, report.warnings)
            except ChecksumError as exc:
                report.warnings.append(f"{exc.message}; extracting it again")
                present = None
            if present is None:
                fresh_archives.append(spec)
                break
            members[member.path] = FileResult(member.path, "present", entry["source"],
                                               *present, [])
    for spec in fresh_archives:
        try:
            if spec.members:
                current = {**known, **{r.path: {"verified": r.verified}
                                       for r in results.values()
                                       if r.status in ("fetched", "present")}}
                archive = results.get(spec.path)
                found, notes = extract_members(root / spec.path, root, spec, current,
                                               archive_verified=bool(archive
                                                                     and archive.verified))
                members.update((r.path, r) for r in found)
                report.warnings.extend(notes)
                extracted[spec.path] = [r.path for r in found]
            else:  # the manifest names no member: every file, each checked, none pinned
                extracted[spec.path] = safe_extract(root / spec.path, root, spec.archive)
        except (DataError, ChecksumError):
            # a hostile or broken archive is never kept where a later run could trust it
            (root / spec.path).unlink(missing_ok=True)
            raise

    report.files = [results[s.path] for s in manifest.files] + list(members.values())
    _variant_completeness(manifest, root, report)
    present = covered()
    declared = _declared_splits(manifest)
    report.splits_present = [s for s in declared if s in present]
    report.splits_missing = [s for s in declared if s not in present]
    for exc in checksum_errors.values():
        report.warnings.append(exc.message)

    have_any = any(r.status in ("fetched", "present") for r in report.files)
    if have_any:
        merge_record(manifest, report, extracted=extracted)
    if checksum_errors:
        raise next(iter(checksum_errors.values()))
    if declared and not report.splits_present:
        if download_errors:
            first = download_errors[0]
            urls = sorted({e.message for e in download_errors})
            raise DownloadError(
                f"nothing of dataset {name!r} could be fetched: " + "; ".join(urls),
                hint=first.hint)
        raise DataError(
            f"nothing of dataset {name!r} could be fetched: no local copy and no download URL",
            hint=(manifest.licence if not manifest.public else
                  "give the files with --from PATH or a mirror with --mirror DIR"))
    return report


def fetch_status(name: str) -> dict[str, Any]:
    """What is on disk for a dataset: ``{"fetched": bool, "splits_present": [...], ...}``."""
    record = read_record(name)
    if record is None:
        return {"fetched": False, "splits_present": [], "splits_missing": []}
    return {"fetched": True, "splits_present": record.get("splits_present", []),
            "splits_missing": record.get("splits_missing", []),
            "fetched_at": record.get("fetched_at", "")}


def iter_sources(name: str) -> Iterable[dict[str, Any]]:
    """The ``files`` entries of a dataset's fetch record (for run manifests)."""
    return (read_record(name) or {}).get("files", [])
