"""Faults in data files and the data home: each gives a clear error (file, values, exit code)
or an explicit, visible state, never a traceback and never silently trusted bytes.

Independent truths: sha256 computed here with hashlib on the bytes written, the mirror's
README hashes (through the manifests), the published TrecQA file names, POSIX umask rules.
"""

from __future__ import annotations

import gzip
import hashlib
import io as pyio
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pairrepro import fileio, paths
from pairrepro.cli.app import app
from pairrepro.console import STATE
from pairrepro.data import archives, fetch
from pairrepro.data.fetch_record import RECORD_NAME
from pairrepro.data.formats import get_reader
from pairrepro.data.manifests import SplitSpec, VariantSpec
from pairrepro.data.prepared import load_prepared, write_prepared
from pairrepro.data.preprocess import prepare_dataset
from pairrepro.errors import ChecksumError, ConfigError, DataError

runner = CliRunner()
JACANA_TEST = "jacana/answer/test-less-than-40.manual-edit.xml"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIRREPRO_MIRROR", "")  # empty: no mirror, not even the default
    STATE.quiet = STATE.json = False


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return path


def _archive_manifest(folder: Path, members: list[dict[str, Any]],
                      archive_sha256: str = "") -> None:
    lines = ['name = "arch"', 'title = "t"', 'task = "classification"',
             'reader = "canonical_jsonl"', "", "[[files]]", 'path = "set.zip"',
             f'sha256 = "{archive_sha256}"', 'archive = "zip"', 'splits = ["train", "dev"]', ""]
    for member in members:
        lines += ["[[files.members]]", *(f"{k} = {json.dumps(v)}" for k, v in member.items()), ""]
    (folder / "arch.toml").write_text("\n".join(lines), encoding="utf-8")


# --------------------------------------------------------------------------- archives


def test_archive_members_are_pinned_staged_and_only_named_ones_written(
        manifests: Path, data_home: Path, tmp_path: Path) -> None:
    train, dev = b'{"x": 1}\n', b'{"x": 2}\n'
    given = _zip(tmp_path / "set.zip", {"set/train.jsonl": train, "set/dev.jsonl": dev,
                                        "set/extra.bin": b"not named"})
    _archive_manifest(manifests, [{"path": "set/train.jsonl", "sha256": _sha(train)},
                                  {"path": "set/dev.jsonl"}])
    report = fetch.fetch_dataset("arch", from_path=given)
    raw = data_home / "raw" / "arch"
    assert (raw / "set" / "train.jsonl").read_bytes() == train
    assert not (raw / "set" / "extra.bin").exists()  # not named: never written
    assert not [p for p in raw.iterdir() if p.name.startswith(archives.STAGING)]
    record = {e["path"]: e for e in json.loads((raw / RECORD_NAME).read_text())["files"]}
    assert record["set/train.jsonl"]["verified"] is True
    # the unpinned member: an explicit unverified state, with the hash of its bytes
    assert record["set/dev.jsonl"] == {**record["set/dev.jsonl"], "verified": False,
                                       "sha256": _sha(dev)}
    assert {r.path: r.verified for r in report.files}["set/dev.jsonl"] is False
    result = runner.invoke(app, ["fetch", "arch", "--from", str(given), "--force"])
    assert "set/dev.jsonl" in result.output and "unverified" in result.output


def test_members_of_a_pinned_archive_are_verified_through_it(
        manifests: Path, data_home: Path, tmp_path: Path) -> None:
    """The official SNLI/MultiNLI zips are pinned but not every member is: the archive's
    verified bytes fix its members', so they are recorded verified; the same member from an
    unpinned archive stays unverified."""
    given = _zip(tmp_path / "set.zip", {"set/train.jsonl": b'{"x": 1}\n'})
    for pin, expected in ((_sha(given.read_bytes()), True), ("", False)):
        _archive_manifest(manifests, [{"path": "set/train.jsonl"}], archive_sha256=pin)
        report = fetch.fetch_dataset("arch", from_path=given, force=True)
        assert {r.path: r.verified for r in report.files}["set/train.jsonl"] is expected


def test_archive_member_with_wrong_bytes_is_exit_5_and_nothing_is_extracted(
        manifests: Path, data_home: Path, tmp_path: Path) -> None:
    given = _zip(tmp_path / "set.zip", {"set/train.jsonl": b"tampered\n", "set/dev.jsonl": b"d"})
    pin = _sha(b"the real bytes\n")
    _archive_manifest(manifests, [{"path": "set/dev.jsonl"},
                                  {"path": "set/train.jsonl", "sha256": pin}])
    with pytest.raises(ChecksumError) as excinfo:
        fetch.fetch_dataset("arch", from_path=given)
    assert "set/train.jsonl" in excinfo.value.message and pin in excinfo.value.message
    assert _sha(b"tampered\n") in excinfo.value.message
    raw = data_home / "raw" / "arch"
    assert not (raw / "set").exists()  # not even the member that had no pin
    assert runner.invoke(app, ["fetch", "arch", "--from", str(given)]).exit_code == 5


