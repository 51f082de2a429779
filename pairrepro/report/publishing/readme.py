"""The generated sections of README.md and docs/, from the committed reference runs alone:
the same text on every machine. Each section lives on one page."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.planning.paper_tables import PAPERS, load_paper
from pairrepro.planning.preflight_record import load_preflight
from pairrepro.planning.recipe_index import load_recipe_index
from pairrepro.report.analyses.evidence import RESTORE_RESULTS_HINT, TamperedRunError, tampered_runs
from pairrepro.report.analyses.gap_account import gap_markdown
from pairrepro.report.analyses.ladders import evaluate_ladder
from pairrepro.report.analyses.orderings import compare_to, orderings_markdown, table_orderings
from pairrepro.report.analyses.parity import evaluate_parity, parity_markdown
from pairrepro.report.analyses.readings import table_readings_markdown
from pairrepro.report.analyses.smoke import smoke_markdown
from pairrepro.report.publishing import bench_records
from pairrepro.report.publishing.release import cpu_line, pending, read_release, reasons_in_short
from pairrepro.report.tables import runs_table
from pairrepro.report.tables.cells import EvalTable, evaluate_table
from pairrepro.report.tables.layout import layout, page_key
from pairrepro.report.tables.numbers import markdown_table
from pairrepro.report.tables.render import to_markdown
from pairrepro.runs import all_runs

BEGIN = "<!-- BEGIN generated: {name} -->"
END = "<!-- END generated -->"
_SECTION = re.compile(r"<!-- BEGIN generated: ([a-z0-9-]+) -->\n(.*?)<!-- END generated -->",
                      re.DOTALL)
# a Markdown link's target that is a path: not a URL, not an anchor of the same page
_PATH_LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s]+)\)")


def _reference_view(paper: str, number: int, results: Path) -> EvalTable:
    doc = load_paper(paper)
    return evaluate_table(doc, doc.table(number), None, load_recipe_index(), results)


def _table(paper: str, number: int, versus: str, results: Path) -> str:
    ev = _reference_view(paper, number, results)
    ev = compare_to(ev, versus) if versus else ev
    return to_markdown(ev, key=False).replace(f"### {paper}: ", f"#### {paper}: ", 1)


def _key(paper: str, results: Path) -> str:
    """What the marks of the paper's tables mean, said once on its page."""
    return "".join(f"- {line}\n" for line in page_key(
        [layout(_reference_view(paper, t.number, results)) for t in load_paper(paper).tables]))


def _readings(paper: str, number: int, results: Path) -> str:
    return table_readings_markdown(_reference_view(paper, number, results))


def _ladder(name: str, results: Path) -> str:
    return gap_markdown(evaluate_ladder(name, results))


def _orderings(paper: str, number: int, results: Path) -> str:
    ev = _reference_view(paper, number, results)
    return orderings_markdown(ev, table_orderings(ev))


def _preflight(results: Path) -> str:
    """The committed preflight figures (``bench/preflight/*.json``, the plan's source)."""
    lines = markdown_table(["recipe", "data", "steps", "checks not passed", "precision",
                            "pairs/s (1 thread)", "peak MB", "GFLOP/pair", "measured on"])
    for name, record in load_preflight().items():
        data = record.get("data", {})
        where = (f"{data.get('dataset')} {data.get('split')}" if not data.get("synthetic")
                 else f"random words ({data.get('dataset')} not here)")
        if data.get("stand_in") and not data.get("synthetic"):
            where += " (stands in for train)"
        open_checks = ", ".join(f"{c['name']} {c['status']}" for c in record.get("checks", [])
                                if c["status"] != "pass") or "none"
        flops = record.get("flops_per_pair")
        gflop = f"{flops / 1e9:.3f}" if flops else ""
        cpu = record.get("cpu") or {}  # rates compare only on the same CPU and kernels
        machine = (f"{cpu.get('model')}, {cpu.get('capability')} kernels" if cpu.get("model")
                   else record.get("device_name", ""))
        lines.append(f"| `{name}` | {where} | {record.get('steps')} | {open_checks} | "
                     f"{record.get('precision', 'fp32')} | {record.get('pairs_per_s') or 0:,.1f}"
                     f" | {record.get('peak_mb') or 0:,.0f} | {gflop} | "
                     f"{record.get('measured', '')}, {machine} |")
    return "\n".join(lines) + "\n"


