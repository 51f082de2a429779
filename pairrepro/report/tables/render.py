"""Render evaluated paper tables: terminal (rich), Markdown, LaTeX and HTML, all from the grid
:func:`layout` builds once: per column the published value (bold as the paper prints it, or
best by value where a conversion lost the bold) and the reproduced ``mean ± std (delta) mark``;
below it a note per cell without a number (why, or the command to run) and a line per recipe
naming its runs (folder, commit, seeds, chosen epochs).
"""

from __future__ import annotations

import html
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.planning.model_facts import needs_training
from pairrepro.planning.paper_tables import Column
from pairrepro.planning.recipe_index import COMPARISON_BLOCK
from pairrepro.report.analyses.comparison import holm_text, versus_text
from pairrepro.report.analyses.evidence import F1_PAIRING
from pairrepro.report.tables.cells import (
    ABOVE,
    BELOW,
    DAMAGED,
    DATA_MISSING,
    FAILED,
    INFO,
    NEW,
    NO_RECIPE,
    NO_REFERENCE,
    NOT_REPRODUCIBLE,
    NOT_RUN,
    OFF,
    REFERENCE,
    REPRODUCED,
    RUNNING,
    STALE,
    UNDECIDED,
    VARIANT,
    VERDICTS,
    Cell,
    EvalTable,
)
from pairrepro.report.tables.numbers import (
    MOVING_NOTE,
    format_count,
    format_interval,
    format_number,
    in_column,
    parse_published,
)
from pairrepro.runs import RunInfo
from pairrepro.stats import (
    CONFIDENCE,
    ENDPOINT_SE,
    INTERVAL_CAP,
    MC_Z,
    P_MARGIN,
    P_SE,
    RESAMPLES,
    TEST_BATCH,
    TEST_CAP,
)

FORMATS = ("term", "md", "latex", "html")
MARKS = {REPRODUCED: "✓", OFF: "✗", BELOW: "↓", ABOVE: "↑", UNDECIDED: "? undecided"}
SHORT = {
    RUNNING: "running", STALE: "stale", DAMAGED: "damaged", FAILED: "failed",
    NOT_RUN: "not run", DATA_MISSING: "data missing", NO_RECIPE: "no recipe",
    NOT_REPRODUCIBLE: "n/a", NEW: "", NO_REFERENCE: "no reference run", VARIANT: "variant",
}
STYLE = {REPRODUCED: "green", OFF: "red", BELOW: "red", ABOVE: "red", NEW: "cyan",
         UNDECIDED: "yellow",
         VARIANT: "yellow", RUNNING: "yellow", STALE: "yellow dim", DAMAGED: "bold red",
         FAILED: "bold red", NOT_RUN: "dim", NO_REFERENCE: "dim", DATA_MISSING: "magenta",
         NO_RECIPE: "dim", NOT_REPRODUCIBLE: "dim"}


@dataclass
class Text:
    """One rendered grid cell: its text and how to dress it."""

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
    legend: str = ""


def _where(runs: list[RunInfo]) -> str:
    """Where runs were made: device, torch build and CPU threads (from their manifests)."""
    seen: list[str] = []
    for run in runs:
        m = run.manifest
        if not m.get("device"):
            continue
        device = str(m.get("device"))
        threads = m.get("cpu_threads")
        text = device + (f", torch {m['torch']}" if m.get("torch") else "")
        if threads and not device.startswith("cuda"):
            text += f", {threads} thread{'s' if threads != 1 else ''}"
        if text not in seen:
            seen.append(text)
    return ", ".join(seen)


def _commit(run: RunInfo) -> str:
    """The run's commit as its manifest records it, ``+dirty`` when the code was not all
    committed (``unknown`` without a record)."""
    git = run.manifest.get("git") if isinstance(run.manifest.get("git"), dict) else {}
    commit = str(git.get("commit") or run.commit or "")[:10] or "unknown"
    return commit + ("+dirty" if git.get("dirty") else "")


