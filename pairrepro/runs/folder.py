"""The run folder ``runs/<recipe>/seed-<n>/`` (layout: docs/internals.md, "Run folder"): its
readers and writers, ``--force``'s kept-aside copy and its lock. A file that exists but cannot
be read raises :class:`DamagedRunError` (exit 3)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pairrepro import fileio
from pairrepro.errors import ConfigError, DataError, StorageError

if TYPE_CHECKING:
    import pandas as pd

CONFIG = "config.toml"
MANIFEST = "manifest.json"
METRICS = "metrics.jsonl"
RESULT = "result.json"
SUMMARY = "summary.json"  # in the recipe folder
STATUSES = ("running", "interrupted", "failed", "finished")
# names that become folders: recipes, datasets (nothing that could climb out of a root)
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]*")


class DamagedRunError(DataError):
    """A run-folder file exists but cannot be read (exit 3)."""


class RunLockedError(ConfigError):
    """Another live process holds the run folder (exit 2)."""


def check_name(name: str, what: str, source: str = "") -> str:
    """``name`` if it is a safe folder name (``[a-z0-9][a-z0-9_-]*``), else a ConfigError."""
    if not NAME_PATTERN.fullmatch(name):
        where = f"{source}: " if source else ""
        raise ConfigError(f"{where}{what} name {name!r} is not allowed",
                          hint="names are lower-case letters, digits, '_' and '-', starting "
                               "with a letter or digit (rename the file)")
    return name


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """An ``OSError`` while writing ``path`` becomes a :class:`StorageError` naming it."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"{path}: cannot write ({exc.strerror or exc})",
                           hint="free disk space, or make the runs folder writable "
                                "(PAIRREPRO_RUNS chooses another one)") from None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``fileio.write_json`` (atomic) with a disk fault a :class:`StorageError`."""
    with writing(path):
        fileio.write_json(path, data)


def inside(root: Path, path: Path) -> Path:
    """``path`` if it resolves under ``root``; a ConfigError otherwise."""
    if not path.resolve().is_relative_to(root.resolve()):
        # the names are checked (check_name): a folder on the way is a link out of root
        link = next((p for p in (path, *path.parents) if p.is_symlink()
                     and p.is_relative_to(root)), None)
        if link is not None:
            raise ConfigError(f"{path} is outside {root}: {link} is a symbolic link to "
                              f"{link.readlink()}",
                              hint=f"a run folder is a real folder under {root}: remove the "
                                   f"link (rm {link}; the files it points to stay), or set "
                                   "PAIRREPRO_RUNS to the folder the runs are in")
        raise ConfigError(f"{path} is outside {root}", hint="check the recipe or dataset name")
    return path


def _member(name: str) -> property:
    return property(lambda folder: folder.path / name)


@dataclass(frozen=True)
class RunFolder:
    """One seed folder; ``path`` need not exist yet."""

    path: Path

    @classmethod
    def of(cls, runs_dir: Path, recipe: str, seed: int, source: str = "") -> RunFolder:
        """``runs_dir/<recipe>/seed-<seed>``, the name checked (:func:`check_name`, naming
        ``source``) to stay under ``runs_dir``."""
        check_name(recipe, "recipe", source)
        return cls(inside(runs_dir, runs_dir / recipe / f"seed-{seed}"))

    @property
    def recipe_dir(self) -> Path:
        return self.path.parent

    config_path = _member(CONFIG)
    manifest_path = _member(MANIFEST)
    metrics_path = _member(METRICS)
    result_path = _member(RESULT)
    checkpoint_dir = _member("checkpoints")
    predictions_dir = _member("predictions")
    evals_dir = _member("evals")
    tensorboard_dir = _member("tensorboard")  # there when a train call had --tensorboard
    # where last.pt stands, readable without torch
    progress_path = _member("checkpoints/last.json")

    def open_tensorboard(self, first_step: int) -> Any:
        """A SummaryWriter into ``tensorboard/`` whose events from ``first_step`` on replace
        those logged before; ``ImportError`` without tensorboard."""
        from torch.utils.tensorboard import SummaryWriter

        with writing(folder := self.tensorboard_dir):
            return SummaryWriter(str(folder), purge_step=first_step, flush_secs=10)

    def checkpoint(self, name: str) -> Path:  # last or best
        return self.checkpoint_dir / f"{name}.pt"

    def write_progress(self, progress: dict[str, Any]) -> None:
        write_json(self.progress_path, progress)

    def read_progress(self) -> dict[str, Any]:
        """``checkpoints/last.json``, or {} when there is none."""
        return self._read_json(self.progress_path) if self.progress_path.is_file() else {}

    def predictions(self, key: str) -> Path:
        return self.predictions_dir / f"{key}.parquet"

    def log_path(self, launcher: str) -> Path:
        """``runs/<recipe>/logs/seed-<n>.<launcher>.log``: beside the seed folder, so an early
        log never makes a fresh folder look like a run."""
        return self.recipe_dir / "logs" / f"{self.path.name}.{launcher}.log"

    @property
    def seed(self) -> int:
        """The seed from the folder name (-1 if the name is not ``seed-<n>``)."""
        head, _, number = self.path.name.partition("-")
        return int(number) if head == "seed" and number.isdigit() else -1

    def exists(self) -> bool:
        """Whether the folder holds anything."""
        return self.path.is_dir() and any(self.path.iterdir())

    def _read_text(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise DamagedRunError(f"{path}: not UTF-8 text ({exc.reason})",
                                  hint=REPAIR) from None
        except OSError as exc:
            raise DamagedRunError(f"{path}: cannot be read ({exc.strerror})",
                                  hint=REPAIR) from None

    def _read_json(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(self._read_text(path))
        except json.JSONDecodeError as exc:
            raise DamagedRunError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})",
                                  hint=REPAIR) from None
        if not isinstance(data, dict):
            raise DamagedRunError(f"{path}: expected a JSON object", hint=REPAIR)
        return data

    def read_result(self) -> dict[str, Any]:
        """``result.json`` ({} when absent); damaged: :class:`DamagedRunError`."""
        if not self.result_path.is_file():
            return {}
        result = self._read_json(self.result_path)
        status = result.get("status")
        if status not in STATUSES:
            raise DamagedRunError(f"{self.result_path}: status {status!r} is not one of "
                                  f"{', '.join(STATUSES)}", hint=REPAIR)
        metrics = result.get("metrics", {})
        if not isinstance(metrics, dict):
            raise DamagedRunError(f"{self.result_path}: metrics is not a table", hint=REPAIR)
        # a value that is no number would drop the run from every table without a word
        if bad := _not_numbers(metrics):
            raise DamagedRunError(f"{self.result_path}: metrics {', '.join(bad)}: not a number "
                                  "(each split is a table of metric = number)", hint=REPAIR)
        return result

    def read_manifest(self) -> dict[str, Any]:
        """``manifest.json`` ({} when absent); damaged: :class:`DamagedRunError`."""
        return self._read_json(self.manifest_path) if self.manifest_path.is_file() else {}

    def read_config(self) -> dict[str, Any]:
        """``config.toml`` as a dict ({} when absent); damaged: :class:`DamagedRunError`."""
        if not self.config_path.is_file():
            return {}
        try:
            return tomllib.loads(self._read_text(self.config_path))
        except tomllib.TOMLDecodeError as exc:
            raise DamagedRunError(f"{self.config_path}: not valid TOML ({exc})",
                                  hint=REPAIR) from None

    def read_metrics(self) -> list[dict[str, Any]]:
        """``metrics.jsonl`` lines ([] when absent)."""
        if not self.metrics_path.is_file():
            return []
        lines: list[dict[str, Any]] = []
        for n, line in enumerate(self._read_text(self.metrics_path).splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DamagedRunError(f"{self.metrics_path}:{n}: not valid JSON ({exc.msg})",
                                      hint=REPAIR) from None
            if not isinstance(record, dict):
                raise DamagedRunError(f"{self.metrics_path}:{n}: expected a JSON object",
                                      hint=REPAIR)
            lines.append(record)
        return lines

    def read_evals(self) -> dict[str, dict[str, Any]]:
        """Saved re-scorings: ``"<split>@<variant>"`` -> the file's content."""
        return {p.stem: self._read_json(p) for p in sorted(self.evals_dir.glob("*.json"))}

    # every writer is atomic (fileio.atomic_path), OSError becoming StorageError (:func:`writing`)
    def write_config(self, toml_text: str) -> None:
        with writing(self.config_path):
            fileio.write_text(self.config_path, toml_text)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, manifest)

    def write_metrics(self, history: list[dict[str, Any]]) -> None:
        """Rewrite ``metrics.jsonl`` from the whole history (one line per epoch)."""
        with writing(self.metrics_path):
            fileio.write_text(self.metrics_path,
                              "".join(json.dumps(h, sort_keys=True) + "\n" for h in history))

    def write_result(self, recipe: str, seed: int, status: str, select_metric: str,
                     chosen_epoch: int | None = None,
                     metrics: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """Write ``result.json``; a ``running`` one also records this process's pid and host."""
        result = {"recipe": recipe, "seed": seed, "status": status,
                  "chosen_epoch": chosen_epoch, "metrics": metrics or {},
                  "select_metric": select_metric, "manifest": MANIFEST, **extra}
        if status == "running":
            result.update(pid=os.getpid(), host=socket.gethostname())
        write_json(self.result_path, result)
        return result

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write the recipe's ``summary.json`` (the seeds of the last ``train`` call)."""
        write_json(self.recipe_dir / SUMMARY, summary)

    def write_eval(self, split: str, variant: str, record: dict[str, Any]) -> Path:
        """Keep a re-scoring with the run (``evals/<split>@<variant>.json``)."""
        path = self.evals_dir / f"{split}@{variant or 'default'}.json"
        write_json(path, record)
        return path

    def write_predictions(self, key: str, frame: pd.DataFrame) -> None:
        """Write ``predictions/<key>.parquet`` (read back by :func:`read_predictions`)."""
        path = self.predictions(key)
        with writing(path), fileio.atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)

    @property
    def aside_path(self) -> Path:
        """Where ``--force`` keeps the run it replaces (a dot name no ``seed-*`` glob sees)."""
        return self.recipe_dir / f".{self.path.name}.replaced"

    def move_aside(self) -> None:
        """Move this folder to :attr:`aside_path` (replacing an older one left there)."""
        with writing(self.aside_path):
            if self.aside_path.exists():
                shutil.rmtree(self.aside_path)
            os.replace(self.path, self.aside_path)

    def restore_aside(self) -> None:
        """Put the run kept aside back (the new run failed before its first checkpoint)."""
        if self.aside_path.is_dir():
            with writing(self.path):
                if self.path.exists():
                    shutil.rmtree(self.path)
                os.replace(self.aside_path, self.path)

    def drop_aside(self) -> None:
        """Delete the run kept aside (the new run has a checkpoint of its own)."""
        if self.aside_path.exists():
            with writing(self.aside_path):
                shutil.rmtree(self.aside_path)

    @property
    def lock_path(self) -> Path:
        # beside the folder, not in it: ``--force`` may remove the folder while holding it
        return self.recipe_dir / f".{self.path.name}.lock"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold this run folder exclusively (``flock``, released however the process dies);
        a second writer gets a :class:`RunLockedError` naming the holder. The lock file is
        removed on release."""
        fd = self._acquire_lock()
        try:
            with writing(self.lock_path):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            yield
        finally:
            # unlinked while still held: a process that opened the old file meanwhile sees
            # that it is no longer the path's (the inode check) and tries again
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)
            os.close(fd)  # closing the descriptor releases the lock
            with contextlib.suppress(OSError):  # a run that failed before writing anything
                self.recipe_dir.rmdir()  # only when empty

    def _acquire_lock(self) -> int:
        """A descriptor of the lock file, locked, that is still the file at its path."""
        while True:
            with writing(self.lock_path):
                self.recipe_dir.mkdir(parents=True, exist_ok=True)
                try:
                    fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
                except FileNotFoundError:  # the folder was removed as empty meanwhile
                    continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                try:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                        raise
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "?"
                finally:
                    os.close(fd)
                raise RunLockedError(
                    f"{self.path} is in use by another process ({holder})",
                    hint="wait for it to finish, or stop it first (Ctrl-C saves a checkpoint; "
                         "then --resume)") from None
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino:
                    return fd
            os.close(fd)  # its holder removed it after we opened it: take the new one


def _not_numbers(metrics: dict[str, Any]) -> list[str]:
    """The splits of ``metrics`` that are no table and the values that are no number."""
    bad = []
    for split, values in metrics.items():
        if not isinstance(values, dict):
            bad.append(str(split))
            continue
        bad += [f"{split}.{name}" for name, value in values.items()
                if isinstance(value, bool) or not isinstance(value, int | float)]
    return bad


REPAIR = ("the run folder is damaged: retrain with --force (a finished run is kept aside "
           "until the new one checkpoints), or restore the file")


