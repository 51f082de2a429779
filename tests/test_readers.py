"""Readers against the real published files (counts from the mirror README and the
datasets' own documentation) and against small hand-made malformed files."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from pairrepro.data.formats import get_reader, trecqa, ubuntu_v1
from pairrepro.data.formats._common import EMPTY_GROUP_RULE, PairCollector, json_lines
from pairrepro.data.formats.snli import NO_MAJORITY_RULE
from pairrepro.data.formats.trecqa import CLEAN_RULE
from pairrepro.data.formats.twitter_url import AMBIGUOUS_RULE, BLANK_RULE
from pairrepro.data.manifests import (
    SplitSpec,
    VariantOptions,
    VariantSpec,
    load_manifest,
    variant_model,
)
from pairrepro.data.preprocess import _variant_with_labels

RawLink = Callable[[str], Path]


def _read(raw_root: Path, name: str, variant: str | None, split: str):
    manifest = load_manifest(name)
    spec = _variant_with_labels(manifest, manifest.variant(variant))
    return get_reader(manifest.reader).read_split(raw_root, spec.splits[split], spec)


def test_snli_dev_test_counts(raw_from_mirror: RawLink) -> None:
    root = raw_from_mirror("snli")
    # mirror README: dev E3329/C3278/N3235/'-'158, test E3368/C3237/N3219/'-'176
    for split, counts, dashes in (("dev", (3329, 3235, 3278), 158),
                                  ("test", (3368, 3219, 3237), 176)):
        result = _read(root, "snli", None, split)
        assert len(result.pairs) == sum(counts)
        assert Counter(result.pairs["label"]) == dict(enumerate(counts))
        assert result.dropped == {NO_MAJORITY_RULE: dashes}
        assert result.malformed == []
        assert result.pairs["pair_id"].is_unique


def test_snli_plain_jsonl_satisfies_gz_entry(tmp_path: Path, shared_datasets: Path) -> None:
    """The official zip holds plain .jsonl where the manifest names the mirror's .jsonl.gz."""
    root = tmp_path / "raw" / "snli" / "snli_1.0"
    root.mkdir(parents=True)
    with gzip.open(shared_datasets / "snli/snli_1.0/snli_1.0_dev.jsonl.gz", "rb") as src:
        (root / "snli_1.0_dev.jsonl").write_bytes(src.read())
    assert len(_read(root.parent, "snli", None, "dev").pairs) == 9842


def test_quora_bimpm(raw_from_mirror: RawLink) -> None:
    root = raw_from_mirror("quora")
    for split in ("dev", "test"):
        pairs = _read(root, "quora", None, split).pairs
        assert len(pairs) == 10000
        assert int(pairs["label"].sum()) == 5000
    first = _read(root, "quora", None, "dev").pairs.iloc[0]
    assert first["left"] == "How do I get funding for my web based startup idea ?"
    assert first["pair_id"] == "327970" and first["label"] == 1


def test_trecqa_jacana_raw_and_clean(raw_from_mirror: RawLink) -> None:
    root = raw_from_mirror("trecqa")
    # TRAIN 94 q / 4,718 pairs (one question has no candidate at all)
    small = _read(root, "trecqa", "raw", "train_small")
    assert len(small.pairs) == 4718
    assert small.pairs["group_id"].nunique() + small.dropped[EMPTY_GROUP_RULE] == 94
    raw_test = _read(root, "trecqa", "raw", "test")
    assert len(raw_test.pairs) == 1517
    assert raw_test.pairs["group_id"].nunique() + raw_test.dropped[EMPTY_GROUP_RULE] == 100
    for split, questions, pairs in (("test", 68, 1442), ("dev", 65, 1117)):
        clean = _read(root, "trecqa", "clean", split).pairs
        assert (len(clean), clean["group_id"].nunique()) == (pairs, questions)
        per_q = clean.groupby("group_id")["label"].agg(["min", "max"])
        assert (per_q["min"] == 0).all() and (per_q["max"] == 1).all()
    assert _read(root, "trecqa", "clean", "test").dropped[CLEAN_RULE] == 100 - 5 - 68