def test_archive_without_any_expected_member_is_an_error(
        manifests: Path, data_home: Path, tmp_path: Path) -> None:
    given = _zip(tmp_path / "set.zip", {"other/readme.txt": b"hello"})
    _archive_manifest(manifests, [{"path": "set/train.jsonl"}])
    with pytest.raises(DataError, match=r"none of the expected members.*set/train\.jsonl"):
        fetch.fetch_dataset("arch", from_path=given)
    assert not (data_home / "raw" / "arch" / "other").exists()


def test_unverified_member_never_replaces_a_verified_file(
        manifests: Path, data_home: Path, tmp_path: Path) -> None:
    good = b"verified bytes\n"
    lines = ['name = "arch"', 'title = "t"', 'task = "classification"',
             'reader = "canonical_jsonl"', "",
             "[[files]]", 'path = "set/dev.jsonl"', f'sha256 = "{_sha(good)}"',
             'splits = ["dev"]', "",
             "[[files]]", 'path = "set.zip"', 'archive = "zip"', 'splits = ["train"]', "",
             "[[files.members]]", 'path = "set/dev.jsonl"', "",
             "[[files.members]]", 'path = "set/train.jsonl"', ""]
    (manifests / "arch.toml").write_text("\n".join(lines), encoding="utf-8")
    given = tmp_path / "given"
    (given / "set").mkdir(parents=True)
    (given / "set" / "dev.jsonl").write_bytes(good)
    _zip(given / "set.zip", {"set/dev.jsonl": b"other bytes\n", "set/train.jsonl": b"t\n"})
    report = fetch.fetch_dataset("arch", from_path=given)
    assert (data_home / "raw" / "arch" / "set" / "dev.jsonl").read_bytes() == good
    assert any("kept the verified file" in w for w in report.warnings)


def test_a_member_cannot_overwrite_the_fetch_record(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "x.zip", {"data.txt": b"d", RECORD_NAME: b"{}"})
    with pytest.raises(DataError, match="fetch's own record"):
        archives.safe_extract(archive, tmp_path / "out", "zip")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- completeness


def test_trecqa_without_its_test_file_is_not_complete(shared_datasets: Path, data_home: Path,
                                                      tmp_path: Path) -> None:
    """Other files carry the ``test`` tag (castorini's raw-test tokens), but every variant
    reads TEST from the jacana file: the report names variant, split and file."""
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_datasets / "trecqa", mirror / "trecqa")
    (mirror / "trecqa" / JACANA_TEST).unlink()
    report = fetch.fetch_dataset("trecqa", mirror=mirror)
    assert not report.complete and report.splits_unreadable == ["test"]
    assert report.variants_missing == {v: {"test": [JACANA_TEST]}
                                       for v in ("raw", "clean", "clean_digits")}
    result = runner.invoke(app, ["fetch", "trecqa", "--mirror", str(mirror)])
    text = " ".join(result.output.split())
    assert "complete" not in text.replace("partly", "")
    assert f"variant raw, split test: missing {JACANA_TEST}" in text


# --------------------------------------------------------------------------- provenance


def test_raw_file_edited_after_fetch_is_not_trusted(shared_datasets: Path,
                                                    data_home: Path) -> None:
    fetch.fetch_dataset("trecqa", mirror=shared_datasets)
    target = data_home / "raw" / "trecqa" / JACANA_TEST
    original = target.read_bytes()
    pin = _sha(original)
    edited = original.replace(b"<positive>", b"<negative>", 1)
    assert len(edited) == len(original)
    stat = target.stat()
    target.write_bytes(edited)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    # size and mtime as recorded: a plain fetch trusts the record ...
    assert fetch.fetch_dataset("trecqa").complete
    # ... --verify hashes again: exit 5 naming the file, the pin and the bytes found
    result = runner.invoke(app, ["fetch", "trecqa", "--verify"])
    assert result.exit_code == 5, result.output
    text = "".join(result.output.split())
    assert "test-less-than-40" in text and pin in text and _sha(edited) in text


