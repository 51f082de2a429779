"""``preprocess`` end to end: real TrecQA, synthetic data, expected counts, --strict, CLI."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.data.fetch import fetch_dataset
from pairrepro.data.prepared import load_prepared
from pairrepro.data.preprocess import NUMBER_PATTERN, Tokenizer, prepare_dataset
from pairrepro.errors import ConfigError, DataError


def _mirror_sha(mirror: Path, rel: str) -> str:
    """The sha256 the mirror README lists for a file (an independent record)."""
    for line in (mirror / "README.md").read_text(encoding="utf-8").splitlines():
        if f"`{rel}`" in line:
            return re.search(r"`([0-9a-f]{64})`", line).group(1)
    raise AssertionError(rel)


def _is_plain_number(token: str) -> bool:
    """Digits, optional ',ddd' thousands groups, optional '.digits', checked by hand."""
    whole, point, fraction = token.partition(".")
    groups = whole.split(",")
    return (all(g.isdigit() for g in groups) and all(len(g) == 3 for g in groups[1:])
            and (fraction.isdigit() if point else True))


def _as_published(text: str) -> list[str]:
    return ["<num>" if _is_plain_number(t) else t for t in text.lower().split()]


def test_trecqa_numbers_as_in_train_all(raw_from_mirror: Callable[[str], Path],
                                        shared_datasets: Path) -> None:
    """TRAIN-ALL is published with numbers as <num>; DEV/TEST are not. After preprocess every
    split follows TRAIN-ALL's rule, so no model trains on <num> and is tested on digits."""
    raw = shared_datasets / "trecqa" / "lexdecomp" / "trec-qa" / "train-all.jsonl.gz"
    published: list[str] = []
    with gzip.open(raw, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            published += record["question"].split()
            for candidate in record["candidates"]:
                published += candidate["sentence"].split()
    # the published rule: 30,624 placeholders and not one plain number left
    assert published.count("<num>") == 30624
    assert not any(_is_plain_number(t) for t in published)
    assert {"1980s", ".08", "1/2", "11.4.26"} <= set(published)  # what the rule leaves alone
    raw_from_mirror("trecqa")
    prepare_dataset("trecqa", "clean", progress=False)
    data = load_prepared("trecqa", "clean")
    num = data.vocab.index("<num>")
    for split in ("train", "dev", "test"):
        frame = data.split(split)
        tokens = [t for text in pd.concat([frame["left"], frame["right"]]) for t in text.split()]
        ids = np.concatenate([np.concatenate(frame["left_ids"].to_numpy()),
                              np.concatenate(frame["right_ids"].to_numpy())])
        expected = sum(t == "<num>" or _is_plain_number(t) for t in tokens)
        assert int((ids == num).sum()) == expected > 0, split
        assert not any(_is_plain_number(data.vocab[i]) for i in np.unique(ids)), split


def test_trecqa_clean_digits_is_for_lexical_scorers_only(
        raw_from_mirror: Callable[[str], Path], tmp_path: Path) -> None:
    """clean_digits keeps DEV/TEST numbers (for BM25); a trained model is refused on it."""
    from pairrepro.train.runner import train_recipe

    raw_from_mirror("trecqa")
    stats = prepare_dataset("trecqa", "clean_digits", progress=False)
    assert stats["lexical_only"] and "numbers" not in stats["tokenisation"]
    data = load_prepared("trecqa", "clean_digits")
    test_tokens = {data.vocab[i] for ids in data.split("test")["right_ids"] for i in ids}
    assert "1997" in test_tokens and "<num>" not in test_tokens
    recipe = tmp_path / "mv_digits.toml"
    recipe.write_text('[data]\ndataset = "trecqa"\nvariant = "clean_digits"\n'
                      '[model]\nname = "mv_lstm"\nhidden = 2\n[task]\ntype = "ranking"\n'
                      'loss = "pointwise"\n[train]\nepochs = 1\n')
    with pytest.raises(ConfigError, match="lexical scorers only"):
        train_recipe(recipe, quiet=True)
    bm25 = tmp_path / "bm25_digits.toml"
    bm25.write_text('[data]\ndataset = "trecqa"\nvariant = "clean_digits"\n'
                    '[model]\nname = "bm25"\n[task]\ntype = "ranking"\nloss = "pointwise"\n'
                    '[train]\nepochs = 1\n')
    (result,) = train_recipe(bm25, quiet=True)
    # test years match question years here: 0.687, the BM25 bar of the README
    assert result["status"] == "finished" and result["metrics"]["test"]["map"] > 0.68


def test_trecqa_clean_prepared(raw_from_mirror: Callable[[str], Path],
                               shared_datasets: Path) -> None:
    raw_from_mirror("trecqa")
    stats = prepare_dataset("trecqa", "clean", progress=False)
    splits = stats["splits"]
    assert (splits["train"]["pairs"], splits["train"]["groups"]) == (53417, 1229)
    assert splits["train"]["labels"] == {"0": 53417 - 6410, "1": 6410}
    assert (splits["test"]["pairs"], splits["test"]["groups"]) == (1442, 68)
    assert (splits["dev"]["pairs"], splits["dev"]["groups"]) == (1117, 65)
    assert stats["sources"]["jacana/answer/test-less-than-40.manual-edit.xml"] == _mirror_sha(
        shared_datasets, "trecqa/jacana/answer/test-less-than-40.manual-edit.xml")
    assert stats["tokenisation"] == {
        "tokenizer": "whitespace", "lowercase": True,
        "pattern": "str.split() (source is published tokenised)",
        "numbers": {"pattern": NUMBER_PATTERN, "placeholder": "<num>"}}

    data = load_prepared("trecqa", "clean")
    assert data.vocab[:2] == ["<pad>", "<unk>"] and data.train_counts[:2] == [0, 0]
    counts = data.train_counts[2:]
    seen = [c for c in counts if c > 0]
    assert seen == sorted(seen, reverse=True) and counts[:len(seen)] == seen
    test = data.split("test")
    # ids decode back to the lower-cased published tokens
    # (numbers as <num>, the rule TRAIN-ALL was published with)
    for _, row in test.head(50).iterrows():
        assert [data.vocab[i] for i in row["left_ids"]] == _as_published(row["left"])
        assert [data.vocab[i] for i in row["right_ids"]] == _as_published(row["right"])
    # train counts are the token frequencies of TRAIN-ALL, counted here independently
    train = data.split("train")
    the = sum(text.lower().split().count("the") for text in train["right"]) + sum(
        text.lower().split().count("the") for text in train["left"])
    assert data.train_counts[data.vocab.index("the")] == the
    assert (paths.home() / "prepared" / "trecqa-clean" / "DONE").is_file()


def test_synthetic_through_preprocess_and_cli(data_home: Path) -> None:
    fetch_dataset("synthetic")  # canonical jsonl, seeded
    result = CliRunner().invoke(app, ["preprocess", "synthetic", "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert {k: v["pairs"] for k, v in stats["splits"].items()} == {
        "train": 6000, "dev": 600, "test": 600}
    assert sum(stats["splits"]["train"]["labels"].values()) == 6000
    nli = load_prepared("synthetic")  # the default variant is reachable without its name
    assert nli.split("dev")["label"].between(0, 2).all()

    ranking = prepare_dataset("synthetic", "ranking", progress=False)
    assert ranking["task"] == "ranking" and ranking["label_map"] == ["0", "1"]
    assert ranking["splits"]["test"]["groups"] == 150
    frame = load_prepared("synthetic", "ranking").split("train")
    assert (frame.groupby("group_id")["label"].sum() == 1).all()


def test_expected_mismatch_and_missing_splits(raw_from_mirror: Callable[[str], Path],
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    raw_from_mirror("quora")
    stats = prepare_dataset("quora", progress=False)
    assert list(stats["splits"]) == ["dev", "test"]
    assert stats["missing_splits"] == {"train": ["Quora_question_pair_partition/train.tsv"]}

    manifests = tmp_path / "manifests"
    manifests.mkdir()
    text = (paths.manifests_dir() / "quora.toml").read_text(encoding="utf-8")
    text = text.replace('expected = { pairs = 10000, labels = { "0" = 5000, "1" = 5000 } }',
                        'expected = { pairs = 9999 }', 1)
    (manifests / "quora.toml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("PAIRREPRO_MANIFESTS", str(manifests))
    with pytest.raises(DataError, match=r"split 'dev': expected pairs = 9999, found 10000"):
        prepare_dataset("quora", progress=False)


def test_no_raw_data_says_which_fetch(data_home: Path) -> None:
    result = CliRunner().invoke(app, ["preprocess", "snli"])
    assert result.exit_code == 3
    assert "pairrepro fetch snli" in result.output


def test_strict_and_reported_malformed_rows(data_home: Path, shared_datasets: Path) -> None:
    folder = data_home / "raw" / "quora" / "Quora_question_pair_partition"
    folder.mkdir(parents=True)
    shutil.copy(shared_datasets / "quora/Quora_question_pair_partition/test.tsv", folder)
    lines = (shared_datasets / "quora/Quora_question_pair_partition/dev.tsv").read_text(
        encoding="utf-8").splitlines()
    lines.insert(41, "garbage line without tabs")
    (folder / "dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")

    with pytest.raises(DataError, match=r"dev\.tsv line 42"):
        prepare_dataset("quora", strict=True, progress=False)
    assert not (paths.prepared_dir("quora", "default") / "DONE").exists()

    stats = prepare_dataset("quora", progress=False)
    assert stats["malformed"] == [{
        "split": "dev", "file": "Quora_question_pair_partition/dev.tsv", "line": 42,
        "reason": "expected 4 tab-separated fields, found 1"}]
    assert stats["splits"]["dev"]["pairs"] == 10000


def test_regex_tokenizer() -> None:
    tok = Tokenizer("regex", lowercase=True)
    assert tok.split("The man's dog doesn't bark, ok?") == [
        "the", "man", "'s", "dog", "does", "n't", "bark", ",", "ok", "?"]
    assert Tokenizer("whitespace", lowercase=False).split("A  b\tC") == ["A", "b", "C"]


def test_tokenizer_fast_path_equals_the_pattern() -> None:
    """The translate/split fast path gives exactly re.findall(TOKEN_PATTERN) (the reference)."""
    import random

    from pairrepro.data.preprocess import TOKEN_PATTERN

    tok, rng = Tokenizer("regex"), random.Random(0)
    alphabet = [chr(i) for i in range(128)] + ["é", "n't", "'s", "ß", "\u2028", " "] * 3
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
        assert tok.split(text) == re.findall(TOKEN_PATTERN, text.lower()), repr(text)


def test_twitter_url_dev_is_held_out_of_train(raw_from_mirror: Callable[[str], Path]) -> None:
    """TwitterURL has no dev split: 10% of train moves to dev, seeded, after the published
    train count (42,200 pairs, 11,167 positive) is checked."""
    raw_from_mirror("twitter_url")
    stats = prepare_dataset("twitter_url", "tokenised", progress=False)
    train, dev = stats["splits"]["train"], stats["splits"]["dev"]
    assert train["pairs"] + dev["pairs"] == 42200
    assert dev["pairs"] == 4220
    assert train["labels"]["1"] + dev["labels"]["1"] == 11167
    data = load_prepared("twitter_url", "tokenised")
    ids_train, ids_dev = set(data.split("train").pair_id), set(data.split("dev").pair_id)
    assert not ids_train & ids_dev
    # what the TwitterURL gap ladder says of this dev (report/ladders/csran_twitter_url.toml):
    # held out pair by pair, it shares every first tweet with train, and test shares none;
    # test has 1,820 paraphrases of 9,324 (castorini test/sim.txt, counted with awk)
    heads = set(data.split("train").left)
    assert data.split("dev").left.isin(heads).all()
    test = data.split("test")
    assert not test.left.isin(heads).any()
    assert (len(test), int(test.label.sum())) == (9324, 1820)
    first = sorted(ids_dev)
    prepare_dataset("twitter_url", "tokenised", progress=False)  # same seed, same split
    assert sorted(load_prepared("twitter_url", "tokenised").split("dev").pair_id) == first
    # variant tokenised_disjoint_dev holds out whole first tweets: dev and train share none
    prepare_dataset("twitter_url", "tokenised_disjoint_dev", progress=False)
    disjoint = load_prepared("twitter_url", "tokenised_disjoint_dev")
    train, dev = disjoint.split("train"), disjoint.split("dev")
    assert len(train) + len(dev) == 42200
    assert int(train.label.sum()) + int(dev.label.sum()) == 11167
    assert not dev.left.isin(set(train.left)).any()
    # a tenth of the 3,553 first tweets of train/a.toks (counted with sort -u), all their pairs
    assert dev.left.nunique() == 355
    assert len(disjoint.split("test")) == 9324
