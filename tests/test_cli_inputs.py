"""Command-line values that looked like something else (issue 38): a blank ``--seeds`` or an
empty item in it, and a run folder that is a link out of the runs folder, are errors that say
what is wrong, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth_prepared import write_synthetic
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
runner = CliRunner()


@pytest.mark.parametrize(("seeds", "words"), [
    (" ", "--seeds ' ': no seed given"),
    ("1,,2", "--seeds '1,,2': an empty item"),
    ("1,2,", "--seeds '1,2,': an empty item"),
])
def test_a_blank_or_an_empty_seed_is_an_error(data_home: Path, seeds: str, words: str) -> None:
    """`--seeds ' '` trained the recipe's seeds and `--seeds 1,,2` trained 1 and 2, as if
    nothing had been left out."""
    write_synthetic(data_home, n_train=60, n_eval=30)
    for flags in (["--print-config"], []):
        out = runner.invoke(app, ["--json", "train", str(NLI), "--seeds", seeds, *flags])
        assert out.exit_code == 2, out.output
        assert json.loads(out.output)["error"].startswith(words), out.output
    assert not paths.runs_dir().exists()


def test_a_seed_folder_that_links_elsewhere_is_named_as_a_link(
        data_home: Path, tmp_path: Path) -> None:
    """A seed folder that is a symbolic link out of the runs folder got the hint "check the
    recipe or dataset name", which names nothing that is wrong."""
    write_synthetic(data_home, n_train=60, n_eval=30)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = paths.runs_dir() / NLI.stem / "seed-1"
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    out = runner.invoke(app, ["--json", "train", str(NLI)])
    assert out.exit_code == 2, out.output
    error = json.loads(out.output)
    assert error["error"] == (f"{link} is outside {paths.runs_dir()}: {link} is a symbolic "
                              f"link to {elsewhere}")
    assert f"remove the link (rm {link}" in error["hint"]
    assert list(elsewhere.iterdir()) == []


def test_out_onto_a_link_fifo_or_device_or_under_a_file_is_refused(tmp_path: Path) -> None:
    """--out replaced a link, a FIFO or a device with a regular file (the link's target kept
    its old text, the FIFO's reader got nothing), and under a file it was a FileExistsError
    traceback. Each is exit 8 naming the path, and nothing there changes."""
    import os
    import shutil
    import stat

    runs = tmp_path / "runs" / "bm25_trecqa"
    shutil.copytree(paths.PROJECT_DIR / "results" / "bm25_trecqa" / "seed-1", runs / "seed-1")
    target, link, fifo, afile = (tmp_path / n for n in ("target.md", "link.md", "fifo", "f"))
    target.write_text("old")
    link.symlink_to(target)
    os.mkfifo(fifo)
    afile.write_text("a file")
    for out, words in ((link, "not a regular file"), (fifo, "not a regular file"),
                       (Path(os.devnull), "not a regular file"),
                       (afile / "table.md", "a file stands where a folder is needed"),
                       (afile / "sub" / "table.md", "a file stands where a folder is needed")):
        result = runner.invoke(app, ["report", "runs", "--runs", str(runs.parent),
                                     "--out", str(out)])
        text = " ".join(result.output.split())  # the console may wrap
        assert result.exit_code == 8, (out, result.output)
        named = afile if afile in out.parents else out
        assert f"error: {named}" in text and words in text and "Traceback" not in text, text
    assert link.is_symlink() and target.read_text() == "old" and afile.read_text() == "a file"
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "fifo", "link.md", "runs",
                                                          "target.md"]
