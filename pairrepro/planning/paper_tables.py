"""Paper tables as data: the schema of ``planning/papers/<paper>.toml`` and its loader, which
validates level by level so that an error names the row by its label or the column."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml
from pairrepro.schema import Schema, validate

PAPERS_DIR = paths.packaged("planning/papers")
PAPERS = ("clstm", "dflstm", "mvlstm", "csran", "cin")
COLUMN_KINDS = ("metric", "info", "params")


class RowRef(Schema):
    """A row of another table of the same paper (hparams columns: whose recipe to read)."""

    table: int
    row: str


class Column(Schema):
    """A metric (``split.metric``), info, a parameter count or (set by the loader) a setting."""

    key: str
    header: str
    kind: Literal["metric", "info", "params", "hparam"] = "metric"
    metric: str = ""
    unit: Literal["%", "fraction"] = "%"
    dataset: str = ""  # for tables whose columns come from different datasets (CSRAN T8)
    from_row: RowRef | None = None  # hparams tables: which recipe
    decimals: int = 1  # inferred from the published strings when not given
    leading_zero: bool = True

    @property
    def split(self) -> str:
        return self.metric.split(".", 1)[0]

    @property
    def metric_name(self) -> str:
        return self.metric.split(".", 1)[1]


class Row(Schema):
    """One printed row, validated with its table's context ``{"columns", "kind", "units"}``."""

    label: str
    values: dict[str, str]
    block: str = ""  # set by the loader from the block's name
    cite: str = ""
    bold: list[str] = Field(default_factory=list)  # bold in the paper's typesetting
    best: list[str] = Field(default_factory=list)  # best by value (bold lost in conversion)
    why: str = ""  # why no recipe can reproduce it
    recipe: str = ""  # explicit recipe name
    footnote: str = ""  # footnote mark: the number is from the text, not the table
    quote: str = ""  # verbatim text of the paper holding a footnote row's number
    # hparams tables: the settings holding the value, first found wins; a list entry is
    # printed as one tuple (``["model.pool_p", "model.pool_q"]``: "Pooling (p, q)")
    keys: list[str | list[str]] = Field(default_factory=list)
    x: float | None = None  # position on a plot of the table (MV-LSTM Table 2: k)

    @field_validator("values", mode="before")
    @classmethod
    def _printed_strings(cls, values: Any) -> Any:
        if isinstance(values, dict):
            for key, value in values.items():
                if not isinstance(value, str):
                    raise ValueError(f"{key}: published values are strings exactly as "
                                     f"printed, e.g. \"85.1\"; got {value!r}")
        return values

    @field_validator("keys")
    @classmethod
    def _setting_names(cls, keys: list[str | list[str]]) -> list[str | list[str]]:
        for entry in keys:
            names = entry if isinstance(entry, list) else [entry]
            if not names or not all("." in n for n in names):
                raise ValueError(f"{entry!r} is not a \"section.key\" name or a list of them")
        return keys

    @model_validator(mode="after")
    def _fits_the_table(self, info: ValidationInfo) -> Row:
        if self.footnote and not self.quote:
            raise ValueError("a footnote row needs quote = the paper's own words")
        context = info.context or {}
        columns = context.get("columns")
        for what, keys in (("values", self.values), ("bold/best", (*self.bold, *self.best))):
            if unknown := [key for key in keys if columns is not None and key not in columns]:
                raise ValueError(f"{what}: unknown column {unknown[0]!r} (columns: "
                                 f"{', '.join(columns)})")
        for key, unit in context.get("units", {}).items():  # "85.4" in a fraction column
            printed = self.values.get(key, "")
            largest, name = SCALE[unit]
            if (_NUMBER.match(printed) and any(ch.isdigit() for ch in printed)
                    and abs(float(printed.replace("−", "-"))) > largest):
                raise ValueError(f"{key}: {printed!r} is not a {name}, the unit of column "
                                 f"{key!r} (unit = {unit!r})")
        if context.get("kind") == "hparams" and not self.keys:
            raise ValueError("an hparams row needs keys = [\"section.key\", ...]")
        return self

    @property
    def printed_label(self) -> str:
        return f"{self.label} ({self.cite})" if self.cite else self.label


