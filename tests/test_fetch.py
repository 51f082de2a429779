"""fetch: mirror, --from, HTTP (a real server on 127.0.0.1), archives, the CLI.

Independent truths: sha256 computed here with hashlib on the bytes served, the mirror
README's hashes (through the manifests, checked in test_manifests), the request
headers the server actually received, and the published split names.
"""

from __future__ import annotations

import hashlib
import io as pyio
import json
import shutil
import socket
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.console import STATE
from pairrepro.data import archives, download, fetch
from pairrepro.data.manifests import find_raw_file
from pairrepro.errors import ChecksumError, ConfigError, DataError, DownloadError

runner = CliRunner()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the internet: only 127.0.0.1 URLs are opened."""
    real_open = download._open_url

    def guarded(url: str, offset: int, timeout: float) -> Any:
        if not url.startswith("http://127.0.0.1:"):
            raise DownloadError(f"cannot download {url}: network disabled in tests")
        return real_open(url, offset, min(timeout, 5.0))

    monkeypatch.setattr(download, "_open_url", guarded)
    monkeypatch.setattr(download, "HTTP_TIMEOUT", 5.0)
    monkeypatch.setenv("PAIRREPRO_MIRROR", "")  # empty: no mirror, not even the default
    STATE.quiet = STATE.json = False


class Server:
    """A real HTTP server with Range support that can cut a response midway."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut: set[str] = set()  # paths whose next full response stops halfway
        self.requests: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                outer.requests.append({"path": self.path, **dict(self.headers)})
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                if rng := self.headers.get("Range"):
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                if self.path in outer.cut and not rng:
                    outer.cut.discard(self.path)
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


def _write_manifest(folder: Path, name: str, files: list[dict[str, Any]]) -> None:
    lines = [f'name = "{name}"', 'title = "test"', 'task = "classification"',
             'reader = "canonical_jsonl"', 'licence = "test"', ""]
    for spec in files:
        lines.append("[[files]]")
        for key, value in spec.items():
            lines.append(f"{key} = {_toml(value)}")
        lines.append("")
    (folder / f"{name}.toml").write_text("\n".join(lines), encoding="utf-8")


def _toml(value: Any) -> str:
    """A TOML value: JSON for scalars and lists of them, inline tables for dicts."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


PAYLOAD = bytes(range(256)) * 800  # 204,800 bytes: several read chunks


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file()) if root.exists() else []


# --------------------------------------------------------------------------- HTTP


def test_full_download(server: Server, manifests: Path, data_home: Path) -> None:
    server.files["/a.bin"] = PAYLOAD
    _write_manifest(manifests, "web", [{"path": "d/a.bin", "url": server.url + "/a.bin",
                                        "sha256": _sha(PAYLOAD), "splits": ["train"]}])
    report = fetch.fetch_dataset("web", progress=True)
    target = data_home / "raw" / "web" / "d" / "a.bin"
    assert target.read_bytes() == PAYLOAD
    assert report.splits_present == ["train"] and report.complete
    assert report.files[0].verified and report.files[0].source == server.url + "/a.bin"
    record = json.loads((data_home / "raw" / "web" / ".fetched.json").read_text())
    assert record["files"][0]["sha256"] == _sha(PAYLOAD)
    assert "Range" not in server.requests[0]
    # a second fetch keeps the verified file and asks the server nothing
    fetch.fetch_dataset("web")
    assert len(server.requests) == 1


def test_cut_connection_is_resumed_with_range(server: Server, manifests: Path,
                                              data_home: Path) -> None:
    server.files["/a.bin"] = PAYLOAD
    server.cut.add("/a.bin")
    _write_manifest(manifests, "web", [{"path": "a.bin", "url": server.url + "/a.bin",
                                        "sha256": _sha(PAYLOAD), "splits": ["train"]}])
    fetch.fetch_dataset("web")
    assert (data_home / "raw" / "web" / "a.bin").read_bytes() == PAYLOAD
    assert len(server.requests) == 2
    assert server.requests[1]["Range"] == f"bytes={len(PAYLOAD) // 2}-"


def test_resume_across_runs(server: Server, manifests: Path, data_home: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed midway leaves a hidden .partial; the next run asks for the rest only."""
    server.files["/a.bin"] = PAYLOAD
    server.cut.add("/a.bin")
    _write_manifest(manifests, "web", [{"path": "a.bin", "url": server.url + "/a.bin",
                                        "sha256": _sha(PAYLOAD), "splits": ["train"]}])
    monkeypatch.setattr(download, "HTTP_ATTEMPTS", 1)
    with pytest.raises(DownloadError, match="did not complete"):
        fetch.fetch_dataset("web")
    raw = data_home / "raw" / "web"
    assert not (raw / "a.bin").exists()
    assert (raw / ".a.bin.partial").stat().st_size == len(PAYLOAD) // 2
    fetch.fetch_dataset("web")
    assert (raw / "a.bin").read_bytes() == PAYLOAD
    assert server.requests[-1]["Range"] == f"bytes={len(PAYLOAD) // 2}-"
    assert not (raw / ".a.bin.partial").exists()


