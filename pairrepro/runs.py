"""The run folder ``runs/<recipe>/seed-<n>/``: its layout, its one reader, its writers and its
lock. No other module reads or writes these files; torch is imported only for checkpoints and
no model ever, so the report reads runs through here.

Layout: ``config.toml`` (the resolved recipe), ``manifest.json`` (provenance), ``metrics.jsonl``
(one line per epoch), ``checkpoints/`` (``last.pt``, ``best.pt``), ``predictions/<split>.parquet``,
``evals/<split>@<variant>.json`` (``eval --save``), ``tensorboard/`` (``train --tensorboard``'s
event files), ``result.json`` (status, metrics); in
``runs/<recipe>/``: ``summary.json`` (over the seeds of the last ``train --seeds``) and
``logs/seed-<n>.<launcher>.log`` (runs a launcher started).

A file that exists but cannot be read is *damaged*: :func:`read_run` never raises for it (status
``damaged``, ``problem`` names the file, so a report renders the rest), while what acts on one
run (``eval``, ``--resume``) calls :meth:`RunFolder.read_result` & co., which raise
:class:`DamagedRunError` (exit 3).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import socket
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pairrepro import paths
from pairrepro.errors import ConfigError, DataError, PairreproError, StorageError, TrainingError

if TYPE_CHECKING:
    import pandas as pd

CONFIG = "config.toml"
MANIFEST = "manifest.json"
METRICS = "metrics.jsonl"
RESULT = "result.json"
CHECKPOINTS = "checkpoints"
PROGRESS = "last.json"  # beside last.pt: its epoch and step
PREDICTIONS = "predictions"
EVALS = "evals"
TENSORBOARD = "tensorboard"
LOGS = "logs"  # in the recipe folder: runs/<recipe>/logs/
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
    """Turn an ``OSError`` while writing ``path`` (disk full, read-only folder, no permission)
    into a :class:`StorageError` (exit 8) naming the file and the cause."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"{path}: cannot write ({exc.strerror or exc})",
                           hint="free disk space, or make the runs folder writable "
                                "(PAIRREPRO_RUNS chooses another one)") from None


def inside(root: Path, path: Path) -> Path:
    """``path`` if it resolves under ``root``; a ConfigError otherwise (nothing we build from
    a name may land, or delete, outside its root)."""
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


# checkpoints hold tensors, numbers, strings, lists and dicts only, so that they load with
# torch.load(weights_only=True): no code runs on load
CHECKPOINT_FORMAT = 1


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically: a crash mid-write leaves the previous file intact. Written
    from Python, not by torch's own writer, so a full disk is an OSError with its errno
    (a :class:`StorageError`), not a bare RuntimeError."""
    import torch

    buffer = BytesIO()
    torch.save({"format_version": CHECKPOINT_FORMAT, **state}, buffer)
    with writing(path), paths.atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint onto the CPU with ``weights_only=True``."""
    import torch

    if not path.is_file():
        raise TrainingError(f"checkpoint {path} not found",
                            hint="train the run first, or pick --checkpoint last|best")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which one
        raise TrainingError(f"checkpoint {path} cannot be read: {exc}",
                            hint="delete it and re-train with --force") from exc
    if state.get("format_version") != CHECKPOINT_FORMAT:
        raise TrainingError(f"checkpoint {path} has format {state.get('format_version')!r}, "
                            f"expected {CHECKPOINT_FORMAT}", hint="re-train with --force")
    return state


