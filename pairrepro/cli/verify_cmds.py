"""CLI of the reference runs: ``pairrepro verify`` and ``pairrepro results add|readme|release``."""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path

import typer

from pairrepro import paths
from pairrepro.cli.common import STATE, add_command, emit_json, err_console, info, show_progress
from pairrepro.cli.interrupts import command_ended, interrupts_held
from pairrepro.errors import ConfigError, NothingToRunError, VerificationError
from pairrepro.fileio import write_text
from pairrepro.runs import RunFolder, all_runs, seed_folders

RESULTS_HELP = "Reference runs folder (default results/ of the project, or $PAIRREPRO_RESULTS)."


def _seed_dirs(targets: list[Path]) -> list[Path]:
    """Seed folders of ``targets``: seed, recipe or runs folders (and runs folders one level
    down: the demo's runs/demo/)."""
    found: list[Path] = []
    for target in targets:
        if not target.is_dir():
            raise ConfigError(f"{target}: no such run folder",
                              hint="name runs/<recipe>/seed-<n>, runs/<recipe> or runs/")
        found += [f.path for f in seed_folders(target) or _runs_folder_seeds(target)]
    return found


def _runs_folder_seeds(folder: Path, depth: int = 1) -> list[RunFolder]:
    """Seed folders of every recipe in ``folder``; a sub-folder that is no recipe's is a runs
    folder itself, ``depth`` levels down."""
    found: list[RunFolder] = []
    for sub in sorted(d for d in folder.iterdir() if d.is_dir()):
        found += seed_folders(sub) or (_runs_folder_seeds(sub, depth - 1) if depth else [])
    return found


def verify(
    runs: list[Path] = typer.Argument(None, help="Run folders: runs/<recipe>/seed-<n>, "
                                      "runs/<recipe>, or a whole runs folder (default: "
                                      "./runs or $PAIRREPRO_RUNS)."),
    results: Path | None = typer.Option(None, "--results", help=RESULTS_HELP),
) -> None:
    """Compare runs with the reference runs of the same recipe and seed in results/.

    Checks the prepared data (sha256), the resolved config (which keys differ; device and
    threads do not count) and the metrics: "same" (bit-equal) only when device, torch build,
    threads, precision and the CPU fingerprint recorded in both manifests match; otherwise
    every dev and test metric must lie inside the reference's 95% bootstrap interval (counts
    equal), and a metric that cannot be checked is named and fails. One verdict line per
    run: same, consistent, different data, variant, different, reference damaged, no
    reference.

    Exit codes: 0 every run is same or consistent (runs without a reference, and runs not
    finished, are listed and skipped); 9 a run differs from its reference; 7 no run has a
    reference.

    Examples:

      pairrepro verify runs/bm25_trecqa/seed-1

      pairrepro verify            # every run in ./runs (make verify)
    """
    from pairrepro.report.publishing.verify import NO_REFERENCE, NOT_FINISHED, verify_run

    # no argument: the runs folder, which a fresh checkout does not have yet
    targets = runs or [d for d in [paths.runs_dir()] if d.is_dir()]
    checked = [verify_run(d, results) for d in _seed_dirs(targets)]
    if STATE.json:
        emit_json([{"run": v.run, "reference": v.reference, "verdict": v.verdict,
                    "ok": v.ok, "checks": v.checks} for v in checked])
    else:
        for v in checked:
            typer.echo(v.line())
    failed = [v for v in checked if not v.ok and v.verdict not in (NO_REFERENCE, NOT_FINISHED)]
    if failed:
        raise VerificationError(f"{len(failed)} of {len(checked)} run(s) differ from their "
                                "reference: " + ", ".join(f"{v.run} ({v.verdict})"
                                                          for v in failed),
                                hint="the checks above say what differs")
    if not any(v.ok for v in checked):
        raise NothingToRunError("no run to verify has a reference run in results/"
                                if checked else "no run folders in " + ", ".join(
                                    map(str, runs or [paths.runs_dir()])),
                                hint="train one first (pairrepro train RECIPE), or name run "
                                     "folders: pairrepro verify runs/<recipe>/seed-<n>"
                                if not checked else "reference runs: "
                                "results/<recipe>/seed-<n> (pairrepro results add RUN)")


def results_add(
    runs: list[Path] = typer.Argument(..., help="Finished runs: runs/<recipe>/seed-<n> or "
                                      "runs/<recipe>."),
    results: Path | None = typer.Option(None, "--results", help=RESULTS_HELP),
    force: bool = typer.Option(False, "--force", help="Replace an existing reference run."),
) -> None:
    """Keep finished runs as the project's reference runs: results/<recipe>/seed-<n>/.

    Copies config.toml, manifest.json, metrics.jsonl, result.json and evals/, and the dev and
    test predictions as pair id, query id, label and score (or predicted class); no
    checkpoints, no train predictions. Only a run of the recipe as it is (not a --set
    variant) can be a reference.

    Example:

      pairrepro results add runs/bm25_trecqa/seed-1
    """
    from pairrepro.report.publishing.verify import add_reference

    seed_dirs = _seed_dirs(runs)
    # each run is added and reported, or not touched: Ctrl-C stops between two runs
    with interrupts_held() as stop_if_interrupted:
        for seed_dir in seed_dirs:
            stop_if_interrupted()
            dest, files = add_reference(seed_dir, results, force)
            size = sum(f.stat().st_size for f in files)
            if STATE.json:
                emit_json({"run": str(seed_dir), "reference": str(dest.path), "bytes": size})
            else:
                info(f"{seed_dir} -> {dest.path} ({len(files)} files, {size / 1024:.0f} KiB)")
        command_ended()  # every run added and said so: a Ctrl-C now cannot undo that


