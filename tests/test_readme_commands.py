"""Every command the README and the docs/ pages show and every example of the ``--help`` texts
works.

The commands are extracted, not listed here: the ```bash blocks of README.md and docs/
(lines starting with ``pairrepro`` or ``make``) and the lines starting with ``pairrepro`` in
every command's help.
Each runs in-process against a fresh ``PAIRREPRO_HOME``/``PAIRREPRO_RUNS`` with the ../shared
mirror as ``PAIRREPRO_MIRROR``. What cannot run as written is in :data:`SMALL` (a command ->
the same command kept small: ``--set`` overrides, ``--dry-run``) or :data:`FAILS` (needs data
we lack: it must end with its documented exit code and a hint, never a traceback). Paths are
made to point into the temporary folders (``runs/...``, ``--out``). A new documented command
runs as written: if it fails, this test fails.

``make`` lines run as ``make -n`` (what they would run; the real work is the pipeline, tested
elsewhere), except ``make help``.
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from pairrepro.cli.app import app

PROJECT = Path(__file__).resolve().parents[1]
SMALL_TRAIN = ["--seeds", "1", "--set", "train.epochs=1", "--set", "data.max_train_pairs=64",
               "--set", "train.score_train_pairs=64"]
SMALL_DEMO = ["--seeds", "1", "--set", "train.epochs=1", "--set", "data.max_train_pairs=64"]
# CSRAN at a toy size: scoring dev/test at the recipe's size takes minutes on 2 cores
SMALL_CSRAN = [*SMALL_TRAIN, *(f"--set=model.{key}=8" for key in (
    "hidden", "char_hidden", "aggr_hidden", "out_hidden", "fm_factors")), "--set=model.layers=1"]
#: command as documented -> extra words that keep it small (appended).
SMALL: dict[str, list[str]] = {
    "pairrepro train recipes/csran_trecqa.toml": SMALL_CSRAN,
    "pairrepro train recipes/mv_lstm_tensor_trecqa.toml --seeds 1 --set model.k=3": SMALL_TRAIN,
    "pairrepro train recipes/csran_trecqa.toml --resume": SMALL_CSRAN,
    # the demo's overrides; --force: the demo example before it trained this seed already
    "pairrepro train recipes/bilstm_max_synthetic.toml": [*SMALL_DEMO, "--force"],
    "pairrepro train bilstm_max_synthetic --resume": SMALL_DEMO,
    "pairrepro train bilstm_max_synthetic --tensorboard": [*SMALL_DEMO, "--force"],
    "pairrepro train mv_lstm_tensor --threads 1": ["--print-config"],
    "pairrepro demo": ["--epochs", "1", "--max-train-pairs", "64"],
    "pairrepro demo --data synthetic": ["--epochs", "1", "--max-train-pairs", "64"],
    "pairrepro demo --data trecqa --epochs 1": ["--max-train-pairs", "64"],
    "pairrepro reproduce csran --table 6 --compare --seeds 1": ["--dry-run"],
    "pairrepro reproduce csran --table 6 --seeds 1,2,3 --device cuda": ["--dry-run"],
    "pairrepro reproduce csran --table 8 --jobs 2": ["--dry-run"],
    "pairrepro reproduce csran --table 6 --launcher slurm --slurm-config slurm.toml --no-wait":
        ["--dry-run"],
}
#: documented commands that need data this machine lacks -> (exit code, words of the hint).
FAILS: dict[str, tuple[int, str]] = {
    "pairrepro fetch yahoo --from ~/Downloads/manner.xml.gz": (2, "--from"),
    "pairrepro train recipes/mv_lstm_tensor.toml --seeds 1,2,3 --set model.k=3":
        (3, "pairrepro fetch yahoo"),
    "pairrepro train recipes/mv_lstm_tensor.toml --seeds 1,2,3": (3, "pairrepro fetch yahoo"),
    "pairrepro train recipes/mv_lstm_tensor.toml --seeds 1,2,3 --set model.hidden=100":
        (3, "pairrepro fetch yahoo"),
    "pairrepro embeddings train --dataset yahoo --variant mvlstm --dim 50":
        (3, "pairrepro fetch yahoo"),
    "pairrepro embeddings train --dataset yahoo --variant mvlstm --out w2v-50d.txt "
    "--epochs 10": (3, "pairrepro fetch yahoo"),
    "pairrepro fetch snli --source hub": (4, "--from DIR"),  # offline: no hub
    "pairrepro preprocess snli --variant hub": (3, "pairrepro fetch snli --source hub"),
    "pairrepro eval runs/cin --ensemble --split test": (2, "runs/<recipe>"),  # never trained
    # checked before any rank starts: no GloVe 840B here (nor, maybe, SNLI)
    "pairrepro train recipes/csran.toml --nproc-per-node 4":
        (3, "--set embeddings.source=glove-6b-50d"),
}
#: commands of other areas still being written, or that write into the repository
#: (results/): their --help must work.
HELP_ONLY = ("pairrepro results", "pairrepro verify", "pairrepro preflight")
#: the README's placeholders for a mirror folder
MIRROR_PLACEHOLDERS = ("/data/mirror", "/data/pairrepro-mirror")


#: the pages a user follows: README.md, docs/*.md and the paper pages (docs/spec/, what the
#: papers say, and docs/history.md, what was measured then, are records, not instructions)
PAGES = [PROJECT / "README.md", *sorted(p for p in (PROJECT / "docs").glob("*.md")
                                        if p.name != "history.md"),
         *sorted((PROJECT / "docs" / "papers").glob("*.md"))]


def pages_text() -> str:
    """Every page of :data:`PAGES`, one after the other."""
    return "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def readme_commands() -> list[str]:
    """The commands of every ```bash block of the README and docs/ (all of it: a record that
    shows a command shows one that must work)."""
    from pairrepro.report.publishing.readme import documents

    text = "\n".join(page.read_text(encoding="utf-8")
                     for page in documents(PROJECT / "README.md"))
    out = []
    for block in text.split("```bash")[1:]:
        for line in block.split("```", 1)[0].splitlines():
            line = re.split(r"\s+#", line)[0].strip()
            if line.startswith(("pairrepro ", "make ")) and "$" not in line:
                out.append(line)
    return out


