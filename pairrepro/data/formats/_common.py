"""Helpers shared by the readers: opening raw files, mapping labels, collecting pairs."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Callable, Iterator
from itertools import zip_longest
from pathlib import Path
from typing import IO, Any, TypeVar

import pandas as pd

from pairrepro.data.formats import LabelOptions, MalformedRow, ReaderOptions, ReaderResult
from pairrepro.data.manifests import SplitSpec, VariantSpec, find_raw_file
from pairrepro.errors import ConfigError, DataError

#: Rule for a query without any candidate (``preprocess`` counts it into ``questions``).
EMPTY_GROUP_RULE = "question without candidates"

T = TypeVar("T")
OptionsT = TypeVar("OptionsT", bound=ReaderOptions)
# raw_decode skips json.loads' Python-level wrappers (a third of the cost per line)
_DECODE = json.JSONDecoder().raw_decode


def split_options(split: SplitSpec | None, variant: VariantSpec,
                  model: type[OptionsT]) -> OptionsT:
    """A reader's ``Options`` for one split (``None``: variant-wide): the split's, else the
    variant's, else the default."""
    sources = (variant.options,) if split is None else (variant.options, split.options)
    values = {key: getattr(source, key) for key in model.model_fields for source in sources
              if key in source.model_fields_set}  # the split's, when set, comes last and wins
    return model.model_construct(**values)


def raw_file(raw_root: Path, rel: str) -> Path:
    if (path := find_raw_file(raw_root, rel)) is None:
        raise DataError(f"raw file {raw_root / rel} is missing",
                        hint=f"run: pairrepro fetch {raw_root.name}  "
                             "(or --mirror DIR / --from PATH)")
    return path


#: (sha256, size) of every raw file a reader read, hashed while reading (no second pass).
_READ_HASHES: dict[Path, tuple[str, int]] = {}
_CHUNK = 1 << 20


def take_read_hashes() -> dict[Path, tuple[str, int]]:
    """The ``(sha256, size)`` of the raw files read since the last call."""
    taken = dict(_READ_HASHES)
    _READ_HASHES.clear()
    return taken


class _HashingReader(io.RawIOBase):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = open(path, "rb")  # noqa: SIM115 (closed with this object)
        self.digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._file.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
            self.size += n
        return n or 0

    def finish(self) -> tuple[str, int]:
        """Hash what the reader left unread and return the result."""
        while chunk := self._file.read(_CHUNK):
            self.digest.update(chunk)
            self.size += len(chunk)
        return self.digest.hexdigest(), self.size

    def close(self) -> None:
        self._file.close()
        super().close()


class TextFile:
    """A raw text file for a reader: UTF-8, gunzipped when ``*.gz``, lines ending only at
    ``\\n``, its bytes hashed while read; bad bytes are a :class:`DataError` naming the line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.line = 0
        self._raw = _HashingReader(path)
        binary: IO[bytes] = io.BufferedReader(self._raw, _CHUNK)
        if path.suffix == ".gz":
            binary = gzip.GzipFile(fileobj=binary, mode="rb")  # type: ignore[assignment]
        self._text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")

    def __iter__(self) -> Iterator[str]:
        try:
            for text in self._text:
                self.line += 1
                yield text
        except UnicodeDecodeError as exc:
            number, byte = _first_bad_line(self.path)
            raise DataError(f"{self.path} line {number}: not UTF-8 text: byte {byte:#04x} "
                            f"cannot be decoded ({exc.reason})",
                            hint="the file is damaged or in another encoding; fetch it "
                                 "again (pairrepro fetch --force)") from None
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise DataError(f"{self.path} (after line {self.line}): not a readable gzip file: "
                            f"{exc}", hint="the file is damaged or not gzip despite its .gz "
                            "name; fetch it again (pairrepro fetch --force)") from None

    def close(self) -> None:
        if self._raw.closed:
            return
        try:
            _READ_HASHES[self.path] = self._raw.finish()
        finally:
            self._text.close()

    def __enter__(self) -> TextFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_bad_line(path: Path) -> tuple[int, int]:
    """Line number and value of the first byte that is not UTF-8 (the decoder cannot say)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return number, raw[exc.start]
    return 0, 0


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    with TextFile(path) as handle:
        for number, line in enumerate(handle, 1):
            yield number, line.rstrip("\r\n")