def _release(results: Path) -> str:
    runs = all_runs(results)
    if todo := pending(runs=runs):
        return (f"**No release yet**: {len(todo)} recipe{'s' * (len(todo) > 1)} "
                f"({sum(len(r.seeds) for r in todo)} runs, "
                f"{sum(r.hours for r in todo):.1f} h as first made) must be re-made at one "
                "clean commit first: seeds from several commits, or runs that do not record "
                "their CPU or ran on another CPU or torch build (`pairrepro results release` "
                "lists them).\n")
    release = read_release(results)
    if release is None:
        return "**No release written yet**: `pairrepro results release --name 1`.\n"
    if drift := release.drift(runs):
        return (f"**Release {release.name} no longer describes `results/`**: runs "
                + "; ".join(f"{how} since: {', '.join(names)}" for how, names in drift.items())
                + ". Write the next release with `pairrepro results release --name <next>`.\n")
    odd = "".join(_not_bit_equal(run, release.remade[run]) for run in release.not_bit_equal)
    return (f"**Release {release.name}** ({release.date}): {len(release.runs)} runs on one CPU, "
            f"{release.cpu}, torch {release.torch}; each recipe's seeds from one commit, "
            f"{len({run.commit for run in runs})} commits in all. {len(release.remade)} runs "
            f"were re-made for it at commit `{release.commit[:10]}`, "
            f"{len(release.not_bit_equal)} of them not bit-equal to the run they replace"
            + (" (each run's `replaces.json` says how far every split moved, and why):"
               if odd else ".") + f"{odd}\n")


def _not_bit_equal(run: str, record: dict[str, Any]) -> str:
    """One re-made run that is not bit-equal: the reasons in short, and how far its test split
    moved (``replaces.json`` has every split and the reasons in full)."""
    differs = record.get("differs_in") or {}
    moved = (f": test {differs['test']}" if "test" in differs
             else f": test bit-equal, {', '.join(differs)} not" if differs else "")
    reasons = "; ".join(reasons_in_short(record))
    return f"\n  - {run}{f' ({reasons})' if reasons else ''}{moved}"


def _environment(results: Path) -> str:
    """Where the reference runs were made, counted from their manifests."""
    manifests = [run.manifest for run in all_runs(results) if run.status == "finished"]
    fields: dict[str, Callable[[dict[str, Any]], str]] = {
        "device": lambda m: str(m.get("device", "not recorded")),
        "torch": lambda m: str(m.get("torch", "not recorded")),
        "precision": lambda m: str(m.get("precision", "not recorded")),
        "deterministic": lambda m: {True: "yes", False: "no"}.get(m.get("deterministic"),
                                                                 "not recorded"),
        "CPU threads": lambda m: str(m.get("cpu_threads", "not recorded")),
        "CPU": cpu_line,
    }
    lines = [f"The {len(manifests)} reference runs' manifests "
             "(`results/*/seed-*/manifest.json`), value (runs):", ""]
    for name, value in fields.items():
        counts = Counter(value(m) for m in manifests).most_common()
        lines.append(f"- {name}: " + "; ".join(f"{v} ({n})" for v, n in counts))
    return "\n".join(lines) + "\n"


def _headline(results: Path) -> str:
    lines = markdown_table(["paper", "table", "holds", "cells"])
    for paper in PAPERS:
        for table in load_paper(paper).tables:
            counts = _reference_view(paper, table.number, results).counts()
            holds = "settings" if table.kind == "hparams" else "results"
            lines.append(f"| [{paper}](docs/papers/{paper}.md) | [Table {table.number}]"
                         f"(docs/papers/{paper}.md#table-{table.number}): {table.caption} | "
                         f"{holds} | " + ", ".join(f"{n} {status}" for status, n in counts.items())
                         + " |")
    return "\n".join(lines) + "\n"


def _paper_runs(paper: str, results: Path) -> str:
    ours = {run.path for run in all_runs(results)
            if run.config.get("recipe", {}).get("paper") == paper}
    lines = [line for line in runs_table.collect(results) if line.run in ours]
    return runs_table.to_markdown(lines) if lines else "No reference run of this paper's models.\n"


def _paper_sections() -> dict[str, Callable[[Path], str]]:
    """``<paper>-table<N>[-...]`` and ``<paper>-runs`` of every paper."""
    extras = {
        "csran-table5": {"csran-table5-vs-bm25": partial(
            _table, "csran", 5, "BM25, threshold fitted on train"),
            "csran-table5-readings": partial(_readings, "csran", 5)},
        "csran-table6": {"csran-table6-vs-bm25": partial(
            _table, "csran", 6, "BM25, DEV/TEST numbers kept"),
            "csran-table6-readings": partial(_readings, "csran", 6)},
        "csran-table8": {"csran-table8-vs-original": partial(_table, "csran", 8, "Original"),
                         "csran-table8-orderings": partial(_orderings, "csran", 8),
                         "csran-table8-readings": partial(_readings, "csran", 8)},
    }
    out: dict[str, Callable[[Path], str]] = {}
    for paper in PAPERS:
        out[f"{paper}-key"] = partial(_key, paper)
        for table in load_paper(paper).tables:
            name = f"{paper}-table{table.number}"
            out[name] = partial(_table, paper, table.number, "")
            out.update(extras.get(name, {}))
        out[f"{paper}-runs"] = partial(_paper_runs, paper)
    return out


