"""The grid every format of an evaluated paper table is drawn from (:func:`layout`); the texts
of a cell are made here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths, stats
from pairrepro.planning.model_facts import needs_training
from pairrepro.planning.paper_tables import Column
from pairrepro.planning.recipe_index import COMPARISON_BLOCK
from pairrepro.report.analyses.comparison import holm_text, test_words, versus_text
from pairrepro.report.tables import numbers
from pairrepro.report.tables.cells import (
    INFO,
    MARKS,
    OFF,
    REFERENCE,
    REPRODUCED,
    SHORT,
    VARIANT,
    VERDICTS,
    Cell,
    EvalTable,
)
from pairrepro.runs import RunInfo


@dataclass
class Text:
    text: str
    bold: bool = False
    status: str = ""
    note: int = 0  # index into Layout.notes (1-based), 0 = none
    run_ref: str = ""  # key into Layout.runs
    link: str = ""


@dataclass
class Layout:
    title: str
    headers: list[str]
    rows: list[list[Text]]
    block_starts: set[int] = field(default_factory=set)  # row indices starting a new block
    notes: list[str] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)  # recipe -> description
    key: list[str] = field(default_factory=list)  # what marks mean: once per page (page_key)
    legend: str = ""  # what holds for this table alone

    @property
    def full_legend(self) -> str:
        """The key and the table's own legend: a table shown alone."""
        return " ".join([*self.key, self.legend])


def _where(runs: list[RunInfo]) -> str:
    """Where runs were made: device, torch build and CPU threads (from their manifests)."""
    seen = []
    for m in (run.manifest for run in runs if run.manifest.get("device")):
        device, threads = str(m["device"]), m.get("cpu_threads")
        seen.append(device + (f", torch {m['torch']}" if m.get("torch") else "")
                    + (f", {threads} thread{'s' if threads != 1 else ''}"
                       if threads and not device.startswith("cuda") else ""))
    return ", ".join(dict.fromkeys(seen))


def _commit(run: RunInfo) -> str:
    """The run's commit (``+dirty``, ``unknown``) as its manifest records it."""
    git = run.manifest.get("git") if isinstance(run.manifest.get("git"), dict) else {}
    commit = str(git.get("commit") or run.commit or "")[:10] or "unknown"
    return commit + ("+dirty" if git.get("dirty") else "")


def _describe_runs(recipe: str, runs: list[RunInfo], reference: bool = False) -> str:
    finished = sorted((r for r in runs if r.status == "finished"), key=lambda r: r.seed)
    commits = [_commit(r) for r in finished] or ["unknown"]
    commits = commits[:1] if len(set(commits)) == 1 else commits  # one commit: every seed's
    seeds = ",".join(str(r.seed) for r in finished)
    epochs = ",".join("?" if r.chosen_epoch is None else str(r.chosen_epoch) for r in finished)
    folder = _shown(Path(finished[0].path).parent) if finished else recipe
    setup = _run_setup(finished[0].config) if finished else ""
    where = _where(finished)
    return (f"{folder} ({'reference run; ' if reference else ''}"
            f"{'made on ' + where + '; ' if where else ''}"
            f"commit{'s in seed order' if len(commits) > 1 else ''} {', '.join(commits)}; "
            f"seeds {seeds}; chosen epochs {epochs}{'; ' + setup if setup else ''})")


def _shown(folder: Path) -> str:
    """A run's folder relative to the working folder or the project, else from its parent's
    name: a page never names a folder of the machine it was made on."""
    for base in (Path.cwd(), paths.PROJECT_DIR):
        if folder.absolute().is_relative_to(base.absolute()):
            return folder.absolute().relative_to(base.absolute()).as_posix()
    return f"{folder.parent.name}/{folder.name}"


def _run_setup(config: dict[str, Any]) -> str:
    """Vectors, epochs and training data size from the run's resolved config."""
    emb, train, data, model, task = (config.get(k, {}) for k in (
        "embeddings", "train", "data", "model", "task"))
    if needs_training(str(model.get("name", ""))) is False:
        return "no training"
    epochs, pairs = train.get("epochs"), data.get("max_train_pairs")
    negatives = task.get("max_negatives_per_query")
    parts = [emb and f"embeddings {emb.get('source', '?')} {emb.get('dim', '?')}d",
             model.get("use_exact_match") and "exact-match feature",
             epochs and f"at most {epochs} epoch{'s' if epochs != 1 else ''}",
             pairs and f"{int(pairs):,} training pairs sampled",
             negatives and f"≤{negatives} negatives per query and epoch"]
    return "; ".join(part for part in parts if part)


