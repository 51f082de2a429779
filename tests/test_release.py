"""Releases of the reference runs: what must be re-made (seeds from several commits, a run
without a CPU fingerprint), whether a re-made run is bit-equal to the one it replaces, and the
release record, on hand-written run folders whose answers are known by construction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner, Result

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
    # one query, "b" its answer: MAP 1 when b scores higher, else 1/2
    test_map = 1.0 if scores[1] > scores[0] else 0.5
    (d / "result.json").write_text(json.dumps({
        "recipe": recipe, "seed": seed, "status": "finished", "chosen_epoch": 1,
        "metrics": {"test": {"map": test_map}}}))
    RunFolder(d).write_predictions("test", pd.DataFrame({
        "pair_id": ["a", "b"], "group_id": ["q", "q"], "label": [0, 1], "score": list(scores)}))
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
    # a score moves by 0.6, past the other, and the metric with it
    moved = read_run(run(tmp_path / "moved", "r", 1, "d" * 40, scores=(0.25, 0.15)))
    assert rl.replacement(old, moved)["differs_in"] == {
        "test": "metrics differ (map by 0.5), scores move by up to 0.6"}


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


def _release(results: Path, *flags: str) -> Result:
    return CliRunner().invoke(app, ["results", "release", "--results", str(results), *flags])


def test_writing_the_written_release_again_keeps_it_whole(tmp_path: Path) -> None:
    """--name 1 on an unchanged tree rewrote release 1's date to today's, rc 0."""
    results = tmp_path / "results"
    run(results, "fine", 1, "c" * 40)
    assert _release(results, "--name", "1").exit_code == 0
    path = results / rl.RELEASE_FILE
    path.write_text(path.read_text().replace(json.loads(path.read_text())["date"],
                                             "2026-11-27"))
    before = path.read_bytes()
    out = _release(results, "--name", "1")
    assert out.exit_code == 0 and "release 1 (2026-11-27) is unchanged" in out.output, out.output
    assert path.read_bytes() == before


def test_a_release_pins_every_file_of_its_runs(tmp_path: Path) -> None:
    """Editing or deleting replaces.json (or the manifest, config, metrics.jsonl) left the
    release "describing every reference run", and the next one was written over it."""
    results = tmp_path / "results"
    d = run(results, "fine", 1, "c" * 40)
    (d / "metrics.jsonl").write_text('{"epoch": 1}\n')
    (d / rl.REPLACES_FILE).write_text(json.dumps({"commit": "c" * 40, "bit_equal": False,
                                                 "differs_in": {"test": "map by 0.031"},
                                                 "why": ["CPU differs"]}))
    assert _release(results, "--name", "1").exit_code == 0
    for name in ("manifest.json", "config.toml", "metrics.jsonl", rl.REPLACES_FILE):
        kept = (d / name).read_bytes()
        (d / name).write_bytes(kept.replace(b"0.031", b"0.001") + b" ")
        out = _release(results)
        assert out.exit_code == 9 and "1 changed (fine/seed-1)" in out.output, (name, out.output)
        (d / name).write_bytes(kept)
        assert _release(results).exit_code == 0
    (d / rl.REPLACES_FILE).unlink()
    assert "1 changed (fine/seed-1)" in _release(results).output


@pytest.mark.parametrize("name", [" 1", "1 ", "\uff11", "0", "01", "-1", "../x", "1\n",
                                  "\x1b[31m1", "9" * 300])
def test_a_release_name_is_a_plain_positive_integer(tmp_path: Path, name: str) -> None:
    results = tmp_path / "results"
    run(results, "fine", 1, "c" * 40)
    out = _release(results, "--name", name)
    assert out.exit_code == 2 and "positive integer" in out.output, out.output
    assert "\x1b" not in out.output and len(out.output) < 400  # no raw escape, no flood
    assert not (results / rl.RELEASE_FILE).exists()


def test_a_release_is_never_written_under_an_older_name_of_damaged_runs_or_blind(
        tmp_path: Path) -> None:
    """After --name 2, --name 1 was written again; a release was written while the tables
    called a run damaged; results/zz_new/seed-1 (a copy of another recipe's run) was left
    out of it; and a truncated release.json gave a hint whose command failed alike."""
    results = tmp_path / "results"
    fine = run(results, "fine", 1, "c" * 40)
    assert _release(results, "--name", "2").exit_code == 0
    out = _release(results, "--name", "1")
    assert out.exit_code == 2 and "--name 3" in out.output
    assert rl.read_release(results).name == "2"  # type: ignore[union-attr]
    result = json.loads((fine / "result.json").read_text())
    result["metrics"]["test"]["map"] = 0.75  # not what its predictions give
    (fine / "result.json").write_text(json.dumps(result))
    out = _release(results, "--name", "3")
    assert out.exit_code == 2 and "damaged" in out.output and "result.json" in out.output
    run(results, "fine", 1, "c" * 40)
    assert _release(results).exit_code == 0
    stray = results / "zz_new" / "seed-1"
    shutil.copytree(fine, stray)
    out = _release(results)
    assert out.exit_code == 9 and "1 added (zz_new/seed-1)" in out.output, out.output
    out = _release(results, "--name", "3")
    assert out.exit_code == 2 and f"{stray}: the folder holds recipe zz_new" in " ".join(
        out.output.split()), out.output
    shutil.rmtree(stray.parent)
    path = results / rl.RELEASE_FILE
    path.write_text(path.read_text()[:100])
    out = _release(results)
    assert out.exit_code == 2 and f"rm {path}" in out.output
    path.unlink()  # what the hint says
    assert _release(results, "--name", "3").exit_code == 0
