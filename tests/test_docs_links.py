"""Documentation is followable from a clone: no comment or docstring in ``pairrepro/`` points
outside the repository, and every in-repository document it cites exists (issue 37)."""

from __future__ import annotations

import re

from pairrepro import paths

PACKAGE = paths.PROJECT_DIR / "pairrepro"
OUTSIDE = re.compile(r"(?<![\w.])\.\./[\w./-]*|/work/[\w./-]+|/home/\w[\w./-]*")
CITED = re.compile(r"\bdocs/[\w./-]*\w")


def _sources() -> dict[str, str]:
    return {str(p.relative_to(paths.PROJECT_DIR)): p.read_text(encoding="utf-8")
            for p in sorted(PACKAGE.rglob("*")) if p.suffix in (".py", ".toml", ".md")}


def test_the_patterns_find_what_they_should() -> None:
    text = "see ``../shared/spec/csran.md`` §3, /work/shared/papers/x.txt, docs/spec/cin.md."
    assert OUTSIDE.findall(text) == ["../shared/spec/csran.md", "/work/shared/papers/x.txt"]
    assert CITED.findall(text) == ["docs/spec/cin.md"]
    assert OUTSIDE.findall("a mirror at ../shared/datasets.") == ["../shared/datasets."]


def test_nothing_in_the_package_points_outside_the_repository() -> None:
    outside = [f"{name}: {found}" for name, text in _sources().items()
               for found in OUTSIDE.findall(text)]
    assert not outside, "documents outside the repository (copy them into docs/):\n" + \
        "\n".join(outside)


def test_every_document_the_package_cites_is_in_the_repository() -> None:
    cited = {found for text in _sources().values() for found in CITED.findall(text)}
    assert any(c.startswith("docs/spec/") for c in cited), cited  # the models cite their specs
    missing = sorted(c for c in cited if not (paths.PROJECT_DIR / c).exists())
    assert not missing, f"cited but not in the repository: {missing}"


def test_every_spec_a_recipe_cites_is_in_docs_spec() -> None:
    named = {m for p in paths.recipes_dir().glob("*.toml")
             for m in re.findall(r"\bspec/(\w+\.md)", p.read_text(encoding="utf-8"))}
    assert named, "no recipe cites a spec: the pattern is stale"
    assert {n for n in named if not (paths.PROJECT_DIR / "docs" / "spec" / n).exists()} == set()


# link text may hold one level of brackets: a table cell's "[0.708 [0.685, 0.731]](results/x)"
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^)\s]+)\)")


def test_the_link_pattern_finds_links_whose_text_holds_brackets() -> None:
    """The pattern missed every run link of the paper pages: an interval in its text."""
    cell = "| [0.708 [0.685, 0.731] (−0.132) ↓](results/csran_twitter_url) | [1] (x) [a](b.md) |"
    assert LINK.findall(cell) == ["results/csran_twitter_url", "b.md"]


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_slug_is_githubs() -> None:
    assert _slug("What is left of the CSRAN TrecQA gap") == "what-is-left-of-the-csran-trecqa-gap"
    assert _slug("Set-up: two commands") == "set-up-two-commands"
    assert _slug("Table 6") == "table-6"


def test_every_link_of_the_pages_resolves() -> None:
    """Every relative link of README.md and docs/ names a file of the repository, and an
    ``#anchor`` a heading of that page (the README's headline links to every paper table)."""
    from pairrepro.report.publishing.readme import documents

    broken = []
    for page in documents(paths.PROJECT_DIR / "README.md"):
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            name, _, anchor = target.partition("#")
            found = (page.parent / name).resolve() if name else page
            if not found.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and found.is_file():
                headings = re.findall(r"^#+ (.+)$", found.read_text(encoding="utf-8"), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