@dataclass(frozen=True)
class RunFolder:
    """One seed folder; ``path`` need not exist yet."""

    path: Path

    @classmethod
    def of(cls, runs_dir: Path, recipe: str, seed: int) -> RunFolder:
        """``runs_dir/<recipe>/seed-<seed>``, the name checked to stay under ``runs_dir``."""
        check_name(recipe, "recipe")
        return cls(inside(runs_dir, runs_dir / recipe / f"seed-{seed}"))

    # ------------------------------------------------------------------ layout
    @property
    def recipe_dir(self) -> Path:
        return self.path.parent

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS

    @property
    def result_path(self) -> Path:
        return self.path / RESULT

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def tensorboard_dir(self) -> Path:
        return self.path / TENSORBOARD

    def open_tensorboard(self, first_step: int) -> Any:
        """A ``torch.utils.tensorboard.SummaryWriter`` into :attr:`tensorboard_dir` whose
        events from ``first_step`` on replace any logged before (a resumed run logs again
        what followed its checkpoint); ``ImportError`` without the tensorboard package."""
        from torch.utils.tensorboard import SummaryWriter

        with writing(self.tensorboard_dir):
            return SummaryWriter(str(self.tensorboard_dir), purge_step=first_step,
                                 flush_secs=10)

    def checkpoint(self, name: str) -> Path:
        """``checkpoints/<name>.pt`` (``last`` or ``best``)."""
        return self.checkpoint_dir / f"{name}.pt"

    def save_checkpoint(self, name: str, state: dict[str, Any]) -> None:
        save_checkpoint(self.checkpoint(name), state)

    def load_checkpoint(self, name: str) -> dict[str, Any]:
        return load_checkpoint(self.checkpoint(name))

    @property
    def progress_path(self) -> Path:
        """``checkpoints/last.json``: where ``last.pt`` stands, readable without torch."""
        return self.checkpoint_dir / PROGRESS

    def write_progress(self, progress: dict[str, Any]) -> None:
        with writing(self.progress_path):
            paths.write_json(self.progress_path, progress)

    def read_progress(self) -> dict[str, Any]:
        """``checkpoints/last.json``, or {} when there is none (no checkpoint yet, or a run
        older than it); a damaged one is a DamagedRunError naming it."""
        return self._read_json(self.progress_path) if self.progress_path.is_file() else {}

    def predictions(self, key: str) -> Path:
        """``predictions/<key>.parquet``."""
        return self.path / PREDICTIONS / f"{key}.parquet"

    def log_path(self, launcher: str) -> Path:
        """``runs/<recipe>/logs/seed-<n>.<launcher>.log``: the output of a run started by a
        launcher (``local`` pool, ``slurm-<job id>``). Beside the seed folder, not in it: a
        log written before training starts must not make a fresh folder look like a run."""
        return self.recipe_dir / LOGS / f"{self.path.name}.{launcher}.log"

    def eval_path(self, split: str, variant: str) -> Path:
        """``evals/<split>@<variant>.json``."""
        return self.path / EVALS / f"{split}@{variant or 'default'}.json"

    @property
    def seed(self) -> int:
        """The seed from the folder name (-1 if the name is not ``seed-<n>``)."""
        head, _, number = self.path.name.partition("-")
        return int(number) if head == "seed" and number.isdigit() else -1

    def exists(self) -> bool:
        """Whether the folder holds anything."""
        return self.path.is_dir() and any(self.path.iterdir())

    def is_run(self) -> bool:
        """Whether this looks like a run folder (it has a config)."""
        return self.config_path.is_file()

    # ------------------------------------------------------------------ reading
    def _read_text(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise DamagedRunError(f"{path}: not UTF-8 text ({exc.reason})",
                                  hint=_REPAIR) from None
        except OSError as exc:
            raise DamagedRunError(f"{path}: cannot be read ({exc.strerror})",
                                  hint=_REPAIR) from None

    def _read_json(self, path: Path) -> dict[str, Any]:
        text = self._read_text(path)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DamagedRunError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})",
                                  hint=_REPAIR) from None
        if not isinstance(data, dict):
            raise DamagedRunError(f"{path}: expected a JSON object", hint=_REPAIR)
        return data

    def read_result(self) -> dict[str, Any]:
        """``result.json`` ({} when absent); damaged: :class:`DamagedRunError`."""
        if not self.result_path.is_file():
            return {}
        result = self._read_json(self.result_path)
        status = result.get("status")
        if status not in STATUSES:
            raise DamagedRunError(f"{self.result_path}: status {status!r} is not one of "
                                  f"{', '.join(STATUSES)}", hint=_REPAIR)
        metrics = result.get("metrics", {})
        if not isinstance(metrics, dict):
            raise DamagedRunError(f"{self.result_path}: metrics is not a table", hint=_REPAIR)
        # a value that is no number would drop the run from every table without a word
        bad = _not_numbers(metrics)
        if bad:
            raise DamagedRunError(f"{self.result_path}: metrics {', '.join(bad)}: not a number "
                                  "(each split is a table of metric = number)", hint=_REPAIR)
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
                                  hint=_REPAIR) from None

    def read_metrics(self) -> list[dict[str, Any]]:
        """``metrics.jsonl`` lines ([] when absent); damaged: :class:`DamagedRunError` naming
        the line."""
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
                                      hint=_REPAIR) from None
            if not isinstance(record, dict):
                raise DamagedRunError(f"{self.metrics_path}:{n}: expected a JSON object",
                                      hint=_REPAIR)
            lines.append(record)
        return lines

    def read_evals(self) -> dict[str, dict[str, Any]]:
        """Saved re-scorings: ``"<split>@<variant>"`` -> the file's content."""
        folder = self.path / EVALS
        if not folder.is_dir():
            return {}
        return {p.stem: self._read_json(p) for p in sorted(folder.glob("*.json"))}

    # ------------------------------------------------------------------ writing
    # every writer is atomic (paths.atomic_path), OSError becoming StorageError (:func:`writing`)
    def write_config(self, toml_text: str) -> None:
        with writing(self.config_path):
            paths.write_text(self.config_path, toml_text)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        with writing(self.manifest_path):
            paths.write_json(self.manifest_path, manifest)

    def write_metrics(self, history: list[dict[str, Any]]) -> None:
        """Rewrite ``metrics.jsonl`` from the whole history (one line per epoch)."""
        with writing(self.metrics_path):
            paths.write_text(self.metrics_path,
                          "".join(json.dumps(h, sort_keys=True) + "\n" for h in history))

    def write_result(self, recipe: str, seed: int, status: str, select_metric: str,
                     chosen_epoch: int | None = None,
                     metrics: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """Write ``result.json``; a ``running`` result also records this process (pid and
        host), so a report can tell a live run from one whose process died."""
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        result = {"recipe": recipe, "seed": seed, "status": status,
                  "chosen_epoch": chosen_epoch, "metrics": metrics or {},
                  "select_metric": select_metric, "manifest": MANIFEST, **extra}
        if status == "running":
            result.update(pid=os.getpid(), host=socket.gethostname())
        with writing(self.result_path):
            paths.write_json(self.result_path, result)
        return result

    def write_eval(self, split: str, variant: str, record: dict[str, Any]) -> Path:
        """Keep a re-scoring with the run (``evals/<split>@<variant>.json``)."""
        path = self.eval_path(split, variant)
        with writing(path):
            paths.write_json(path, record)
        return path

    def write_predictions(self, key: str, frame: pd.DataFrame) -> None:
        """Write ``predictions/<key>.parquet`` (read back by :func:`read_predictions`)."""
        path = self.predictions(key)
        with writing(path), paths.atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)

    # ------------------------------------------------------------------ --force
    @property
    def aside_path(self) -> Path:
        """Where ``--force`` keeps the run it replaces until the new one has a checkpoint
        (a dot name: ``seed-*`` globs, and so reports, do not see it)."""
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

    # ------------------------------------------------------------------ the lock
    @property
    def lock_path(self) -> Path:
        # beside the folder, not in it: ``--force`` may remove the folder while holding it
        return self.recipe_dir / f".{self.path.name}.lock"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold this run folder exclusively for the life of a run (``flock``: the kernel
        releases it when the process dies, however it dies). A second writer gets a
        :class:`RunLockedError` naming the holder (pid@host). The holder removes the file
        before it lets go, so a finished or failed run leaves none behind (one killed with
        SIGKILL leaves a file nobody holds, which the next run takes over)."""
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
            try:
                current = os.stat(self.lock_path).st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(fd).st_ino:
                return fd
            os.close(fd)  # its holder removed it after we opened it: take the new one


_REPAIR = ("the run folder is damaged: retrain with --force (a finished run is kept aside "
           "until the new one checkpoints), or restore the file")


# ---------------------------------------------------------------------- many runs
@dataclass
class RunInfo:
    """What a report needs of one seed folder (never raises on a damaged folder)."""

    recipe: str
    seed: int
    path: str
    # finished | running | interrupted | failed | damaged (a file missing or unreadable, or
    # a finished run's record incomplete), unknown (no such folder), or stale: result.json
    # says running but its process (pid on host) no longer exists on this host
    status: str
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    chosen_epoch: int | None = None
    commit: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    problem: str = ""  # damaged: which file and why

    def value(self, metric: str) -> float | None:
        """``"<split>.<metric>"`` of a finished run, or None."""
        split, name = metric.split(".", 1)
        value = self.metrics.get(split, {}).get(name)
        return float(value) if isinstance(value, int | float) else None

    @property
    def folder(self) -> RunFolder:
        return RunFolder(Path(self.path))


def process_gone(result: dict[str, Any]) -> bool:
    """True when ``result.json`` names its training process (``pid``, ``host``), the host is
    this one, and no such process exists. A run on another host, or one without a pid, cannot
    be checked here and counts as alive."""
    pid, host = result.get("pid"), result.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, owned by another user
    return False


def commit_of(manifest: dict[str, Any]) -> str:
    """The git commit a run was made at ("" when unknown)."""
    git = manifest.get("git")
    return str(git.get("commit") or "") if isinstance(git, dict) else ""


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


def read_run(seed_dir: Path) -> RunInfo:
    """A seed folder's status, metrics, chosen epoch, commit, config and manifest. A damaged
    file, a folder without ``result.json`` and a finished run missing a part
    (:func:`_missing_parts`) make the status ``damaged`` (``problem`` says which file and
    why): a report never drops such a seed in silence."""
    folder = RunFolder(seed_dir)
    info = RunInfo(recipe=seed_dir.parent.name, seed=folder.seed, path=str(seed_dir),
                   status="unknown")
    try:
        result = folder.read_result()
        info.manifest = folder.read_manifest()
        info.config = folder.read_config()
    except DamagedRunError as exc:
        info.status, info.problem = "damaged", exc.message
        return info
    if not seed_dir.is_dir():
        return info  # no run here: "unknown"
    # result.json is a run's first file (runner._train_seed): a folder without it lost it
    problem = (f"{folder.result_path}: missing (a seed folder holds one from its start)"
               if not result else "")
    if result and result["status"] == "finished":
        problem = "; ".join(_missing_parts(folder, result, info.manifest))
    if problem:
        info.status, info.problem = "damaged", problem
        return info
    info.status = str(result["status"])
    if info.status == "running" and process_gone(result):
        info.status = "stale"
    info.metrics = result.get("metrics") or {}
    info.chosen_epoch = result.get("chosen_epoch")
    info.recipe = str(result.get("recipe", info.recipe))
    info.commit = commit_of(info.manifest)
    return info


def _missing_parts(folder: RunFolder, result: dict[str, Any], manifest: dict[str, Any]
                   ) -> list[str]:
    """What the record of a run the trainer finished lacks (its manifest records
    ``epochs_run``; a hand-made folder records no such claim): a readable line of
    ``metrics.jsonl`` per epoch run, and the saved predictions of every split it records
    metrics of but :data:`COMPACT_SKIP`, which no reference keeps."""
    epochs = manifest.get("epochs_run")
    if not isinstance(epochs, int) or isinstance(epochs, bool):
        return []
    missing = [f"{folder.predictions(split)}: missing (result.json records {split} metrics)"
               for split in result.get("metrics", {})
               if split not in COMPACT_SKIP and not folder.predictions(split).is_file()]
    try:
        lines = len(folder.read_metrics())
    except DamagedRunError as exc:
        return [*missing, exc.message]
    if lines != epochs:
        missing.append(f"{folder.metrics_path}: {lines} epoch line(s) where manifest.json "
                       f"records {epochs} epoch(s) run")
    return missing


def find_runs(runs_dir: Path, recipe: str) -> list[RunInfo]:
    """Every ``runs_dir/<recipe>/seed-*`` folder, sorted by seed."""
    folder = runs_dir / recipe
    if not folder.is_dir():
        return []
    runs = [read_run(d) for d in folder.glob("seed-*") if d.is_dir()]
    return sorted(runs, key=lambda r: r.seed)


def all_runs(runs_dir: Path) -> list[RunInfo]:
    """Every seed folder under ``runs_dir``, by recipe then seed."""
    if not runs_dir.is_dir():
        return []
    folders = [d for d in sorted(runs_dir.iterdir()) if d.is_dir()]
    return [run for d in folders for run in find_runs(runs_dir, d.name)]


def seed_folders(target: Path) -> list[RunFolder]:
    """A seed folder itself, or every seed folder (with a config) of a recipe's folder."""
    if (target / CONFIG).is_file():
        return [RunFolder(target)]
    folders = [RunFolder(p) for p in target.glob("seed-*") if (p / CONFIG).is_file()]
    return sorted(folders, key=lambda f: f.seed)


