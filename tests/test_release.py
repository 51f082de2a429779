"""Releases of the reference runs: what must be re-made (seeds from several commits, a run
without a CPU fingerprint), whether a re-made run is bit-equal to the one it replaces, and the
release record, on hand-written run folders whose answers are known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from pairrepro.cli.app import app
from pairrepro.errors import ConfigError
from pairrepro.report.publishing import readme
from pairrepro.report.publishing import release as rl
from pairrepro.runs import RunFolder, read_run

CPU = {"model": "AMD EPYC", "isa": ["avx512f"], "onednn": "v3.12.0"}


def run(results: Path, recipe: str, seed: int, commit: str, cpu: bool | dict = True,
        scores: tuple[float, ...] = (0.25, 0.75), wall: float = 1800.0,
        torch: str = "2.13.0+cpu") -> Path:
    d = results / recipe / f"seed-{seed}"
    d.mkdir(parents=True, exist_ok=True)
    manifest = {"git": {"commit": commit, "dirty": False}, "wall_time_s": wall,
                "torch": torch, "precision": "fp32", "cpu_threads": 1,
                **({"cpu": CPU if cpu is True else cpu} if cpu else {})}
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "config.toml").write_text("")
    test_map = sum(scores) / len(scores)
    (d / "result.json").write_text(json.dumps({
        "recipe": recipe, "seed": seed, "status": "finished", "chosen_epoch": 1,
        "metrics": {"test": {"map": test_map}}}))
    RunFolder(d).write_predictions("test", pd.DataFrame({"pair_id": ["a", "b"],
                                                         "score": list(scores)}))
    return d


@pytest.fixture
def results(tmp_path: Path) -> Path:
    r = tmp_path / "results"
    for seed, commit in ((1, "a" * 40), (2, "b" * 40)):
        run(r, "mixed", seed, commit)
    run(r, "no_cpu", 1, "c" * 40)
    run(r, "no_cpu", 2, "c" * 40, cpu=False, wall=3600.0)
    run(r, "fine", 1, "c" * 40)
    run(r, "fine", 2, "c" * 40)
    run(r, "elsewhere", 1, "c" * 40, cpu={**CPU, "isa": ["avx2"]})
    run(r, "other_torch", 1, "c" * 40, torch="2.12.0+cpu")
    return r


def test_pending_lists_mixed_commits_and_unknown_cpus_and_torch_builds(results: Path) -> None:
    todo = {r.recipe: r for r in rl.pending(results)}
    assert set(todo) == {"mixed", "no_cpu", "elsewhere", "other_torch"}
    assert todo["elsewhere"].why == "made on another CPU"  # 6 runs on one CPU, 1 on another
    assert todo["other_torch"].why == "made with another torch build than 2.13.0+cpu"
    assert todo["mixed"].seeds == (1, 2) and "2 commits" in todo["mixed"].why
    assert todo["mixed"].hours == pytest.approx(1.0)  # two runs of 1,800 s
    assert todo["no_cpu"].seeds == (2,) and todo["no_cpu"].hours == pytest.approx(1.0)
    assert todo["no_cpu"].command == "pairrepro train no_cpu --seeds 2 --threads 1 --force"


def test_replacement_is_bit_equal_only_when_metrics_and_predictions_are(tmp_path: Path
                                                                        ) -> None:
    old = read_run(run(tmp_path / "old", "r", 1, "a" * 40, cpu=False))
    same = read_run(run(tmp_path / "same", "r", 1, "d" * 40))
    assert rl.replacement(old, same) == {"replaced_commit": "a" * 40, "commit": "d" * 40,
                                         "bit_equal": True, "differs_in": {}, "why": []}
    # one score moves by one ulp (the mean rounds back to 0.5): not bit-equal, and the old
    # run's missing CPU record is named as a reason
    other = read_run(run(tmp_path / "other", "r", 1, "d" * 40, scores=(0.25, 0.7500000000000001)))
    record = rl.replacement(old, other)
    assert record["bit_equal"] is False
    assert record["differs_in"] == {"test": "metrics equal, scores move by up to 1.1e-16"}
    assert "the replaced run does not record its CPU" in record["why"]
    # a score moves by 0.1, and the metric (their mean) with it
    moved = read_run(run(tmp_path / "moved", "r", 1, "d" * 40, scores=(0.25, 0.85)))
    assert rl.replacement(old, moved)["differs_in"] == {
        "test": "metrics differ (map by 0.05), scores move by up to 0.1"}


def test_a_long_list_of_changed_files_is_counted_by_folder() -> None:
    two = ["pairrepro/models/esim.py", "pairrepro/tasks.py"]
    assert rl._changed_code_summary(two) == "pairrepro/models/esim.py, pairrepro/tasks.py"
    many = [*two, "pairrepro/models/csran.py", "pairrepro/train/loop.py"]
    assert rl._changed_code_summary(many) == ("4 files (pairrepro/models 2, pairrepro/tasks.py 1, "
                                              "pairrepro/train 1)")


def test_a_release_waits_for_the_remakes_then_records_their_commit(results: Path) -> None:
    with pytest.raises(ConfigError, match="4 recipe") as refused:
        rl.make_release("1", "2026-11-27", results)
    # the hint's command runs, and lists the commands that re-make them
    hint = refused.value.hint or ""
    listed = CliRunner().invoke(app, [*hint.split(" lists")[0].split()[1:], "--results",
                                      str(results)])
    assert listed.exit_code == 9 and "pairrepro train mixed" in listed.output
    for seed in (1, 2):
        d = run(results, "mixed", seed, "e" * 40)
        (d / rl.REPLACES_FILE).write_text(json.dumps(
            {"commit": "e" * 40, "bit_equal": seed == 1, "replaced_commit": "a" * 40,
             "differs_in": {} if seed == 1 else {"test": "metrics differ (map by 0.1)",
                                                 "train": "metrics equal"},
             "why": [] if seed == 1 else ["training code changed between a and e: x.py",
                                          "CPU differs"]}))
    run(results, "no_cpu", 2, "c" * 40)
    run(results, "elsewhere", 1, "c" * 40)
    run(results, "other_torch", 1, "c" * 40)
    assert rl.pending(results) == []
    release = rl.make_release("1", "2026-11-27", results)
    assert release.commit == "e" * 40 and release.not_bit_equal == ["mixed/seed-2"]
    assert len(release.runs) == 8 and "AMD EPYC" in release.cpu and release.torch == "2.13.0+cpu"
    rl.write_release(release, results)
    assert rl.read_release(results) == release
    text = readme._release(results)  # the README's release section
    assert text.startswith("**Release 1** (2026-11-27): 8 runs on one CPU, AMD EPYC")
    assert "from one commit, 2 commits in all. 2 runs were re-made for it at commit " \
           "`eeeeeeeeee`, 1 of them not bit-equal" in text
    assert text.endswith("\n  - mixed/seed-2 (training code changed between a and e; CPU "
                         "differs): test metrics differ (map by 0.1)\n")


def test_cli_lists_the_commands_and_exits_9_while_anything_is_pending(results: Path) -> None:
    out = CliRunner().invoke(app, ["results", "release", "--results", str(results)])
    assert out.exit_code == 9
    assert "pairrepro train mixed --seeds 1,2 --threads 1 --force" in out.output
    assert "4 recipe(s), 5 run(s)" in out.output


def test_a_written_release_notices_every_run_added_changed_or_removed_since(tmp_path: Path
                                                                           ) -> None:
    results = tmp_path / "results"
    for seed in (1, 2):
        run(results, "fine", seed, "c" * 40)
    cli = ["results", "release", "--results", str(results)]
    assert CliRunner().invoke(app, [*cli, "--name", "1"]).exit_code == 0
    out = CliRunner().invoke(app, cli)
    assert out.exit_code == 0 and "release 1 (" in out.output
    assert readme._release(results).startswith("**Release 1** (")

    # one score of seed 1 moves by an ulp; seed 3 appears; seed 2 goes: each is named
    run(results, "fine", 1, "c" * 40, scores=(0.25, 0.7500000000000001))
    run(results, "fine", 3, "c" * 40)
    for f in sorted((results / "fine" / "seed-2").rglob("*"), reverse=True):
        f.rmdir() if f.is_dir() else f.unlink()
    (results / "fine" / "seed-2").rmdir()
    release = rl.read_release(results)
    assert release is not None
    assert release.drift(rl.all_runs(results)) == {
        "added": ["fine/seed-3"], "removed": ["fine/seed-2"], "changed": ["fine/seed-1"]}
    assert readme._release(results).startswith("**Release 1 no longer describes `results/`**")
    out = CliRunner().invoke(app, cli)
    assert out.exit_code == 9 and "1 changed (fine/seed-1)" in out.output
    # release 1 keeps its meaning: the next one needs the next name
    refused = CliRunner().invoke(app, [*cli, "--name", "1"])
    assert refused.exit_code != 0 and "--name 2" in refused.output
    assert CliRunner().invoke(app, [*cli, "--name", "2"]).exit_code == 0
    assert CliRunner().invoke(app, cli).exit_code == 0


def test_a_classifier_s_change_counts_the_labels_that_moved() -> None:
    def frame(*labels: int) -> pd.DataFrame:
        return pd.DataFrame({"pair_id": [f"p{i}" for i in range(len(labels))],
                             "prediction": list(labels)})
    assert rl._prediction_change(frame(0, 1, 2), frame(0, 2, 2)) == "1 of 3 labels differ"
    assert rl._prediction_change(frame(0, 1, 2), frame(0, 1, 2)) == ""
    assert rl._prediction_change(frame(0, 1, 2), frame(0, 1)) == "other pairs saved"
    assert rl._prediction_change(frame(0, 1, 2), frame(0, 1, 2).rename(
        columns={"prediction": "label"})) == "other columns saved"
