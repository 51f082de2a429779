"""Paper tables as data, and the comparison of published numbers with finished runs.

``pairrepro/report/papers/<paper>.toml`` holds every table with numbers of one paper: caption,
columns (a metric as ``<split>.<metric>`` from ``result.json``, unit ``%`` or ``fraction``),
row blocks in the paper's order, each published value as the string printed in the paper,
bold/best marks, footnote rows, and for rows no recipe can reproduce, ``why``.

Rows are tied to recipes at run time: a recipe declaring
``reproduces = [{paper = "clstm", table = 2, row = "four stacked TC-LSTMs"}]`` reproduces that
row (labels compared after dropping citations in parentheses, spaces and case, so
``"MV-LSTM(k=3)"`` and ``"single LSTM (Rocktäschel et al., 2015)"`` match). A row may also name
``recipe`` explicitly. A recipe declaring ``compares = [{paper, table, row}]`` adds a row of
its own below the paper's rows (block ``comparison``): a model run here for comparison, with
no published value (e.g. BM25 under CSRAN's TrecQA table).

Rules of a cell (documented once, here):

* reproduced values are the mean ± sample std over the finished seeds, converted to the
  column's unit (fractions × 100 for ``%`` columns);
* ``delta = mean − published`` in the column's unit, on unrounded numbers;
* *reproduced* when ``|delta| <= tolerance`` (the table's ``tolerance`` for ``%`` columns, in
  points; ``tolerance_fraction`` — default ``tolerance``, or ``tolerance / 100`` in a table
  with ``%`` columns — for fraction columns), otherwise *off*;
* values print with the decimals of the paper's own numbers in that column, and fractions keep
  the paper's style (``0.739`` or ``.739``).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import statistics
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.io import read_toml

PAPERS_DIR = Path(__file__).resolve().parent / "papers"
PAPERS = ("clstm", "dflstm", "mvlstm", "csran", "cin")

# Cell statuses, in the order a reader cares about them.
REPRODUCED = "reproduced"
OFF = "off"
NEW = "no published value"
RUNNING = "running"
STALE = "stale"  # interrupted (Ctrl-C), or "running" but its process is gone
FAILED = "failed"
NOT_RUN = "not run"
DATA_MISSING = "data missing"
NO_RECIPE = "no recipe"
NOT_REPRODUCIBLE = "not reproducible"
INFO = "info"
STATUSES = (REPRODUCED, OFF, NEW, RUNNING, STALE, FAILED, NOT_RUN, DATA_MISSING, NO_RECIPE,
            NOT_REPRODUCIBLE, INFO)

COLUMN_KINDS = ("metric", "info", "params")
UNITS = ("%", "fraction")


# --------------------------------------------------------------------------- schema


@dataclass
class Column:
    """One column: a metric (``split.metric``), printed info (``k``), or a parameter count."""

    key: str
    header: str
    kind: str = "metric"
    metric: str = ""
    unit: str = "%"
    dataset: str = ""  # for tables whose columns come from different datasets (CSRAN T8)
    from_row: dict[str, Any] = field(default_factory=dict)  # hparams tables: which recipe
    decimals: int = 1  # inferred from the published strings when not given
    leading_zero: bool = True

    @property
    def split(self) -> str:
        return self.metric.split(".", 1)[0]

    @property
    def metric_name(self) -> str:
        return self.metric.split(".", 1)[1]


@dataclass
class Row:
    """One printed row (``label`` as printed, without its citation line ``cite``)."""

    label: str
    values: dict[str, str]
    block: str = ""
    cite: str = ""
    bold: list[str] = field(default_factory=list)  # bold in the paper's typesetting
    best: list[str] = field(default_factory=list)  # best by value (bold lost in conversion)
    why: str = ""  # why no recipe can reproduce it
    recipe: str = ""  # explicit recipe name
    footnote: str = ""  # footnote mark: the number is from the text, not the table
    quote: str = ""  # verbatim text of the paper holding a footnote row's number
    # hparams tables: the recipe settings (``section.key``) that hold the value, first found
    # wins; an entry that is itself a list names several settings printed as one tuple, e.g.
    # ``["model.pool_p", "model.pool_q"]`` for "Pooling (p, q)"
    keys: list[str | list[str]] = field(default_factory=list)
    x: float | None = None  # position on a plot of the table (MV-LSTM Table 2: k)

    @property
    def printed_label(self) -> str:
        return f"{self.label} ({self.cite})" if self.cite else self.label


@dataclass
class Block:
    name: str
    rows: list[Row]


@dataclass
class PaperTable:
    paper: str
    number: int
    caption: str
    columns: list[Column]
    blocks: list[Block]
    kind: str = "results"  # results | hparams
    dataset: str = ""
    tolerance: float = 0.5
    tolerance_fraction: float | None = None
    label_header: str = "Model"
    data_note: str = ""
    joined_header: str = ""
    x_label: str = ""

    @property
    def rows(self) -> list[Row]:
        return [row for block in self.blocks for row in block.rows]

    @property
    def name(self) -> str:
        return f"{self.paper} Table {self.number}"

    def tolerance_for(self, column: Column) -> float:
        """The absolute tolerance in ``column``'s unit."""
        if column.unit == "%":
            return self.tolerance
        if self.tolerance_fraction is not None:
            return self.tolerance_fraction
        has_percent = any(c.unit == "%" and c.kind == "metric" for c in self.columns)
        return self.tolerance / 100 if has_percent else self.tolerance