def test_wrong_checksum_is_rejected(server: Server, manifests: Path, data_home: Path) -> None:
    server.files["/a.bin"] = PAYLOAD
    wrong = _sha(b"something else")
    _write_manifest(manifests, "web", [{"path": "a.bin", "url": server.url + "/a.bin",
                                        "sha256": wrong, "splits": ["train"]}])
    with pytest.raises(ChecksumError) as excinfo:
        fetch.fetch_dataset("web")
    message = str(excinfo.value)
    assert "a.bin" in message and wrong in message and _sha(PAYLOAD) in message
    assert _leftovers(data_home / "raw" / "web") == []  # no file, no partial, no record
    result = runner.invoke(app, ["fetch", "web"])
    assert result.exit_code == ChecksumError.exit_code == 5
    assert _leftovers(data_home / "raw" / "web") == []


def test_http_404(server: Server, manifests: Path, data_home: Path) -> None:
    _write_manifest(manifests, "web", [{"path": "a.bin", "url": server.url + "/nope.bin",
                                        "splits": ["train"]}])
    with pytest.raises(DownloadError, match=r"404.*/nope\.bin"):
        fetch.fetch_dataset("web")
    result = runner.invoke(app, ["fetch", "web"])
    assert result.exit_code == DownloadError.exit_code == 4
    assert _leftovers(data_home / "raw" / "web") == []