def value_text(cell: Cell, column: Column) -> str:
    """The reproduced value as the paper would print it ("" without one)."""
    found = cell.estimate
    if found is None:
        if cell.status == VARIANT:
            return f"variant (keys {', '.join(cell.variant_keys)})"
        if cell.status not in (REPRODUCED, OFF):
            return ""
        if isinstance(cell.setting, tuple):
            return f"({', '.join(map(str, cell.setting))})"
        return "not set" if cell.setting is None else str(cell.setting)
    if column.kind == "params":
        return numbers.format_count(found.mean)
    spread = (f" ± {numbers.format_number(found.std or 0.0, column)}"
              if found.interval is None and len(found.seeds) > 1 else "")
    return numbers.format_number(found.mean, column) + spread


def delta_text(cell: Cell, column: Column) -> str:
    """Reproduced minus published in the column's unit (a parameter count: relative)."""
    delta = cell.verdict.delta
    if delta is None:
        return ""
    if column.kind == "params":
        return f"{delta / (numbers.parse_published(cell.published) or 1.0):+.1%}".replace("-", "−")
    return numbers.format_number(delta, column, signed=True)


def comparison_text(cell: Cell, column: Column) -> str:
    """``--compare-to``'s "+0.052 (p 0.003)" ("n/a" without a test, "" not compared)."""
    found = cell.comparison
    return "" if found is None else "n/a" if found.p_value is None else versus_text(found, column)


def _ours(cell: Cell, column: Column, layout: Layout) -> Text:
    out = Text("", status=cell.status)
    if text := value_text(cell, column):
        found = cell.estimate
        parts = [text]
        if found is not None and found.interval is not None and column.kind != "params":
            parts.append(numbers.format_interval(found.interval, numbers.in_column(column)))
        if delta_text(cell, column):
            parts.append(f"({delta_text(cell, column)})")
        if cell.status in MARKS:  # †: one trained model, no verdict about the method
            parts.append("†" if cell.one_model else MARKS[cell.status])
        if found is not None and found.last_epoch is not None:
            parts.append(f"(last epoch {numbers.format_number(found.last_epoch, column)})")
        if found is not None and found.reference_damaged:
            parts.append("(ref damaged)")
        elif found is not None and found.reference is not None:
            parts.append(f"(ref {numbers.format_number(found.reference, column)})")
        out.text = " ".join(parts)
        if cell.runs and any(r.status == "finished" for r in cell.runs):
            reference = cell.source == REFERENCE
            out.run_ref = cell.recipe + (" (reference)" if reference else "")
            out.link = cell.runs[0].path.rsplit("/seed-", 1)[0]
            layout.runs.setdefault(out.run_ref, _describe_runs(cell.recipe, cell.runs, reference))
        if cell.reference_runs:
            layout.runs.setdefault(f"{cell.recipe} (reference)", _describe_runs(
                cell.recipe, cell.reference_runs, reference=True))
    else:
        out.text = SHORT.get(cell.status, cell.status)
    # a verdict's detail is a note only for metric cells (others keep theirs for --json)
    if cell.detail and (cell.status not in VERDICTS or cell.source):
        if cell.detail not in layout.notes:
            layout.notes.append(cell.detail)
        out.note = layout.notes.index(cell.detail) + 1
    return out


def layout(ev: EvalTable) -> Layout:
    table = ev.table
    lay = Layout(title=f"Table {table.number}: {table.caption}",
                 headers=[table.label_header or ""], rows=[])
    for column in table.columns:
        if column.kind == "info" and table.kind != "hparams":
            lay.headers.append(column.header)
            continue
        ours = "recipe" if table.kind == "hparams" else "ours"
        lay.headers += [f"{column.header} (paper)", f"{column.header} ({ours})"]
        if ev.compare_to and column.kind == "metric" and table.kind != "hparams":
            lay.headers += [f"{column.header} vs {ev.compare_to}", "Holm p"]
    lay.block_starts = {i for i in range(1, len(ev.rows))
                        if ev.rows[i].row.block != ev.rows[i - 1].row.block}
    for erow in ev.rows:
        row = erow.row
        line = [Text(row.printed_label + (f" [footnote {row.footnote}]" if row.footnote else "")
                     + (" †" if any(c.one_model for c in erow.cells) else ""))]
        for column, cell in zip(table.columns, erow.cells, strict=True):
            line.append(Text(cell.published or "", bold=cell.bold or cell.best))
            if column.kind != "info":
                line.append(_ours(cell, column, lay) if cell.status != INFO else Text(""))
            if ev.compare_to and column.kind == "metric" and table.kind != "hparams":
                line += [Text("(the named row)" if row.printed_label == ev.compare_to
                              else comparison_text(cell, column)), Text(holm_text(cell.comparison))]
        lay.rows.append(line)
    facts = ["Cells: " + ", ".join(f"{n} {status}" for status, n in ev.counts().items()) + "."]
    if table.kind == "hparams":
        lay.key = ["Hyper-parameter tables: ✓ the recipe sets the paper's value; ✗ it does not."]
    else:
        lay.key = _verdict_rule(ev)
        facts.insert(0, _resamples_text([c for r in ev.rows for c in r.cells]))
        if ev.compare_to:
            tests = sum(c.comparison is not None and c.comparison.p_value is not None
                        for r in ev.rows for c in r.cells)
            facts.append(f"The 'vs {ev.compare_to}' columns: each row's value minus that "
                         f"row's, on the same {_splits(ev)} units, with "
                         f"{test_words(_splits(ev) + ' units')} (n/a: no saved predictions or "
                         "other units). Holm p: the same p-values adjusted by Holm's step-down "
                         f"method over the {tests} tests of this table (family-wise error).")
    if table.joined_header:
        facts.append(f"The paper prints {table.joined_header} as one column.")
    if any(r.row.best for r in ev.rows):
        lay.key.append("Bold: bold in the paper, or best by value where the conversion lost it.")
    if any(r.row.block == COMPARISON_BLOCK for r in ev.rows):
        lay.key.append("The last block holds models run here for comparison: the paper has "
                       "no number for them.")
    lay.legend = " ".join(f for f in facts if f)
    return lay