def _describe_runs(recipe: str, runs: list[RunInfo], reference: bool = False) -> str:
    finished = sorted((r for r in runs if r.status == "finished"), key=lambda r: r.seed)
    commits = [_commit(r) for r in finished] or ["unknown"]
    if len(set(commits)) == 1:
        commits = commits[:1]  # one commit for every seed
    seeds = ",".join(str(r.seed) for r in finished)
    epochs = ",".join("?" if r.chosen_epoch is None else str(r.chosen_epoch) for r in finished)
    folder = finished[0].path.rsplit("/seed-", 1)[0] if finished else recipe
    setup = _run_setup(finished[0].config) if finished else ""
    where = _where(finished)
    return (f"{folder} ({'reference run; ' if reference else ''}"
            f"{'made on ' + where + '; ' if where else ''}"
            f"commit{'s in seed order' if len(commits) > 1 else ''} {', '.join(commits)}; "
            f"seeds {seeds}; chosen epochs {epochs}{'; ' + setup if setup else ''})")


def _run_setup(config: dict[str, Any]) -> str:
    """What a reader needs to weigh a reproduced number: vectors, epochs, training data size
    (from the run's resolved config, so a CPU-sized or 50-d run says so next to its number)."""
    emb, train, data, model, task = (config.get(k, {}) for k in (
        "embeddings", "train", "data", "model", "task"))
    if needs_training(str(model.get("name", ""))) is False:
        return "no training"
    parts = []
    if emb:
        parts.append(f"embeddings {emb.get('source', '?')} {emb.get('dim', '?')}d")
    if model.get("use_exact_match"):
        parts.append("exact-match feature")
    if train.get("epochs"):
        parts.append(f"at most {train['epochs']} epoch{'s' if train['epochs'] != 1 else ''}")
    if data.get("max_train_pairs"):
        parts.append(f"{int(data['max_train_pairs']):,} training pairs sampled")
    if task.get("max_negatives_per_query"):
        parts.append(f"≤{task['max_negatives_per_query']} negatives per query and epoch")
    return "; ".join(parts)


def value_text(cell: Cell, column: Column) -> str:
    """The reproduced value as the paper would print it ("" without one): the mean (± the
    seeds' std where there is no interval), a parameter count, the recipe's setting."""
    found = cell.estimate
    if found is None:
        if cell.status == VARIANT:
            return f"variant (keys {', '.join(cell.variant_keys)})"
        if cell.status not in (REPRODUCED, OFF):
            return ""
        if cell.setting is None:
            return "not set"
        setting = cell.setting
        return f"({', '.join(map(str, setting))})" if isinstance(setting, tuple) else str(setting)
    if column.kind == "params":
        return format_count(found.mean)
    spread = (f" ± {format_number(found.std or 0.0, column)}"
              if found.interval is None and len(found.seeds) > 1 else "")
    return format_number(found.mean, column) + spread


def delta_text(cell: Cell, column: Column) -> str:
    """Reproduced minus published in the column's unit (a parameter count: relative)."""
    delta = cell.verdict.delta
    if delta is None:
        return ""
    if column.kind == "params":
        return f"{delta / (parse_published(cell.published) or 1.0):+.1%}".replace("-", "−")
    return format_number(delta, column, signed=True)


def comparison_text(cell: Cell, column: Column) -> str:
    """``--compare-to``'s "+0.052 (p 0.003)" ("n/a" without a test, "" not compared)."""
    if cell.comparison is None:
        return ""
    return versus_text(cell.comparison, column) if cell.comparison.p_value is not None \
        else "n/a"


def _ours(cell: Cell, column: Column, layout: Layout) -> Text:
    out = Text("", status=cell.status)
    text = value_text(cell, column)
    if text:
        found = cell.estimate
        parts = [text]
        if found is not None and found.interval is not None and column.kind != "params":
            parts.append(format_interval(found.interval, in_column(column)))
        if delta_text(cell, column):
            parts.append(f"({delta_text(cell, column)})")
        if cell.one_model and cell.status in MARKS:
            parts.append("†")  # one trained model: no verdict about the method
        elif cell.status in MARKS:
            parts.append(MARKS[cell.status])
        if found is not None and found.last_epoch is not None:
            parts.append(f"(last epoch {format_number(found.last_epoch, column)})")
        if found is not None and found.reference_damaged:
            parts.append("(ref damaged)")
        elif found is not None and found.reference is not None:
            parts.append(f"(ref {format_number(found.reference, column)})")
        out.text = " ".join(parts)
        if cell.runs and any(r.status == "finished" for r in cell.runs):
            reference = cell.source == REFERENCE
            out.run_ref = cell.recipe + (" (reference)" if reference else "")
            out.link = cell.runs[0].path.rsplit("/seed-", 1)[0]
            layout.runs.setdefault(out.run_ref, _describe_runs(cell.recipe, cell.runs,
                                                               reference))
        if cell.reference_runs:
            layout.runs.setdefault(f"{cell.recipe} (reference)", _describe_runs(
                cell.recipe, cell.reference_runs, reference=True))
    else:
        out.text = SHORT.get(cell.status, cell.status)
    # a verdict cell's detail is a note only for metric cells (left-out runs, damage);
    # hyper-parameter and parameter-count cells keep theirs for --json
    if cell.detail and (cell.status not in VERDICTS or cell.source):
        if cell.detail not in layout.notes:
            layout.notes.append(cell.detail)
        out.note = layout.notes.index(cell.detail) + 1
    return out