@pytest.mark.parametrize("same_stat", [True, False])
def test_a_changed_raw_file_is_reported_even_with_a_mirror(shared_datasets: Path,
                                                           data_home: Path,
                                                           same_stat: bool) -> None:
    """Issue 27: with a mirror, --verify (or a later fetch that sees a new size/mtime)
    quietly copied the mirror's file over the edited one (exit 0, "sha256 ok"). The change
    is exit 5 naming the file whatever the sources; fetching again is the next command."""
    mirror = ["--mirror", str(shared_datasets)]
    assert runner.invoke(app, ["fetch", "trecqa", *mirror]).exit_code == 0
    target = data_home / "raw" / "trecqa" / JACANA_TEST
    original = target.read_bytes()
    edited = original.replace(b"<positive>", b"<negative>", 1)
    stat = target.stat()
    target.write_bytes(edited if same_stat else edited + b"\n")
    if same_stat:
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = runner.invoke(app, ["fetch", "trecqa", *mirror, *(["--verify"] * same_stat)])
    assert result.exit_code == 5, result.output
    text = "".join(result.output.split())
    assert "test-less-than-40" in text and _sha(original) in text
    assert not target.exists()  # the changed copy is not kept, nor silently replaced
    record = json.loads((data_home / "raw" / "trecqa" / RECORD_NAME).read_text())
    assert JACANA_TEST not in {f["path"] for f in record["files"]}
    # the explicit next step brings the published bytes back
    assert runner.invoke(app, ["fetch", "trecqa", *mirror]).exit_code == 0
    assert target.read_bytes() == (shared_datasets / "trecqa" / JACANA_TEST).read_bytes()


def test_preprocess_refuses_bytes_that_differ_from_the_fetch_record(
        shared_datasets: Path, data_home: Path) -> None:
    fetch.fetch_dataset("trecqa", mirror=shared_datasets)
    target = data_home / "raw" / "trecqa" / JACANA_TEST
    target.write_bytes(target.read_bytes().replace(b"<positive>", b"<negative>", 1))
    with pytest.raises(ChecksumError, match=r"test-less-than-40.*not the [0-9a-f]{64} pinned"):
        prepare_dataset("trecqa", "raw", progress=False)
    assert not (paths.prepared_dir("trecqa", "raw") / "DONE").exists()