def _splits(ev: EvalTable) -> str:
    """The splits the table's metric columns score ("test", "dev", "dev / test")."""
    return " / ".join(sorted({c.metric.split(".")[0] for c in ev.table.columns
                              if c.kind == "metric" and c.metric})) or "test"


def _verdict_rule(ev: EvalTable) -> list[str]:
    """The key of a results table's marks."""
    cells = [c for r in ev.rows for c in r.cells]
    key = [f"ours = mean over seeds [{stats.CONFIDENCE:.0%} bootstrap interval over {_splits(ev)} "
           "queries (ranking) or pairs (classification) and seeds] (delta); ✓ the published "
           "value lies inside the interval or within half a unit of its last printed digit; "
           "↓ / ↑ the interval lies below / above it.", MC_TEXT]
    if any(any(c.estimate.interval.moving()) for c in cells if c.estimate and c.estimate.interval):
        key.append(f"{numbers.MOVING_NOTE}.")
    if any(c.one_model for c in cells):
        key.append("†: one trained model (one seed); its interval covers the test units only, "
                 "not training randomness, so its verdict is about that model, not the "
                 "method.")
    if any(c.estimate and c.estimate.last_epoch is not None for c in cells):
        key.append(f"{_splits(ev)} is also the split each run's epoch was chosen on (the "
                 "chosen epoch's value is the best of several looks at it, so it leans "
                 "high); 'last epoch' is the mean over seeds of the value at each run's "
                 "final epoch (metrics.jsonl).")
    if any(c.verdict.rule == "tolerance" for c in cells):
        key.append(f"Cells without per-unit values (no interval; mean ± std over seeds): ✓ "
                 f"within ±{_tolerances(ev)} of the published value.")
    if any(c.source == REFERENCE for c in cells):
        key.append("Values from results/ are the project's reference runs (where each was made "
                 "is listed under Runs); values from runs/ are your own, with the reference "
                 "value beside them (ref).")
    return key


MC_TEXT = (f"Resamples double from {stats.RESAMPLES:,} until each endpoint's Monte-Carlo "
           f"s.e. is at most {stats.ENDPOINT_SE:g} (fraction scale), no rounding boundary of its "
           f"printed digits lies within {stats.MC_Z:g} s.e. of it and the published value lies "
           f"more than {stats.MC_Z:g} s.e. from both endpoints, at most "
           f"{stats.INTERVAL_CAP:,}; ? undecided: the published value still within that at the "
           "cap, so inside or outside would depend on the resampling seed.")


def _resamples_text(cells: list[Cell]) -> str:
    if not (found := [c.estimate.interval for c in cells if c.estimate and c.estimate.interval]):
        return ""
    counts = sorted({i.resamples for i in found})
    span = f"{counts[0]:,}" + (f"–{counts[-1]:,}" if len(counts) > 1 else "")
    return f"Here {span} resamples; largest endpoint MC s.e. {max(i.mc_se for i in found):.4f}."


def page_key(layouts: list[Layout]) -> list[str]:
    """The key of several tables shown together: each sentence once, in order of use."""
    return list(dict.fromkeys(sentence for lay in layouts for sentence in lay.key))


def _tolerances(ev: EvalTable) -> str:
    parts = []
    for unit, name in (("%", "points"), ("fraction", "")):
        if cols := [c for c in ev.table.columns if c.unit == unit and c.kind == "metric"]:
            parts.append(f"{ev.table.tolerance_for(cols[0]):g} {name}".strip())
    return " / ".join(parts) or f"{ev.table.tolerance:g}"