def test_trecqa_xml_agrees_with_token_files(raw_from_mirror: RawLink) -> None:
    """Clean TEST from jacana XML and from castorini's token files hold the same pairs."""
    root = raw_from_mirror("trecqa")
    xml = _read(root, "trecqa", "clean", "test").pairs
    folder = "nce-cnn-torch/TrecQA/clean-test"
    split = SplitSpec("test", [f"{folder}/{n}" for n in ("a.toks", "b.toks", "sim.txt", "id.txt")],
                      options=trecqa.Options(format="toks"))
    toks = get_reader("trecqa").read_split(root, split, VariantSpec("t")).pairs
    assert len(toks) == 1442 and toks["group_id"].nunique() == 68

    def key(frame: pd.DataFrame) -> Counter:
        return Counter(zip(frame["left"].str.lower(), frame["right"].str.lower(),
                           frame["label"], strict=True))

    assert key(xml) == key(toks)


def test_twitter_url_raw_rule_and_tokenised(raw_from_mirror: RawLink,
                                            shared_datasets: Path) -> None:
    root = raw_from_mirror("twitter_url")
    raw = _read(root, "twitter_url", "raw", "test")
    assert len(raw.pairs) == 9334  # the corpus README: 9,334 test pairs after dropping n == 3
    # independent count: labels (4,6)..(6,6) in the raw file are the paraphrases
    votes = Counter(line.split("\t")[2] for line in
                    (shared_datasets / "twitter_url/Twitter_URL_Corpus_test.txt")
                    .read_text(encoding="utf-8").splitlines() if line.strip())
    assert int(raw.pairs["label"].sum()) == votes["(4,6)"] + votes["(5,6)"] + votes["(6,6)"]
    assert raw.dropped == {AMBIGUOUS_RULE: votes["(3,6)"], BLANK_RULE: 250}
    assert raw.malformed == []
    train = _read(root, "twitter_url", "tokenised", "train").pairs
    assert (len(train), int(train["label"].sum())) == (42200, 11167)


def test_scitail_derived_csv(raw_from_mirror: RawLink) -> None:
    root = raw_from_mirror("scitail")
    result = _read(root, "scitail", "derived_csv", "test")
    labels = load_manifest("scitail").label_map
    assert len(result.pairs) == 2126
    assert Counter(result.pairs["label"]) == {labels.index("entails"): 842,
                                              labels.index("neutral"): 1284}
    assert result.malformed == []


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_malformed_rows_are_reported_with_line_numbers(tmp_path: Path) -> None:
    good = {"gold_label": "neutral", "sentence1": "a b", "sentence2": "c", "pairID": "p1"}
    lines = [json.dumps(good), "{not json", json.dumps({"gold_label": "neutral"}),
             json.dumps({**good, "gold_label": "maybe"}), "",
             json.dumps({**good, "gold_label": "-", "pairID": "p2"})]
    _write(tmp_path / "s.jsonl", "\n".join(lines) + "\n")
    result = get_reader("snli").read_split(tmp_path, SplitSpec("dev", ["s.jsonl"]),
                                           VariantSpec("v"))
    assert len(result.pairs) == 1 and result.dropped == {NO_MAJORITY_RULE: 1}
    assert [(m.file, m.line) for m in result.malformed] == [("s.jsonl", n) for n in (2, 3, 4, 5)]
    assert "JSON" in result.malformed[0].reason and "sentence1" in result.malformed[1].reason
    assert "maybe" in result.malformed[2].reason

    _write(tmp_path / "q.tsv", "1\ta\tb\t7\n2\ta\tb\t8\nonly-one-field\n")
    quora = get_reader("quora_bimpm").read_split(tmp_path, SplitSpec("dev", ["q.tsv"]),
                                                 VariantSpec("v"))
    assert len(quora.pairs) == 1
    assert [(m.line, "0 or 1" in m.reason or "4 tab" in m.reason) for m in quora.malformed] == [
        (2, True), (3, True)]

    xml = ("<QApairs id='1'>\n<question>\nwho\t?\n</question>\n<positive>\nhim\n</positive>\n"
           "</QApairs>\n<QApairs id='2'>\n<question>\nwhat\n</question>\n<negative>\n")
    _write(tmp_path / "t.xml", xml)
    options = variant_model("trecqa")(format="jacana_xml")  # set variant-wide
    trec = get_reader("trecqa").read_split(tmp_path, SplitSpec("test", ["t.xml"]),
                                           VariantSpec("v", options=options))
    assert list(trec.pairs["left"]) == ["who ?"]
    assert [(m.line, "ends before" in m.reason) for m in trec.malformed] == [(9, True)]