def layout(ev: EvalTable) -> Layout:
    """The grid of an evaluated table, shared by every output format."""
    table = ev.table
    lay = Layout(title=f"Table {table.number}: {table.caption}", headers=[], rows=[])
    lay.headers.append(table.label_header or "")
    for column in table.columns:
        if table.kind == "hparams":
            lay.headers += [f"{column.header} (paper)", f"{column.header} (recipe)"]
        elif column.kind == "info":
            lay.headers.append(column.header)
        else:
            lay.headers += [f"{column.header} (paper)", f"{column.header} (ours)"]
            if ev.compare_to and column.kind == "metric":
                lay.headers += [f"{column.header} vs {ev.compare_to}", "Holm p"]
    previous_block = None
    for i, erow in enumerate(ev.rows):
        row = erow.row
        if previous_block is not None and row.block != previous_block:
            lay.block_starts.add(i)
        previous_block = row.block
        label = row.printed_label
        if row.footnote:
            label = f"{label} [footnote {row.footnote}]"
        if any(c.one_model for c in erow.cells):
            label += " †"
        line = [Text(label)]
        for column, cell in zip(table.columns, erow.cells, strict=True):
            line.append(Text(cell.published or "", bold=cell.bold or cell.best))
            if column.kind != "info":
                line.append(_ours(cell, column, lay) if cell.status != INFO else Text(""))
            if ev.compare_to and column.kind == "metric" and table.kind != "hparams":
                same = row.printed_label == ev.compare_to
                line.append(Text("(the named row)" if same else comparison_text(cell, column)))
                line.append(Text(holm_text(cell.comparison)))
        lay.rows.append(line)
    counts = ev.counts()
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    if table.kind == "hparams":
        lay.legend = f"✓ the recipe sets the paper's value; ✗ it does not. Cells: {summary}."
    else:
        lay.legend = _verdict_rule(ev) + f" Cells: {summary}."
        if ev.compare_to:
            tests = sum(c.comparison is not None and c.comparison.p_value is not None
                        for r in ev.rows for c in r.cells)
            lay.legend += (f" The 'vs {ev.compare_to}' columns: each row's value minus that "
                           f"row's, on the same {_splits(ev)} units, with the two-sided "
                           "p-value of a "
                           f"paired randomization test ({_test_resamples(ev)}; "
                           f"{F1_PAIRING}; n/a: no saved predictions or other units). "
                           "Holm p: the same p-values adjusted by Holm's step-down method "
                           f"over the {tests} tests of this table (family-wise error).")
    if table.joined_header:
        lay.legend += f" The paper prints {table.joined_header} as one column."
    if any(r.row.best for r in ev.rows):
        lay.legend += " Bold: bold in the paper, or best by value where the conversion lost it."
    if any(r.row.block == COMPARISON_BLOCK for r in ev.rows):
        lay.legend += (" The last block holds models run here for comparison: the paper has "
                       "no number for them.")
    return lay


def _test_resamples(ev: EvalTable) -> str:
    """The paired tests' resampling in words (adaptive: pairrepro.stats)."""
    return (f"resamples in batches of {TEST_BATCH:,} until the p-value's Monte-Carlo s.e. "
            f"sqrt(p(1-p)/R) is at most {P_SE:g} and it is sure whether p lies within "
            f"{P_MARGIN:g} of 0.05, at most {TEST_CAP:,}; 'undecided at 0.05' where p lies "
            f"within the larger of {P_MARGIN:g} and {MC_Z:g} MC s.e. of 0.05")


def _splits(ev: EvalTable) -> str:
    """The splits the table's metric columns score ("test", "dev", "dev / test")."""
    return " / ".join(sorted({c.metric.split(".")[0] for c in ev.table.columns
                              if c.kind == "metric" and c.metric})) or "test"


