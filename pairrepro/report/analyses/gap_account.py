"""What a ladder's measurements say about the gap left to the paper, each sentence with its
support (docs/results.md)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from pairrepro.planning.paper_tables import Column, load_paper
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.ladders import (
    LadderResult,
    crosscheck_values,
    evaluate_ladder,
    ladder_json,
    ladder_markdown,
    ladder_readings,
    versus,
)
from pairrepro.report.analyses.readings import (
    ReadingValue,
    farther_text,
    readings_block,
    tied_with_nearest,
)
from pairrepro.report.tables.numbers import format_number, to_unit


def _signed(value: float, column: Column) -> str:
    return format_number(value, column, signed=True)


def _unsigned(value: float, column: Column) -> str:
    """``value`` as the paper prints it, a negative one with the minus sign of the tables."""
    return format_number(value, column).replace("-", "−")


def _interval(low: float, high: float, column: Column) -> str:
    return f"[{_signed(low, column)}, {_signed(high, column)}]"


def _protocol(result: LadderResult, step: int, column: Column,
              published: float) -> tuple[list[str], ReadingValue | None, ReadingValue | None]:
    """The protocol sentence, with the clean (first) and the nearest reading of ``step``."""
    values = next((v for n, c, _, v in ladder_readings(result)
                   if n == step and c.metric == column.metric), [])
    if not values:
        return [], None, None
    nearest = next(v for v in values if v.nearest)
    first = values[0]
    where = "inside" if nearest.low <= published <= nearest.high else "outside"
    text = (f"- **Protocol** (readings above): scored as *{nearest.reading.name}*, the reading "
            f"nearest the paper, step {step} gives {format_number(nearest.value, column)} "
            f"[{format_number(nearest.low, column)}, {format_number(nearest.high, column)}], "
            f"{_signed(nearest.distance or 0.0, column)} "
            f"{_interval(nearest.low - published, nearest.high - published, column)} from "
            f"the paper's {format_number(published, column)}, which lies {where} the interval.")
    tied = tied_with_nearest(values)
    if tied:
        text += (f" These runs cannot tell *{nearest.reading.name}* from " + " or ".join(
            f"*{v.reading.name}* (farther by {farther_text(v.farther, column)})"
            for v in tied if v.farther is not None) + ": the nearest protocol is not decided.")
    text += (f" Scored as *{first.reading.name}* (the table's protocol) it is "
             f"{_signed(first.distance or 0.0, column)}.")
    return [text], first, nearest


def _side_steps(result: LadderResult) -> list[str]:
    """The steps with an ``against``, in the first column."""
    lines = []
    for step in (s for s in result.steps if result.ladder.steps[s.number].against):
        if not step.values:
            lines.append(f"- **Step {step.number}**, {step.change}: no reference run yet.")
            continue
        value, found = step.values[0], step.values[0].comparison
        holm = f", Holm {found.holm:.3f}" if found and found.holm is not None else ""
        lines.append(f"- **Step {step.number}**, {step.change}: {value.text}, "
                     f"vs step {step.against}: {versus(value, result.columns[0][0])}{holm}.")
    return lines


def _vectors(dose: LadderResult | None, column: Column
             ) -> tuple[list[str], tuple[float, float, float] | None]:
    """The dose-response sentence and the carried gain (low, value, high; None: none)."""
    if dose is None or dose.ladder.dose is None:
        return [], None
    slopes = [s for s in dose_response(dose) if s[0].metric == column.metric]
    if not slopes:
        return ([f"- **Vectors** (ladder `{dose.name}`): its steps have no reference runs "
                 "yet."], None)
    _, slope, low, high = slopes[0]
    spec = dose.ladder.dose
    doublings = math.log2(spec.target / spec.amounts[1])
    first = next((s for s in dose.steps if s.values), None)
    last = dose.steps[spec.steps[1]]
    whole = ""
    if first is not None and first.number != last.number and last.values:
        found = evidence.difference_interval(
            evidence.run_units(dose.runs[last.number], column.metric),
            evidence.run_units(dose.runs[first.number], column.metric))
        value, low_all, high_all = (to_unit(v, column)
                                    for v in (found.value, found.low, found.high))
        whole = (f" All the information in them is worth {_signed(value, column)} "
                 f"{_interval(low_all, high_all, column)} over step {first.number}'s "
                 f"({first.change.split(':')[0]}).")
    counts = sorted({len(runs) for runs in dose.runs.values()})
    seeds = "/".join(map(str, counts)) + (" seed" if counts == [1] else " seeds")
    text = (f"- **Vectors** (ladder `{dose.name}`, {seeds} a step):{whole} Each doubling of "
            f"the dimensions (from {spec.amounts[0]:g} to {spec.amounts[1]:g}) "
            f"adds {_signed(slope, column)} {_interval(low, high, column)}; carried at that "
            f"rate over {doublings:.2f} doublings to {spec.target:g}, "
            f"{_signed(slope * doublings, column)} "
            f"{_interval(low * doublings, high * doublings, column)}.")
    return [text], (low * doublings, slope * doublings, high * doublings)


def _crosschecks(result: LadderResult, column: Column) -> list[str]:
    lines = []
    for check, number, values in crosscheck_values(result):
        if values is None:
            lines.append(f"- **Cross-check** ({check.name}): no results committed yet "
                         f"(`{check.folder}`).")
            continue
        own = next(v for v in values if v.metric == column.metric)
        lines.append(f"- **Cross-check** ({check.name}, `{check.folder}`): {own.text}, "
                     f"vs step {number}: {versus(own, column)}.")
    return lines


def account_markdown(result: LadderResult) -> list[str]:
    """The account block of a ladder with ``[account]`` (empty list without one)."""
    account = result.ladder.account
    if account is None or not result.columns:
        return []
    column, published = result.columns[0]
    if published is None:
        return []
    step = account.step
    lines = ["", f"What the measurements say ({column.header}; each line names its evidence):",
             ""]
    protocol, clean, nearest = _protocol(result, step, column, published)
    lines += protocol + _side_steps(result)
    dose = (evaluate_ladder(account.dose_ladder, result.results_dir)
            if account.dose_ladder else None)
    vectors, carried = _vectors(dose, column)
    lines += vectors + _crosschecks(result, column)
    low_gain, gain, high_gain = carried or (0.0, 0.0, 0.0)
    left = []
    for reading in (clean, nearest):
        if reading is None or (reading is nearest and nearest is clean):
            continue
        distance = -(reading.distance or 0.0)  # paper minus the reading, positive when below
        low, high = published - reading.high, published - reading.low
        left.append(f"under *{reading.reading.name}*, {_unsigned(distance - gain, column)} "
                    f"[{_unsigned(low - high_gain, column)}, "
                    f"{_unsigned(high - low_gain, column)}]")
    if left:
        what = (f"the paper's value less step {step}'s and less the carried vector gain; the "
                "endpoints combine the two intervals, not a joint bootstrap" if carried
                else f"the paper's value less step {step}'s, with its interval")
        lines.append(f"- **Unexplained** ({what}): " + "; ".join(left) + ".")
    return lines


def gap_markdown(result: LadderResult) -> str:
    """A ladder's table with its readings, dose-response and account."""
    return ladder_markdown(result, _readings_markdown(result) + _dose_markdown(result)
                           + account_markdown(result))