def write_summary(recipe_dir: Path, summary: dict[str, Any]) -> Path:
    """Write ``runs/<recipe>/summary.json`` (the seeds of the last ``train`` call)."""
    path = recipe_dir / SUMMARY
    with writing(path):
        paths.write_json(path, summary)
    return path


# ---------------------------------------------------------------------- continuing a run
def train_words(recipe: str, overrides: Sequence[str], seeds: str, device: str | None,
                *flags: str) -> list[str]:
    """``pairrepro train`` with this recipe, seeds, overrides, device and ``flags``."""
    words = ["pairrepro", "train", recipe]
    if seeds.strip():
        words += ["--seeds", seeds]
    for override in overrides:
        words += ["--set", override]
    if device:
        words += ["--device", device]
    return [*words, *flags]


def resume_command(recipe: str, seeds: str, overrides: Sequence[str] = (),
                   device: str | None = None, runs_dir: Path | None = None) -> str:
    """The command that continues a stopped ``train``: the same recipe, seeds, overrides and
    device, plus ``--resume`` (never ``--force``: the checkpoint is kept; the run's precision,
    checkpoint timing and threads are its own: ``runner._continuation``). With ``runs_dir``
    other than ``./runs``, ``PAIRREPRO_RUNS`` is named as an absolute path: a later shell
    may not have it set, or start elsewhere."""
    command = shlex.join(train_words(recipe, overrides, seeds, device, "--resume"))
    if runs_dir is None or runs_dir.resolve() == Path(paths.DEFAULT_RUNS).resolve():
        return command
    return f"PAIRREPRO_RUNS={shlex.quote(str(runs_dir.absolute()))} {command}"


