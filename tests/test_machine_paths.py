"""No committed file names a folder that exists on one machine only: a home folder, the build
machines' work folders, or (in a record: a run's manifest, a bench record) a temporary folder.
Commands in the pages may show ``/tmp/...`` as an example anyone can type; a record cannot."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
# written in pieces, so that this file does not hold what it looks for
HOME_OR_WORK = re.compile(r"(?<![\w.~-])(/ro" r"ot\b|/home/[a-z_][\w-]*|/Users/\w+|/wo" r"rk/)")
TEMPORARY = re.compile(r"(?<![\w.~-])/tmp/\w")
RECORD = re.compile(r"\.(json|jsonl|csv)$")


def _committed() -> dict[str, str]:
    if shutil.which("git") is None or not (PROJECT / ".git").exists():
        pytest.skip("needs the git command and a clone: the committed files are git's list")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    texts = {}
    for name in filter(None, names):
        try:
            texts[name] = (PROJECT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (parquet, png) or deleted in the work tree
    return texts


def _hits(name: str, text: str) -> list[str]:
    patterns = [HOME_OR_WORK, TEMPORARY] if RECORD.search(name) else [HOME_OR_WORK]
    return [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for pattern in patterns for m in pattern.finditer(text)]


def test_the_patterns_find_machine_paths() -> None:
    typed = " ".join(["/ro" + "ot/.cache/pairrepro", "/ho" + "me/alice/x", "/wo" + "rk/h1"])
    assert len(_hits("notes.md", typed)) == 3
    assert _hits("notes.md", "--out /tm" + "p/csran_tf ~/root/x $HOME/x /home") == []
    assert len(_hits("run/manifest.json", '"prepared_dir": "/tm' + 'p/home/x"')) == 1


def test_no_committed_file_names_one_machines_folders() -> None:
    found = [hit for name, text in _committed().items()
             if name != "tests/test_docs_links.py"  # holds such paths as test input
             for hit in _hits(name, text)]
    assert not found, ("name the folder relative to the project or $PAIRREPRO_HOME, or by an "
                       "example anyone can use (/data/mirror):\n" + "\n".join(found[:40]))
