"""Archives, every entry checked before anything is written (absolute paths, ``..``, links,
devices and fetch's own names are a :class:`DataError` naming them)."""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from pairrepro import fileio
from pairrepro.data.download import CHUNK
from pairrepro.data.fetch_record import RECORD_NAME, FileResult
from pairrepro.data.manifests import FileSpec
from pairrepro.errors import ChecksumError, ConfigError, DataError

STAGING = ".staging-"


def _refuse(archive: Path, name: str, reason: str) -> DataError:
    return DataError(f"{archive}: refusing to extract member {name!r}: {reason}",
                     hint="the archive is malformed or hostile; get it from another source")


def _check_member(archive: Path, name: str, dest: Path, refusal: str) -> Path:
    """Where member ``name`` goes under ``dest``; ``refusal``: why its kind is refused."""
    if refusal:
        raise _refuse(archive, name, refusal)
    if not name or "\x00" in name:
        raise _refuse(archive, name, "empty or invalid name")
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or (pure.parts and pure.parts[0].endswith(":")):
        raise _refuse(archive, name, "absolute path")
    if ".." in pure.parts:
        raise _refuse(archive, name, "'..' would leave the target folder")
    if pure.parts and (pure.parts[0] == RECORD_NAME or pure.parts[0].startswith(STAGING)):
        raise _refuse(archive, name, "it would overwrite fetch's own record or staging folder")
    out = (dest / pure).resolve()
    root = dest.resolve()
    if out != root and root not in out.parents:
        raise _refuse(archive, name, "it would land outside the target folder")
    return out


def _refusal(member: zipfile.ZipInfo | tarfile.TarInfo) -> str:
    """Why a member is refused for its kind ("": a plain file or folder)."""
    if isinstance(member, zipfile.ZipInfo):
        return "symbolic link" if stat.S_ISLNK(member.external_attr >> 16) else ""
    if member.issym() or member.islnk():
        return "symbolic link" if member.issym() else "hard link"
    return "" if member.isfile() or member.isdir() else "not a regular file or folder"


def _archive_entries(archive: Path, dest: Path, kind: str) -> Iterator[tuple[str, Path, bool, Any]]:
    """``(name, target path, is a folder, opener)`` per member, all checked before the first."""
    if kind == "zip":
        with zipfile.ZipFile(archive) as zf:
            yield from [(i.filename, _check_member(archive, i.filename, dest, _refusal(i)),
                         i.is_dir(), lambda i=i: zf.open(i)) for i in zf.infolist()]
    elif kind in ("tar", "tar.gz", "tgz"):
        with tarfile.open(archive, "r:*") as tf:
            yield from [(m.name, _check_member(archive, m.name, dest, _refusal(m)),
                         m.isdir(), lambda m=m: tf.extractfile(m)) for m in tf.getmembers()]
    else:
        raise ConfigError(f"unknown archive kind {kind!r} for {archive}",
                          hint="use 'zip', 'tar' or 'tar.gz' in the manifest")


def safe_extract(archive: Path, dest: Path, kind: str) -> list[str]:
    """Extract every member of ``archive`` under ``dest``, each file atomically; their paths."""
    written: list[str] = []
    root = dest.resolve()
    try:
        for _name, out, is_dir, opener in _archive_entries(archive, dest, kind):
            if is_dir:
                out.mkdir(parents=True, exist_ok=True)
                continue
            with opener() as src, fileio.atomic_open(out, "wb") as handle:
                shutil.copyfileobj(src, handle, CHUNK)
            written.append(out.relative_to(root).as_posix())
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise DataError(f"{archive}: not a readable {kind} archive: {exc}",
                        hint="delete it and fetch again (--force)") from exc
    return written


def extract_members(archive: Path, root: Path, spec: FileSpec,
                    keep: dict[str, dict[str, Any]], archive_verified: bool = False
                    ) -> tuple[list[FileResult], list[str]]:
    """Extract the members ``spec`` names: staged, checked against their pins (a mismatch
    moves nothing), then moved into place; an unpinned one never replaces a verified file."""
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
                tmp = staging / rel  # atomic_open makes its folder
                with opener() as src, fileio.atomic_open(tmp, "wb") as handle:
                    shutil.copyfileobj(src, handle, CHUNK)
                digest, size = fileio.sha256_file(tmp), tmp.stat().st_size
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
            if not verified and keep.get(rel, {}).get("verified") and target.is_file():
                warnings.append(f"{rel}: kept the verified file; the unpinned copy in "
                                f"{spec.path} (sha256 {digest}) was not used")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            results.append(FileResult(rel, "fetched", f"archive:{spec.path}", digest, size,
                                      verified, []))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if absent := [m for m in wanted if m not in {r[0] for r in staged}]:
        warnings.append(f"{spec.path}: expected member(s) not in the archive: "
                        + ", ".join(absent))
    return results, warnings
