"""The README's and the docs/ pages' generated sections are what results/ renders: the committed
pages may not differ from them (make readme-tables rewrites them), and the README stays a
front page."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.planning.paper_tables import PAPERS, load_paper
from pairrepro.report.publishing.readme import (
    SECTIONS,
    documents,
    refresh,
    rewrite_all,
)

README = paths.PROJECT_DIR / "README.md"


def test_committed_pages_match_what_results_render() -> None:
    stale = {str(page): names for page, (_, names) in refresh(README).items()}
    assert not stale, f"sections {stale} differ from results/: run make readme-tables"


def test_the_pages_are_the_readme_and_docs() -> None:
    pages = documents(README)
    assert pages[0] == README
    assert paths.PROJECT_DIR / "docs" / "papers" / "csran.md" in pages


def test_the_readme_fits_a_few_screens() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_every_paper_table_is_on_its_papers_page() -> None:
    """Each table of a paper file has its section and a ``## Table N`` heading (the README's
    headline links to it) on ``docs/papers/<paper>.md``, and the page ends with its run list."""
    for paper in PAPERS:
        page = (paths.PROJECT_DIR / "docs" / "papers" / f"{paper}.md").read_text()
        for table in load_paper(paper).tables:
            assert f"<!-- BEGIN generated: {paper}-table{table.number} -->" in page
            assert f"\n## Table {table.number}\n" in page, (paper, table.number)
        assert f"<!-- BEGIN generated: {paper}-runs -->" in page


def test_rewrite_replaces_only_between_markers() -> None:
    sections = {name: f"new {name}\n" for name in SECTIONS}
    body = "".join(f"<!-- BEGIN generated: {n} -->\nold 0.999\n<!-- END generated -->\n"
                   for n in SECTIONS)
    text = "# title\ntyped 0.5\n" + body + "tail\n"
    out = rewrite_all({Path("README.md"): text}, sections)[Path("README.md")]
    assert out.startswith("# title\ntyped 0.5\n") and out.endswith("tail\n")
    assert "old 0.999" not in out
    for name in SECTIONS:
        assert f"<!-- BEGIN generated: {name} -->\nnew {name}\n<!-- END generated -->" in out


def test_sections_spread_over_pages_are_each_rewritten_on_theirs() -> None:
    sections = {"one": "1\n", "two": "2\n"}
    pages = {Path("a.md"): "<!-- BEGIN generated: one -->\nx\n<!-- END generated -->\n",
             Path("docs/b.md"): "b\n<!-- BEGIN generated: two -->\n<!-- END generated -->\n"}
    out = rewrite_all(pages, sections)
    assert out == {Path("a.md"): "<!-- BEGIN generated: one -->\n1\n<!-- END generated -->\n",
                   Path("docs/b.md"): "b\n<!-- BEGIN generated: two -->\n2\n"
                                      "<!-- END generated -->\n"}


def test_a_missing_unknown_or_doubled_marker_is_an_error() -> None:
    sections = {name: "x\n" for name in SECTIONS}
    with pytest.raises(ConfigError, match="missing: "):
        rewrite_all({Path("README.md"): "no markers here\n"}, sections)
    text = "<!-- BEGIN generated: nope -->\n<!-- END generated -->\n"
    with pytest.raises(ConfigError, match=r"docs/x\.md: generated section 'nope' is unknown"):
        rewrite_all({Path("docs/x.md"): text}, sections)
    twice = "<!-- BEGIN generated: one -->\n<!-- END generated -->\n"
    with pytest.raises(ConfigError, match=r"docs/b\.md: generated section 'one' is also in a\.md"):
        rewrite_all({Path("a.md"): twice, Path("docs/b.md"): twice}, {"one": "1\n"})


def test_a_second_clone_checks_clean_against_its_own_readme_and_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`results readme --check --readme OTHER/README.md --results OTHER/results` on an unedited
    copy found 11 sections drifted: run paths were written relative to the running checkout,
    not to the README given. The sections naming run folders are rendered here; the others
    (minutes of intervals, no paths) stand in as committed, their links from the root."""
    from pairrepro.report.publishing import readme

    clone = tmp_path / "clone"
    for name in ("docs", "results"):
        shutil.copytree(README.parent / name, clone / name)
    shutil.copy(README, clone / "README.md")
    rendered = {"csran-table5", "csran-runs", "cin-runs", "release"}
    committed = {name: body.replace("](../../", "](") for page in documents(README)
                 for name, body in readme._SECTION.findall(page.read_text(encoding="utf-8"))}
    monkeypatch.setattr(readme, "SECTIONS", {
        name: render if name in rendered else lambda _results, body=committed[name]: body
        for name, render in readme.SECTIONS.items()})
    monkeypatch.setattr(readme, "tampered_runs", lambda _folder: [])  # tested elsewhere
    assert refresh(clone / "README.md", clone / "results") == {}
    run_paths = readme.SECTIONS["csran-runs"](Path("results"))
    assert "results/csran_trecqa/seed-1" in run_paths