def resume_overrides(run: RunInfo) -> list[str]:
    """``--set`` values for every key in which ``run``'s config differs from its recipe file
    today (none when the file cannot be read), so that ``--resume`` finds the same config."""
    from pairrepro.config import load_recipe  # the schema; config imports nothing here

    try:
        recipe = load_recipe(paths.recipes_dir() / f"{run.recipe}.toml").to_dict()
    except PairreproError:
        recipe = {}
    return [f"{key}={json.dumps(mine)}"
            for key, (mine, _) in config_differences(run.config, recipe).items()
            if mine is not None]


# ---------------------------------------------------------------------- variants
# Keys that change where or how fast a run is made, or its [recipe] bookkeeping, not what it
# computes. Precision, like threads, moves only the last bits (`verify` compares runs that
# differ in it through intervals, never as the same run).
IGNORED_DIFFERENCES = frozenset({
    "train.device", "train.threads", "train.precision", "train.checkpoint_minutes",
    "optim.l2_scope_why",
    "recipe.description", "recipe.change", "recipe.paper", "recipe.reproduces",
    "recipe.compares", "recipe.seeds",
})


def flatten_config(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as flat ``section.key`` names (``{"train": {"epochs": 4}}`` ->
    ``{"train.epochs": 4}``); lists stay values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_config(value, f"{name}."))
        else:
            out[name] = value
    return out


