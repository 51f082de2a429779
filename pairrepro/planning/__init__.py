"""What a paper table needs before it can render: the tables as data, the recipe of each row,
the preflight records and the compute plan (below report, pipeline and launch, which read it)."""

from pairrepro import paths

#: the committed measurements (preflight records, figures, model facts, GPU rates)
BENCH_DIR = paths.shipped("bench")