@dataclass
class FigureSpec:
    paper: str
    number: int
    caption: str
    x: str
    y: str
    series: list[dict[str, Any]]
    x_label: str = ""
    y_label: str = ""
    unit: str = "%"


@dataclass
class Paper:
    paper: str
    title: str
    authors: str
    venue: str
    source: str
    tables: list[PaperTable]
    figures: list[FigureSpec]
    path: str

    def table(self, number: int) -> PaperTable:
        for table in self.tables:
            if table.number == number:
                return table
        raise ConfigError(
            f"{self.paper} has no table {number} with numbers",
            hint=f"tables: {', '.join(str(t.number) for t in self.tables)}",
        )


def _check(where: str, raw: dict[str, Any], allowed: set[str], required: set[str]) -> None:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table, got {raw!r}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}",
                          hint=f"allowed keys: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(raw))
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")


_NUMBER = re.compile(r"^[−-]?(\d*)\.?(\d*)$")


def _infer_format(column: Column, published: list[str], explicit: dict[str, Any]) -> None:
    """Decimals and leading-zero style from the paper's own numbers in this column."""
    numeric = [p for p in published if p not in ("-", "") and _NUMBER.match(p)]
    if "decimals" not in explicit and numeric:
        column.decimals = max(len(p.split(".")[1]) if "." in p else 0 for p in numeric)
    if "leading_zero" not in explicit and numeric and column.unit == "fraction":
        column.leading_zero = not all(p.lstrip("−-").startswith(".") for p in numeric)