def test_connection_refused_names_url_and_alternatives(manifests: Path, data_home: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/a.bin"
    _write_manifest(manifests, "web", [{"path": "a.bin", "url": url, "splits": ["train"]}])
    result = runner.invoke(app, ["fetch", "web"])
    assert result.exit_code == 4
    text = " ".join(result.output.split())
    assert url in text and "--mirror" in text and "--from" in text


def test_alt_url_used_when_official_fails(server: Server, manifests: Path,
                                          data_home: Path) -> None:
    server.files["/mirror/a.bin"] = PAYLOAD
    _write_manifest(manifests, "web", [{"path": "a.bin", "url": server.url + "/gone.bin",
                                        "alt_urls": [server.url + "/mirror/a.bin"],
                                        "sha256": _sha(PAYLOAD), "splits": ["train"]}])
    report = fetch.fetch_dataset("web")
    assert report.files[0].source.endswith("/mirror/a.bin")


def test_zip_download_is_extracted_and_covers_its_splits(server: Server, manifests: Path,
                                                         data_home: Path) -> None:
    buffer = pyio.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("set/train.jsonl", "t\n")
        zf.writestr("set/dev.jsonl", "d\n")
    data = buffer.getvalue()
    server.files["/set.zip"] = data
    _write_manifest(manifests, "web", [
        {"path": "set.zip", "url": server.url + "/set.zip", "sha256": _sha(data),
         "archive": "zip", "splits": ["train", "dev"],
         "members": [{"path": "set/train.jsonl"}, {"path": "set/dev.jsonl"}]},
        {"path": "set/dev.jsonl.gz", "url": server.url + "/never.gz", "splits": ["dev"]},
    ])
    report = fetch.fetch_dataset("web")
    raw = data_home / "raw" / "web"
    assert (raw / "set" / "train.jsonl").read_text() == "t\n"
    assert report.splits_present == ["train", "dev"] and report.complete
    assert report.files[1].status == "not needed"
    assert [r["path"] for r in server.requests] == ["/set.zip"]
    assert find_raw_file(raw, "set/dev.jsonl.gz") == raw / "set" / "dev.jsonl"


# --------------------------------------------------------------------------- archives


def _zip_with(name: str, tmp_path: Path) -> Path:
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ok.txt", "fine")
        zf.writestr(name, "evil")
    return path


@pytest.mark.parametrize("member", ["../evil", "/abs/evil", "a/../../evil"])
def test_zip_members_outside_are_refused(member: str, tmp_path: Path) -> None:
    archive = _zip_with(member, tmp_path)
    dest = tmp_path / "out"
    with pytest.raises(DataError, match=f"refusing to extract member {member!r}"):
        archives.safe_extract(archive, dest, "zip")
    assert not (tmp_path / "evil").exists() and not dest.exists()  # nothing written at all


def test_zip_symlink_member_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)  # S_IFLNK
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(DataError, match=r"'link'.*symbolic link"):
        archives.safe_extract(archive, tmp_path / "out", "zip")


