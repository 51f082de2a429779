"""``report --format html`` writes one page that stands alone: every table, the figures drawn
inline as SVG (a figure with nothing to draw is a line saying why), links that stay inside the
page and tooltips without local paths; and a real headless browser (Debian's chromium driven by
Selenium) draws its tables and figures with a size. Skips, saying why, where no browser is."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app

RECIPE = "csran_trecqa"  # its reference runs fill CSRAN Table 6 and the first step of two ladders
# what the page must draw from those runs alone, and what it must leave out with a reason
DRAWN = ["csran Table 6: training curves", "csran Table 6: readings",
         "gap ladder csran_trecqa: MAP", "gap ladder csran_trecqa: MRR",
         "gap ladder csran_trecqa_vectors: MAP", "gap ladder csran_trecqa_vectors: MRR"]
LEFT_OUT = ["csran Figure 2", "csran Figure 3"]  # depth curves: no reference run varies depth


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of CSRAN Table 6 on a results folder holding only ``RECIPE``'s reference runs,
    written two folders below the working folder, far from the project."""
    root = tmp_path_factory.mktemp("html")
    shutil.copytree(paths.PROJECT_DIR / "results" / RECIPE, root / "results" / RECIPE)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("PAIRREPRO_RESULTS", str(root / "results"))
        mp.setenv("PAIRREPRO_RUNS", str(root / "runs"))
        result = CliRunner().invoke(app, ["report", "csran", "--table", "6", "--format", "html",
                                          "--out", "deep/er/page.html"])
    assert result.exit_code == 0, result.output
    return root / "deep" / "er" / "page.html"


def test_the_page_stands_alone(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.count("<table>") == 1
    assert re.findall(r"<figcaption>([^<]*)</figcaption>", text) == DRAWN
    assert re.findall(r"<p>([^<:]*): left out \(", text) == LEFT_OUT
    assert text.count("<svg") == len(DRAWN) and "<img" not in text  # inline, no other file
    # every link is an anchor of the page itself, and each anchor exists
    links = re.findall(r'href="([^"]*)"', text)
    assert links and all(link.startswith("#") for link in links)
    ids = set(re.findall(r'id="([^"]*)"', text))
    assert {link[1:] for link in links} <= ids and not any(" " in i for i in ids)
    # no tooltip or text names a folder of this machine
    assert str(paths.PROJECT_DIR) not in text and str(page.parent.parent.parent) not in text


def _browser():  # selenium imported only here
    """Headless chromium through its system chromedriver, or skip saying what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                    "(pip install -e '.[dev]')")
    browser = next((p for name in ("chromium", "chromium-browser", "google-chrome")
                    if (p := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("no headless browser here: install chromium and its chromedriver "
                    "(Debian: apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))


def test_a_browser_draws_the_tables_and_figures(page: Path) -> None:
    browser = _browser()
    try:
        browser.get(page.as_uri())
        sizes = browser.execute_script(
            "return ['table', 'figure svg'].map(sel => Array.from(document.querySelectorAll(sel))"
            ".map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; }))")
        cells = browser.execute_script("return document.querySelectorAll('td').length")
        # each link leads to an element of the page, as the browser resolves it
        dangling = browser.execute_script(
            "return Array.from(document.links).filter(a => !document.getElementById("
            "decodeURIComponent(a.hash.slice(1)))).map(a => a.href)")
    finally:
        browser.quit()
    tables, figures = sizes
    assert len(tables) == 1 and len(figures) == len(DRAWN)
    assert all(w > 100 and h > 50 for w, h in tables + figures), sizes
    assert cells == page.read_text(encoding="utf-8").count("<td")
    assert not dangling