def _parse_table(paper: str, raw: dict[str, Any], where: str) -> PaperTable:
    _check(where, raw, {"number", "kind", "caption", "dataset", "tolerance", "tolerance_fraction",
                        "label_header", "columns", "blocks", "data_note", "joined_header",
                        "x_label"}, {"number", "caption", "columns", "blocks"})
    kind = raw.get("kind", "results")
    if kind not in ("results", "hparams"):
        raise ConfigError(f"{where}: kind: {kind!r} is not 'results' or 'hparams'")
    columns: list[Column] = []
    col_keys = {"key", "header", "kind", "metric", "unit", "dataset", "from_row", "decimals",
                "leading_zero"}
    for i, craw in enumerate(raw["columns"]):
        cw = f"{where} columns[{i}]"
        _check(cw, craw, col_keys, {"key", "header"})
        col = Column(**craw)
        if kind == "hparams":
            col.kind = "hparam"
            if not col.from_row and not craw.get("metric"):
                raise ConfigError(f"{cw}: an hparams column needs from_row = {{table, row}}")
        elif col.kind not in COLUMN_KINDS:
            raise ConfigError(f"{cw}: kind: {col.kind!r} is not one of {', '.join(COLUMN_KINDS)}")
        if col.kind == "metric" and "." not in col.metric:
            raise ConfigError(f"{cw}: metric: expected '<split>.<metric>' "
                              f"(e.g. test.accuracy), got {col.metric!r}")
        if col.unit not in UNITS:
            raise ConfigError(f"{cw}: unit: {col.unit!r} is not '%' or 'fraction'")
        columns.append(col)
    keys = [c.key for c in columns]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{where}: column keys must be unique, got {keys}")
    row_keys = {"label", "values", "cite", "bold", "best", "why", "recipe", "footnote", "quote",
                "keys", "x"}
    blocks: list[Block] = []
    for b, braw in enumerate(raw["blocks"]):
        bw = f"{where} blocks[{b}]"
        _check(bw, braw, {"name", "rows"}, {"rows"})
        rows = []
        for r, rraw in enumerate(braw["rows"]):
            rw = f"{bw} rows[{r}] {rraw.get('label', '?')!r}"
            _check(rw, rraw, row_keys, {"label", "values"})
            row = Row(block=braw.get("name", ""), **rraw)
            for key, value in row.values.items():
                if key not in keys:
                    raise ConfigError(f"{rw}: values: unknown column {key!r}",
                                      hint=f"columns: {', '.join(keys)}")
                if not isinstance(value, str):
                    raise ConfigError(f"{rw}: values.{key}: published values are strings "
                                      f"exactly as printed, e.g. \"85.1\"; got {value!r}")
            for mark in (*row.bold, *row.best):
                if mark not in keys:
                    raise ConfigError(f"{rw}: bold/best: unknown column {mark!r}")
            if row.footnote and not row.quote:
                raise ConfigError(f"{rw}: a footnote row needs quote = the paper's own words")
            if kind == "hparams" and not row.keys:
                raise ConfigError(f"{rw}: an hparams row needs keys = [\"section.key\", ...]")
            for entry in row.keys:
                names = entry if isinstance(entry, list) else [entry]
                if not names or not all(isinstance(n, str) and "." in n for n in names):
                    raise ConfigError(f"{rw}: keys: {entry!r} is not a \"section.key\" name "
                                      "or a list of them")
            rows.append(row)
        blocks.append(Block(braw.get("name", ""), rows))
    table = PaperTable(
        paper=paper, columns=columns, blocks=blocks,
        **{k: v for k, v in raw.items() if k not in ("columns", "blocks")},
    )
    for col in columns:
        explicit = next(c for c in raw["columns"] if c["key"] == col.key)
        _infer_format(col, [r.values.get(col.key, "") for r in table.rows], explicit)
    return table


def load_paper_file(path: str | Path) -> Paper:
    """Read and validate one paper TOML (errors name the file and the key)."""
    p = Path(path)
    try:
        raw = read_toml(p)
    except FileNotFoundError:
        raise ConfigError(f"paper table file {p} not found") from None
    _check(str(p), raw, {"paper", "title", "authors", "venue", "source", "tables", "figures"},
           {"paper", "title", "tables"})
    tables = [_parse_table(raw["paper"], t, f"{p}: tables[{i}] (Table {t.get('number', '?')})")
              for i, t in enumerate(raw["tables"])]
    numbers = [t.number for t in tables]
    if len(set(numbers)) != len(numbers):
        raise ConfigError(f"{p}: table numbers must be unique, got {numbers}")
    figures = []
    for i, fraw in enumerate(raw.get("figures", [])):
        fw = f"{p}: figures[{i}]"
        _check(fw, fraw, {"number", "caption", "x", "y", "series", "x_label", "y_label", "unit"},
               {"number", "caption", "x", "y", "series"})
        figures.append(FigureSpec(paper=raw["paper"], **fraw))
    return Paper(
        paper=raw["paper"], title=raw["title"], authors=raw.get("authors", ""),
        venue=raw.get("venue", ""), source=raw.get("source", ""), tables=tables,
        figures=figures, path=str(p),
    )


def load_paper(name: str) -> Paper:
    """The paper ``name`` (``clstm``, ``dflstm``, ``mvlstm``, ``csran``, ``cin``)."""
    path = PAPERS_DIR / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown paper {name!r}", hint=f"papers: {', '.join(PAPERS)}")
    return load_paper_file(path)


# --------------------------------------------------------------------------- numbers