def resolved_config(config: dict[str, Any]) -> dict[str, Any]:
    """A run's ``config.toml`` read through today's recipe schema, so a key added since
    appears at its default (the old behaviour) and never makes an old run differ; a config the
    schema cannot read is returned as it is."""
    from pairrepro.config import recipe_from_dict  # the schema; config imports nothing here

    try:
        return recipe_from_dict(config, name="run", source=CONFIG).to_dict()
    except PairreproError:
        return config


def config_differences(run_config: dict[str, Any], recipe_config: dict[str, Any],
                       also_ignore: frozenset[str] = frozenset()
                       ) -> dict[str, tuple[Any, Any]]:
    """The one rule for "is this run the recipe's reproduction or a *variant*": the keys in
    which a run's config differs from a recipe's (``recipe.to_dict()``) or another run's, both
    read through :func:`resolved_config`, as ``{"section.key": (run value, recipe value)}``
    (``None`` where a side lacks the key), leaving out :data:`IGNORED_DIFFERENCES` and
    ``also_ignore``. An empty ``run_config`` (no config.toml) claims none."""
    if not run_config:  # a folder that recorded no config.toml: nothing to compare
        return {}
    run = flatten_config(resolved_config(run_config))
    recipe = flatten_config(resolved_config(recipe_config))
    ignored = IGNORED_DIFFERENCES | also_ignore
    return {key: (run.get(key), recipe.get(key)) for key in sorted(set(run) | set(recipe))
            if key not in ignored and run.get(key) != recipe.get(key)}