def test_ubuntu_v1_csv_groups(tmp_path: Path) -> None:
    _write(tmp_path / "trainset.csv", "Context,Utterance,Label\n"
           '"hi __eou__ how, now __eou__",fine __eou__,1.0\nhello __eou__,bye,0\nx,y,2\n')
    header = "Context,Ground Truth Utterance," + ",".join(f"Distractor_{i}" for i in range(9))
    row = "ctx __eou__,right," + ",".join(f"wrong{i}" for i in range(9))
    _write(tmp_path / "valset.csv", f"{header}\n{row}\n{row}\nshort,row\n")
    reader = get_reader("ubuntu_v1")
    train = reader.read_split(tmp_path, SplitSpec("train", ["trainset.csv"]), VariantSpec("v"))
    assert list(train.pairs["label"]) == [1, 0]
    assert train.pairs["left"][0] == "hi __eou__ how, now __eou__"
    assert [m.line for m in train.malformed] == [4]
    dev = reader.read_split(tmp_path, SplitSpec("dev", ["valset.csv"]), VariantSpec("v"))
    assert len(dev.pairs) == 20 and dev.pairs["group_id"].nunique() == 2
    assert dev.pairs.groupby("group_id")["label"].sum().tolist() == [1, 1]
    assert dev.pairs["right"][0] == "right" and [m.line for m in dev.malformed] == [4]


def test_ubuntu_wu_txt_and_scitail_tsv(tmp_path: Path) -> None:
    rows = [f"{int(i % 10 == 0)}\tturn one\tturn two\tresponse {i}" for i in range(20)]
    _write(tmp_path / "valid.txt", "\n".join(rows) + "\n")
    split = SplitSpec("dev", ["valid.txt"], options=ubuntu_v1.Options(format="wu_txt",
                                                                     group_size=10))
    dev = get_reader("ubuntu_v1").read_split(tmp_path, split, VariantSpec("v"))
    assert dev.pairs["group_id"].nunique() == 2 and dev.malformed == []
    assert dev.pairs["left"][0] == "turn one __eot__ turn two"
    assert dev.pairs.groupby("group_id")["label"].sum().tolist() == [1, 1]

    _write(tmp_path / "scitail_1.0_test.tsv", "p one\th one\tentails\np two\th two\tneutral\n"
           "p three\th three\tcontradiction\n")
    sci = get_reader("scitail").read_split(
        tmp_path, SplitSpec("test", ["scitail_1.0_test.tsv"]),
        VariantSpec("v", options=VariantOptions(label_map=["entails", "neutral"])))
    assert list(sci.pairs["label"]) == [0, 1]
    assert [(m.line, "contradiction" in m.reason) for m in sci.malformed] == [(3, True)]


def test_missing_raw_file_names_fetch(tmp_path: Path) -> None:
    from pairrepro.errors import DataError

    with pytest.raises(DataError, match="pairrepro fetch quora"):
        get_reader("quora_bimpm").read_split(tmp_path / "quora", SplitSpec("dev", ["dev.tsv"]),
                                             VariantSpec("v"))


def test_json_lines_reports_each_kind_of_bad_line(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text(
        '{"a": 1}\n\n  {"a": 2}  \n[1]\n{"b": 1}\n{"a": 1} x\n{bad\n{"a": "z"}\n')
    out = PairCollector()
    rows = list(json_lines(tmp_path, "x.jsonl", out, lambda row, _: int(row["a"])))
    assert rows == [(1, 1), (3, 2)]  # surrounding spaces are fine
    reasons = [(m.line, m.reason.split(":")[0]) for m in out.malformed]
    assert reasons == [(2, "empty line"), (4, "not a JSON object"), (5, "missing field 'a'"),
                       (6, "extra data after the JSON object at column 9"),
                       (7, "not valid JSON"), (8, "unexpected record")]
