"""Benchmark: Lucene-BM25 negative sampling (bm25s) against rank_bm25 on the same inputs.

Synthetic Yahoo-sized data: answers of 5-50 words drawn from a Zipf(1.1) vocabulary of 50,000
words (the shape of real text: a few very frequent words with long posting lists). Each answer
is also a query (the papers use the best answer as the query), top 1,000 results each, 4
negatives sampled. rank_bm25 (BM25Okapi: the same per-query work, a slightly different idf)
runs on a few hundred queries and is extrapolated per query; bm25s runs on the full size.

    .venv/bin/python bench/bench_negatives.py                   # 60k x 60k, 300 rank_bm25 queries
    .venv/bin/python bench/bench_negatives.py --size 10000      # a smaller run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from protocol import LoadMonitor, begin

from pairrepro.data.negatives import BM25Params, bm25_top_k, sample_negatives


def synthetic_corpus(size: int, seed: int = 0, vocab: int = 50_000) -> list[list[str]]:
    """``size`` documents of 5-50 Zipf-distributed words."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 51, size)
    words = rng.zipf(1.1, int(lengths.sum())) % vocab
    ends = np.cumsum(lengths)
    names = np.array([f"w{i}" for i in range(vocab)])
    tokens = names[words]
    return [list(tokens[end - n:end]) for n, end in zip(lengths, ends, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=60_000, help="questions = answers")
    parser.add_argument("--rank-bm25-queries", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top-k", type=int, default=1000)
    args = parser.parse_args()
    begin(args.threads)
    monitor = LoadMonitor(args.threads).start()

    corpus = synthetic_corpus(args.size)
    params = BM25Params(top_k=args.top_k)

    start = time.perf_counter()
    indices, _ = bm25_top_k(corpus, corpus, params, n_threads=args.threads)
    negatives = sample_negatives(indices, np.arange(args.size), 4, seed=1)
    ours = time.perf_counter() - start
    assert not (negatives == np.arange(args.size)[:, None]).any()
    per_query_ours = ours / args.size

    from rank_bm25 import BM25Okapi

    n_ref = min(args.rank_bm25_queries, args.size)
    start = time.perf_counter()
    ref = BM25Okapi(corpus, k1=params.k1, b=params.b)
    index_time = time.perf_counter() - start
    start = time.perf_counter()
    for query in corpus[:n_ref]:
        scores = ref.get_scores(query)
        np.argpartition(-scores, args.top_k)[: args.top_k]
    per_query_ref = (time.perf_counter() - start) / n_ref
    ref_total = index_time + per_query_ref * args.size

    print(f"corpus: {args.size} answers, {args.size} queries, top {args.top_k}, 4 negatives, "
          f"{args.threads} threads")
    print(f"bm25s (ours, index + retrieval + sampling, full size): {ours:.1f} s "
          f"({per_query_ours * 1e3:.2f} ms/query)")
    print(f"rank_bm25: index {index_time:.1f} s, {per_query_ref * 1e3:.1f} ms/query over {n_ref} "
          f"queries -> {ref_total:.0f} s extrapolated to {args.size}")
    print(f"speed-up: {ref_total / ours:.0f}x (per query {per_query_ref / per_query_ours:.0f}x)")
    print(monitor.stop().describe())


if __name__ == "__main__":
    main()
