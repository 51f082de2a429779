"""Errors that the CLI turns into a clear message and a documented exit code.

Exit codes (stable, scripts may rely on them):
    0 success · 1 unexpected failure · 2 bad usage or invalid recipe/config ·
    3 data missing or malformed · 4 download failed (network, HTTP error) ·
    5 checksum mismatch · 6 training failed (NaN loss, diverged) · 7 nothing could run ·
    8 an output could not be written (disk full, read-only folder, no permission) ·
    9 ``pairrepro verify``: a run differs from its reference run (data, config or metrics) ·
    10 a preflight check failed (``pairrepro preflight``: the message names the check) ·
    130 interrupted (Ctrl-C or SIGTERM; a training run saved a checkpoint: --resume continues)
"""

from __future__ import annotations

#: The exit code of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
INTERRUPTED_EXIT = 130


class PairreproError(Exception):
    """Base class: a problem the user can fix. ``hint`` says what to do; a subclass states its
    ``exit_code`` as a class keyword (``class ConfigError(PairreproError, exit_code=2)``)."""

    exit_code = 1

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:  # else its base class's code
            cls.exit_code = exit_code

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message  # the one-line cause (``str()`` adds the hint)
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class ConfigError(PairreproError, exit_code=2):
    """Invalid recipe, override or command-line value."""


class DataError(PairreproError, exit_code=3):
    """Dataset missing, not prepared, or malformed."""


class NoEvidenceError(DataError):
    """A run's saved predictions give no per-unit values for a metric."""


class DownloadError(PairreproError, exit_code=4):
    """A file could not be downloaded (no network, HTTP error)."""


class ChecksumError(PairreproError, exit_code=5):
    """A file's sha256 does not match its manifest; the file was not kept."""


class TrainingError(PairreproError, exit_code=6):
    """Training stopped (non-finite loss, divergence)."""


class NothingToRunError(PairreproError, exit_code=7):
    """A make target or report found nothing it could run."""


class StorageError(PairreproError, exit_code=8):
    """An output could not be written (disk full, read-only folder, no permission)."""


class PreflightError(PairreproError, exit_code=10):
    """A ``pairrepro preflight`` check failed (the message names it)."""


class VerificationError(PairreproError, exit_code=9):
    """``pairrepro verify``: a run differs from the reference run of its recipe and seed."""