def _tar_with(tmp_path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        tf.addfile(member, pyio.BytesIO(data) if data else None)
    return path


def test_tar_links_and_traversal_are_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("innocent")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(DataError, match=r"'innocent'.*symbolic link"):
        archives.safe_extract(_tar_with(tmp_path, link), tmp_path / "out", "tar.gz")
    hard = tarfile.TarInfo("hard")
    hard.type = tarfile.LNKTYPE
    hard.linkname = "../../x"
    with pytest.raises(DataError, match=r"'hard'.*hard link"):
        archives.safe_extract(_tar_with(tmp_path, hard), tmp_path / "out", "tar.gz")
    evil = tarfile.TarInfo("../evil")
    evil.size = 4
    with pytest.raises(DataError, match=r"'\.\./evil'"):
        archives.safe_extract(_tar_with(tmp_path, evil, b"evil"), tmp_path / "out", "tar.gz")
    absolute = tarfile.TarInfo("/abs")
    absolute.size = 4
    with pytest.raises(DataError, match=r"'/abs'.*absolute"):
        archives.safe_extract(_tar_with(tmp_path, absolute, b"evil"), tmp_path / "out", "tar.gz")
    assert not (tmp_path / "evil").exists()


def test_hostile_archive_from_server_is_not_kept(server: Server, manifests: Path,
                                                 data_home: Path, tmp_path: Path) -> None:
    data = _zip_with("../evil", tmp_path).read_bytes()
    server.files["/x.zip"] = data
    _write_manifest(manifests, "web", [{"path": "x.zip", "url": server.url + "/x.zip",
                                        "archive": "zip", "splits": ["train"]}])
    result = runner.invoke(app, ["fetch", "web"])
    assert result.exit_code == 3
    assert "../evil" in result.output
    assert _leftovers(data_home / "raw" / "web") == []
    assert not (data_home / "raw" / "evil").exists()


# --------------------------------------------------------------------------- mirror / --from


def test_fetch_from_mirror(shared_datasets: Path, data_home: Path) -> None:
    report = fetch.fetch_dataset("twitter_url", mirror=shared_datasets)
    raw = data_home / "raw" / "twitter_url"
    assert report.splits_present == ["train", "test"] and report.complete
    fetched = [r for r in report.files if r.status == "fetched"]
    assert len(fetched) == 11 and all(r.verified for r in fetched)
    for result in fetched:
        assert (raw / result.path).read_bytes() == (shared_datasets / "twitter_url"
                                                    / result.path).read_bytes()
    record = json.loads((raw / ".fetched.json").read_text())
    assert {f["path"] for f in record["files"]} == {r.path for r in fetched}
    assert (raw / "data_example" / "Twitter_URL_Corpus_train_sample.txt").is_file()


def test_mirror_from_environment(shared_datasets: Path, data_home: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIRREPRO_MIRROR", str(shared_datasets))
    report = fetch.fetch_dataset("quora")
    assert report.splits_present == ["dev", "test"]
    assert report.splits_missing == ["train"]


def test_a_mirror_that_is_a_file_is_named_as_not_a_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PAIRREPRO_MIRROR naming a file said the mirror folder "does not exist"."""
    from pairrepro.data.fetch import resolve_mirror
    from pairrepro.errors import ConfigError

    afile = tmp_path / "mirror.txt"
    afile.write_text("x", encoding="utf-8")
    monkeypatch.setenv("PAIRREPRO_MIRROR", str(afile))
    with pytest.raises(ConfigError) as info:
        resolve_mirror(None)
    assert f"{afile} ($PAIRREPRO_MIRROR) is a file, not a folder" in info.value.message
    with pytest.raises(ConfigError) as info:
        resolve_mirror(tmp_path / "absent")
    assert f"{tmp_path / 'absent'} (--mirror) does not exist" in info.value.message


def _mirror_of_quora(folder: Path, shared_datasets: Path) -> Path:
    """A mirror folder holding only quora (a link to the real files): what fetch takes from
    it shows which mirror it used."""
    folder.mkdir(parents=True)
    (folder / "quora").symlink_to(shared_datasets / "quora", target_is_directory=True)
    return folder


def test_default_mirror_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$PAIRREPRO_MIRROR (empty: none), else the user config's mirror (relative to its file),
    else none: a shared/datasets folder beside the checkout is no mirror of the product."""
    config_home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setattr(paths, "PROJECT_DIR", tmp_path / "work" / "main")
    monkeypatch.delenv("PAIRREPRO_MIRROR", raising=False)
    (tmp_path / "work" / "shared" / "datasets").mkdir(parents=True)
    assert paths.mirror_dir() is None
    (config_home / "pairrepro").mkdir(parents=True)
    (config_home / "pairrepro" / "config.toml").write_text('mirror = "../../my-mirror"\n')
    assert paths.mirror_dir().resolve() == (tmp_path / "my-mirror").resolve()
    monkeypatch.setenv("PAIRREPRO_MIRROR", str(tmp_path / "env-mirror"))
    assert paths.mirror_dir() == tmp_path / "env-mirror"
    monkeypatch.setenv("PAIRREPRO_MIRROR", "")
    assert paths.mirror_dir() is None


def test_fetch_uses_the_mirror_of_the_user_config(tmp_path: Path, shared_datasets: Path,
                                                  data_home: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = _mirror_of_quora(tmp_path / "mirror", shared_datasets)
    config = tmp_path / "config" / "pairrepro" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'mirror = "{mirror}"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("PAIRREPRO_MIRROR", raising=False)
    result = runner.invoke(app, ["--json", "fetch", "quora"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["splits_present"] == ["dev", "test"]
    record = json.loads((data_home / "raw" / "quora" / ".fetched.json").read_text())
    sources = [f["source"] for f in record["files"]]
    assert sources and all(s.startswith(f"mirror:{mirror.resolve()}/quora/") for s in sources)


def test_user_config_faults_name_the_file(tmp_path: Path, data_home: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "pairrepro" / "config.toml"
    config.parent.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("PAIRREPRO_MIRROR", raising=False)
    config.write_text('mirorr = "/data"\n')
    with pytest.raises(ConfigError, match=r"config\.toml: .*unknown key 'mirorr'"):
        paths.mirror_dir()
    config.write_text(f'mirror = "{tmp_path / "gone"}"\n')
    result = runner.invoke(app, ["fetch", "quora"])
    assert result.exit_code == 2
    # whitespace dropped: the terminal may wrap the long path anywhere
    assert f"{config}:mirror" in "".join(result.output.split())


def test_snli_partial_availability(shared_datasets: Path, data_home: Path) -> None:
    result = runner.invoke(app, ["fetch", "snli", "--mirror", str(shared_datasets)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "splits present dev, test; missing train" in text
    raw = data_home / "raw" / "snli" / "snli_1.0"
    assert sorted(p.name for p in raw.iterdir()) == ["snli_1.0_dev.jsonl.gz",
                                                     "snli_1.0_test.jsonl.gz"]
    result = runner.invoke(app, ["--json", "fetch", "snli", "--mirror", str(shared_datasets)])
    data = json.loads(result.output)
    assert data["splits_missing"] == ["train"] and data["complete"] is False


def test_corrupt_mirror_file_is_never_used(shared_datasets: Path, data_home: Path,
                                           tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_datasets / "quora", mirror / "quora")
    dev = mirror / "quora" / "Quora_question_pair_partition" / "dev.tsv"
    dev.write_bytes(dev.read_bytes()[:-10])
    with pytest.raises(ChecksumError, match=r"dev\.tsv"):
        fetch.fetch_dataset("quora", mirror=mirror)
    raw = data_home / "raw" / "quora" / "Quora_question_pair_partition"
    assert not (raw / "dev.tsv").exists()
    assert (raw / "test.tsv").is_file()  # the good file is kept and recorded
    record = json.loads((data_home / "raw" / "quora" / ".fetched.json").read_text())
    assert "Quora_question_pair_partition/dev.tsv" not in {f["path"] for f in record["files"]}


def test_fetch_from_a_file_and_a_folder(shared_datasets: Path, data_home: Path,
                                        tmp_path: Path) -> None:
    given = tmp_path / "downloads" / "manner.xml.gz"
    given.parent.mkdir()
    given.write_bytes(b"\x1f\x8b fake webscope file")
    report = fetch.fetch_dataset("yahoo", from_path=given)
    assert report.splits_present == ["all"]
    assert report.files[1].source == f"from:{given}"
    assert (data_home / "raw" / "yahoo" / "manner.xml.gz").read_bytes() == given.read_bytes()
    # a folder laid out like the mirror's dataset folder
    report = fetch.fetch_dataset("quora", from_path=shared_datasets / "quora")
    assert report.splits_present == ["dev", "test"]
    assert all(r.verified for r in report.files if r.status == "fetched")


def test_from_with_unknown_file_name(tmp_path: Path, data_home: Path) -> None:
    stray = tmp_path / "whatever.txt"
    stray.write_text("x")
    with pytest.raises(ConfigError, match=r"manner\.xml"):
        fetch.fetch_dataset("yahoo", from_path=stray)
    result = runner.invoke(app, ["fetch", "yahoo", "--from", str(stray)])
    assert result.exit_code == 2


def test_licence_gated_without_from(data_home: Path) -> None:
    result = runner.invoke(app, ["fetch", "yahoo"])
    assert result.exit_code == 3
    assert "webscope" in result.output.lower()
    assert runner.invoke(app, ["fetch", "no_such_dataset"]).exit_code == 2


def test_force_refetches(shared_datasets: Path, data_home: Path) -> None:
    fetch.fetch_dataset("quora", mirror=shared_datasets)
    again = fetch.fetch_dataset("quora", mirror=shared_datasets)
    assert {r.status for r in again.files if r.splits == ["dev"]} == {"present"}
    forced = fetch.fetch_dataset("quora", mirror=shared_datasets, force=True)
    assert {r.status for r in forced.files if r.splits == ["dev"]} == {"fetched"}


# --------------------------------------------------------------------------- synthetic, datasets


def test_fetch_synthetic(data_home: Path) -> None:
    result = runner.invoke(app, ["fetch", "synthetic"])
    assert result.exit_code == 0, result.output
    raw = data_home / "raw" / "synthetic"
    counts = {}
    for kind in ("nli", "ranking"):
        for split in ("train", "dev", "test"):
            rows = [json.loads(line) for line in (raw / kind / f"{split}.jsonl").open()]
            assert set(rows[0]) == {"pair_id", "group_id", "left", "right", "label"}
            counts[kind, split] = len(rows)
            if kind == "ranking":
                groups: dict[str, int] = {}
                for row in rows:
                    groups[row["group_id"]] = groups.get(row["group_id"], 0) + row["label"]
                assert set(groups.values()) == {1}  # exactly one relevant answer per query
                counts["queries", split] = len(groups)
    assert counts["nli", "train"] == 6000 and counts["nli", "dev"] == 600
    assert counts["queries", "train"] == 800 and counts["ranking", "test"] == 150 * 5
    first = (raw / "nli" / "dev.jsonl").read_bytes()
    fetch.fetch_dataset("synthetic", force=True)
    assert (raw / "nli" / "dev.jsonl").read_bytes() == first  # seeded


def test_datasets_command(shared_datasets: Path, data_home: Path) -> None:
    fetch.fetch_dataset("snli", mirror=shared_datasets)
    result = runner.invoke(app, ["--json", "datasets"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert {"snli", "yahoo", "reuters_sc", "synthetic", "trecqa"} <= set(rows)
    assert rows["snli"]["fetched"] and rows["snli"]["splits_missing"] == ["train"]
    assert rows["yahoo"]["public"] is False and not rows["trecqa"]["fetched"]
    STATE.json = False
    table = runner.invoke(app, ["datasets"])
    assert table.exit_code == 0 and "twitter_url" in table.output
    assert "Examples" in runner.invoke(app, ["fetch", "--help"]).output


def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No host name resolves, as on a machine without a network."""
    import urllib.error

    def no_dns(url: str, offset: int, timeout: float) -> Any:
        raise urllib.error.URLError(socket.gaierror(socket.EAI_NONAME,
                                                    "Name or service not known"))

    monkeypatch.setattr(download, "_open_url", no_dns)


def test_offline_fetch_says_once_what_could_not_be_reached(
        data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, `fetch trecqa` (and `make demo` before its fallback) printed one line of
    5,000 characters: a "cannot download ... Name or service not known" per URL. One
    sentence now: how many files, which hosts, the first cause, how to use a mirror."""
    from pairrepro.data.manifests import load_manifest

    _offline(monkeypatch)
    needed = [f for f in load_manifest("trecqa").files if f.splits and f.url]
    hosts = sorted({f.url.split("/")[2] for f in needed})
    with pytest.raises(DownloadError) as caught:
        fetch.fetch_dataset("trecqa")
    message, hint = caught.value.message, caught.value.hint or ""
    assert message.startswith(f"nothing of dataset 'trecqa' could be fetched: {len(needed)} "
                              f"file(s) could not be downloaded from {', '.join(hosts)} "
                              "(the first: cannot download https://"), message
    assert message.count("Name or service not known") == 1 and len(message) < 400
    assert "export PAIRREPRO_MIRROR=DIR (make: MIRROR=DIR)" in hint


def test_offline_demo_says_once_why_it_falls_back(
        data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairrepro.cli import pipeline_cmds

    _offline(monkeypatch)
    fell_back: list[int] = []
    monkeypatch.setattr(pipeline_cmds, "_demo_synthetic",
                        lambda seed, overrides: fell_back.append(seed))
    out = runner.invoke(app, ["demo"])
    assert out.exit_code == 0 and fell_back == [1], out.output
    text = " ".join(out.output.split())
    assert text.count("Name or service not known") == 1, out.output
    assert "make demo MIRROR=DIR" in text and "PAIRREPRO_MIRROR=DIR pairrepro demo" in text
    assert max(len(line) for line in out.output.splitlines()) < 600
