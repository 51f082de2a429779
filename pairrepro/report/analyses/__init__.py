"""What the runs say beyond a cell: per-unit evidence, paired comparisons, orderings, gap
ladders, precision parity, protocol readings (their data: ``pairrepro/report/``)."""