def test_stats_record_the_hash_of_the_bytes_read(shared_datasets: Path, data_home: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Every source is hashed while read, once: the reader's hash is what stats.json holds."""
    fetch.fetch_dataset("trecqa", mirror=shared_datasets)
    hashed: list[str] = []
    real = fileio.sha256_file
    monkeypatch.setattr(fileio, "sha256_file", lambda p, *a: hashed.append(str(p)) or real(p, *a))
    stats = prepare_dataset("trecqa", "raw", progress=False)
    assert hashed == []  # no second pass over any raw file
    for rel, sha in stats["sources"].items():
        assert sha == _sha((shared_datasets / "trecqa" / rel).read_bytes()), rel
    assert stats["unverified_sources"] == []
    on_disk = json.loads((paths.prepared_dir("trecqa", "raw") / "stats.json").read_text())
    assert on_disk["sources"] == stats["sources"]


# --------------------------------------------------------------------------- prepared data


def _tiny_prepared() -> Path:
    rows = [{"pair_id": f"p{i}", "group_id": f"g{i // 2}", "left": "a", "right": "b",
             "label": i % 2, "left_ids": [2, 3], "right_ids": [3]} for i in range(8)]
    frame = pd.DataFrame(rows)
    root = paths.prepared_dir("toy", "v")
    write_prepared(root, {"train": frame, "dev": frame.head(4), "test": frame.head(6)},
                   ["<pad>", "<unk>", "a", "b"], [0, 0, 8, 8], {"dataset": "toy",
                                                               "vocab_size": 4})
    return root


def test_prepared_split_replaced_after_preprocess_is_a_data_error(data_home: Path) -> None:
    root = _tiny_prepared()
    assert len(load_prepared("toy", "v").split("test")) == 6
    recorded = json.loads((root / "stats.json").read_text())["files"]["test.parquet"]["sha256"]
    assert recorded == _sha((root / "test.parquet").read_bytes())
    shutil.copyfile(root / "dev.parquet", root / "test.parquet")
    with pytest.raises(DataError) as excinfo:
        load_prepared("toy", "v").split("test")
    message = excinfo.value.message
    assert "test.parquet" in message and recorded in message
    assert _sha((root / "dev.parquet").read_bytes()) in message


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_truncated_parquet_is_a_data_error(data_home: Path, damage: str) -> None:
    root = _tiny_prepared()
    path = root / "train.parquet"
    path.write_bytes(path.read_bytes()[: 100] if damage == "truncated" else b"")
    with pytest.raises(DataError, match=r"train\.parquet: sha256 .* is not the"):
        load_prepared("toy", "v").split("train")
    # without a record (a folder from before), the parse error is still a DataError
    stats = json.loads((root / "stats.json").read_text())
    del stats["files"]["train.parquet"]
    (root / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(DataError, match=r"train\.parquet: not a readable parquet"):
        load_prepared("toy", "v").split("train")


def test_truncated_vocab_and_damaged_stats_are_data_errors(data_home: Path) -> None:
    root = _tiny_prepared()
    vocab = root / "vocab.tsv"
    full = vocab.read_bytes()
    vocab.write_bytes(full[: full.rindex(b"b\t")])
    with pytest.raises(DataError, match=r"vocab\.tsv: sha256"):
        load_prepared("toy", "v")
    stats = json.loads((root / "stats.json").read_text())
    del stats["files"]["vocab.tsv"]
    (root / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(DataError, match=r"vocab\.tsv: 3 tokens .* records 4"):
        load_prepared("toy", "v")
    vocab.write_bytes(full)
    (root / "stats.json").write_text('{"dataset": "toy", "vocab_si')
    with pytest.raises(DataError, match=r"stats\.json: damaged"):
        load_prepared("toy", "v")
    result = runner.invoke(app, ["embeddings", "train", "--dataset", "toy", "--variant", "v"])
    assert result.exit_code == 3 and "Traceback" not in result.output


def test_check_files_compares_a_runs_hashes(data_home: Path) -> None:
    root = _tiny_prepared()
    data = load_prepared("toy", "v")
    good = {"test.parquet": _sha((root / "test.parquet").read_bytes())}
    data.check_files(good, "runs/x/seed-1/manifest.json")
    with pytest.raises(DataError) as excinfo:
        data.check_files({"test.parquet": "0" * 64}, "runs/x/seed-1/manifest.json")
    assert excinfo.value.message.startswith("runs/x/seed-1/manifest.json: prepared file "
                                            "test.parquet had sha256 " + "0" * 64)
    assert good["test.parquet"] in excinfo.value.message


# --------------------------------------------------------------------------- files and home


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_atomic_writes_honour_the_umask(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        fileio.write_text(tmp_path / "a.txt", "x")
        plain = tmp_path / "plain.txt"
        plain.write_text("x")  # what open() gives: the reference
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def _read(tmp_path: Path, name: str, data: bytes) -> Any:
    (tmp_path / name).write_bytes(data)
    return get_reader("snli").read_split(tmp_path, SplitSpec("dev", [name]), VariantSpec("v"))


def test_gz_that_is_not_gzip_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"s\.jsonl\.gz .*not a readable gzip file"):
        _read(tmp_path, "s.jsonl.gz", b'{"gold_label": "neutral"}\n')
    whole = gzip.compress(b'{"gold_label": "neutral"}\n' * 500)
    with pytest.raises(DataError, match=r"t\.jsonl\.gz .*not a readable gzip file"):
        _read(tmp_path, "t.jsonl.gz", whole[: len(whole) // 2])  # cut short


def test_non_utf8_input_is_a_data_error(tmp_path: Path) -> None:
    line = json.dumps({"gold_label": "neutral", "sentence1": "caf\u00e9", "sentence2": "b",
                       "pairID": "1"}).encode()
    with pytest.raises(DataError, match=r"s\.jsonl line 2: not UTF-8 text: byte 0xe9"):
        _read(tmp_path, "s.jsonl", line + b"\n" + line.replace(b"\\u00e9", b"\xe9") + b"\n")
    result = _read(tmp_path, "ok.jsonl", line + b"\n")
    assert result.pairs["left"].tolist() == ["caf\u00e9"]


def test_non_utf8_raw_file_through_preprocess_exits_3(raw_from_mirror: Any, data_home: Path,
                                                      tmp_path: Path) -> None:
    raw = data_home / "raw" / "quora" / "Quora_question_pair_partition"
    raw.mkdir(parents=True)
    (raw / "dev.tsv").write_bytes(b"1\tq \xff one\tq two\t7\n")
    result = runner.invoke(app, ["preprocess", "quora"])
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert "dev.tsv" in " ".join(result.output.split()).replace(" ", "")


def test_home_that_is_a_file_is_a_config_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("PAIRREPRO_HOME", str(home))
    with pytest.raises(ConfigError, match=f"PAIRREPRO_HOME={home}: .* is not a folder"):
        paths.raw_dir("trecqa")
    result = runner.invoke(app, ["fetch", "synthetic"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert str(home) in "".join(result.output.split())


def test_reader_hashes_match_hashlib(tmp_path: Path) -> None:
    """The hash taken while reading equals hashlib's over the file, also for gzip input."""
    from pairrepro.data.formats._common import take_read_hashes

    data = gzip.compress(b"".join(json.dumps({"gold_label": "-", "sentence1": "a",
                                              "sentence2": str(i)}).encode() + b"\n"
                                  for i in range(3000)))
    take_read_hashes()
    _read(tmp_path, "big.jsonl.gz", data)
    assert take_read_hashes() == {tmp_path / "big.jsonl.gz": (_sha(data), len(data))}
    assert np.frombuffer(pyio.BytesIO(data).getvalue()[:2], dtype=np.uint8).tolist() == [31, 139]