def parse_published(text: str) -> float | None:
    """A printed number as a float (``"85.1"``, ``".8912"``, ``"5E−5"``); ``None`` for ``-``."""
    cleaned = text.strip().replace("−", "-").replace("E", "e")
    if cleaned in ("", "-"):
        return None
    multiplier = 1.0
    if cleaned[-1] in "KkM":
        multiplier = 1e6 if cleaned[-1] == "M" else 1e3
        cleaned = cleaned[:-1]
    try:
        return float(cleaned) * multiplier
    except ValueError:
        return None


def format_number(value: float, column: Column, signed: bool = False) -> str:
    """``value`` (already in the column's unit) with the paper's decimals and fraction style."""
    text = f"{value:+.{column.decimals}f}" if signed else f"{value:.{column.decimals}f}"
    if column.unit == "fraction" and not column.leading_zero:
        text = re.sub(r"^([+-]?)0\.", r"\1.", text)
    return text.replace("-", "−") if signed else text


def format_count(value: float) -> str:
    """A parameter count in the paper's style: ``77.5K``, ``190K``."""
    if value >= 1e6:
        return f"{value / 1e6:.1f}M".replace(".0M", "M")
    return f"{value / 1e3:.1f}K".replace(".0K", "K")


def normalise_label(label: str) -> str:
    """Row labels compared without citations in parentheses, spaces or case."""
    no_cite = re.sub(r"\([^()]*\d{4}[a-z]?\)", "", label)
    return re.sub(r"[\s$]", "", no_cite).lower()


# --------------------------------------------------------------------------- recipes & runs


@dataclass
class RecipeIndex:
    """Every recipe in a folder and the table rows each one declares."""

    recipes: dict[str, Any]  # name -> pairrepro.config.Recipe
    rows: dict[tuple[str, int, str], list[str]]
    errors: dict[str, str]
    # (paper, table) -> [(printed label, recipe)] of comparison rows, in recipe-name order
    comparisons: dict[tuple[str, int], list[tuple[str, str]]] = field(default_factory=dict)

    def for_row(self, paper: str, table: int, label: str) -> list[str]:
        return self.rows.get((paper, table, normalise_label(label)), [])


def load_recipe_index(recipes_dir: Path | None = None) -> RecipeIndex:
    """Read every ``*.toml`` recipe; invalid ones are kept as errors, not fatal."""
    from pairrepro.config import load_recipe

    folder = recipes_dir or paths.recipes_dir()
    recipes: dict[str, Any] = {}
    rows: dict[tuple[str, int, str], list[str]] = {}
    errors: dict[str, str] = {}
    comparisons: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            recipe = load_recipe(path)
        except PairreproError as exc:
            errors[path.stem] = str(exc)
            continue
        recipes[recipe.name] = recipe
        for ref in recipe.recipe.reproduces:
            key = (ref.paper, ref.table, normalise_label(ref.row))
            rows.setdefault(key, []).append(recipe.name)
        for ref in recipe.recipe.compares:
            comparisons.setdefault((ref.paper, ref.table), []).append((ref.row, recipe.name))
    return RecipeIndex(recipes, rows, errors, comparisons)


@dataclass
class RunInfo:
    """One seed directory ``runs/<recipe>/seed-<n>``."""

    recipe: str
    seed: int
    path: str
    # finished | running | interrupted | failed | unknown, or stale: result.json says running
    # but its process (pid on host) no longer exists on this host
    status: str
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    chosen_epoch: int | None = None
    commit: str = ""
    config: dict[str, Any] = field(default_factory=dict)

    def value(self, metric: str) -> float | None:
        split, name = metric.split(".", 1)
        value = self.metrics.get(split, {}).get(name)
        return float(value) if isinstance(value, int | float) else None


def _commit(manifest: dict[str, Any]) -> str:
    for key in ("git_commit", "commit"):
        if isinstance(manifest.get(key), str):
            return manifest[key]
    git = manifest.get("git")
    if isinstance(git, dict):
        return str(git.get("commit", ""))
    return ""


def process_gone(result: dict[str, Any]) -> bool:
    """True when ``result.json`` names its training process (``pid``, ``host``), the host is
    this one, and no such process exists. A run on another host, or one without a pid (older
    runners), cannot be checked here and counts as alive."""
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


