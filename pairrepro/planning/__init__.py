"""What a paper table needs before it can render: the tables as data, the recipe that
reproduces each row, the preflight records and the compute plan. Below the report, the
pipeline and the launchers, which all read it.
"""

from pairrepro import paths

#: the committed measurements (preflight records, throughput figures, model facts, GPU
#: rates): every path under it is built from this one
BENCH_DIR = paths.PROJECT_DIR / "bench"
