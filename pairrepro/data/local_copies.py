"""Local copies of a dataset's files: ``--from PATH`` and the mirror (``DIR/<dataset>/<path>``)."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from pairrepro import fileio, paths
from pairrepro.data.checksums import verify_file
from pairrepro.data.manifests import FileSpec, Manifest
from pairrepro.errors import ConfigError


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
    if mirror is not None:
        cand = mirror / name / spec.path
        if cand.is_file():
            found.append((f"mirror:{cand}", cand))
    return found


def install_copy(source: Path, target: Path, spec: FileSpec, origin: str) -> tuple[str, bool]:
    """Copy a local file into place, verified first: ``(sha256, verified)``."""
    with fileio.atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
        return verify_file(tmp, spec, origin)
