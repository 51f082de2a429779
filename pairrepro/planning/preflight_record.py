"""The preflight record ``bench/preflight/<recipe>.json``, read back validated: a bad figure
is a :class:`ConfigError`, never skipped (another recipe's figure would take its place)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pairrepro.errors import ConfigError, PreflightError
from pairrepro.planning import BENCH_DIR
from pairrepro.runs import config_differences
from pairrepro.schema import validate

PREFLIGHT_DIR = BENCH_DIR / "preflight"
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
DERIVED = ("passed", "failed")  # written for readers of the file, computed from ``checks``


class Check(BaseModel):
    """One check's outcome: ``status`` is ``pass``, ``fail`` or ``n/a``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    status: Literal["pass", "fail", "n/a"]
    detail: str = ""
    value: float | None = None

    def __init__(self, name: str, status: str, detail: str = "", value: float | None = None
                 ) -> None:
        super().__init__(name=name, status=status, detail=detail, value=value)


class PreflightRecord(BaseModel):
    """Everything preflight measured and checked, on this device."""

    model_config = ConfigDict(extra="forbid", strict=True)
    recipe: str
    model: str
    source: str
    overrides: list[str]
    device: str
    device_name: str
    hardware: Literal["cpu", "gpu"]  # the unit of the plan's hours from these figures
    threads: int
    torch_version: str
    measured: str
    data: dict[str, Any]
    embeddings: dict[str, Any]
    trains: bool
    batch_size: int
    pairs_per_step: int
    steps: Annotated[int, Field(ge=0)]
    budget_s: float
    step_s: list[float] = Field(default_factory=list)
    losses: list[float] = Field(default_factory=list)  # train mode, before each step
    eval_losses: list[float] = Field(default_factory=list)  # eval mode, after each step
    loss_before: float | None = None
    loss_after: float | None = None
    pairs_per_s: Positive | None = None  # None only while preflight runs
    peak_mb: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    flops_per_step: int | None = None
    flops_per_pair: Positive | None = None
    parameters: dict[str, int] = Field(default_factory=dict)
    checks: list[Check] = Field(default_factory=list)
    precision: str = "fp32"  # of the training steps (eval losses and outputs are fp32)
    cpu: dict[str, Any] = Field(default_factory=dict)  # device.cpu_fingerprint()
    # the resolved recipe checked (overrides applied): a record vouches for this config only
    config: dict[str, Any] = Field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "fail"]

    @property
    def passed(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        return {**self.model_dump(), "passed": self.passed, "failed": self.failed}

    def raise_if_failed(self) -> None:
        """A :class:`PreflightError` naming every failed check and its detail."""
        if self.failed:
            details = "; ".join(f"{c.name}: {c.detail}" for c in self.checks if c.status == "fail")
            raise PreflightError(
                f"{self.recipe}: preflight check(s) failed: {details}",
                hint="see the check's meaning in `pairrepro preflight --help`; fix the recipe "
                     "or the model before the long run")


def read_record(path: Path) -> dict[str, Any]:
    """One record as written, validated as a :class:`PreflightRecord`."""
    again = (f"measure it again (pairrepro preflight {path.stem} --out-dir {path.parent}), "
             "or delete the file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})", hint=again) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}, column "
                          f"{exc.colno}: {exc.msg})", hint=again) from None
    fields = {k: v for k, v in data.items() if k not in DERIVED} if isinstance(data, dict) \
        else data
    record = validate(PreflightRecord, fields, str(path), hint=again)
    if record.pairs_per_s is None:
        raise ConfigError(f"{path}: pairs_per_s: missing key", hint=again)
    if record.recipe != path.stem:
        raise ConfigError(f"{path}: recipe: {record.recipe!r} is not the file's recipe "
                          f"{path.stem!r}", hint=again)
    return data


def load_preflight(folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every record of ``folder`` (``bench/preflight``) as ``{recipe: record}``."""
    return {path.stem: read_record(path)
            for path in sorted((folder or PREFLIGHT_DIR).glob("*.json"))}


def preflight_record(recipe: str, folder: Path | None = None) -> dict[str, Any] | None:
    """The validated record of ``recipe`` in ``folder`` (``bench/preflight``), or None."""
    path = (folder or PREFLIGHT_DIR) / f"{recipe}.json"
    return read_record(path) if path.is_file() else None


# keys that change how long or how often a run trains or is scored, not one training step:
# a preflight record of the recipe still vouches for a config that differs in them
STEP_NEUTRAL = frozenset({"train.epochs", "train.patience", "train.score_train_pairs",
                          "train.eval_batch_size", "train.checkpoint_every"})


def preflight_problem(recipe: str, config: dict[str, Any], folder: Path | None = None) -> str:
    """Why ``recipe`` resolved as ``config`` has no passing record of that config (""
    when it has one): the gate of ``results add``."""
    path = (folder or PREFLIGHT_DIR) / f"{recipe}.json"
    data = preflight_record(recipe, folder)
    if data is None:
        return f"no preflight record {path}"
    if failed := [c["name"] for c in data.get("checks", []) if c["status"] == "fail"]:
        return f"{path}: failed check(s) {', '.join(failed)}"
    if not data.get("config"):
        return f"{path} does not say which config it checked (made before records did)"
    if diffs := config_differences(data["config"], config, also_ignore=STEP_NEUTRAL):
        return f"{path} checked another config: " + ", ".join(
            f"{key} {theirs!r} there, {mine!r} here" for key, (theirs, mine) in diffs.items())
    return ""
