"""Whether bytes are the bytes a manifest pins: the one place fetch compares hashes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import IO, Any

from pairrepro import fileio
from pairrepro.data.manifests import FileSpec
from pairrepro.errors import ChecksumError

CHUNK = 1 << 16


def verify_file(path: Path, spec: FileSpec, origin: str) -> tuple[str, bool]:
    """``(sha256, verified)`` of ``path`` against ``spec``'s sha256, else its size."""
    actual = fileio.sha256_file(path)
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


def copy_hashed(source: IO[bytes], target: Path) -> tuple[str, int]:
    """Copy a stream into a new file (synced); the sha256 and size of the bytes copied."""
    digest, size = hashlib.sha256(), 0
    with open(target, "wb") as handle:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    return digest.hexdigest(), size