def help_examples() -> list[str]:
    out: list[str] = []

    def walk(command: object) -> None:
        for line in (getattr(command, "help", None) or "").splitlines():
            line = re.split(r"\s{2,}[(#]", line.strip())[0].strip()
            if line.startswith("pairrepro "):
                out.append(line)
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return out


def _commands() -> list[str]:
    """README commands in their order, then the help examples, those that get data first
    (the train examples use the synthetic data the demo prepares, as a user's would)."""
    first = ("pairrepro demo", "pairrepro fetch", "pairrepro preprocess")
    examples = sorted(help_examples(), key=lambda c: not c.startswith(first))
    return list(dict.fromkeys(readme_commands() + examples))


def _localise(words: list[str], tmp: Path, mirror: Path) -> list[str]:
    out = []
    for i, word in enumerate(words):
        if word in MIRROR_PLACEHOLDERS:
            word = str(mirror)
        elif word.startswith("runs/"):
            word = str(tmp / word)
        elif i and words[i - 1] in ("--out", "-o", "--figures", "--out-dir"):
            word = str(tmp / "out" / word)
        out.append(word)
    return out


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


def test_every_documented_command_is_known() -> None:
    commands = _commands()
    assert any(c.startswith("pairrepro train") for c in commands)
    assert "pairrepro fetch snli --source hub" in commands
    stale = [c for c in [*SMALL, *FAILS] if c not in commands]
    assert not stale, f"mapped here but no longer documented: {stale}"


def test_every_documented_command_works(sandbox: Path, shared_datasets: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIRREPRO_HOME", str(sandbox / "home"))
    monkeypatch.setenv("PAIRREPRO_RUNS", str(sandbox / "runs"))
    monkeypatch.setenv("PAIRREPRO_MIRROR", str(shared_datasets))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(sandbox / "hf"))
    monkeypatch.chdir(PROJECT)  # recipes/... as written
    runner = CliRunner()
    failures = []
    for command in _commands():
        words = shlex.split(command)
        if words[0] == "make":
            argv = ["make", "-s", "help"] if words[1] == "help" else ["make", "-n", *words[1:]]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if done.returncode:
                failures.append(f"{command}: make exit {done.returncode}: {done.stderr[-300:]}")
            continue
        if command.startswith(HELP_ONLY):
            words = [*words[:2], "--help"]
        words = _localise(words + SMALL.get(command, []), sandbox, shared_datasets)
        result = runner.invoke(app, words[1:])
        output = " ".join(result.output.split())
        want, hint = FAILS.get(command, (0, ""))
        if result.exit_code != want or (want and (hint not in output or "hint" not in output)):
            failures.append(f"{command}: exit {result.exit_code} (documented {want}): "
                            f"{output[-400:]}")
        if "Traceback" in result.output:
            failures.append(f"{command}: printed a traceback")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------- what the README quotes beside them