def _verdict_rule(ev: EvalTable) -> str:
    """The footer's statement of the verdict rule (pairrepro.report.tables.cells)."""
    cells = [c for r in ev.rows for c in r.cells]
    text = (f"ours = mean over seeds [{CONFIDENCE:.0%} bootstrap interval over {_splits(ev)} "
            "queries "
            "(ranking) or pairs (classification) and seeds] (delta); ✓ the published value "
            "lies inside the interval or within half a unit of its last printed digit; ↓ / ↑ "
            "the interval lies below / above it. " + _mc_text(cells))
    if any(c.one_model for c in cells):
        text += (" †: one trained model (one seed); its interval covers the test units only, "
                 "not training randomness, so its verdict is about that model, not the "
                 "method.")
    if any(c.estimate and c.estimate.last_epoch is not None for c in cells):
        text += (f" {_splits(ev)} is also the split each run's epoch was chosen on (the "
                 "chosen epoch's value is the best of several looks at it, so it leans "
                 "high); 'last epoch' is the mean over seeds of the value at each run's "
                 "final epoch (metrics.jsonl).")
    if any(c.verdict.rule == "tolerance" for c in cells):
        text += (f" Cells without per-unit values (no interval; mean ± std over seeds): ✓ "
                 f"within ±{_tolerances(ev)} of the published value.")
    if any(c.source == REFERENCE for c in cells):
        text += (" Values from results/ are the project's reference runs (where each was made "
                 "is listed under Runs); values from runs/ are your own, with the reference "
                 "value beside them (ref).")
    return text


def _mc_text(cells: list[Cell]) -> str:
    """How many resamples the intervals took and their largest Monte-Carlo error."""
    found = [c.estimate.interval for c in cells
             if c.estimate is not None and c.estimate.interval is not None]
    text = (f"Resamples double from {RESAMPLES:,} until each endpoint's Monte-Carlo s.e. is at "
            f"most {ENDPOINT_SE:g} (fraction scale), no rounding boundary of its printed "
            f"digits lies within {MC_Z:g} s.e. of it and the published value lies more than "
            f"{MC_Z:g} s.e. from both endpoints, at most {INTERVAL_CAP:,}; ? undecided: the "
            "published value still within that at the cap, so inside or outside would "
            "depend on the resampling seed.")
    if any(any(i.moving()) for i in found):
        text += f" {MOVING_NOTE}."
    if found:
        counts = sorted({i.resamples for i in found})
        span = f"{counts[0]:,}" + (f"–{counts[-1]:,}" if len(counts) > 1 else "")
        text += (f" Here {span} resamples; largest endpoint MC s.e. "
                 f"{max(i.mc_se for i in found):.4f}.")
    return text


def _tolerances(ev: EvalTable) -> str:
    parts = []
    for unit, name in (("%", "points"), ("fraction", "")):
        cols = [c for c in ev.table.columns if c.unit == unit and c.kind == "metric"]
        if cols:
            parts.append(f"{ev.table.tolerance_for(cols[0]):g} {name}".strip())
    return " / ".join(parts) or f"{ev.table.tolerance:g}"


# --------------------------------------------------------------------------- formats


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _link(link: str, links_from: Path | None) -> str:
    """A run folder as a link from the folder ``links_from`` (where the document is read),
    never the absolute path of the machine that rendered it; a run of this checkout
    (``results/``) linked from a document outside it: relative to the checkout, as in the
    README. ``None``: as found."""
    if links_from is None:
        return link
    target, base = Path(link).absolute(), links_from.absolute()
    project = paths.PROJECT_DIR.absolute()
    if target.is_relative_to(project) and not base.is_relative_to(project):
        base = project
    return Path(os.path.relpath(target, base)).as_posix()


def to_markdown(ev: EvalTable, links_from: Path | None = None) -> str:
    """A GitHub-flavoured Markdown table with notes and run links (relative to
    ``links_from``, the folder of the file written, when given)."""
    lay = layout(ev)
    out = [f"### {ev.paper.paper}: {lay.title}", ""]
    out.append("| " + " | ".join(_md_escape(h) for h in lay.headers) + " |")
    out.append("|" + "|".join("---" for _ in lay.headers) + "|")
    for line in lay.rows:
        cells = []
        for t in line:
            text = _md_escape(t.text)
            if t.bold and text:
                text = f"**{text}**"
            if t.link:
                text = f"[{text}]({_link(t.link, links_from)})"
            if t.note:
                text += f" [{t.note}]"
            cells.append(text)
        out.append("| " + " | ".join(cells) + " |")
    out += ["", lay.legend, ""]
    out += [f"[{i}] {_md_escape(note)}" + "  " for i, note in enumerate(lay.notes, 1)]
    if lay.runs:
        out += ["", "Runs:", ""]
        out += [f"- `{recipe}`: {desc}" for recipe, desc in sorted(lay.runs.items())]
    return "\n".join(out).rstrip() + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}