def toks_lines(raw_root: Path, split: SplitSpec, names: tuple[str, ...], reader: str,
               out: PairCollector) -> Iterator[tuple[int, list[str], int]]:
    """castorini's layout: the split's files ``names`` (the labels' ``sim.txt`` last) read in
    step; ``(line number, the other files' lines, label)`` per line whose label is 0 or 1. Other
    lines, and a file ending before the others, go to ``out`` as malformed."""
    by_name = {Path(rel).name: rel for rel in split.files}
    if missing := [n for n in names if n not in by_name]:
        raise ConfigError(f"{reader} split {split.name!r} (format toks): files lack {missing}")
    sim_rel = by_name[names[-1]]
    streams = [numbered_lines(raw_file(raw_root, by_name[n])) for n in names]
    for row in zip_longest(*streams, fillvalue=(0, None)):
        if short := [n for n, (_, line) in zip(names, row, strict=True) if line is None]:
            out.bad(sim_rel, max(number for number, _ in row) + 1,
                    f"{', '.join(short)} ended before the other files")
            return
        number, sim = row[-1]
        if sim not in ("0", "1"):
            out.bad(sim_rel, number, f"label {sim!r} is not 0 or 1")
            continue
        yield number, [line for _, line in row[:-1]], int(sim)


def json_lines(raw_root: Path, rel: str, out: PairCollector,
               parse: Callable[[Any, int], T]) -> Iterator[tuple[int, T]]:
    """``(line number, parse(record, line number))`` per line of the jsonl file ``rel``; other
    lines go to ``out`` as malformed rows."""
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
        except KeyError as exc:
            out.bad(rel, number, f"missing field {exc.args[0]!r}")
        except (TypeError, ValueError) as exc:
            out.bad(rel, number, "not a JSON object" if not isinstance(row, dict)
                    else f"unexpected record: {exc}")
        else:
            yield number, value


class LabelMapper:

    def __init__(self, split: SplitSpec, variant: VariantSpec, default: list[str]) -> None:
        names = list(variant.options.label_map or default)
        self.index = {name: i for i, name in enumerate(names)}
        for alias, target in split_options(split, variant, LabelOptions).label_aliases.items():
            if target not in self.index:
                raise DataError(f"label alias {alias!r} -> {target!r}: {target!r} is not a label",
                                hint=f"labels: {', '.join(names)}")
            self.index[alias] = self.index[target]
        self.names = names

    def __call__(self, name: str) -> int | None:
        return self.index.get(name)


class PairCollector:

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, int]] = []  # as COLUMNS
        self.malformed: list[MalformedRow] = []
        self.dropped: dict[str, int] = {}

    COLUMNS = ("pair_id", "group_id", "left", "right", "label")

    def add(self, pair_id: str, group_id: str, left: str, right: str, label: int) -> None:
        self.rows.append((pair_id, group_id, left, right, label))

    def bad(self, file: str, line: int, reason: str) -> None:
        self.malformed.append(MalformedRow(file, line, reason))

    def drop(self, rule: str, count: int = 1) -> None:
        self.dropped[rule] = self.dropped.get(rule, 0) + count

    def result(self) -> ReaderResult:
        # object columns: tokenising iterates them at Python-list speed
        frame = pd.DataFrame(self.rows, columns=list(self.COLUMNS), dtype=object)
        return ReaderResult(frame.astype({"label": "int64"}), self.malformed, self.dropped)