#: the pages' generated sections (rendered from records, checked by test_readme_drift)
GENERATED = re.compile(r"<!-- BEGIN generated: [\w-]+ -->.*?<!-- END generated -->", re.S)
#: a duration as typed: "2.3 s", "10 min 53 s", "103 seconds", "about 3 minutes", "a few minutes"
TYPED_TIME = re.compile(r"\b\d[\d,.]*\s?(?:ms|s|min|minutes?|seconds?|hours?)\b(?![.-]\w)"
                        r"|\b(?:a few|several|some|about \d+)\s+(?:seconds|minutes|hours)\b")
#: "exit 2", "exits 10", "exit 3 / 2", "the exit code is 6"
EXIT_MENTION = re.compile(r"\bexits? (?:code is )?(\d+)(?: / (\d+))?")


def typed_readme() -> str:
    """The pages without their generated sections: the text a person typed."""
    return GENERATED.sub("", pages_text())


def exit_code_table() -> dict[int, str]:
    """``pairrepro/errors.py``'s table (its docstring): exit code -> meaning."""
    from pairrepro import errors

    table = (errors.__doc__ or "").split("Exit codes", 1)[1].split(":", 1)[1]
    return {int(code): " ".join(meaning.split())
            for code, meaning in re.findall(r"(\d+) ([^·]+)", table)}


def test_exit_codes_are_the_errors_table() -> None:
    """Every error class's code is in the table, the README's list is the table, in order, and
    every exit code the README quotes beside a command is one of the table's."""
    from pairrepro import errors

    table = exit_code_table()
    assert {0, 1, 130} <= set(table), table
    classes = [c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.PairreproError)]
    assert {c.exit_code for c in classes} <= set(table), {c.__name__: c.exit_code
                                                          for c in classes}
    text = typed_readme()
    listed = text.split("Exit codes scripts can rely on (`pairrepro/errors.py`):", 1)[1]
    listed = listed.split("\n\n", 1)[0]
    assert [int(c) for c in re.findall(r"`(\d+)`", listed)] == list(table)
    quoted = {int(c) for pair in EXIT_MENTION.findall(text) for c in pair if c}
    assert quoted, "the README quotes no exit code: the pattern is stale"
    assert quoted <= set(table), f"README quotes exit codes not in errors.py: {quoted - set(table)}"


def test_exit_code_pattern_and_time_pattern_find_what_they_should() -> None:
    """The two patterns above against known text, so that a test passing on the README is not a
    pattern matching nothing."""
    found = [m.group(0) for m in TYPED_TIME.finditer(
        "took 2.231 s, then 10 min 53 s; about 12 minutes or a few minutes; 3 s.e. apart, a "
        "60-second budget, 5 seconds")]
    assert found == ["2.231 s", "10 min", "53 s", "about 12 minutes", "a few minutes",
                     "5 seconds"]
    assert EXIT_MENTION.findall("exit 2; exits 10 naming it; exit 3 / 2; the exit code is 6") == [
        ("2", ""), ("10", ""), ("3", "2"), ("6", "")]


def test_typed_times_say_where_they_were_measured() -> None:
    """A time typed into the README or docs/ (outside the sections generated from records) must
    say on what machine and under what load it was measured, in its own paragraph or table
    row."""
    unqualified = []
    for block in re.split(r"\n\s*\n|\n(?=\|)", typed_readme()):
        times = TYPED_TIME.findall(block)
        if times and not ("load" in block and re.search(r"machine|cores?\b", block)):
            unqualified.append(f"{times}: {' '.join(block.split())[:160]}")
    assert not unqualified, "typed times without machine and load:\n" + "\n".join(unqualified)


def test_recipes_type_no_time() -> None:
    """Issue 27, defect 9: csran_twitter_url's description said "under 20 minutes" (on 2
    cores, one thread), and its reference run took 23 minutes on one; what it inherits said
    so for its bigger descendants too. A recipe's time is measured (preflight records, the
    plan, each run's manifest), never typed."""
    typed = [f"{path.name}: {match.group(0)!r}"
             for path in sorted((PROJECT / "recipes").glob("*.toml"))
             for match in TYPED_TIME.finditer(path.read_text(encoding="utf-8"))]
    assert not typed, typed


