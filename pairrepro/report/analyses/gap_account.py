"""What a ladder's measurements say about the gap left to the paper, each sentence with its
support (docs/results.md)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from pairrepro.planning.paper_tables import Column, load_paper
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.comparison import equivalence
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
    ends_json,
    farther_text,
    readings_block,
    tied_with_nearest,
)
from pairrepro.report.tables import numbers
from pairrepro.report.tables.numbers import format_number, to_unit
from pairrepro.stats import ALPHA, Interval

_signed = partial(format_number, signed=True)


def _unsigned(value: float, column: Column) -> str:
    """``value`` as the paper prints it, a negative one with the minus sign of the tables."""
    return format_number(value, column).replace("-", "−")


def _interval(found: Interval, column: Column, signed: bool = True) -> str:
    """``found`` (the metric's scale) as ``column`` prints it, an endpoint that may move marked."""
    return numbers.format_interval(found, lambda v: (_signed if signed else _unsigned)(
        to_unit(v, column), column))


def _ends(low: float, high: float, moving: tuple[bool, bool], column: Column,
          number: Callable[[float, Column], str]) -> str:
    """``[low, high]`` (the column's unit) printed by ``number``, marked as ``moving`` says."""
    return "[" + ", ".join(numbers.MOVING * m + number(v, column)
                           for v, m in zip((low, high), moving, strict=True)) + "]"


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
    shifted = _ends(nearest.low - published, nearest.high - published, nearest.moving, column,
                    _signed)
    text = (f"- **Protocol** (readings above): scored as *{nearest.reading.name}*, the reading "
            f"nearest the paper, step {step} gives {format_number(nearest.value, column)} "
            f"{_ends(nearest.low, nearest.high, nearest.moving, column, format_number)}, "
            f"{_signed(nearest.distance or 0.0, column)} {shifted} from "
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


def _slope_text(column: Column, slope: Interval, carried: Interval | None, ahead: float,
                target: float) -> str:
    """The change per doubling, and carried ``ahead`` doublings where it is identified."""
    text = f"{_signed(to_unit(slope.value, column), column)} {_interval(slope, column)}"
    if carried is None:
        return (f"{text}; over the {ahead:.2f} doublings to {target:g} not identified: its "
                f"sign is not shown ({numbers.p_text(slope.p_value)}), so the two measured "
                "points give no carried gain, and none is printed")
    return (f"{text}; carried at that rate over the {ahead:.2f} doublings to {target:g}, "
            f"{_signed(to_unit(carried.value, column), column)} {_interval(carried, column)}")


def _vectors(dose: LadderResult | None, column: Column) -> tuple[list[str], Interval | None]:
    """The dose-response sentence and the carried gain (None: not identified, or no runs)."""
    if dose is None or dose.ladder.dose is None:
        return [], None
    slopes = [s for s in dose_response(dose) if s[0].metric == column.metric]
    if not slopes:
        return ([f"- **Vectors** (ladder `{dose.name}`): its steps have no reference runs "
                 "yet."], None)
    _, slope, carried = slopes[0]
    spec = dose.ladder.dose
    first = next((s for s in dose.steps if s.values), None)
    last = dose.steps[spec.steps[1]]
    whole = ""
    if first is not None and first.number != last.number and last.values:
        found = evidence.difference_interval(
            evidence.run_units(dose.runs[last.number], column.metric),
            evidence.run_units(dose.runs[first.number], column.metric),
            step=numbers.printed_step(column))
        whole = (f" All the information in them is worth "
                 f"{_signed(to_unit(found.value, column), column)} {_interval(found, column)} "
                 f"over step {first.number}'s ({first.change.split(':')[0]}).")
    counts = sorted({len(runs) for runs in dose.runs.values()})
    seeds = "/".join(map(str, counts)) + (" seed" if counts == [1] else " seeds")
    text = (f"- **Vectors** (ladder `{dose.name}`, {seeds} a step):{whole} Each doubling of "
            f"the dimensions (from {spec.amounts[0]:g} to {spec.amounts[1]:g}) adds "
            + _slope_text(column, slope, carried, math.log2(spec.target / spec.amounts[1]),
                          spec.target) + ".")
    return [text], carried


def _crosschecks(result: LadderResult, column: Column) -> list[str]:
    lines = []
    for check, number, values, units in crosscheck_values(result):
        if values is None:
            lines.append(f"- **Cross-check** ({check.name}): no results committed yet "
                         f"(`{check.folder}`).")
            continue
        own = next(v for v in values if v.metric == column.metric)
        ours, theirs = units[0], result.units.get(number, ["no runs"])[0]
        if isinstance(ours, str) or isinstance(theirs, str):
            lines.append(f"- **Cross-check** ({check.name}, `{check.folder}`): {own.text}, "
                         f"vs step {number}: {versus(own, column) or 'n/a (no runs)'}.")
            continue
        found = equivalence(ours, theirs, numbers.from_unit(check.margin, column),
                            numbers.printed_step(column))
        margin = f"±{format_number(check.margin, column)}"
        lines.append(
            f"- **Cross-check** ({check.name}, `{check.folder}`): {own.text}; its difference "
            f"from step {number} is {_signed(to_unit(found.difference.value, column), column)} "
            f"{_interval(found.difference, column)} ({numbers.p_text(found.difference.p_value)}). "
            f"Equivalence within {margin} ({check.margin_why}): {found.verdict} (two one-sided "
            f"tests at {ALPHA:g}: the 90% interval {_interval(found.tost, column)} against "
            f"{margin}). With {ours.values.shape[0]} seeds and {len(ours.ids)} queries this "
            "design detects a difference of about "
            f"±{format_number(to_unit(found.detectable, column), column)} (80% power at "
            f"{ALPHA:g}: 2.8 s.e., the s.e. from the 95% interval's width).")
    return lines


def _unexplained(result: LadderResult, column: Column, published: float,
                 dose: LadderResult | None, carried: Interval | None,
                 readings: tuple[ReadingValue | None, ReadingValue | None]) -> list[str]:
    """The paper's value less the account step's, and less the carried vector gain where it
    is identified (one joint bootstrap, all under the table's protocol)."""
    step = result.ladder.account.step if result.ladder.account else 0
    units = result.units.get(step, ["no runs"])[0]
    if carried is not None and dose is not None and dose.ladder.dose is not None \
            and not isinstance(units, str):
        spec = dose.ladder.dose
        low, high = (evidence.run_units(dose.runs[n], column.metric) for n in spec.steps)
        rate = math.log2(spec.target / spec.amounts[1]) / math.log2(
            spec.amounts[1] / spec.amounts[0])
        joint = evidence.combination_interval(
            [(-1.0, units), (-rate, high), (rate, low)], numbers.from_unit(published, column),
            step=numbers.printed_step(column))
        return [f"- **Unexplained** (the paper's value less step {step}'s and less the carried "
                "vector gain, all three scored under the table's protocol, one bootstrap of "
                f"queries and seeds drawn jointly for the three recipes): "
                f"{_unsigned(to_unit(joint.value, column), column)} "
                f"{_interval(joint, column, signed=False)}."]
    clean, nearest = readings
    left = [f"under *{r.reading.name}*, {_unsigned(-(r.distance or 0.0), column)} "
            + _ends(published - r.high, published - r.low, r.moving[::-1], column, _unsigned)
            for r in (clean, nearest) if r is not None and not (r is nearest and r is clean)]
    why = ("; the vectors' share is not identified (above), so none is subtracted"
           if dose is not None else "")
    return ([f"- **Unexplained** (the paper's value less step {step}'s under each reading, "
             f"with its interval{why}): " + "; ".join(left) + "."] if left else [])


def account_markdown(result: LadderResult) -> list[str]:
    """The account block of a ladder with ``[account]`` (empty list without one)."""
    account = result.ladder.account
    if account is None or not result.columns:
        return []
    column, published = result.columns[0]
    if published is None:
        return []
    lines = ["", f"What the measurements say ({column.header}; each line names its evidence):", ""]
    protocol, clean, nearest = _protocol(result, account.step, column, published)
    lines += protocol + _side_steps(result)
    dose = evaluate_ladder(account.dose_ladder, result.results_dir) if account.dose_ladder else None
    vectors, carried = _vectors(dose, column)
    return lines + vectors + _crosschecks(result, column) + _unexplained(
        result, column, published, dose, carried, (clean, nearest))


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
            "dose": [{"metric": column.metric, "per_doubling": ends_json(slope),
                      "carried": None if carried is None else ends_json(carried)}
                     for column, slope, carried in dose_response(result)]}


def _readings_markdown(result: LadderResult) -> list[str]:
    """The readings of the named steps under every protocol, with their sources."""
    readings = ladder_readings(result)
    if not readings:
        return []
    steps = sorted({number for number, _, _, _ in readings})
    dataset = load_paper(result.ladder.paper).table(result.ladder.table).dataset
    cells = [(f"step {number}", *rest) for number, *rest in readings]
    return ["", f"Protocol readings of step{'s' if len(steps) > 1 else ''} "
            + ", ".join(map(str, steps)) + " (the same committed predictions re-scored):", "",
            *readings_block(cells, dataset)]


def dose_response(result: LadderResult) -> list[tuple[Column, Interval, Interval | None]]:
    """Per column: the change per doubling between the dose steps (a two-level interval), and
    that change carried to the target (None: the slope's sign is not shown)."""
    dose = result.ladder.dose
    if dose is None or any(n not in result.runs for n in dose.steps):
        return []
    doublings = math.log2(dose.amounts[1] / dose.amounts[0])
    ahead = math.log2(dose.target / dose.amounts[1])
    found = []
    for column, _ in result.columns:
        low, high = (evidence.run_units(result.runs[n], column.metric) for n in dose.steps)
        step = numbers.printed_step(column)
        slope = evidence.difference_interval(high, low, 1 / doublings, step=step)
        carried = (None if slope.p_value >= ALPHA or slope.undecided() else
                   evidence.difference_interval(high, low, ahead / doublings, step=step))
        found.append((column, slope, carried))
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
    for (column, slope, carried), (_, published) in zip(slopes, result.columns, strict=True):
        left = ""
        if published is not None and second in result.runs:
            mean = statistics.fmean(to_unit(r.value(column.metric) or 0.0, column)
                                    for r in result.runs[second])
            left = f", against {format_number(published - mean, column)} left to the paper"
            verdicts.append(_supports(column, carried, published - mean))
        parts.append(f"{column.header} per doubling "
                     f"{_slope_text(column, slope, carried, ahead, dose.target)}{left}")
    return [*_coverage(result), "", f"Dose-response ({dose.what}, step {first} at "
            f"{dose.amounts[0]:g} against step {second} at {dose.amounts[1]:g}, seed k against "
            "seed k, 95% bootstrap interval over test queries and seeds): " + "; ".join(parts)
            + f". A carried value is the same rate per doubling to {dose.target_what}, a "
            "straight-line extrapolation in log scale that the two measured points cannot test, "
            "its interval the measured slope's alone." + "".join(verdicts)]


def _supports(column: Column, carried: Interval | None, left: float) -> str:
    """Whether the carried gain's interval reaches the distance left."""
    said = ("the slope is not identified, so these points cannot say whether" if carried is None
            else "even the upper end of the carried gain falls short of the distance left, so "
            "the measured slope does not support that" if to_unit(carried.high, column) < left
            else "the carried gain's interval reaches the distance left, so the measured slope "
            "cannot rule out that")
    return f" {column.header}: {said} the vectors' dimensions explain the rest."