_LATEX_TEXT = {"±": r"$\pm$", "✓": r"\checkmark{}", "✗": r"$\times$", "↓": r"$\downarrow$",
               "↑": r"$\uparrow$", "≤": r"$\le$", "−": "$-$", "θ": r"$\theta$",
               "ä": r"\"a", "→": r"$\to$"}


def _tex(text: str) -> str:
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    for src, dst in _LATEX_TEXT.items():
        out = out.replace(src, dst)
    return out


def to_latex(ev: EvalTable) -> str:
    """A ``table`` environment (booktabs; ``\\checkmark`` needs amssymb)."""
    lay = layout(ev)
    refs = {recipe: chr(ord("a") + i) for i, recipe in enumerate(sorted(lay.runs))}
    spec = "l" + "r" * (len(lay.headers) - 1)
    out = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}",
           r"\toprule", " & ".join(_tex(h) for h in lay.headers) + r" \\", r"\midrule"]
    for i, line in enumerate(lay.rows):
        if i in lay.block_starts:
            out.append(r"\midrule")
        cells = []
        for t in line:
            text = _tex(t.text)
            if t.bold and text:
                text = rf"\textbf{{{text}}}"
            if t.run_ref:
                text += rf"\textsuperscript{{{refs[t.run_ref]}}}"
            if t.note:
                text += rf"\textsuperscript{{[{t.note}]}}"
            cells.append(text)
        out.append(" & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    caption = f"{lay.title} (paper vs. pairrepro). {lay.legend}"
    out.append(rf"\caption{{{_tex(caption)}}}")
    out.append(rf"\label{{tab:{ev.paper.paper}-{ev.table.number}}}")
    out.append(r"\end{table}")
    notes = [f"% [{i}] {note}" for i, note in enumerate(lay.notes, 1)]
    runs = [f"% ({refs[r]}) {r}: {desc}" for r, desc in sorted(lay.runs.items())]
    return "\n".join(out + notes + runs) + "\n"


def to_html(ev: EvalTable, links_from: Path | None = None) -> str:
    """A self-contained HTML fragment (``<table>`` plus notes); cells link to their runs
    (relative to ``links_from`` when given, as :func:`to_markdown`)."""
    lay = layout(ev)
    esc = html.escape
    out = [f'<section class="pairrepro-table" id="{ev.paper.paper}-table{ev.table.number}">',
           f"<h3>{esc(ev.paper.paper)}: {esc(lay.title)}</h3>", "<table>", "<thead><tr>"]
    out += [f"<th>{esc(h)}</th>" for h in lay.headers]
    out.append("</tr></thead><tbody>")
    for i, line in enumerate(lay.rows):
        cls = ' class="block-start"' if i in lay.block_starts else ""
        cells = []
        for t in line:
            text = esc(t.text)
            if t.bold and text:
                text = f"<b>{text}</b>"
            if t.link:
                title = esc(lay.runs.get(t.run_ref, ""), quote=True)
                href = esc(_link(t.link, links_from), quote=True)
                text = f'<a href="{href}" title="{title}">{text}</a>'
            if t.note:
                anchor = f"{ev.paper.paper}-{ev.table.number}-n{t.note}"
                text += f'<sup><a href="#{anchor}">[{t.note}]</a></sup>'
            status = f' class="{t.status.replace(" ", "-")}"' if t.status else ""
            cells.append(f"<td{status}>{text}</td>")
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out += ["</tbody></table>", f"<p>{esc(lay.legend)}</p>"]
    if lay.notes:
        out.append("<ol>")
        out += [f'<li id="{ev.paper.paper}-{ev.table.number}-n{i}">{esc(n)}</li>'
                for i, n in enumerate(lay.notes, 1)]
        out.append("</ol>")
    if lay.runs:
        out.append("<ul>")
        out += [f"<li><code>{esc(r)}</code>: {esc(d)}</li>" for r, d in sorted(lay.runs.items())]
        out.append("</ul>")
    out.append("</section>")
    return "\n".join(out) + "\n"


HTML_HEAD = """<!doctype html>
<html><head><meta charset="utf-8"><title>pairrepro tables</title>
<style>
body{font-family:sans-serif} table{border-collapse:collapse;margin:1em 0}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left} tr.block-start td{border-top:2px solid #888}
td.reproduced{color:#060} td.off,td.below,td.above{color:#a00} td.variant{color:#a60}
td.data-missing{color:#808}
td.not-run,td.no-recipe,td.not-reproducible{color:#888}
</style></head><body>
"""


def term_renderables(ev: EvalTable) -> list[object]:
    """The rich objects of the terminal view: the table, its notes and its run links."""
    from rich.table import Table
    from rich.text import Text as RichText

    lay = layout(ev)
    table = Table(title=f"{ev.paper.paper}: {lay.title}", caption=lay.legend)
    for i, header in enumerate(lay.headers):
        table.add_column(header, justify="left" if i == 0 else "right")
    for i, line in enumerate(lay.rows):
        if i in lay.block_starts:
            table.add_section()
        cells = []
        for t in line:
            style = STYLE.get(t.status, "")
            if t.bold:
                style = f"bold {style}".strip()
            cells.append(RichText(t.text + (f" [{t.note}]" if t.note else ""), style=style))
        table.add_row(*cells)
    out: list[object] = [table]
    out += [RichText(f"[{i}] {note}") for i, note in enumerate(lay.notes, 1)]
    out += [RichText(f"run {recipe}: {desc}") for recipe, desc in sorted(lay.runs.items())]
    return out


def to_term(ev: EvalTable, width: int = 160) -> str:
    """The terminal view as plain text (for files and tests; the CLI prints it in colour)."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, highlight=False, color_system=None)
    for item in term_renderables(ev):
        console.print(item)
    return buffer.getvalue()


def render(ev: EvalTable, fmt: str, links_from: Path | None = None) -> str:
    """Render one evaluated table in ``fmt`` (term | md | latex | html); Markdown and HTML
    link runs relative to ``links_from`` when given."""
    if fmt in ("md", "html"):
        return (to_markdown if fmt == "md" else to_html)(ev, links_from)
    return {"term": to_term, "latex": to_latex}[fmt](ev)


def render_many(evs: list[EvalTable], fmt: str, links_from: Path | None = None) -> str:
    """Several tables in one document (HTML gets a full page); run links relative to
    ``links_from`` (the document's folder) when given."""
    body = "\n".join(render(ev, fmt, links_from) for ev in evs)
    if fmt == "html":
        return HTML_HEAD + body + "</body></html>\n"
    return body


def eval_to_json(ev: EvalTable) -> dict[str, Any]:
    """A JSON-ready view of an evaluated table (``--json``)."""
    columns = {c.key: c for c in ev.table.columns}
    return {
        "paper": ev.paper.paper, "table": ev.table.number, "caption": ev.table.caption,
        "compare_to": ev.compare_to,
        "counts": ev.counts(),
        "rows": [{"label": r.row.label, "block": r.row.block, "recipes": r.recipes,
                  "cells": {c.column: _cell_json(c, columns[c.column]) for c in r.cells}}
                 for r in ev.rows],
    }


def _cell_json(c: Cell, column: Column) -> dict[str, Any]:
    found, interval, versus = c.estimate, c.estimate and c.estimate.interval, c.comparison
    return {
        "published": c.published, "status": c.status,
        "mean": found and found.mean, "std": found and found.std, "delta": c.verdict.delta,
        "seeds": found.seeds if found else [], "recipe": c.recipe, "detail": c.detail,
        "source": c.source, "rule": c.verdict.rule,
        "interval": None if interval is None else [interval.low, interval.high],
        "variant_keys": c.variant_keys, "comparison": comparison_text(c, column),
        "comparison_p": versus and versus.p_value, "comparison_holm": versus and versus.holm,
        "one_model": c.one_model, "last_epoch": found and found.last_epoch,
        "mc_se": None if interval is None else interval.mc_se,
        "resamples": None if interval is None else interval.resamples,
        "runs": [{"path": run.path, "seed": run.seed, "status": run.status,
                  "commit": run.commit, "chosen_epoch": run.chosen_epoch,
                  "problem": run.problem} for run in c.runs]}