def test_where_the_reference_runs_were_made_is_counted_not_typed() -> None:
    """The README typed "made on 2 cores of an Intel Xeon": 10 of the committed manifests
    name an AMD EPYC and the others no CPU at all. The paragraph now types no machine, and its
    generated section counts what the manifests say (counted here from the JSON by hand)."""
    from collections import Counter

    from pairrepro.report.publishing.readme import SECTIONS

    text = (PROJECT / "docs" / "results.md").read_text(encoding="utf-8")
    marker = "<!-- BEGIN generated: reference-environment -->"
    assert marker in text
    paragraph = text.split("**Hardware and software**", 1)[1].split(marker, 1)[0]
    assert not re.search(r"Intel|Xeon|EPYC|AMD|\bcores?\b", paragraph), paragraph
    manifests = [json.loads(p.read_text(encoding="utf-8"))
                 for p in sorted((PROJECT / "results").glob("*/seed-*/manifest.json"))]
    rendered = SECTIONS["reference-environment"](PROJECT / "results")
    assert f"The {len(manifests)} reference runs" in rendered
    cpus = Counter(None if not m.get("cpu") else (m["cpu"]["model"], m["cpu"]["capability"])
                   for m in manifests)
    for cpu, count in cpus.items():
        shown = "not recorded (made before manifests recorded the CPU)" if cpu is None \
            else f"{cpu[0]}, torch capability {cpu[1]}, "
        assert re.search(re.escape(shown) + r"[^;]*\(" + str(count) + r"\)", rendered), (
            cpu, count, rendered)
    threads = Counter(m.get("cpu_threads") for m in manifests)
    assert "- CPU threads: " + "; ".join(f"{t} ({n})" for t, n in threads.most_common()) \
        in rendered


def _paragraph(start: str) -> str:
    """The README paragraph (typed text) that begins with ``start``."""
    text = typed_readme()
    return " ".join(text[text.index(start):].split("\n\n", 1)[0].split())


def test_the_regression_checks_are_what_the_readme_says() -> None:
    """The README said the short recipe must give its metrics "to 1e-6", a check the test
    suite no longer made (bit-equal on the reference's kernels, else a band)."""
    from test_regression import BM25_TOLERANCE, LOSS_RTOL, band_problems

    said = _paragraph("Regression checks in the test suite")
    def sci(x: float) -> str:  # 1e-09 -> 1e-9, as the README writes it
        return f"{x:.0e}".replace("e-0", "e-")

    assert f"to {sci(BM25_TOLERANCE)}" in said and f"relative {sci(LOSS_RTOL)}" in said
    assert "bit for bit" in said and "one query's worth (1 / queries)" in said
    history = [{"epoch": 1, "train_loss": 0.7}]
    ref = {"train": {"map": 0.5, "num_queries": 20.0}}
    inside = {"train": {"map": 0.5 + 1 / 20, "num_queries": 20.0}}
    outside = {"train": {"map": 0.5 + 1 / 20 + 1e-9, "num_queries": 20.0}}
    assert not band_problems(inside, history, ref, history)
    assert band_problems(outside, history, ref, history)
    assert band_problems(ref, [{"epoch": 1, "train_loss": 0.7 * (1 + 2 * LOSS_RTOL)}], ref,
                         history)


def _source(relative: str) -> str:
    return (PROJECT / relative).read_text(encoding="utf-8")


def test_numbers_the_readme_types_are_the_codes() -> None:
    """Each figure the README types about the code (defaults, budgets, targets, thresholds) is
    the value the code uses: (the README's words, the value found in the code)."""
    from pairrepro.cli.train_cmds import preflight
    from pairrepro.config import TrainSection
    from pairrepro.stats import TEST_CAP

    readme = " ".join(typed_readme().split())
    budget = inspect.signature(preflight).parameters["budget"].default.default  # seconds
    makefile = _source("Makefile")
    protocol = _source("bench/protocol.py")
    quoted = {
        "five-minute check": budget == 5 * 60,
        "`run_all.py`'s 60-second default": '"--budget", type=float, default=60.0'
                                            in _source("bench/preflight/run_all.py"),
        "`checkpoint_minutes` (default 10)": TrainSection().checkpoint_minutes == 10,
        "ends with its 15 slowest tests (`--durations`)": "--durations=15" in makefile,
        "reports every failure rather than stopping at the first": re.search(
            r"^test:.*\n\t.*pytest(?!.* -x\b)", makefile, re.M) is not None,
        "≥ 50,000 pairs/s per CPU second": "TARGET_PAIRS_PER_S = 50_000"
                                           in _source("bench/bench_preprocess.py"),
        "engine/bare ≥ 0.90": "e / b >= 0.9 else" in _source("bench/bench_engine_overhead.py"),
        "top-1,000 negatives, 60k questions × 60k answers": re.search(
            r'"--size", type=int, default=60_000.*"--top-k", type=int, default=1000',
            _source("bench/bench_negatives.py"), re.S) is not None,
        "9,324 pairs × 3 seeds at ≥ 64,000 resamples per second, its cap of 640,000": (
            "PAIRS, QUERIES, SEEDS = 9_324, 68, 3" in _source("bench/bench_stats.py")
            and "TARGET_S = 10.0" in _source("bench/bench_stats.py") and TEST_CAP == 640_000),
        "within the machine's cores (+0.5)": "LOAD_MARGIN = 0.5" in protocol,
        "at most 10% of the bench's core": "MAX_OTHERS_ON_OUR_CORES = 0.10" in protocol,
        "a bf16 step predicted over 5 s is not run": '"--bf16-cap", type=float, default=5.0'
                                                      in protocol,
    }
    missing = [words for words in quoted if words not in readme]
    assert not missing, f"the README no longer says {missing}: update this table"
    wrong = [words for words, holds in quoted.items() if not holds]
    assert not wrong, f"the README's figures differ from the code: {wrong}"


