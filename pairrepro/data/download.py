"""Resumable, time-limited HTTP(S) downloads, checked and synced before they get their name."""

from __future__ import annotations

import http.client
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pairrepro import __version__, fileio
from pairrepro.data.manifests import FileSpec
from pairrepro.errors import ChecksumError, DownloadError

HTTP_TIMEOUT = 30.0
HTTP_ATTEMPTS = 3
USER_AGENT = f"pairrepro/{__version__} (+dataset fetch)"
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
                     "(--force) or from another source (--mirror / --from)")
        return actual, True
    if spec.size and (size := path.stat().st_size) != spec.size:
        raise ChecksumError(
            f"{origin}: size mismatch for {spec.path!r}: expected {spec.size} bytes, "
            f"got {size}; the file was deleted",
            hint="fetch it again (--force) or from another source (--mirror / --from)")
    return actual, False


def _progress_bar(label: str, total: int | None, enabled: bool) -> Any:
    """A download bar (a no-op one when not ``enabled``)."""
    from rich import progress as bars

    from pairrepro.console import live_progress

    progress = live_progress(bars.TextColumn("{task.description}"), bars.BarColumn(),
                             bars.DownloadColumn(), bars.TransferSpeedColumn(),
                             bars.TimeRemainingColumn(), enabled=enabled)
    progress.add_task(label, total=total)
    return progress


def _open_url(url: str, offset: int, timeout: float) -> Any:
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def download(url: str, target: Path, *, size: int = 0, progress: bool = False) -> Path:
    """Download ``url`` into its partial file, resuming one there; a :class:`DownloadError`."""
    if not url.startswith(("http://", "https://")):
        raise DownloadError(f"unsupported URL {url!r} (only http and https)")
    partial = target.with_name(f".{target.name}.partial")  # hidden: never read
    partial.parent.mkdir(parents=True, exist_ok=True)
    hint = "no network? use --mirror DIR (a folder laid out <DIR>/<dataset>/<file>) or " \
           "--from PATH (a file or folder you downloaded yourself)"
    last_error = ""
    for _attempt in range(max(1, HTTP_ATTEMPTS)):
        offset = partial.stat().st_size if partial.exists() else 0
        if size and offset == size:
            return partial  # a previous run got every byte; only the check remains
        try:
            response = _open_url(url, offset, HTTP_TIMEOUT)
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
                    bar.advance(bar.task_ids[0], offset)
                    while chunk := response.read(CHUNK):
                        handle.write(chunk)
                        bar.advance(bar.task_ids[0], len(chunk))
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


def install_download(url: str, target: Path, spec: FileSpec, progress: bool) -> tuple[str, bool]:
    """Download ``url`` to ``target``: ``(sha256, verified)``; a bad file is deleted."""
    partial = download(url, target, size=spec.size, progress=progress)
    try:
        checked = verify_file(partial, spec, url)
    except ChecksumError:
        partial.unlink(missing_ok=True)
        raise
    with open(partial, "rb") as handle:  # durable before the rename makes it visible
        os.fsync(handle.fileno())
    os.replace(partial, target)
    return checked
