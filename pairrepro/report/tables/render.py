"""Render evaluated paper tables from their :func:`~.layout.layout`: terminal (rich),
Markdown, LaTeX, HTML, and the ``--json`` view of every cell."""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.planning.paper_tables import Column
from pairrepro.report.tables.cells import STYLE, Cell, EvalTable
from pairrepro.report.tables.layout import Text, comparison_text, layout, page_key
from pairrepro.report.tables.numbers import markdown_table

FORMATS = ("term", "md", "latex", "html")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _link(link: str, links_from: Path | None) -> str:
    """A run folder relative to ``links_from`` (a run of this checkout from outside it:
    relative to the checkout); ``None``: as found."""
    if links_from is None:
        return link
    target, base = Path(link).absolute(), links_from.absolute()
    project = paths.PROJECT_DIR.absolute()
    if target.is_relative_to(project) and not base.is_relative_to(project):
        base = project
    return Path(os.path.relpath(target, base)).as_posix()


def _marked(t: Text, escape: Callable[[str], str], bold: str, note: str,
            link: Callable[[Text, str], str] = lambda t, text: text) -> str:
    """``t``'s text escaped, in ``bold`` where marked so, linked, with its ``note`` mark."""
    text = escape(t.text)
    text = bold.format(text) if t.bold and text else text
    return link(t, text) + (note.format(t.note) if t.note else "")


def to_markdown(ev: EvalTable, links_from: Path | None = None, key: bool = True) -> str:
    """A GitHub-flavoured Markdown table with notes and run links (``key``: its marks' key)."""
    lay = layout(ev)

    def link(t: Text, text: str) -> str:
        return f"[{text}]({_link(t.link, links_from)})" if t.link else text

    rows = [[_marked(t, _md_escape, "**{}**", " [{}]", link) for t in line] for line in lay.rows]
    out = [f"### {ev.paper.paper}: {lay.title}", "",
           *markdown_table([_md_escape(h) for h in lay.headers], rows), "",
           lay.full_legend if key else lay.legend, ""]
    out += [f"[{i}] {_md_escape(note)}" + "  " for i, note in enumerate(lay.notes, 1)]
    if lay.runs:
        out += ["", "Runs:", "", *(f"- `{r}`: {desc}" for r, desc in sorted(lay.runs.items()))]
    return "\n".join(out).rstrip() + "\n"


# one code point each: str.translate replaces every character once, never a replacement again
_LATEX = str.maketrans({
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "±": r"$\pm$", "✓": r"\checkmark{}", "✗": r"$\times$", "↓": r"$\downarrow$",
    "↑": r"$\uparrow$", "≤": r"$\le$", "−": "$-$", "θ": r"$\theta$", "ä": r"\"a", "→": r"$\to$"})


def _tex(text: str) -> str:
    return text.translate(_LATEX)


