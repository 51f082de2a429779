"""Helpers shared by the readers: opening raw files, mapping labels, collecting pairs.

Reader options come from the manifest variant (variant-wide) and its split (per split);
:func:`option` looks in the split first. ``prepare`` adds the manifest's ``label_map``
to the variant options so that readers turn label names into class indices without
knowing the manifest; ``label_aliases`` (name -> name in the label map) renames labels
that a derived copy spells differently (SciTail's ``not_entailment`` -> ``neutral``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import pandas as pd

from pairrepro.data.formats import MalformedRow, ReaderResult
from pairrepro.data.manifests import SplitSpec, VariantSpec
from pairrepro.errors import DataError

#: Rule name for a query that has no candidate at all (it cannot appear in a pair table).
#: ``prepare`` counts such queries into the ``questions`` expected count.
EMPTY_GROUP_RULE = "question without candidates"

T = TypeVar("T")
# raw_decode skips json.loads' Python-level wrappers (a third of the cost per line)
_DECODE = json.JSONDecoder().raw_decode


def option(split: SplitSpec, variant: VariantSpec, key: str, default: Any = None) -> Any:
    """A reader option: the split's value, else the variant's, else ``default``."""
    if key in split.options:
        return split.options[key]
    return variant.options.get(key, default)


def find_raw_file(raw_root: Path, rel: str) -> Path | None:
    """The raw file ``rel``, or its twin with/without ``.gz`` (official zips hold plain
    ``x.jsonl`` where a mirror has ``x.jsonl.gz``); ``None`` when neither exists."""
    for name in (rel, rel[:-3] if rel.endswith(".gz") else rel + ".gz"):
        if (raw_root / name).is_file():
            return raw_root / name
    return None


def raw_file(raw_root: Path, rel: str) -> Path:
    """The path of a raw file; a :class:`DataError` says how to fetch it when it is missing."""
    path = find_raw_file(raw_root, rel)
    if path is None:
        raise DataError(
            f"raw file {raw_root / rel} is missing",
            hint=f"run: pairrepro fetch {raw_root.name}  (or --mirror DIR / --from PATH)",
        )
    return path


def open_text(path: Path) -> IO[str]:
    """Open a UTF-8 text file, gunzipping ``*.gz``; lines end only at ``\\n`` (a stray
    ``\\r`` inside a tweet must not split a pair)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="\n")
    return open(path, encoding="utf-8", newline="\n")


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number starting at 1, line without its newline)`` for every line of a file."""
    with open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            yield number, line.rstrip("\r\n")


def json_lines(raw_root: Path, rel: str, out: PairCollector,
               parse: Callable[[Any, int], T]) -> Iterator[tuple[int, T]]:
    """``(line number, parse(record, line number))`` for each line of the jsonl file ``rel``
    (plain or gzipped).

    A line that is empty, not exactly one JSON value, or that ``parse`` rejects (a missing
    field: ``KeyError``; a wrong shape or value: ``TypeError`` / ``ValueError``) is recorded on
    ``out`` as a malformed row naming the file and line, and skipped.
    """
    for number, line in numbered_lines(raw_file(raw_root, rel)):
        start = len(line) - len(line.lstrip())
        if start == len(line):
            out.bad(rel, number, "empty line")
            continue
        row: Any = None
        try:
            row, end = _DECODE(line, start)
            if end != len(line) and line[end:].strip():
                out.bad(rel, number, f"extra data after the JSON object at column {end + 1}")
                continue
            value = parse(row, number)
        except json.JSONDecodeError as exc:
            out.bad(rel, number, f"not valid JSON: {exc.msg} at column {exc.colno}")
            continue
        except KeyError as exc:
            out.bad(rel, number, f"missing field {exc.args[0]!r}")
            continue
        except (TypeError, ValueError) as exc:
            out.bad(rel, number, "not a JSON object" if not isinstance(row, dict)
                    else f"unexpected record: {exc}")
            continue
        yield number, value


class LabelMapper:
    """Label name (or its alias) -> class index in the manifest's label map."""

    def __init__(self, split: SplitSpec, variant: VariantSpec, default: list[str]) -> None:
        names = list(option(split, variant, "label_map", None) or default)
        self.index = {name: i for i, name in enumerate(names)}
        for alias, target in (option(split, variant, "label_aliases", None) or {}).items():
            if target not in self.index:
                raise DataError(f"label alias {alias!r} -> {target!r}: {target!r} is not a label",
                                hint=f"labels: {', '.join(names)}")
            self.index[alias] = self.index[target]
        self.names = names

    def __call__(self, name: str) -> int | None:
        """The class index, or ``None`` for an unknown label (the caller reports it)."""
        return self.index.get(name)


class PairCollector:
    """Accumulates canonical pairs column by column, plus malformed rows and drop counts."""

    def __init__(self) -> None:
        self.pair_id: list[str] = []
        self.group_id: list[str] = []
        self.left: list[str] = []
        self.right: list[str] = []
        self.label: list[int] = []
        self.malformed: list[MalformedRow] = []
        self.dropped: dict[str, int] = {}

    def add(self, pair_id: str, group_id: str, left: str, right: str, label: int) -> None:
        self.pair_id.append(pair_id)
        self.group_id.append(group_id)
        self.left.append(left)
        self.right.append(right)
        self.label.append(label)

    def bad(self, file: str, line: int, reason: str) -> None:
        """Record a row that could not be read (reported, never silently lost)."""
        self.malformed.append(MalformedRow(file, line, reason))

    def drop(self, rule: str, count: int = 1) -> None:
        """Count a row removed by a documented rule of the dataset."""
        self.dropped[rule] = self.dropped.get(rule, 0) + count

    def __len__(self) -> int:
        return len(self.pair_id)

    def result(self) -> ReaderResult:
        # object columns: no copy now, and tokenising iterates them at Python-list speed
        # (the Arrow string dtype pandas would pick costs a copy and slow iteration)
        frame = pd.DataFrame({
            "pair_id": pd.Series(self.pair_id, dtype=object),
            "group_id": pd.Series(self.group_id, dtype=object),
            "left": pd.Series(self.left, dtype=object),
            "right": pd.Series(self.right, dtype=object),
            "label": pd.array(self.label, dtype="int64"),
        })
        return ReaderResult(frame, self.malformed, self.dropped)