def read_run(seed_dir: Path) -> RunInfo:
    """A seed directory's status, metrics, chosen epoch, commit and resolved config."""
    recipe = seed_dir.parent.name
    try:
        seed = int(seed_dir.name.split("-", 1)[1])
    except (IndexError, ValueError):
        seed = -1
    info = RunInfo(recipe=recipe, seed=seed, path=str(seed_dir), status="unknown")
    result_path = seed_dir / "result.json"
    if result_path.is_file():
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{result_path}: not valid JSON: {exc}") from exc
        info.status = str(result.get("status", "unknown"))
        if info.status == "running" and process_gone(result):
            info.status = "stale"
        info.metrics = result.get("metrics", {}) or {}
        info.chosen_epoch = result.get("chosen_epoch")
        info.recipe = str(result.get("recipe", recipe))
    elif (seed_dir / "metrics.jsonl").is_file() or (seed_dir / "manifest.json").is_file():
        info.status = "running"  # started, no result yet
    manifest_path = seed_dir / "manifest.json"
    if manifest_path.is_file():
        try:
            info.commit = _commit(json.loads(manifest_path.read_text(encoding="utf-8")))
        except json.JSONDecodeError:
            info.commit = ""
    config_path = seed_dir / "config.toml"
    if config_path.is_file():
        try:
            info.config = tomllib.loads(config_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError:
            info.config = {}
    return info


def find_runs(runs_dir: Path, recipe: str) -> list[RunInfo]:
    """Every ``runs/<recipe>/seed-*`` directory, sorted by seed."""
    folder = runs_dir / recipe
    if not folder.is_dir():
        return []
    runs = [read_run(d) for d in folder.glob("seed-*") if d.is_dir()]
    return sorted(runs, key=lambda r: r.seed)


def all_runs(runs_dir: Path) -> list[RunInfo]:
    """Every seed directory under ``runs_dir``."""
    if not runs_dir.is_dir():
        return []
    folders = [d for d in sorted(runs_dir.iterdir()) if d.is_dir()]
    return [run for d in folders for run in find_runs(runs_dir, d.name)]


# --------------------------------------------------------------------------- evaluation


@dataclass
class Cell:
    """Published vs reproduced for one (row, column)."""

    column: str
    published: str
    status: str
    mean: float | None = None
    std: float | None = None
    delta: float | None = None
    seeds: list[int] = field(default_factory=list)
    recipe: str = ""
    detail: str = ""  # why, or the command to run next
    reproduced_text: str = ""  # formatted reproduced value
    delta_text: str = ""
    runs: list[RunInfo] = field(default_factory=list)
    bold: bool = False
    best: bool = False


@dataclass
class EvalRow:
    row: Row
    cells: list[Cell]
    recipes: list[str]


@dataclass
class EvalTable:
    paper: Paper
    table: PaperTable
    rows: list[EvalRow]
    runs_dir: str

    def counts(self) -> dict[str, int]:
        """How many cells have each status (info cells left out)."""
        out: dict[str, int] = {}
        for row in self.rows:
            for cell in row.cells:
                if cell.status != INFO:
                    out[cell.status] = out.get(cell.status, 0) + 1
        return out


def data_status(dataset: str, variant: str = "") -> tuple[bool, str]:
    """Whether ``dataset`` is prepared; if not, the command(s) that would make it so."""
    from pairrepro.data.manifests import load_manifest

    try:
        manifest = load_manifest(dataset)
    except PairreproError:
        return False, f"no manifest data_manifests/{dataset}.toml: the dataset is not packaged"
    variants = [variant] if variant else [manifest.default_variant, ""]
    for v in variants:
        folder = paths.prepared_dir(dataset, v or None)
        if (folder / "DONE").is_file() or (folder.is_dir() and any(folder.glob("*.parquet"))):
            return True, ""
    suffix = f" --variant {variant}" if variant else ""
    raw = paths.raw_dir(dataset)
    have_raw = bool(manifest.files) and all((raw / f.path).exists() for f in manifest.files)
    if have_raw:
        return False, f"pairrepro preprocess {dataset}{suffix}"
    if not manifest.public:
        return False, (f"not public ({manifest.notes.strip() or manifest.licence}); put the files "
                       f"in a folder and run: pairrepro fetch {dataset} --from DIR")
    mirror = " --mirror DIR" if paths.mirror_dir() is None else ""
    return False, f"pairrepro fetch {dataset}{mirror} && pairrepro preprocess {dataset}{suffix}"


def _to_unit(value: float, column: Column) -> float:
    return value * 100 if column.unit == "%" else value


@cache
def _count_params_cached(recipe_source: str) -> int:
    from pairrepro.config import load_recipe
    from pairrepro.models.base import ModelContext
    from pairrepro.models.registry import build_model

    recipe = load_recipe(recipe_source)
    outputs = 3 if recipe.task.type == "classification" else 1
    ctx = ModelContext(vocab_size=10, embed_dim=recipe.embeddings.dim, num_outputs=outputs)
    model = build_model(recipe.model.name, ctx, recipe.model.hparams)
    return count_weight_params(model)


def count_weight_params(model: Any) -> int:
    """θ_M as the papers count it: weight matrices only, no biases, no embedding tables."""
    from torch import nn

    embedding_ids = {id(p) for m in model.modules() if isinstance(m, nn.Embedding)
                     for p in m.parameters()}
    return sum(p.numel() for p in model.parameters()
               if p.dim() >= 2 and id(p) not in embedding_ids)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def settings(config: dict[str, Any]) -> dict[str, Any]:
    """A recipe's (or a run's ``config.toml``) settings as flat ``section.key`` names.

    Recipes record only the model hyper-parameters they set, so the model constructor's
    defaults fill the other ``model.*`` names: a report or a figure then sees what the run
    actually used. Unknown model names (fake recipes) get no defaults.
    """
    # lazy: the registry imports every model (and torch); only hparams and figures need it
    from pairrepro.models.registry import model_hparams

    flat = flatten(config)
    name = flat.get("model.name")
    if isinstance(name, str):
        try:
            params = model_hparams(name)
        except ConfigError:
            return flat
        for key, param in params.items():
            if param.default is not param.empty:
                flat.setdefault(f"model.{key}", param.default)
    return flat


def _hparam_equal(published: str, value: Any) -> bool:
    text = published.replace("−", "-").replace(" ", "")
    if text.startswith("(") and text.endswith(")"):
        parts = [parse_published(p) for p in text[1:-1].split(",")]
        return isinstance(value, list | tuple) and [float(v) for v in value] == parts
    number = parse_published(text)
    if number is None or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isclose(float(value), number, rel_tol=1e-9, abs_tol=1e-12)


def _metric_cell(table: PaperTable, column: Column, row: Row, recipe_name: str,
                 index: RecipeIndex, runs_dir: Path) -> Cell:
    published = row.values.get(column.key, "")
    cell = Cell(column=column.key, published=published, status=NOT_RUN, recipe=recipe_name,
                bold=column.key in row.bold, best=column.key in row.best)
    runs = find_runs(runs_dir, recipe_name)
    cell.runs = runs
    finished = [r for r in runs if r.status == "finished" and r.value(column.metric) is not None]
    if finished:
        values = [_to_unit(r.value(column.metric) or 0.0, column) for r in finished]
        cell.mean = statistics.fmean(values)
        cell.std = statistics.stdev(values) if len(values) > 1 else 0.0
        cell.seeds = [r.seed for r in finished]
        cell.reproduced_text = format_number(cell.mean, column)
        if len(values) > 1:
            cell.reproduced_text += f" ± {format_number(cell.std, column)}"
        target = parse_published(published)
        if target is None:
            cell.status = NEW
        else:
            cell.delta = cell.mean - target
            cell.delta_text = format_number(cell.delta, column, signed=True)
            ok = abs(cell.delta) <= table.tolerance_for(column) + 1e-9
            cell.status = REPRODUCED if ok else OFF
        pending = [r for r in runs if r.status == "running"]
        stopped = [r for r in runs if r.status in ("stale", "interrupted")]
        notes = [f"{len(pending)} more seed(s) running"] if pending else []
        notes += [f"{len(stopped)} seed(s) stopped (--resume)"] if stopped else []
        if notes:
            cell.detail = "; ".join(notes)
        return cell
    if any(r.status == "running" for r in runs):
        cell.status = RUNNING
        cell.detail = ", ".join(r.path for r in runs if r.status == "running")
        return cell
    stopped = [r for r in runs if r.status in ("stale", "interrupted")]
    if stopped:
        cell.status = STALE
        why = {"stale": "process gone", "interrupted": "interrupted"}
        cell.detail = (", ".join(f"{r.path} ({why[r.status]})" for r in stopped)
                       + f"; continue: pairrepro train {_recipe_path(recipe_name)} --resume")
        return cell
    if any(r.status == "failed" for r in runs):
        cell.status = FAILED
        cell.detail = f"see {runs[0].path}; rerun: pairrepro train {_recipe_path(recipe_name)}"
        return cell
    recipe = index.recipes[recipe_name]
    ready, command = data_status(recipe.data.dataset, recipe.data.variant)
    if ready:
        cell.status = NOT_RUN
        cell.detail = f"pairrepro train {_recipe_path(recipe_name)}"
    else:
        cell.status = DATA_MISSING
        cell.detail = command
    return cell


def _recipe_path(name: str) -> str:
    """The recipe file as a user would type it (relative to the working folder if inside)."""
    path = (paths.recipes_dir() / f"{name}.toml").absolute()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _choose_recipe(candidates: list[str], column: Column, index: RecipeIndex) -> str:
    if column.dataset:
        for name in candidates:
            if index.recipes[name].data.dataset == column.dataset:
                return name
        return ""
    return candidates[0] if candidates else ""


def _row_recipes(paper: str, table: PaperTable, row: Row, index: RecipeIndex) -> list[str]:
    if row.recipe:
        if row.recipe not in index.recipes:
            raise ConfigError(
                f"{paper} Table {table.number} row {row.label!r}: recipe {row.recipe!r} not found",
                hint=index.errors.get(row.recipe, "check recipes/ (or $PAIRREPRO_RECIPES)"),
            )
        return [row.recipe]
    found = index.for_row(paper, table.number, row.label)
    if not found and row.cite:
        found = index.for_row(paper, table.number, row.printed_label)
    return sorted(set(found))


def _hparam_cell(column: Column, row: Row, recipe_name: str, index: RecipeIndex) -> Cell:
    published = row.values.get(column.key, "")
    cell = Cell(column=column.key, published=published, status=NO_RECIPE, recipe=recipe_name)
    if not recipe_name:
        ref = column.from_row
        cell.detail = (f"no recipe declares Table {ref.get('table')} row {ref.get('row')!r}")
        return cell
    config = index.recipes[recipe_name].to_dict()
    explicit, resolved = flatten(config), settings(config)
    for entry in row.keys:
        names = entry if isinstance(entry, list) else [entry]
        if not all(name in resolved for name in names):
            continue
        values = [resolved[name] for name in names]
        value: Any = tuple(values) if isinstance(entry, list) else values[0]
        cell.reproduced_text = (f"({', '.join(map(str, values))})" if isinstance(entry, list)
                                else str(value))
        cell.status = REPRODUCED if _hparam_equal(published, value) else OFF
        defaults = [name for name in names if name not in explicit]
        cell.detail = f"{recipe_name}: {' + '.join(names)} = {value!r}" + (
            f" ({', '.join(defaults)}: model default)" if defaults else "")
        return cell
    cell.status = OFF
    cell.reproduced_text = "not set"
    tried = ", ".join("+".join(e) if isinstance(e, list) else e for e in row.keys)
    cell.detail = f"{recipe_name} sets none of {tried}"
    return cell


def _params_cell(column: Column, row: Row, recipe_name: str, index: RecipeIndex) -> Cell:
    published = row.values.get(column.key, "")
    cell = Cell(column=column.key, published=published, status=INFO, recipe=recipe_name)
    if not recipe_name:
        return cell
    try:
        count = _count_params_cached(index.recipes[recipe_name].source)
    except Exception as exc:  # a model not written yet must not stop the report
        cell.status = NOT_RUN
        cell.detail = f"cannot build the model to count parameters: {exc}"
        return cell
    cell.mean = float(count)
    cell.reproduced_text = format_count(count)
    target = parse_published(published)
    if target:
        cell.delta = count - target
        cell.delta_text = f"{cell.delta / target:+.1%}".replace("-", "−")
        # θ_M is printed to 2-3 significant digits: within 5% counts as the same count.
        cell.status = REPRODUCED if abs(cell.delta) <= 0.05 * target else OFF
    cell.detail = f"{count:,} weights without embeddings and biases ({recipe_name})"
    return cell


def evaluate_table(paper: Paper, table: PaperTable, runs_dir: Path,
                   index: RecipeIndex | None = None) -> EvalTable:
    """Every cell of ``table`` with its published value, reproduced value and status."""
    index = index or load_recipe_index()
    rows: list[EvalRow] = []
    for row in table.rows + comparison_rows(paper, table, index):
        cells: list[Cell] = []
        if table.kind == "hparams":
            for column in table.columns:
                ref = column.from_row
                found = index.for_row(paper.paper, int(ref.get("table", 0)), str(ref.get("row")))
                cells.append(_hparam_cell(column, row, sorted(found)[0] if found else "", index))
            rows.append(EvalRow(row, cells, sorted({c.recipe for c in cells if c.recipe})))
            continue
        candidates = _row_recipes(paper.paper, table, row, index)
        for column in table.columns:
            published = row.values.get(column.key, "")
            marks = {"bold": column.key in row.bold, "best": column.key in row.best}
            if column.kind == "info":
                cells.append(Cell(column.key, published, INFO, **marks))
                continue
            recipe = _choose_recipe(candidates, column, index)
            if column.kind == "params":
                cells.append(_params_cell(column, row, recipe, index))
                continue
            if not recipe:
                cell = Cell(column.key, published, NO_RECIPE, **marks)
                if row.why:
                    cell.status, cell.detail = NOT_REPRODUCIBLE, row.why
                elif table.data_note:
                    cell.status, cell.detail = NOT_REPRODUCIBLE, table.data_note
                else:
                    cell.detail = "no recipe declares this row"
                cells.append(cell)
                continue
            cells.append(_metric_cell(table, column, row, recipe, index, runs_dir))
        rows.append(EvalRow(row, cells, candidates))
    return EvalTable(paper, table, rows, str(runs_dir))


def evaluate_paper(name: str, runs_dir: Path, table: int | None = None,
                   index: RecipeIndex | None = None) -> list[EvalTable]:
    """Evaluate one table (``table``) or every table of a paper."""
    paper = load_paper(name)
    index = index or load_recipe_index()
    tables = [paper.table(table)] if table is not None else paper.tables
    return [evaluate_table(paper, t, runs_dir, index) for t in tables]


COMPARISON_BLOCK = "comparison"


def comparison_rows(paper: Paper, table: PaperTable, index: RecipeIndex) -> list[Row]:
    """The rows recipes add below ``table`` with ``compares`` (none for hparams tables)."""
    if table.kind == "hparams":
        return []
    return [Row(label=label, values={}, block=COMPARISON_BLOCK, recipe=recipe)
            for label, recipe in index.comparisons.get((paper.paper, table.number), [])]


def table_recipes(paper: Paper, table: PaperTable, index: RecipeIndex,
                  comparisons: bool = False) -> list[str]:
    """Every recipe that reproduces a row of ``table`` (for ``reproduce`` and ``--plan``),
    and with ``comparisons`` the recipes of its comparison rows too."""
    names: set[str] = set()
    for row in table.rows:
        if table.kind == "hparams":
            continue
        names.update(_row_recipes(paper.paper, table, row, index))
    if comparisons:
        names.update(row.recipe for row in comparison_rows(paper, table, index))
    return sorted(names)


def eval_to_json(ev: EvalTable) -> dict[str, Any]:
    """A JSON-ready view of an evaluated table (``--json``)."""
    return {
        "paper": ev.paper.paper, "table": ev.table.number, "caption": ev.table.caption,
        "counts": ev.counts(),
        "rows": [
            {"label": r.row.label, "block": r.row.block, "recipes": r.recipes,
             "cells": {c.column: {
                 "published": c.published, "status": c.status, "mean": c.mean, "std": c.std,
                 "delta": c.delta, "seeds": c.seeds, "recipe": c.recipe, "detail": c.detail,
                 "runs": [{"path": run.path, "seed": run.seed, "status": run.status,
                           "commit": run.commit, "chosen_epoch": run.chosen_epoch}
                          for run in c.runs]} for c in r.cells}}
            for r in ev.rows
        ],
    }