def p_columns_without_holm(table: str) -> list[str]:
    """The headers of a markdown table's p-value columns (cells like "+0.012 (p 0.043)") that
    the next column does not adjust ("Holm p")."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines() if line.startswith("|")]
    if len(rows) < 3:
        return []
    head, body = rows[0], rows[2:]
    lonely = []
    for k, name in enumerate(head):
        tested = any(k < len(r) and re.search(r"\(p [<\d]", r[k]) for r in body)
        if tested and (k + 1 >= len(head) or head[k + 1] != "Holm p"):
            lonely.append(name)
    return lonely


def test_every_p_value_column_of_the_readme_has_its_holm_twin() -> None:
    """Issue 25: where a table prints several tests, Holm-adjusted p-values stand beside the
    raw ones, in every generated table of the README and docs/."""
    assert p_columns_without_holm("| a | a vs b |\n|---|---|\n| x | +0.1 (p 0.04) |") == [
        "a vs b"]
    assert p_columns_without_holm(
        "| a | a vs b | Holm p |\n|---|---|---|\n| x | +0.1 (p 0.04) | 0.08 |") == []
    sections = GENERATED.findall(pages_text())
    tables = [t for s in sections for t in re.split(r"\n\s*\n", s)]
    assert sum(bool(re.search(r"\(p [<\d]", t)) for t in tables) >= 7
    lonely = {t.splitlines()[0][:60]: p_columns_without_holm(t) for t in tables
              if p_columns_without_holm(t)}
    assert not lonely, lonely


def test_help_texts_keep_their_square_brackets() -> None:
    """rich reads ``[word]`` as markup and drops it: each bracketed word of a command's help
    text is printed by its ``--help`` (``fetch --help`` once lost ``[hub]``)."""
    missing = []

    def walk(command: object, words: list[str]) -> None:
        for word in re.findall(r"\[([a-z_.]+)\]", getattr(command, "help", None) or ""):
            shown = CliRunner().invoke(app, [*words, "--help"], terminal_width=200).output
            if f"[{word}]" not in shown:
                missing.append(f"pairrepro {' '.join(words)} --help: [{word}]")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*words, name])

    walk(typer.main.get_command(app), [])
    assert not missing, missing


def test_the_quick_tour_starts_with_data_a_newcomer_can_fetch() -> None:
    """The tour's first fetch and first training run need only public data (its licence-gated
    Yahoo file comes later, said to be so)."""
    from pairrepro.config import load_recipe
    from pairrepro.data.manifests import load_manifest

    text = (PROJECT / "README.md").read_text(encoding="utf-8")
    tour = text.split("## A quick tour", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    words = [shlex.split(re.split(r"\s+#", line)[0]) for line in tour.splitlines()]
    fetch = next(w for w in words if w[:2] == ["pairrepro", "fetch"])
    train = next(w for w in words if w[:2] == ["pairrepro", "train"])
    dataset = load_recipe(PROJECT / train[2]).data.dataset
    assert fetch[2] == dataset and load_manifest(dataset).public


def test_ci_runs_the_readmes_test_command() -> None:
    """`.ci/run` ends with the README's test command, as a newcomer types it."""
    readme = _source("README.md").splitlines()
    command = next(line.split("#")[0].strip() for line in readme if line.startswith("make test"))
    lines = [line for line in _source(".ci/run").splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[-1] == command == "make test"