# the largest magnitude a published metric may have in each unit, and its name in errors
SCALE = {"%": (100.0, "percentage (0..100)"), "fraction": (1.0, "fraction (0..1)")}


class Block(Schema):
    """Rows printed together (a rule between blocks)."""

    name: str = ""
    rows: list[Row]


class _TableFields(Schema):
    number: int
    caption: str
    columns: list[Column]
    kind: Literal["results", "hparams"] = "results"
    dataset: str = ""
    tolerance: float = 0.5
    tolerance_fraction: float | None = None
    label_header: str = "Model"
    data_note: str = ""
    joined_header: str = ""
    x_label: str = ""


class PaperTable(_TableFields):
    """One table with numbers."""

    paper: str
    blocks: list[Block]

    @property
    def rows(self) -> list[Row]:
        return [row for block in self.blocks for row in block.rows]

    @property
    def name(self) -> str:
        return f"{self.paper} Table {self.number}"

    @property
    def datasets(self) -> tuple[str, ...]:
        """The table's ``dataset``, else its columns' (CSRAN Table 8); () when none is named."""
        if self.dataset:
            return (self.dataset,)
        return tuple(dict.fromkeys(c.dataset for c in self.columns if c.dataset))

    def tolerance_for(self, column: Column) -> float:
        """The absolute tolerance in ``column``'s unit."""
        if column.unit == "%":
            return self.tolerance
        if self.tolerance_fraction is not None:
            return self.tolerance_fraction
        has_percent = any(c.unit == "%" and c.kind == "metric" for c in self.columns)
        return self.tolerance / 100 if has_percent else self.tolerance


