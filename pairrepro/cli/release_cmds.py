"""``pairrepro results release``: what the next release of the reference runs must re-make,
and the release record once nothing is pending (:mod:`pairrepro.report.publishing.release`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer

from pairrepro.cli.common import STATE, emit_json, info
from pairrepro.errors import VerificationError


def results_release(
    name: str = typer.Option("", "--name", help="Write results/release.json as this release "
                             "(refused while a run must be re-made)."),
    results: Path | None = typer.Option(None, "--results", help="Reference runs folder "
                                        "(default results/ of the project)."),
) -> None:
    """List the reference runs the next release must re-make (a recipe's seeds from several
    commits; a run without a CPU fingerprint), with the command that re-makes each and the
    hours the replaced runs took; with --name, write the release record.

    Exit codes: 0 nothing pending (or the release written); 9 runs must be re-made first.

    Examples:

      pairrepro results release

      pairrepro results release --name 1
    """
    from pairrepro.report.publishing.release import make_release, pending, write_release

    todo = pending(results)
    if name and not todo:
        release = make_release(name, dt.date.today().isoformat(), results)
        path = write_release(release, results)
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
    if not todo:
        info("nothing to re-make: every run records its CPU and every recipe's seeds come "
             "from one commit")
        return
    raise VerificationError(f"{len(todo)} recipe(s) must be re-made at one clean commit "
                                "before a release", hint="run the commands above, then "
                                "pairrepro results add --force each run")
