"""What the runs say beyond a cell: per-unit evidence and the paired comparison of two sets
of runs (:mod:`.comparison`) that orderings, gap ladders, precision parity and
``--compare-to`` share; protocol readings and the gap account. The data they read
(``ladders/``, ``readings/``, ``parity.toml``) lives in ``pairrepro/report/``."""
