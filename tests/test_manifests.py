"""Dataset manifests: every one parses, and its files agree with the real mirror.

The independent truth is the mirror's README table (sha256 and byte size of every
file, written when the files were copied) and the files themselves.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairrepro import fileio
from pairrepro.cli.app import app
from pairrepro.data.manifests import available_datasets, load_manifest, parse_manifest
from pairrepro.errors import ConfigError

EXPECTED = {"snli", "multinli", "quora", "trecqa", "ubuntu", "yahoo", "scitail", "twitter_url",
            "reuters_sc", "synthetic"}
ROW = re.compile(r"^\| (\w+) \| `([^`]+)` \| (\d+) \| \d+ \| `([0-9a-f]{64})` \|")


def _readme_rows(datasets: Path) -> list[tuple[str, str, int, str]]:
    rows = []
    for line in (datasets / "README.md").read_text(encoding="utf-8").splitlines():
        if m := ROW.match(line):
            dataset, path, size, sha = m.groups()
            rows.append((dataset, path.split("/", 1)[1], int(size), sha))
    return rows


def test_every_dataset_has_a_manifest_that_parses() -> None:
    assert set(available_datasets()) >= EXPECTED
    for name in available_datasets():
        manifest = load_manifest(name)
        assert manifest.name == name
        assert manifest.title and manifest.licence, name
        assert manifest.task in ("classification", "ranking")
        listed = [spec.path for spec in manifest.files]
        assert len(listed) == len(set(listed)), f"{name}: duplicate [[files]] path"
        for spec in manifest.files:
            assert not spec.path.startswith("/") and ".." not in spec.path.split("/")
            assert spec.archive in ("", "zip", "tar", "tar.gz")
            assert spec.sha256 == "" or re.fullmatch(r"[0-9a-f]{64}", spec.sha256), spec.path
            for url in (spec.url, *spec.alt_urls):
                assert url == "" or url.startswith(("http://", "https://")), url


def test_non_public_datasets_say_why() -> None:
    for name in ("yahoo", "reuters_sc"):
        manifest = load_manifest(name)
        assert manifest.public is False
        assert manifest.notes
    yahoo = load_manifest("yahoo")
    assert {"manner.xml", "manner.xml.gz"} <= {s.path for s in yahoo.files}
    assert "webscope" in yahoo.licence.lower()


def test_unpublished_dataset_fetch_and_preprocess_say_so(data_home: Path) -> None:
    assert load_manifest("reuters_sc").never_published
    assert not load_manifest("yahoo").never_published  # gated, but the user can obtain it
    assert load_manifest("yahoo").default_variant == "mvlstm"
    runner = CliRunner()
    for command in ("fetch", "preprocess"):
        result = runner.invoke(app, [command, "reuters_sc"])
        assert result.exit_code == 3, (command, result.output)
        assert "'reuters_sc' was never published" in result.output, result.output
    assert not (data_home / "raw" / "reuters_sc").exists()


def test_official_urls_and_hub_ids() -> None:
    snli = load_manifest("snli")
    assert snli.files[0].path == "snli_1.0.zip"
    assert snli.files[0].url == "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
    assert snli.files[0].hf_hub == "stanfordnlp/snli"
    assert load_manifest("multinli").files[0].hf_hub == "nyu-mll/multi_nli"
    assert load_manifest("scitail").files[0].hf_hub == "allenai/scitail"
    assert snli.label_map == ["entailment", "neutral", "contradiction"]


def test_mirror_files_are_listed_with_the_readme_hashes(shared_datasets: Path) -> None:
    rows = _readme_rows(shared_datasets)
    assert len(rows) == 71  # the README's table
    for dataset, path, size, sha in rows:
        spec = {f.path: f for f in load_manifest(dataset).files}[path]
        assert spec.sha256 == sha, f"{dataset}/{path}"
        assert spec.size == size, f"{dataset}/{path}"


def test_manifest_hashes_match_the_real_files(shared_datasets: Path) -> None:
    checked = 0
    for name in available_datasets():
        for spec in load_manifest(name).files:
            real = shared_datasets / name / spec.path
            if not spec.sha256 or not real.is_file():
                continue
            assert real.stat().st_size == spec.size, real
            assert fileio.sha256_file(real) == spec.sha256, real
            checked += 1
    assert checked == 71


def test_variant_files_are_declared() -> None:
    """Every file a variant reads is a [[files]] path, an archive member or its gz twin."""
    for name in available_datasets():
        manifest = load_manifest(name)
        known = {s.path for s in manifest.files}
        for spec in manifest.files:
            known.update(member.path for member in spec.members)
        known |= {p + ".gz" for p in known} | {p[:-3] for p in known if p.endswith(".gz")}
        if manifest.hub is not None:  # written by fetch --source hub
            known |= {manifest.hub.file(split) for split in manifest.hub.splits}
        for variant in manifest.variants.values():
            for split in variant.splits.values():
                for rel in split.files:
                    if name == "synthetic":
                        continue  # generated, not downloaded
                    assert rel in known, f"{name}: variant {variant.name} reads undeclared {rel}"


def test_unknown_key_is_named() -> None:
    raw = {"name": "x", "title": "x", "task": "ranking", "reader": "x",
           "files": [{"path": "a", "sha": "typo"}]}
    with pytest.raises(ConfigError, match=r"files\[0\].*'sha'"):
        parse_manifest(raw, "x.toml")


def _trecqa_raw() -> dict:
    return fileio.read_toml(Path(__file__).resolve().parents[1] / "data_manifests" / "trecqa.toml")


def test_misspelt_reader_option_is_an_error_at_load_time() -> None:
    """``no_postive`` used to be ignored silently, turning raw TrecQA's MAP convention from
    "zero" into the default "skip"; now the manifest does not load, naming the table and key."""
    raw = _trecqa_raw()
    del raw["variants"]["raw"]["no_positive"]
    raw["variants"]["raw"]["no_postive"] = "zero"
    with pytest.raises(ConfigError) as excinfo:
        parse_manifest(raw, "trecqa.toml")
    assert excinfo.value.message == "trecqa.toml: [variants.raw] no_postive: unknown key " \
                                    "'no_postive'"
    assert "no_positive" in (excinfo.value.hint or "")  # the allowed keys are listed
    # per split too, and an option of another reader is not an option of this one
    raw = _trecqa_raw()
    raw["variants"]["clean"]["splits"]["dev"]["group_size"] = 10  # ubuntu's option
    with pytest.raises(ConfigError, match=r"\[variants\.clean\.splits\.dev\] group_size: "
                                          r"unknown key 'group_size'"):
        parse_manifest(raw, "trecqa.toml")


@pytest.mark.parametrize(("table", "key", "value", "allowed"), [
    (("variants", "raw"), "no_positive", "zro", "expected one of skip, zero, error"),
    (("variants", "raw", "splits", "test"), "format", "xml", "'jacana_xml', 'jsonl' or 'toks'"),
    (("variants", "raw"), "clean", "yes", "expected true or false"),
    (("variants", "raw", "splits", "dev", "expected"), "pairs", "1148", "expected an integer"),
])
def test_wrong_option_value_names_value_and_what_is_allowed(
        table: tuple[str, ...], key: str, value: object, allowed: str) -> None:
    raw = _trecqa_raw()
    target = raw
    for part in table:
        target = target[part]
    target[key] = value
    with pytest.raises(ConfigError) as excinfo:
        parse_manifest(raw, "trecqa.toml")
    message = excinfo.value.message
    assert message.startswith(f"trecqa.toml: [{'.'.join(table)}] {key}: {value!r}: "), message
    assert allowed in message


def test_file_entries_are_checked() -> None:
    raw = _trecqa_raw()
    raw["files"][2]["sha256"] = "ABC"
    with pytest.raises(ConfigError, match=r"\[files\[2\]\] sha256: 'ABC': expected 64 "):
        parse_manifest(raw, "trecqa.toml")
    raw = _trecqa_raw()
    raw["files"][0]["members"] = [{"path": "x.txt"}]  # a plain file has no members
    with pytest.raises(ConfigError, match=r"\[files\[0\]\] members: .*only an archive"):
        parse_manifest(raw, "trecqa.toml")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", ".fetched.json", "a/../../b", ""])
def test_paths_stay_inside_the_raw_folder(path: str) -> None:
    """No file, member or split file may name fetch's record or leave raw/<name>/."""
    raw = {"name": "x", "title": "x", "task": "ranking", "reader": "x",
           "files": [{"path": "a.zip", "archive": "zip", "members": [{"path": path}]}]}
    with pytest.raises(ConfigError, match=r"\[files\[0\]\.members\[0\]\] path: .*relative path"):
        parse_manifest(raw, "x.toml")
