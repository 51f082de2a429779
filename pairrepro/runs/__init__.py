"""Run folders (``runs/<recipe>/seed-<n>/`` and the reference copies under ``results/``); the
names used outside the package are re-exported here."""

from pairrepro.runs.checkpoints import load_checkpoint, save_checkpoint
from pairrepro.runs.folder import DamagedRunError, RunFolder, RunLockedError, check_name
from pairrepro.runs.index import (
    COMPACT_COLUMNS,
    RunInfo,
    all_runs,
    config_differences,
    copy_compact,
    find_runs,
    flatten_config,
    prediction_keys,
    put_back_aside,
    read_predictions,
    read_run,
    resume_command,
    resume_overrides,
    seed_folders,
    train_words,
)

__all__ = [
    "COMPACT_COLUMNS", "DamagedRunError", "RunFolder", "RunInfo", "RunLockedError",
    "all_runs", "check_name", "config_differences", "copy_compact", "find_runs",
    "flatten_config", "load_checkpoint", "prediction_keys", "put_back_aside",
    "read_predictions", "read_run", "resume_command", "resume_overrides",
    "save_checkpoint", "seed_folders", "train_words",
]
