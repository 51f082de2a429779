"""The commands of the two "Adding a ..." guides (docs/adding-a-model.md,
docs/adding-a-dataset.md) as their tests run them, in-process from a temporary project folder:
each line of the page's ```text block, a ``make`` line replaced by the commands of its
Makefile target (read from the Makefile, so the test follows the target, not a copy of it)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app


def guide_lines(page: Path) -> list[str]:
    """The non-empty lines of the page's first ```text block."""
    block = re.findall(r"```text\n(.*?)```", page.read_text(encoding="utf-8"), re.S)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def make_lines(line: str) -> list[str]:
    """``make TARGET VAR=value ...`` as the shell lines of its Makefile target, with ``$(CLI)``
    as ``pairrepro``, the variables given filled in and an ``$(if $(VAR),...)`` of a variable
    not given dropped; the target's own ``@`` checks are left out."""
    _make, target, *assignments = shlex.split(line)
    given = dict(a.split("=", 1) for a in assignments)
    text = (paths.PROJECT_DIR / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert body, f"the Makefile has no target {target}"
    out = []
    for raw in body.group(1).splitlines():
        raw = re.sub(r"\$\(if \$\((\w+)\),([^)]*)\)",
                     lambda m: m.group(2) if given.get(m.group(1)) else "", raw.strip())
        for name, value in {"CLI": "pairrepro", **given}.items():
            raw = raw.replace(f"$({name})", value)
        if not raw.startswith("@"):
            out.append(raw.strip())
    return out


def run_line(line: str, project: Path) -> Any:
    """One shell line in ``project``: ``pairrepro ...`` (its ``--json`` output parsed, or its
    text written to ``F`` with ``> F``; ``&& mv F G`` then moves it) ; returns the parsed
    output, or None."""
    command, _, moved = line.partition(" && mv ")
    words, _, into = command.partition(" > ")
    argv = shlex.split(words)
    assert argv[0] == "pairrepro", line
    # `results readme` rewrites the project's own pages: the tests check its section instead
    assert argv[1:3] != ["results", "readme"], "see preflight_section"
    json_out = not into
    result = CliRunner().invoke(app, (["--json"] if json_out else []) + argv[1:])
    assert result.exit_code == 0, f"{line}: {result.output[-800:]}"
    if into:
        (project / into).write_text(result.stdout, encoding="utf-8")
    if moved:
        source, target = shlex.split(moved)
        (project / source).replace(project / target)
    return json.loads(result.stdout) if json_out and result.stdout.strip() else None


def preflight_section(folder: Path) -> str:
    """docs/preflight.md's generated table as `results readme` renders it from the preflight
    records of ``folder``."""
    from pairrepro.planning import preflight_record
    from pairrepro.report.publishing import readme

    real = preflight_record.PREFLIGHT_DIR
    preflight_record.PREFLIGHT_DIR = folder
    try:
        return readme.SECTIONS["preflight"](paths.PROJECT_DIR / "results")
    finally:
        preflight_record.PREFLIGHT_DIR = real