# section name -> how it is rendered from the results folder (README first, then docs/)
SECTIONS: dict[str, Callable[[Path], str]] = {
    "headline": _headline,
    "release": _release,
    **_paper_sections(),
    "csran-trecqa-gap": partial(_ladder, "csran_trecqa"),
    "csran-twitter-url-gap": partial(_ladder, "csran_twitter_url"),
    "csran-trecqa-vectors": partial(_ladder, "csran_trecqa_vectors"),
    "mv-lstm-cosine-twitter-url-dev": partial(_ladder, "mv_lstm_cosine_twitter_url"),
    "bf16-parity": lambda results: parity_markdown(evaluate_parity(results)),
    "smoke": smoke_markdown,
    "reference-environment": _environment,
    "preflight": _preflight,
    "benchmarks": lambda results: bench_records.bench_markdown(),  # bench/records/
    "gpu-rates": lambda results: bench_records.gpu_rates_markdown(),
    "step-profile": lambda results: bench_records.step_profile_markdown(),
}


def render_sections(results_dir: Path | None = None,
                    progress: Callable[[str], None] | None = None,
                    root: Path = paths.PROJECT_DIR) -> dict[str, str]:
    """Every generated section's text from ``results_dir`` (default ``results/``), paths
    relative to ``root`` (the README's folder); ``progress`` gets one line per phase."""
    say = progress or (lambda _line: None)
    started = time.monotonic()
    folder = (results_dir or paths.results_dir()).absolute()
    say(f"checking {sum(1 for _ in folder.glob('*/seed-*'))} reference runs in {folder} "
        "against their saved predictions")
    # one hand-edited or damaged run stops the rewrite (and --check), naming every such file
    if problems := tampered_runs(folder):
        raise TamperedRunError(f"{len(problems)} reference run(s) in {folder} cannot be "
                               "trusted: " + " | ".join(problems),
                               hint=RESTORE_RESULTS_HINT)
    sections = {}
    with contextlib.chdir(root):
        results = Path(os.path.relpath(folder, root))
        for number, (name, render) in enumerate(SECTIONS.items(), 1):
            say(f"section {number}/{len(SECTIONS)}: {name} "
                f"({time.monotonic() - started:.0f} s so far)")
            sections[name] = render(results)
    return sections


def documents(readme: Path) -> list[Path]:
    """``readme`` and every page under the ``docs/`` folder beside it: where sections live."""
    return [readme, *sorted((readme.parent / "docs").rglob("*.md"))]


def rewrite_all(texts: dict[Path, str], sections: dict[str, str]) -> dict[Path, str]:
    """``texts`` (page -> text, the README first) with every marked section's body replaced,
    its links made relative to its page; an unknown, doubly marked or unmarked section is a
    ConfigError naming the pages."""
    where: dict[str, Path] = {}
    for path, text in texts.items():
        for name in (m.group(1) for m in _SECTION.finditer(text)):
            if name not in sections:
                raise ConfigError(f"{path}: generated section {name!r} is unknown",
                                  hint=f"known sections: {', '.join(sections)}")
            if name in where:
                raise ConfigError(f"{path}: generated section {name!r} is also in "
                                  f"{where[name]}", hint="keep one of the two")
            where[name] = path
    if missing := [name for name in sections if name not in where]:
        raise ConfigError(f"{', '.join(map(str, texts))}: generated sections missing: "
                          f"{', '.join(missing)}",
                          hint=f"mark each on its page as {BEGIN.format(name='NAME')} ... {END}")
    root = next(iter(texts)).parent

    def fresh(m: re.Match[str]) -> str:  # its links, written from root, from its own page
        up = os.path.relpath(root, where[m[1]].parent)
        body = _PATH_LINK.sub(lambda k: f"]({posixpath.normpath(posixpath.join(up, k[1]))})",
                              sections[m[1]])
        return f"{BEGIN.format(name=m[1])}\n{body.rstrip()}\n{END}"

    return {path: _SECTION.sub(fresh, text) for path, text in texts.items()}


def refresh(readme: Path, results_dir: Path | None = None,
            progress: Callable[[str], None] | None = None) -> dict[Path, tuple[str, list[str]]]:
    """Each page whose sections are stale -> (its fresh text, those sections' names)."""
    texts = {path: path.read_text(encoding="utf-8") for path in documents(readme)}
    fresh = rewrite_all(texts, render_sections(results_dir, progress, readme.parent))
    stale = {path: dict(_SECTION.findall(text)) for path, text in texts.items()
             if fresh[path] != text}  # page -> its sections as they stand
    return {path: (fresh[path], [name for name, body in _SECTION.findall(fresh[path])
                                 if old.get(name) != body]) for path, old in stale.items()}
