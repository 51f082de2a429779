"""Yahoo! Answers L4 pipeline on a generated L4-format file (tests/make_l4_sample.py), with the
real manifest variants (data_manifests/yahoo.toml)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from make_l4_sample import write_l4_sample

from pairrepro import paths
from pairrepro.data.formats.yahoo_l4 import candidates_path, read_variant
from pairrepro.data.manifests import VariantSpec, parse_manifest
from pairrepro.data.negatives import analyze
from pairrepro.errors import ConfigError, DataError
from pairrepro.fileio import read_toml

N_QUESTIONS = 300


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    raw = tmp_path_factory.mktemp("raw") / "yahoo"
    raw.mkdir()
    truth = write_l4_sample(raw / "manner.xml", N_QUESTIONS, seed=0)
    return raw, truth


def _variant(name: str, **options: object) -> VariantSpec:
    """Variant ``name`` of the real manifest with ``options`` set, validated as a manifest is."""
    source = paths.manifests_dir() / "yahoo.toml"
    raw = read_toml(source)
    raw["variants"][name].update(options)
    return parse_manifest(raw, str(source)).variant(name)


def _fresh(raw: Path, variant: VariantSpec) -> dict:
    candidates_path(raw, variant.name).unlink(missing_ok=True)
    return read_variant(raw, variant)


@pytest.mark.parametrize("name,lo,hi", [("mvlstm", 5, 50), ("clstm", 4, 30)])
def test_length_filter_and_splits(sample: tuple[Path, list], name: str, lo: int, hi: int) -> None:
    raw, truth = sample
    results = _fresh(raw, _variant(name))
    expected = {g.uri for g in truth
                if g.best_words is not None and lo <= g.question_words <= hi
                and lo <= g.best_words <= hi}
    groups = {split: set(r.pairs["group_id"]) for split, r in results.items()}
    test_parts = ["test"] if name == "mvlstm" else ["test_5"]
    kept = set().union(*(groups[s] for s in ["train", "dev", *test_parts]))
    assert kept == expected
    for result in results.values():
        pairs = result.pairs
        assert list(pairs.columns) == ["pair_id", "group_id", "left", "right", "label"]
        assert all(lo <= len(analyze(t)) <= hi for t in pairs["left"])
    # Filter counts are reported once (with the first split) and match the generator.
    dropped = results["train"].dropped
    assert dropped["before the split: no best answer"] == sum(g.best_words is None for g in truth)
    assert sum(dropped.values()) == len(truth) - len(expected)
    assert not any(k.startswith("before") for r in list(results.values())[1:] for k in r.dropped)
    # Question-level split by ratio: parts after the first are floor(n * r / total).
    n = len(expected)
    ratios = {"mvlstm": (8, 1, 1), "clstm": (20, 1, 1)}[name]
    dev = math.floor(n * ratios[1] / sum(ratios))
    assert len(groups["dev"]) == dev and len(groups[test_parts[0]]) == dev
    assert len(groups["train"]) == n - 2 * dev
    assert not groups["train"] & groups["dev"] and not groups["dev"] & groups[test_parts[0]]


def test_lists_and_negatives(sample: tuple[Path, list]) -> None:
    raw, _ = sample
    results = _fresh(raw, _variant("clstm"))
    sizes = {"train": 5, "dev": 5, "test_5": 5, "test_10": 10}
    for split, result in results.items():
        pairs = result.pairs
        for qid, group in pairs.groupby("group_id", sort=False):
            assert len(group) == sizes[split]
            assert group["label"].tolist() == [1] + [0] * (sizes[split] - 1)
            positive = group.iloc[0]
            assert positive["pair_id"] == f"{qid}:{qid}"
            negatives = group.iloc[1:]
            assert (negatives["pair_id"] != positive["pair_id"]).all()
            assert (negatives["right"].str.lower() != positive["right"].lower()).all()
            assert negatives["pair_id"].is_unique
    # test_5 is nested in test_10: same questions, first 4 negatives.
    t5, t10 = results["test_5"].pairs, results["test_10"].pairs
    for qid, group in t5.groupby("group_id"):
        assert group["pair_id"].tolist() == t10[t10.group_id == qid]["pair_id"].tolist()[:5]


def test_negatives_come_from_the_bm25_top_k(sample: tuple[Path, list]) -> None:
    raw, _ = sample
    variant = _variant("mvlstm", bm25={"k1": 1.2, "b": 0.75, "top_k": 6})
    pairs = pd.concat([r.pairs for r in _fresh(raw, variant).values()])
    positives = pairs[pairs.label == 1].set_index("group_id")["right"]
    pool = [analyze(t) for t in positives]  # the pool: best answers of kept questions
    pool_ids = list(positives.index)
    avg = sum(map(len, pool)) / len(pool)
    df: dict[str, int] = {}
    for doc in pool:
        for term in set(doc):
            df[term] = df.get(term, 0) + 1

    def score(query: list[str], doc: list[str]) -> float:
        return sum(math.log(1 + (len(pool) - df[t] + 0.5) / (df[t] + 0.5))
                   * doc.count(t) / (doc.count(t) + 1.2 * (0.25 + 0.75 * len(doc) / avg))
                   for t in query if t in df)

    for qid, group in list(pairs.groupby("group_id"))[:40]:
        query = analyze(positives[qid])
        others = sorted((score(query, d) for i, d in zip(pool_ids, pool, strict=True)
                         if i != qid), reverse=True)
        sixth = others[5]
        for answer_id in group[group.label == 0]["pair_id"].str.split(":").str[1]:
            got = score(query, pool[pool_ids.index(answer_id)])
            assert got >= sixth - 1e-9  # within the top 6 (ties at the boundary allowed)


def test_reproducible_for_a_seed_and_reused_from_file(sample: tuple[Path, list]) -> None:
    raw, _ = sample
    first = _fresh(raw, _variant("mvlstm"))
    again = _fresh(raw, _variant("mvlstm"))
    other = _fresh(raw, _variant("mvlstm", seed=2))
    for split in first:
        pd.testing.assert_frame_equal(first[split].pairs, again[split].pairs)
    assert not first["train"].pairs["pair_id"].equals(other["train"].pairs["pair_id"])
    # The lists are written out; with the file present they are read back, not re-sampled.
    _fresh(raw, _variant("mvlstm"))
    path = candidates_path(raw, "mvlstm")
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# options: ") and lines[1] == "split\tgroup_id\tanswer_id\tlabel"
    assert len(lines) - 2 == sum(len(r.pairs) for r in first.values())
    reused = read_variant(raw, _variant("mvlstm"))
    for split in first:
        pd.testing.assert_frame_equal(first[split].pairs, reused[split].pairs)
    with pytest.raises(DataError, match="other options"):
        read_variant(raw, _variant("mvlstm", seed=5))


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    raw = tmp_path / "yahoo"
    raw.mkdir()
    with pytest.raises(DataError, match="not in"):
        read_variant(raw, _variant("mvlstm"))
    (raw / "manner.xml").write_text("<ystfeed>\n<document><uri>1</uri>\n</ystfeed>\n")
    with pytest.raises(DataError, match=r"manner.xml:3:\d+: not valid XML"):
        read_variant(raw, _variant("mvlstm"))
    with pytest.raises(ConfigError, match=r"yahoo.toml: \[variants.mvlstm\] lengths.*min <= max"):
        _variant("mvlstm", lengths=[50, 5])  # refused where the manifest is read