def gap_json(result: LadderResult) -> dict[str, Any]:
    return {**ladder_json(result),
            "readings": [{"step": number, "metric": column.metric, "published": published,
                          **value.as_json()}
                         for number, column, published, values in ladder_readings(result)
                         for value in values],
            "dose": [{"metric": column.metric, "per_doubling": slope, "low": low,
                      "high": high} for column, slope, low, high in dose_response(result)]}


def _readings_markdown(result: LadderResult) -> list[str]:
    """The readings of the named steps under every protocol, with their sources."""
    readings = ladder_readings(result)
    if not readings:
        return []
    steps = sorted({number for number, _, _, _ in readings})
    dataset = load_paper(result.ladder.paper).table(result.ladder.table).dataset
    cells = [(f"step {number}", column, published, values)
             for number, column, published, values in readings]
    return ["", f"Protocol readings of step{'s' if len(steps) > 1 else ''} "
            + ", ".join(map(str, steps)) + " (the same committed predictions re-scored):", "",
            *readings_block(cells, dataset)]


def dose_response(result: LadderResult) -> list[tuple[Column, float, float, float]]:
    """Per column: (column, change per doubling, its 95% interval) between the dose steps."""
    dose = result.ladder.dose
    if dose is None or any(n not in result.runs for n in dose.steps):
        return []
    doublings = math.log2(dose.amounts[1] / dose.amounts[0])
    found = []
    for column, _ in result.columns:
        low_runs, high_runs = (result.runs[n] for n in dose.steps)
        change = evidence.difference_interval(evidence.run_units(high_runs, column.metric),
                                              evidence.run_units(low_runs, column.metric))
        found.append((column, *(to_unit(v, column) / doublings
                                for v in (change.value, change.low, change.high))))
    return found


