"""``fetch NAME --source hub``: the Hugging Face hub as a data source, tested offline.

There is no internet here, so the hub is a local folder laid out as the stanfordnlp/snli
repository is (``plain_text/<split>-00000-of-00001.parquet`` plus a README.md whose YAML header
declares the config and the ClassLabel names), built from the real SNLI dev/test files of the
mirror with the hub's own encoding (label index, -1 for the '-' gold label). ``load_dataset``
reads such a folder exactly as it reads the hub repository; the published counts (9,842 dev,
9,824 test after dropping -1, with their per-label counts) are the independent truth.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.data.fetch import fetch_dataset, fetch_from
from pairrepro.data.fetch_record import read_record
from pairrepro.data.prepared import load_prepared
from pairrepro.data.preprocess import prepare_dataset

runner = CliRunner()
HUB_INDEX = {"entailment": 0, "neutral": 1, "contradiction": 2, "-": -1}
CARD = """---
configs:
- config_name: plain_text
  data_files:
  - split: validation
    path: plain_text/validation-*
  - split: test
    path: plain_text/test-*
dataset_info:
  config_name: plain_text
  features:
  - name: premise
    dtype: string
  - name: hypothesis
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': entailment
          '1': neutral
          '2': contradiction
---
# SNLI (a local copy laid out as the hub repository stanfordnlp/snli)
"""


@pytest.fixture
def hub_snli(shared_datasets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub-layout SNLI folder with the real dev/test (no train, as in the mirror), and an
    empty Hugging Face cache, offline."""
    repo = tmp_path / "snli-hub"
    (repo / "plain_text").mkdir(parents=True)
    for ours, theirs in (("dev", "validation"), ("test", "test")):
        source = shared_datasets / "snli" / "snli_1.0" / f"snli_1.0_{ours}.jsonl.gz"
        with gzip.open(source, "rt") as handle:
            rows = [json.loads(line) for line in handle]
        table = pa.table({"premise": [r["sentence1"] for r in rows],
                          "hypothesis": [r["sentence2"] for r in rows],
                          "label": pa.array([HUB_INDEX[r["gold_label"]] for r in rows],
                                            pa.int64())})
        pq.write_table(table, repo / "plain_text" / f"{theirs}-00000-of-00001.parquet")
    (repo / "README.md").write_text(CARD)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return repo


def test_hub_folder_fetches_and_prepares_with_the_published_counts(
        hub_snli: Path, data_home: Path) -> None:
    result = runner.invoke(app, ["fetch", "snli", "--source", "hub", "--from", str(hub_snli)])
    assert result.exit_code == 0, result.output
    assert "train" in result.output  # the split the hub copy lacks is named
    record = read_record("snli")
    assert record is not None
    hub = record["hub"]
    assert hub["id"] == "stanfordnlp/snli" and hub["config"] == "plain_text"
    assert hub["fingerprint"]
    # the data files load_dataset resolved, per hub split
    assert [Path(f).name for f in hub["data_files"]["validation"]] == [
        "validation-00000-of-00001.parquet"]
    assert hub["splits"]["dev"]["rows"] == 10_000  # the hub keeps the -1 rows
    assert record["splits_present"] == ["dev", "test"]
    assert record["splits_missing"] == ["train"]

    result = runner.invoke(app, ["preprocess", "snli", "--variant", "hub"])
    assert result.exit_code == 0, result.output
    stats = json.loads((paths.prepared_dir("snli", "hub") / "stats.json").read_text())
    # published: 9,842 / 9,824 pairs after the no-majority pairs (158 / 176) are dropped
    assert stats["splits"]["dev"]["pairs"] == 9842
    assert stats["splits"]["test"]["pairs"] == 9824
    assert stats["splits"]["dev"]["labels"] == {
        "entailment": 3329, "neutral": 3235, "contradiction": 3278}
    assert sum(stats["dropped"]["dev"].values()) == 158
    assert sum(stats["dropped"]["test"].values()) == 176
    assert stats["reader"] == "hub_parquet"
    # every parquet file read is the one fetch recorded
    assert sorted(stats["sources"]) == ["hub/dev.parquet", "hub/test.parquet"]


def test_hub_variant_equals_the_official_files(hub_snli: Path, data_home: Path,
                                               shared_datasets: Path) -> None:
    """Same code path after fetch: the hub variant's pairs are the default variant's."""
    fetch_from("snli", "hub", from_path=hub_snli)
    fetch_dataset("snli", mirror=shared_datasets)  # the official files beside the hub ones
    record = read_record("snli")
    assert record is not None and "hub" in record  # a file fetch keeps the hub's record
    assert {"hub/dev.parquet", "snli_1.0/snli_1.0_dev.jsonl.gz"} <= {
        e["path"] for e in record["files"]}
    prepare_dataset("snli", "hub", progress=False)
    prepare_dataset("snli", "default", progress=False)
    hub = load_prepared("snli", "hub").split("test")
    official = load_prepared("snli", "default").split("test")
    assert hub["label"].tolist() == official["label"].tolist()
    assert hub["left_ids"].map(len).tolist() == official["left_ids"].map(len).tolist()


def test_hub_offline_without_a_copy_is_a_download_error(
        data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    result = runner.invoke(app, ["fetch", "snli", "--source", "hub"])
    assert result.exit_code == 4, result.output
    assert "stanfordnlp/snli" in result.output and "--from DIR" in result.output
    assert "Traceback" not in result.output


def test_a_dataset_without_hub_table_names_those_with_one(data_home: Path) -> None:
    result = runner.invoke(app, ["fetch", "trecqa", "--source", "hub"])
    assert result.exit_code == 2, result.output
    assert "no [hub] table" in result.output and "snli" in result.output


def test_fetch_from_names_the_source_once(data_home: Path, shared_datasets: Path) -> None:
    """`fetch --from` printed "from from:PATH"."""
    result = runner.invoke(app, ["fetch", "quora", "--from",
                                 str(shared_datasets / "quora")])
    assert result.exit_code == 0, result.output
    assert "from from" not in result.output
    assert "from " + str(shared_datasets / "quora") in result.output.replace("\n", "")