def results_readme(
    readme: Path = typer.Option(paths.PROJECT_DIR / "README.md", "--readme",
                                help="The README to rewrite, with the docs/ pages beside it."),
    check: bool = typer.Option(False, "--check", help="Only say which generated sections "
                               "are out of date (exit 9 if any)."),
    results: Path | None = typer.Option(None, "--results", help=RESULTS_HELP),
) -> None:
    """Rewrite the generated sections (<!-- BEGIN generated: NAME --> ... <!-- END generated
    -->) of the README and the docs/ pages from the reference runs in results/: the headline
    table, the paper pages, the run lists (make readme-tables).

    Example:

      pairrepro results readme --check
    """
    from pairrepro.report.publishing.readme import refresh

    # progress on stderr: stdout keeps the one result line
    say = functools.partial(err_console.print, markup=False, highlight=False)
    stale = refresh(readme, results, say if show_progress() else None)
    if check and stale:
        raise VerificationError("generated sections out of date: " + ", ".join(
            f"{path}: {name}" for path, (_, names) in stale.items() for name in names),
            hint="run make readme-tables")
    for path, (text, _) in stale.items():
        write_text(path, text)
    info(f"{readme} and its docs/: generated sections "
         + ("match results/" if not stale else "rewritten in " + ", ".join(map(str, stale))))


def results_release(
    name: str = typer.Option("", "--name", help="Write results/release.json as this release: "
                             "a positive integer above the written one's (refused while a run "
                             "must be re-made or is damaged; the written one again: unchanged)."),
    results: Path | None = typer.Option(None, "--results", help=RESULTS_HELP),
) -> None:
    """List the reference runs the next release must re-make (a recipe's seeds from several
    commits; a run without a CPU fingerprint, or on another CPU or torch build than most),
    with the command that re-makes each and the hours the replaced runs took; with --name,
    write the release record. With nothing to re-make, check that the written release still
    describes every run (none added, removed or changed since).

    Exit codes: 0 nothing pending (or the release written, or unchanged); 2 a --name that is
    no positive integer above the written one's, or a damaged run; 9 runs must be re-made
    first, or the written release no longer describes results/.

    Examples:

      pairrepro results release

      pairrepro results release --name 1
    """
    from pairrepro.report.publishing import release as releases

    results = results or paths.results_dir()
    runs = all_runs(results)
    todo = releases.pending(runs=runs)
    written = releases.read_release(results)
    if name and not todo:
        if releases.check_name(name, written, runs) and written:
            if STATE.json:
                emit_json({"release": name, "date": written.date, "unchanged": True})
            info(f"release {name} ({written.date}) is unchanged: it describes every run")
            return
        release = releases.make_release(name, dt.date.today().isoformat(), results)
        path = releases.write_release(release, results)
        if STATE.json:
            emit_json({"release": release.name, "commit": release.commit, "path": str(path),
                       "runs": len(release.runs), "not_bit_equal": release.not_bit_equal})
        else:
            info(f"{path}: release {release.name}, commit {release.commit[:10]}, "
                 f"{len(release.runs)} runs, {len(release.remade)} re-made "
                 f"({len(release.not_bit_equal)} not bit-equal)")
        return
    if STATE.json:
        emit_json([{"recipe": r.recipe, "seeds": list(r.seeds), "why": r.why,
                    "hours": round(r.hours, 2), "command": r.command} for r in todo])
    else:
        for r in todo:
            typer.echo(f"{r.command}  # {r.why}; {r.hours:.2f} h before")
        if todo:
            typer.echo(f"# {len(todo)} recipe(s), {sum(len(r.seeds) for r in todo)} run(s), "
                       f"{sum(r.hours for r in todo):.1f} h as first made")
    if todo:
        raise VerificationError(f"{len(todo)} recipe(s) must be re-made at one clean commit "
                                "before a release", hint="run the commands above, then "
                                "pairrepro results add --force each run")
    info("nothing to re-make: every run records its CPU and every recipe's seeds come "
         "from one commit")
    if written and (drift := written.drift(runs)):
        raise VerificationError(
            f"{results}: release {written.name} no longer describes the reference runs: "
            + "; ".join(f"{len(names)} {how} ({', '.join(names)})" for how, names in drift.items()),
            hint=f"write the next: pairrepro results release --name {int(written.name) + 1}")
    if written:
        info(f"release {written.name} ({written.date}) describes every reference run")


def register(app: typer.Typer) -> None:
    add_command(app, "verify", verify)
    group = typer.Typer(no_args_is_help=True, help="The project's reference runs (results/): "
                        "add a finished run; rewrite the generated sections of the README "
                        "and docs/.")
    add_command(group, "add", results_add)
    add_command(group, "readme", results_readme)
    add_command(group, "release", results_release)
    app.add_typer(group, name="results")

