"""MultiNLI 1.0 jsonl: the SNLI format (labelled test sets were never released)."""

from __future__ import annotations

from pairrepro.data.formats.snli import LABELS, Options, read_split

__all__ = ["LABELS", "Options", "read_split"]