def _coverage(result: LadderResult) -> list[str]:
    """Each step's OOV share of its vocabulary, from its manifests (a run without a recorded
    vocabulary size takes it from a run of the same prepared data)."""
    rows_of = {(r.manifest.get("prepared_sha256") or {}).get("train.parquet"):
               r.manifest.get("embedding_rows")
               for runs in result.runs.values() for r in runs
               if r.manifest.get("embedding_rows")}
    parts = []
    for step in result.steps:
        runs = result.runs.get(step.number)
        if not runs:
            continue
        manifest = runs[0].manifest
        rows = manifest.get("embedding_rows") or rows_of.get(
            (manifest.get("prepared_sha256") or {}).get("train.parquet"))
        oov = manifest.get("embedding_oov")
        if rows is None or oov is None:
            parts.append(f"step {step.number} not recorded")
            continue
        words = int(rows) - 2  # <pad> and <unk> have no word
        rate = f"OOV {int(oov):,} of {words:,} words ({100 * int(oov) / words:.1f}%)"
        if (runs[0].config.get("embeddings") or {}).get("randomise"):
            rate += ", and every found word's vector drawn at random: none carries GloVe's"
        parts.append(f"step {step.number}: {rate}")
    return ["", "Vocabulary coverage (the runs' manifests): " + "; ".join(parts) + "."] \
        if parts else []


def _dose_markdown(result: LadderResult) -> list[str]:
    """The dose-response sentence beside the distance left to the paper."""
    dose = result.ladder.dose
    slopes = dose_response(result)
    if dose is None or not slopes:
        return []
    ahead = math.log2(dose.target / dose.amounts[1])
    first, second = dose.steps
    parts, verdicts = [], []
    for (column, slope, low, high), (_, published) in zip(slopes, result.columns, strict=True):
        left = ""
        if published is not None and second in result.runs:
            mean = statistics.fmean(to_unit(r.value(column.metric) or 0.0, column)
                                    for r in result.runs[second])
            left = f", against {format_number(published - mean, column)} left to the paper"
            verdicts.append(_supports(column, high * ahead, published - mean))
        parts.append(f"{column.header} {_signed(slope, column)} per doubling "
                     f"{_interval(low, high, column)}, so {_signed(slope * ahead, column)} "
                     f"{_interval(low * ahead, high * ahead, column)} over the "
                     f"{ahead:.2f} doublings to {dose.target:g}{left}")
    return [*_coverage(result), "", f"Dose-response ({dose.what}, step {first} at "
            f"{dose.amounts[0]:g} against step "
            f"{second} at {dose.amounts[1]:g}, seed k against seed k, 95% bootstrap interval "
            f"over test queries and seeds): " + "; ".join(parts) + ". Carried at the same rate "
            f"per doubling to {dose.target_what}, a straight-line extrapolation in log scale "
            "that the two measured points cannot test." + "".join(verdicts)]


def _supports(column: Column, carried_high: float, left: float) -> str:
    """Whether the carried gain's interval reaches the distance left."""
    said = ("even the upper end of the carried gain falls short of the distance left, so the "
            "measured slope does not support" if carried_high < left else "the carried gain's "
            "interval reaches the distance left, so the measured slope cannot rule out")
    return f" {column.header}: {said} that the vectors' dimensions explain the rest."