class FigureSpec(Schema):
    """``y`` against the recipe setting ``x``: a curve per ``{label, match = {setting = v}}``."""

    paper: str
    number: int
    caption: str
    x: str
    y: str
    series: list[dict[str, Any]]
    x_label: str = ""
    y_label: str = ""
    unit: Literal["%", "fraction"] = "%"

    @field_validator("series")
    @classmethod
    def _labelled(cls, series: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, entry in enumerate(series):
            if not isinstance(entry.get("label"), str) or not isinstance(
                    entry.get("match", {}), dict):
                raise ValueError(f"[{i}]: expected {{label = \"...\", match = {{...}}}}")
        return series


class _PaperFields(Schema):
    paper: str
    title: str
    authors: str = ""
    venue: str = ""
    source: str = ""


class Paper(_PaperFields):
    tables: list[PaperTable]
    figures: list[FigureSpec] = Field(default_factory=list)
    path: str = ""

    def table(self, number: int) -> PaperTable:
        """Table ``number`` (a ConfigError naming the tables there are)."""
        if found := next((table for table in self.tables if table.number == number), None):
            return found
        raise ConfigError(f"{self.paper} has no table {number} with numbers",
                          hint=f"tables: {', '.join(str(t.number) for t in self.tables)}")


class _TableHead(_TableFields):
    blocks: list[dict[str, Any]]


class _BlockHead(Schema):
    name: str = ""
    rows: list[dict[str, Any]]


class _PaperHead(_PaperFields):
    tables: list[dict[str, Any]]
    figures: list[dict[str, Any]] = Field(default_factory=list)


_NUMBER = re.compile(r"^[−-]?(\d*)\.?(\d*)$")


@functools.cache
def metric_names() -> frozenset[str]:
    """Every metric name a run's result.json records, asked of :mod:`pairrepro.metrics` (one
    query of ten candidates: R10@k and R2@1 need them)."""
    import numpy as np

    from pairrepro.metrics import classification_metrics, ranking_metrics

    labels = np.array([1] + [0] * 9)
    ranking = ranking_metrics(["q"] * 10, labels, np.arange(10.0)[::-1].copy())
    return frozenset(classification_metrics(labels, labels, 2)) | frozenset(ranking)


def _with_format(column: Column, published: list[str]) -> Column:
    """Decimals and leading-zero style from the column's published numbers, unless given."""
    numeric = [p for p in published if p not in ("-", "") and _NUMBER.match(p)]
    update: dict[str, Any] = {}
    if "decimals" not in column.model_fields_set and numeric:
        update["decimals"] = max(len(p.split(".")[1]) if "." in p else 0 for p in numeric)
    if "leading_zero" not in column.model_fields_set and numeric and column.unit == "fraction":
        update["leading_zero"] = not all(p.lstrip("−-").startswith(".") for p in numeric)
    return column.model_copy(update=update) if update else column


def _load_table(paper: str, raw: Any, where: str) -> PaperTable:
    head = validate(_TableHead, raw, where, sections=False)
    columns = list(head.columns)
    for i, col in enumerate(columns):
        if head.kind == "hparams":
            if col.from_row is None and not col.metric:
                raise ConfigError(f"{where}: columns[{i}]: an hparams column needs "
                                  "from_row = {table, row}")
            columns[i] = col.model_copy(update={"kind": "hparam"})
        elif col.kind == "hparam":
            raise ConfigError(f"{where}: columns[{i}] kind: 'hparam' is only for hparams "
                              f"tables; allowed: {', '.join(COLUMN_KINDS)}")
        elif col.kind == "metric" and "." not in col.metric:
            raise ConfigError(f"{where}: columns[{i}] {col.key!r}: metric: expected "
                              f"'<split>.<metric>' (e.g. test.accuracy), got {col.metric!r}")
        elif col.kind == "metric" and col.metric_name not in metric_names():
            raise ConfigError(f"{where}: columns[{i}] {col.key!r}: metric: unknown metric "
                              f"{col.metric_name!r} in {col.metric!r}",
                              hint=f"metrics a run records: {', '.join(sorted(metric_names()))}")
    keys = [c.key for c in columns]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{where}: column keys must be unique, got {keys}")
    units = {c.key: c.unit for c in columns if c.kind == "metric"}
    context = {"columns": keys, "kind": head.kind, "units": units}
    blocks: list[Block] = []
    for b, braw in enumerate(head.blocks):
        bw = f"{where} blocks[{b}]"
        block = validate(_BlockHead, braw, bw, sections=False)
        rows = []
        for r, rraw in enumerate(block.rows):
            label = rraw.get("label", "?") if isinstance(rraw, dict) else "?"
            row = validate(Row, rraw, f"{bw} rows[{r}] {label!r}", sections=False,
                           context=context)
            rows.append(row.model_copy(update={"block": block.name}))
        blocks.append(Block(name=block.name, rows=rows))
    printed = [row for block in blocks for row in block.rows]
    columns = [_with_format(c, [r.values.get(c.key, "") for r in printed]) for c in columns]
    fields = head.model_dump(exclude={"columns", "blocks"})
    return PaperTable(paper=paper, columns=columns, blocks=blocks, **fields)


def load_paper_file(path: str | Path) -> Paper:
    p = Path(path)
    try:
        raw = read_toml(p)
    except FileNotFoundError:
        raise ConfigError(f"paper table file {p} not found") from None
    head = validate(_PaperHead, raw, str(p), sections=False)
    tables = [_load_table(head.paper, t, f"{p}: tables[{i}] (Table "
                                         f"{t.get('number', '?') if isinstance(t, dict) else '?'})")
              for i, t in enumerate(head.tables)]
    numbers = [t.number for t in tables]
    if len(set(numbers)) != len(numbers):
        raise ConfigError(f"{p}: table numbers must be unique, got {numbers}")
    figures = [validate(FigureSpec, {**f, "paper": head.paper}, f"{p}: figures[{i}]",
                        sections=False) for i, f in enumerate(head.figures)]
    return Paper(**head.model_dump(exclude={"tables", "figures"}), tables=tables,
                 figures=figures, path=str(p))


def load_paper(name: str) -> Paper:
    """The paper ``name`` (``clstm``, ``dflstm``, ``mvlstm``, ``csran``, ``cin``)."""
    path = PAPERS_DIR / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown paper {name!r}", hint=f"papers: {', '.join(PAPERS)}")
    return load_paper_file(path)