def to_latex(ev: EvalTable) -> str:
    """A ``table`` environment (booktabs; ``\\checkmark`` needs amssymb)."""
    lay = layout(ev)
    refs = {recipe: chr(ord("a") + i) for i, recipe in enumerate(sorted(lay.runs))}

    def link(t: Text, text: str) -> str:  # the letter of the run's line below the table
        return text + (rf"\textsuperscript{{{refs[t.run_ref]}}}" if t.run_ref else "")

    spec = "l" + "r" * (len(lay.headers) - 1)
    out = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}",
           r"\toprule", " & ".join(_tex(h) for h in lay.headers) + r" \\", r"\midrule"]
    for i, line in enumerate(lay.rows):
        if i in lay.block_starts:
            out.append(r"\midrule")
        out.append(" & ".join(_marked(t, _tex, r"\textbf{{{}}}", r"\textsuperscript{{[{}]}}", link)
                              for t in line) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    caption = f"{lay.title} (paper vs. pairrepro). {lay.full_legend}"
    out += [rf"\caption{{{_tex(caption)}}}", rf"\label{{tab:{ev.paper.paper}-{ev.table.number}}}",
            r"\end{table}"]
    notes = [f"% [{i}] {note}" for i, note in enumerate(lay.notes, 1)]
    runs = [f"% ({refs[r]}) {r}: {desc}" for r, desc in sorted(lay.runs.items())]
    return "\n".join(out + notes + runs) + "\n"


def to_html(ev: EvalTable, key: bool = True) -> str:
    """A ``<table>`` with notes, its cells linked in-page to its runs listed below it."""
    lay = layout(ev)
    esc = html.escape
    anchor = f"{ev.paper.paper}-{ev.table.number}"

    def run_id(ref: str) -> str:  # an id holds no space: "csran_trecqa (reference)"
        return anchor + "-" + re.sub(r"[^\w.-]+", "-", ref)

    def link(t: Text, text: str) -> str:
        return f'<a href="#{run_id(t.run_ref)}" title="run {esc(t.run_ref)}">{text}</a>' \
            if t.link else text

    note = f'<sup><a href="#{anchor}-n{{0}}">[{{0}}]</a></sup>'
    out = [f'<section class="pairrepro-table" id="{ev.paper.paper}-table{ev.table.number}">',
           f"<h3>{esc(ev.paper.paper)}: {esc(lay.title)}</h3>", "<table>", "<thead><tr>"]
    out += [*(f"<th>{esc(h)}</th>" for h in lay.headers), "</tr></thead><tbody>"]
    for i, line in enumerate(lay.rows):
        cls = ' class="block-start"' if i in lay.block_starts else ""
        cells = [(f' class="{t.status.replace(" ", "-")}"' if t.status else "",
                  _marked(t, esc, "<b>{}</b>", note, link)) for t in line]
        out.append(f"<tr{cls}>" + "".join(f"<td{status}>{text}</td>" for status, text in cells)
                   + "</tr>")
    out += ["</tbody></table>", f"<p>{esc(lay.full_legend if key else lay.legend)}</p>"]
    if lay.notes:
        out += ["<ol>", *(f'<li id="{anchor}-n{i}">{esc(n)}</li>'
                          for i, n in enumerate(lay.notes, 1)), "</ol>"]
    if lay.runs:
        out += ["<ul>", *(f'<li id="{run_id(r)}"><code>{esc(r)}</code>: {esc(d)}</li>'
                          for r, d in sorted(lay.runs.items())), "</ul>"]
    return "\n".join([*out, "</section>"]) + "\n"


HTML_HEAD = """<!doctype html>
<html><head><meta charset="utf-8"><title>pairrepro tables</title>
<style>
body{font-family:sans-serif} figure svg{max-width:100%;height:auto}
table{border-collapse:collapse;margin:1em 0}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left} tr.block-start td{border-top:2px solid #888}
td.reproduced{color:#060} td.off,td.below,td.above{color:#a00} td.variant{color:#a60}
td.data-missing{color:#808}
td.not-run,td.no-recipe,td.not-implemented,td.not-reproducible{color:#888}
</style></head><body>
"""


def term_renderables(ev: EvalTable) -> list[object]:
    from rich.table import Table
    from rich.text import Text as RichText

    lay = layout(ev)
    table = Table(title=f"{ev.paper.paper}: {lay.title}", caption=lay.full_legend)
    for i, header in enumerate(lay.headers):
        table.add_column(header, justify="left" if i == 0 else "right")
    for i, line in enumerate(lay.rows):
        if i in lay.block_starts:
            table.add_section()
        table.add_row(*(RichText(_marked(t, str, "{}", " [{}]"),
                                 style=("bold " * t.bold + STYLE.get(t.status, "")).strip())
                        for t in line))
    return [table, *(RichText(f"[{i}] {note}") for i, note in enumerate(lay.notes, 1)),
            *(RichText(f"run {recipe}: {desc}") for recipe, desc in sorted(lay.runs.items()))]


def to_term(ev: EvalTable, width: int = 160) -> str:
    """The terminal view as plain text (for files and tests; the CLI prints it in colour)."""
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, highlight=False, color_system=None).print(
        *term_renderables(ev), sep="\n")
    return buffer.getvalue()


def render(ev: EvalTable, fmt: str, links_from: Path | None = None, key: bool = True) -> str:
    if fmt == "md":
        return to_markdown(ev, links_from, key)
    return to_html(ev, key) if fmt == "html" else {"term": to_term, "latex": to_latex}[fmt](ev)


def render_many(evs: list[EvalTable], fmt: str, links_from: Path | None = None,
                figures: list[tuple[str, Any]] | None = None) -> str:
    """Several tables in one document, the key of their marks once (Markdown, HTML); HTML
    gets a page of its own, ``figures`` (:func:`~.figures.page_figures`) drawn inline."""
    once = len(evs) > 1 and fmt in ("md", "html")
    body = "\n".join(render(ev, fmt, links_from, key=not once) for ev in evs)
    if once:
        lines = page_key([layout(ev) for ev in evs])
        body = ("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>\n"
                if fmt == "html" else "".join(f"- {line}\n" for line in lines) + "\n") + body
    if fmt != "html":
        return body
    from pairrepro.report.tables.figures import svg_text

    shown = "".join(f"<figure><figcaption>{html.escape(title)}</figcaption>{svg_text(fig)}"
                    "</figure>\n" if not isinstance(fig, str) else
                    f"<p>{html.escape(title)}: left out ({html.escape(fig)}).</p>\n"
                    for title, fig in figures or [])
    return HTML_HEAD + body + (f"<h2>Figures</h2>\n{shown}" if shown else "") + "</body></html>\n"


def eval_to_json(ev: EvalTable) -> dict[str, Any]:
    columns = {c.key: c for c in ev.table.columns}
    return {"paper": ev.paper.paper, "table": ev.table.number, "caption": ev.table.caption,
            "compare_to": ev.compare_to, "counts": ev.counts(),
            "rows": [{"label": r.row.label, "block": r.row.block, "recipes": r.recipes,
                      "cells": {c.column: _cell_json(c, columns[c.column]) for c in r.cells}}
                     for r in ev.rows]}


def _cell_json(c: Cell, column: Column) -> dict[str, Any]:
    found, interval, versus = c.estimate, c.estimate and c.estimate.interval, c.comparison
    return {"published": c.published, "status": c.status,
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
