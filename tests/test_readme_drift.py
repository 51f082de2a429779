"""The README's "What we reproduced" tables and run table are what results/ renders: the
committed README may not differ from them (make readme-tables rewrites them)."""

from __future__ import annotations

import pytest

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.report.publishing.readme import SECTIONS, rewrite, stale_sections


def test_committed_readme_matches_what_results_render() -> None:
    stale = stale_sections(paths.PROJECT_DIR / "README.md")
    assert not stale, f"README sections {stale} differ from results/: run make readme-tables"


def test_rewrite_replaces_only_between_markers() -> None:
    sections = {name: f"new {name}\n" for name in SECTIONS}
    body = "".join(f"<!-- BEGIN generated: {n} -->\nold 0.999\n<!-- END generated -->\n"
                   for n in SECTIONS)
    text = "# title\ntyped 0.5\n" + body + "tail\n"
    out = rewrite(text, sections)
    assert out.startswith("# title\ntyped 0.5\n") and out.endswith("tail\n")
    assert "old 0.999" not in out
    for name in SECTIONS:
        assert f"<!-- BEGIN generated: {name} -->\nnew {name}\n<!-- END generated -->" in out


def test_a_missing_or_unknown_marker_is_an_error() -> None:
    sections = {name: "x\n" for name in SECTIONS}
    with pytest.raises(ConfigError, match="missing: "):
        rewrite("no markers here\n", sections)
    text = "<!-- BEGIN generated: nope -->\n<!-- END generated -->\n"
    with pytest.raises(ConfigError, match="unknown: nope"):
        rewrite(text, sections)