# ---------------------------------------------------------------------- predictions
def read_predictions(folder: RunFolder, key: str) -> Any:
    """``predictions/<key>.parquet`` as a pandas DataFrame, or None when absent; a file that
    cannot be read is a :class:`DamagedRunError`."""
    import pandas as pd

    path = folder.predictions(key)
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise DamagedRunError(f"{path}: not a readable parquet file ({exc})",
                              hint=_REPAIR) from None


def prediction_keys(folder: RunFolder) -> list[str]:
    """The splits a run saved predictions for (``dev``, ``test``, ``train``, ...)."""
    return sorted(p.stem for p in (folder.path / PREDICTIONS).glob("*.parquet"))


# the columns a reference run keeps: what metrics, intervals and paired tests need (ids,
# gold label, the ranking score or the predicted class); never the text of a pair
COMPACT_COLUMNS = ("pair_id", "group_id", "label", "score", "prediction")
# the splits a reference run keeps predictions of (train predictions are a fit diagnostic,
# large, and no table reads them)
COMPACT_SKIP = ("train",)


def put_back_aside(dest: RunFolder) -> Path:
    """Where :func:`copy_compact` puts the folder it replaces while the new one moves in. A
    folder found there is put back when none is in place (an add killed between the two
    renames), else removed (killed after them)."""
    aside = dest.path.parent / f".{dest.path.name}.replaced"
    if aside.is_dir():
        with writing(dest.path):
            if dest.path.exists():  # killed after the new one moved in: the old one is done
                shutil.rmtree(aside)
            else:
                os.replace(aside, dest.path)
    return aside


def _write_compact(source: RunFolder, staging: Path) -> None:
    """The compact copy's files, written into ``staging``."""
    for name in (CONFIG, MANIFEST, METRICS, RESULT):
        if (source.path / name).is_file():
            shutil.copyfile(source.path / name, staging / name)
    if (source.path / EVALS).is_dir():
        shutil.copytree(source.path / EVALS, staging / EVALS)
    (staging / PREDICTIONS).mkdir()
    for key in prediction_keys(source):
        if key in COMPACT_SKIP:
            continue
        frame = read_predictions(source, key)
        keep = [c for c in COMPACT_COLUMNS if c in frame.columns]
        frame[keep].to_parquet(staging / PREDICTIONS / f"{key}.parquet", index=False,
                               compression="zstd")


def copy_compact(source: RunFolder, dest: RunFolder) -> list[Path]:
    """Copy a finished run into ``dest`` without checkpoints, its dev/test predictions cut to
    :data:`COMPACT_COLUMNS`; the files written. Staged, then renamed into place, the folder it
    replaces renamed aside first and removed last: an interruption leaves the old reference or
    the new one, and no staging folder."""
    staging = dest.path.parent / f".{dest.path.name}.incoming"
    aside = put_back_aside(dest)
    try:
        with writing(staging):
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            _write_compact(source, staging)
            if dest.path.exists():
                os.replace(dest.path, aside)
            os.replace(staging, dest.path)
    except BaseException:
        put_back_aside(dest)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    return sorted(p for p in dest.path.rglob("*") if p.is_file())
