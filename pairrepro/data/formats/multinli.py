"""MultiNLI 1.0 jsonl: the SNLI format (dev comes as ``dev_matched`` and ``dev_mismatched``).

The labelled test sets were never released (Kaggle only), so manifests list train and
the two dev files. ``gold_label`` ``-`` is dropped and counted as for SNLI.
"""

from __future__ import annotations

from pairrepro.data.formats.snli import LABELS, Options, read_split

__all__ = ["LABELS", "Options", "read_split"]
