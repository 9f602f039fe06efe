"""Remote datasets through a real S3 server (moto, on loopback) and the node-local cache."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import io
import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from shardfeed import cli

from .conftest import LAYOUT, digest, make_table
from .s3_server import s3_env, s3_server

ARGS = dict(batch_size=64, seed=8, with_sample_id=True, output="numpy",
            stack={"feats": [f"f{i}" for i in range(8)]}, columns=["label", "seq"])  # fmt: skip
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server, s3_env(server):
        yield server


@pytest.fixture(scope="module")
def remote(s3, dataset):
    """The session dataset, uploaded; the same files under a bucket."""
    return s3.upload_folder(dataset, "data", "ds")


def total_bytes(dataset: Path) -> int:
    return sum(os.path.getsize(dataset / name) for name, _, _ in LAYOUT)


def folder_bytes(folder: Path) -> int:
    total = 0
    for entry in folder.rglob("*"):
        try:  # the cache evicts while we look
            total += entry.stat().st_size if entry.is_file() else 0
        except FileNotFoundError:
            pass
    return total


def test_the_bucket_gives_the_local_stream(remote, dataset):
    local = shardfeed.Loader(dataset, **ARGS)
    bucket = shardfeed.Loader(remote, **ARGS)
    assert bucket.fingerprint == local.fingerprint  # same relative paths, same order
    for epoch in (0, 1):
        local.set_epoch(epoch)
        bucket.set_epoch(epoch)
        assert digest(bucket) == digest(local)
    fetched = bucket.stats()
    assert fetched["stages"]["fetch"]["bytes"] > 0
    assert fetched["remote_bytes"] == fetched["stages"]["fetch"]["bytes"]


def test_second_epoch_reads_nothing_remote_when_the_dataset_fits(remote, dataset, tmp_path):
    ld = shardfeed.Loader(remote, cache_dir=tmp_path, **ARGS)
    reference = shardfeed.Loader(dataset, **ARGS)
    assert digest(ld) == digest(reference)
    first = ld.stats()
    assert first["remote_bytes"] == total_bytes(dataset)  # every file downloaded once
    # The prefetcher downloads ahead, so most opens are already hits.
    assert first["cache_hits"] + first["cache_misses"] >= 3
    for epoch in (1, 2):
        ld.set_epoch(epoch)
        reference.set_epoch(epoch)
        assert digest(ld) == digest(reference)
    later = ld.stats()
    assert later["remote_bytes"] == first["remote_bytes"]  # zero remote bytes since
    assert later["cache_hits"] > first["cache_hits"]
    assert later["cache_misses"] == first["cache_misses"]
    assert (tmp_path / "files").stat().st_mode & 0o777 == 0o700
    # A second run on the node starts warm.
    again = shardfeed.Loader(remote, cache_dir=tmp_path, **ARGS)
    assert digest(again) == digest(shardfeed.Loader(dataset, **ARGS))
    assert again.stats()["remote_bytes"] == 0


def test_a_limit_below_the_dataset_size_holds_and_the_stream_is_unchanged(
    remote, dataset, tmp_path
):
    sizes = sorted(os.path.getsize(dataset / name) for name, _, _ in LAYOUT)
    limit = sizes[-1] + sizes[0]  # room for two files, never three
    ld = shardfeed.Loader(remote, cache_dir=tmp_path, cache_limit_bytes=limit, num_threads=2,
                          prefetch_bytes=limit, **ARGS)  # fmt: skip
    reference = shardfeed.Loader(dataset, **ARGS)
    for epoch in (0, 1):
        ld.set_epoch(epoch)
        reference.set_epoch(epoch)
        got = []
        for batch in ld:
            got.append(batch)
            assert folder_bytes(tmp_path / "files") <= limit + 4096  # + small .meta files
        assert digest(got) == digest(reference)
    assert ld.stats()["evictions"] > 0


def test_two_processes_share_one_cache_and_download_once(remote, dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "import json, sys, shardfeed\n"
        "from tests.conftest import digest\n"
        f"args = json.loads({json.dumps(ARGS)!r})\n"
        f"ld = shardfeed.Loader({remote!r}, cache_dir={str(tmp_path / 'cache')!r}, **args)\n"
        "ld._settings.extra['start_early'] = False\n"  # one pass: count its downloads only
        "d = digest(ld)\n"
        "json.dump({'digest': d, 'remote': ld.stats()['remote_bytes']},"
        " open(sys.argv[1], 'w'))\n"
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(out / f"{i}.json")], cwd=ROOT,
                              env=env) for i in range(2)]  # fmt: skip
    assert all(p.wait(timeout=120) == 0 for p in procs)
    results = [json.loads((out / f"{i}.json").read_text()) for i in range(2)]
    want = digest(shardfeed.Loader(dataset, **ARGS))
    assert all(r["digest"] == want for r in results)
    assert sum(r["remote"] for r in results) == total_bytes(dataset)  # once per node


def test_damaged_entries_and_changed_remote_files_are_fetched_again(s3, dataset, tmp_path):
    src = tmp_path / "src"
    for name, rows, rg in LAYOUT:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(make_table(0, rows, seed=1), src / name, row_group_size=rg)
    uri = s3.upload_folder(src, "mutable", "ds")
    cache = tmp_path / "cache"
    first = shardfeed.Loader(uri, cache_dir=cache, **ARGS)
    assert digest(first) == digest(shardfeed.Loader(src, **ARGS))
    # Truncate one entry and flip a byte in another: both are refetched, never served.
    entries = sorted((cache / "files").glob("*.data"))
    assert len(entries) == 3
    entries[0].write_bytes(entries[0].read_bytes()[:100])
    raw = bytearray(entries[1].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    entries[1].write_bytes(bytes(raw))
    second = shardfeed.Loader(uri, cache_dir=cache, **ARGS)
    assert digest(second) == digest(shardfeed.Loader(src, **ARGS))
    assert second.stats()["remote_bytes"] > 0
    # Overwrite a remote file: the entry is stale and is not served.
    name, rows, rg = LAYOUT[0]
    changed = make_table(0, rows, seed=1)
    col = changed.schema.get_field_index("noise")
    changed = changed.set_column(col, "noise", pa.array(np.full(rows, 7, np.float32)))
    pq.write_table(changed, src / name, row_group_size=rg)
    s3.upload_folder(src, "mutable", "ds")
    third = shardfeed.Loader(uri, cache_dir=cache, columns=["noise"], output="numpy",
                             batch_size=64, shuffle=False)  # fmt: skip
    noise = np.concatenate([b["noise"] for b in third])
    assert (noise[: LAYOUT[0][1]] == 7).all()


def test_decoded_tier_over_s3(remote, dataset, tmp_path):
    ld = shardfeed.Loader(remote, cache_dir=tmp_path, cache_decoded=True, **ARGS)
    reference = shardfeed.Loader(dataset, **ARGS)
    assert digest(ld) == digest(reference)
    ld.set_epoch(1)
    reference.set_epoch(1)
    assert digest(ld) == digest(reference)
    s = ld.stats()
    assert s["stages"]["decode"]["seconds"] == 0 and s["decoded_hits"] > 0


def test_global_shuffle_over_s3_is_the_local_stream(remote, dataset, tmp_path):
    """shuffle="global" (issue 11 item 3) from the bucket, cold then warm, against the local
    files with their own tier: one stream."""
    args = dict(ARGS, shuffle="global", drop_last=False)
    bucket = shardfeed.Loader(remote, cache_dir=tmp_path / "s3", cache_decoded=True, **args)
    local = shardfeed.Loader(dataset, cache_dir=tmp_path / "local", cache_decoded=True, **args)
    for epoch in (0, 1):
        bucket.set_epoch(epoch)
        local.set_epoch(epoch)
        assert digest(bucket) == digest(local)
    s = bucket.stats()
    assert s["decoded_hits"] > 0 and s["stages"]["decode"]["seconds"] == 0


def test_cache_cli(remote, tmp_path, capsys):
    assert cli.main(["cache", "warm", remote, "--cache-dir", str(tmp_path)]) == 0
    assert "3 of 3 files cached" in capsys.readouterr().out
    assert cli.main(["cache", "stats", "--cache-dir", str(tmp_path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["files"]["entries"] == 3 and stats["files"]["bytes"] > 0
    assert cli.main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["files"]["entries"] == 0 and cleared["freed_bytes"] > 0
    # The options before the source too (once: "unrecognized arguments: <the source>").
    for args in (["cache", "warm", "--cache-dir", str(tmp_path), remote],
                 ["cache", "--cache-dir", str(tmp_path), "warm", remote]):  # fmt: skip
        assert cli.main(args) == 0
        assert "3 of 3 files cached" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # an unknown option is still one
        cli.main(["cache", "warm", "--cache-dir", str(tmp_path), remote, "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_keys_with_spaces_and_accents_in_a_uri_as_they_are(s3, tmp_path):
    """Hive writes city=New York: a URI naming such a folder or file works typed as it
    is (the path is percent-encoded for Arrow) and percent-encoded by the user."""
    folder = tmp_path / "city=São Paulo"
    folder.mkdir()
    pq.write_table(pa.table({"v": np.arange(6)}), folder / "part 0.parquet")
    root = s3.upload_folder(tmp_path, "spaces", "lake")
    plain = root.replace("/lake?", "/lake/city=São Paulo/part 0.parquet?")
    escaped = root.replace("/lake?", "/lake/city=S%C3%A3o%20Paulo?")
    for uri in (root, plain, escaped, root.replace("/lake?", "/lake/city=São Paulo?")):
        ld = shardfeed.Loader(uri, batch_size=2, shuffle=False, output="numpy", columns=["v"])
        assert [b["v"].tolist() for b in ld] == [[0, 1], [2, 3], [4, 5]], uri


def test_hadoop_s3_schemes_and_upper_case_are_the_same_bucket(remote):
    """Spark and Hive name S3 locations s3a:// (once: "Unrecognized filesystem type")."""
    reference = shardfeed.Loader(remote, **ARGS)
    for scheme in ("s3a", "s3n", "S3"):
        other = shardfeed.Loader(scheme + remote[len("s3") :], **ARGS)
        assert other.fingerprint == reference.fingerprint
        assert digest(other) == digest(reference)


def test_remote_errors_name_the_uri(s3):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        shardfeed.Loader(s3.uri("data", "nothing-here"))


def test_remote_read_failures_are_storage_errors_cached_or_not(s3, dataset, tmp_path):
    # A server of our own, stopped once the loaders have read the footers:
    # every later read is refused.  Through the file cache or straight from
    # the bucket, that is a StorageError (an OSError), never InvalidDataError.
    with s3_server() as server:
        uri = server.upload_folder(dataset, "gone", "ds")
        # (A refused connection is retried until remote_timeout: keep the test short.)
        uncached = shardfeed.Loader(uri, remote_timeout=5.0, **ARGS)
        cached = shardfeed.Loader(uri, cache_dir=tmp_path, remote_timeout=5.0, **ARGS)
    for ld in (uncached, cached):
        with pytest.raises(shardfeed.StorageError) as e:
            for _ in ld:
                pass
        assert isinstance(e.value, OSError)
        assert not isinstance(e.value, shardfeed.InvalidDataError)
        assert ".parquet" in str(e.value)
        assert "s3|" not in str(e.value)  # not the cache's internal key


def test_after_a_server_died_another_store_opens_without_waiting(remote, dataset, tmp_path):
    """Reads abandoned at remote_timeout went on retrying on their own threads (Arrow's
    S3 retries, then ours) for ~25 s, and every new S3 client of the process waits
    until no request is in flight: the next Loader of another endpoint or credentials
    timed out opening its source.  Abandoned reads now stop retrying by the deadline."""
    with s3_server() as server:
        uri = server.upload_folder(dataset, "dies", "ds")
        loaders = [
            shardfeed.Loader(uri, remote_timeout=4.0, **ARGS),
            shardfeed.Loader(uri, cache_dir=tmp_path, remote_timeout=4.0, **ARGS),
        ]
    errors = []
    for ld in loaders:
        with pytest.raises(shardfeed.StorageError) as caught:
            for _ in ld:
                pass
        errors.append(str(caught.value))
    # The uncached read reports the refused connection (the S3 client's retries end
    # before the deadline), not only that the storage did not answer.
    assert "NETWORK_CONNECTION" in errors[0], errors[0]
    # Another endpoint spelling: a client of its own.
    other = remote.replace("127.0.0.1", "localhost")
    assert other != remote
    got = [b["sample_id"] for b in shardfeed.Loader(other, remote_timeout=15.0, **ARGS)]
    want = [b["sample_id"] for b in shardfeed.Loader(dataset, **ARGS)]
    assert np.array_equal(np.concatenate(got), np.concatenate(want))


def test_a_filesystem_given_up_at_remote_timeout_does_not_crash_the_exit(remote):
    """remote_timeout=0.01: the S3 filesystem was still being made on a thread the loader
    had given up on when pyarrow's exit hook shut the AWS SDK down under it: SIGSEGV or
    SIGABRT after the StorageError, in 5 runs of 6.  The exit hook now waits for it."""
    child = (
        "import shardfeed, sys\n"
        "try:\n"
        "    shardfeed.Loader(sys.argv[1], remote_timeout=0.01)\n"
        "except shardfeed.StorageError as e:\n"
        "    print('raised', e)\n"
    )
    for _ in range(4):
        run = subprocess.run([sys.executable, "-c", child, remote], capture_output=True,
                             text=True, timeout=120)  # fmt: skip
        assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
        assert "within 0.01 s" in run.stdout or run.stdout == "", run.stdout


def test_a_read_the_storage_refuses_is_not_called_bad_data(remote, monkeypatch, tmp_path):
    """Without credentials the server lists but refuses the reads: a StorageError that
    says the file could not be read, not "not a readable Parquet file"."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws of the machine's
    with pytest.raises(shardfeed.StorageError) as caught:
        list(shardfeed.Loader(remote, batch_size=64, remote_timeout=30))
    assert "cannot read it" in str(caught.value)
    assert "ACCESS_DENIED" in str(caught.value)
    assert "not a readable Parquet file" not in str(caught.value)


def test_an_entry_damaged_in_place_with_its_mtime_kept_is_fetched_again(s3, tmp_path):
    """A loader remembered an entry it had checked by name, inode, size and mtime: bytes
    overwritten in place with the mtime set back (as bit rot or cp -p would leave it)
    were served as data by that loader.  The change time, which no one sets back,
    is part of what it remembers."""
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"x": np.arange(20000.0)}), src / "a.parquet", row_group_size=5000,
                   compression="none")  # fmt: skip
    uri = s3.upload_folder(src, "inplace", "ds")
    ld = shardfeed.Loader(uri, batch_size=1000, output="numpy", shuffle=False,
                          cache_dir=tmp_path / "cache")  # fmt: skip
    assert np.array_equal(np.concatenate([b["x"] for b in ld]), np.arange(20000.0))
    (entry,) = (tmp_path / "cache" / "files").glob("*.data")
    st = entry.stat()
    time.sleep(0.05)  # a change time of its own
    with open(entry, "r+b") as f:
        f.seek(st.st_size // 2)
        f.write(b"\x7f" * 8)
    os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))
    for epoch in (1, 2):
        ld.set_epoch(epoch)
        assert np.array_equal(np.concatenate([b["x"] for b in ld]), np.arange(20000.0))


@contextlib.contextmanager
def _proxy(
    s3: Any,
    answered: Callable[[str, str], None] = lambda command, path: None,
    refuse: Callable[[str, str, bool], bool] = lambda command, path, ranged: False,
) -> Iterator[str]:
    """An HTTP proxy on loopback in front of the S3 server; `answered(command, path)` runs
    after the server answered each request, before the answer is passed on; a request
    for which `refuse(command, path, ranged)` is true is answered 503 ServiceUnavailable
    (throttling) without reaching the server.  Yields the proxy's endpoint
    ("127.0.0.1:port")."""

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if refuse(self.command, self.path, "Range" in self.headers):
                error = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>"
                         b"ServiceUnavailable</Code><Message>test</Message></Error>")  # fmt: skip
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(error)
                return
            upstream = http.client.HTTPConnection(s3.host, s3.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            upstream.close()
            answered(self.command, self.path)
            self.send_response(answer.status)
            for k, v in answer.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", answer.getheader("Content-Length") or "0")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_HEAD = forward

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    proxy = Server(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{proxy.server_address[1]}"
    finally:
        proxy.shutdown()


def test_an_object_overwritten_between_its_check_and_its_read_is_never_mixed(s3, tmp_path):
    """A writer overwrote an object (same size) just after the loader's HEAD check and
    before its ranged GETs: the loader delivered the old version's rows and then the
    new one's. A proxy on loopback overwrites part-1 as it answers that HEAD; now the
    read is checked again afterwards and the row group is an error naming the file."""
    client = s3.client()
    s3.create_bucket("race")

    def version(start: int) -> bytes:  # the same size for any start
        out = io.BytesIO()
        pq.write_table(pa.table({"id": np.arange(start, start + 1000, dtype=np.int64)}), out,
                       row_group_size=250, compression="none", use_dictionary=False)  # fmt: skip
        return out.getvalue()

    for i in range(3):
        client.put_object(Bucket="race", Key=f"ds/part-{i}.parquet", Body=version(i * 1000))
    armed = threading.Event()

    def answered(command: str, path: str) -> None:
        if armed.is_set() and command == "HEAD" and "part-1" in path:
            armed.clear()  # a writer overwrites it now, at its size
            client.put_object(Bucket="race", Key="ds/part-1.parquet", Body=version(10**5))

    with _proxy(s3, answered) as endpoint:
        uri = f"s3://race/ds?endpoint_override={endpoint}&scheme=http"
        loader = shardfeed.Loader(uri, batch_size=100, output="numpy", shuffle=False,
                                  num_threads=1, remote_timeout=10)  # fmt: skip
        time.sleep(1.1)  # the new version's modification time (seconds) must differ
        armed.set()
        got: list[int] = []
        with pytest.raises(shardfeed.InvalidDataError, match=r"part-1\.parquet.*changed"):
            for batch in loader:
                got += batch["id"].tolist()
        assert got == list(range(len(got))) and len(got) >= 1000  # part-0 whole, nothing new


def test_a_burst_of_throttling_is_ridden_out_until_remote_timeout(s3, remote, dataset, tmp_path):
    """An uncached read (footers at open, row groups in the epoch) gave up after the S3
    client's own retries and five of shardfeed's, a few seconds into a 60 s remote_timeout,
    where the README promises retries until remote_timeout.  Twelve 503s to one object's
    ranged GETs now cost time, not the epoch; with a file cache too."""
    reference = digest(shardfeed.Loader(dataset, batch_size=64, output="numpy", seed=2,
                                        with_sample_id=True))  # fmt: skip
    refused: list[str] = []

    def refuse(command: str, path: str, ranged: bool) -> bool:
        if command == "GET" and ranged and "b.parquet" in path and len(refused) < 12:
            refused.append(path)
            return True
        return False

    for cache in (None, tmp_path / "cache"):
        refused.clear()
        with _proxy(s3, refuse=refuse) as endpoint:
            uri = f"s3://data/ds?endpoint_override={endpoint}&scheme=http"  # `remote`
            loader = shardfeed.Loader(uri, batch_size=64, output="numpy", seed=2,
                                      with_sample_id=True, remote_timeout=60,
                                      cache_dir=cache)  # fmt: skip
            assert digest(loader) == reference
        assert len(refused) == 12, cache


def test_a_row_group_read_from_the_store_is_checked_twice_not_once_per_part(s3):
    """Each uncached row group is checked with a HEAD request before its reads and one
    after them all.  The stack's tile reads (16 columns at a time) each made a HEAD of
    their own: 6 per row group for 64 columns, requests an object store bills."""
    client = s3.client()
    s3.create_bucket("heads")
    rng = np.random.default_rng(0)
    table = pa.table({f"f{i}": rng.standard_normal(2000).astype(np.float32) for i in range(64)})
    table = table.append_column("id", pa.array(np.arange(2000)))
    for k in range(2):
        out = io.BytesIO()
        pq.write_table(table.slice(k * 1000, 1000), out, row_group_size=500)
        client.put_object(Bucket="heads", Key=f"ds/part-{k}.parquet", Body=out.getvalue())
    heads: list[str] = []
    counting = threading.Event()

    def answered(command: str, path: str) -> None:
        if counting.is_set() and command == "HEAD":
            heads.append(path)

    with _proxy(s3, answered) as endpoint:
        uri = f"s3://heads/ds?endpoint_override={endpoint}&scheme=http"
        args = dict(batch_size=100, stack={"x": [f"f{i}" for i in range(64)]}, columns=["id"],
                    output="numpy", shuffle=False, num_threads=1)  # fmt: skip
        loader = shardfeed.Loader(uri, **args)
        loader._settings.extra["start_early"] = False  # no next epoch's reads meanwhile
        counting.set()
        ids = np.concatenate([b["id"] for b in loader])
        counting.clear()
    assert np.array_equal(ids, np.arange(2000))
    assert len(heads) == 2 * 4, heads  # 4 row groups: before and after each one's reads


GLOB_TREE = [
    "day=1/part-0.parquet",
    "day=1/part-1.parquet",
    "day=2/part-0.parquet",
    "day=2/sub/part-9.parquet",
    "day=12/part-0.parquet",
    "_temporary/0/part-5.parquet",
    ".hidden/part-6.parquet",
    "top.parquet",
    "other[1]/part-0.parquet",
]
GLOBS = [
    "day=*/*.parquet",
    "day=[0-9]/part-0.parquet",
    "day=[12]",
    "day=[!2]*/*",
    "*",
    "**/*.parquet",
    "**/part-[0-1].parquet",
    "day=2/**",
    "_temporary/*/*.parquet",
    ".hidden/*.parquet",
    "other[[]1]/*.parquet",
]


def test_a_uris_glob_reads_what_the_same_glob_reads_on_a_local_disk(s3, tmp_path):
    """Object stores have no glob: a URI whose path does not exist and has a pattern
    character is matched against a listing of the folder above its first pattern
    component, as Python's glob(recursive=True) and the local rules match paths
    (`*`, `?`, `[set]` within a component, `**` across them, hidden names only when
    named).  Every pattern gives the rows, columns and partitions it gives locally.
    (A '?' would start the URI's query: `[...]` stands for one character there.)"""
    tree = tmp_path / "lake"
    for i, rel in enumerate(GLOB_TREE):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"v": np.arange(3) + 10 * i}), tree / rel)
    root = s3.upload_folder(tree, "globs", "lake")
    base, query = root.split("?")
    kw = dict(batch_size=1000, shuffle=False, drop_last=False, output="numpy", partitioning=None)
    for pattern in GLOBS:
        local = next(iter(shardfeed.Loader(str(tree / pattern), **kw)))
        remote = next(iter(shardfeed.Loader(f"{base}/{pattern}?{query}", **kw)))
        assert sorted(remote["v"].tolist()) == sorted(local["v"].tolist()), pattern
        as_uri = next(iter(shardfeed.Loader(f"file://{tree}/{pattern}", **kw)))
        assert sorted(as_uri["v"].tolist()) == sorted(local["v"].tolist()), pattern
    hive = dict(kw, partitioning="hive", columns=["v", "day"])
    local = next(iter(shardfeed.Loader(str(tree / "day=*"), **hive)))
    remote = next(iter(shardfeed.Loader(f"{base}/day=*?{query}", **hive)))
    assert {k: v.tolist() for k, v in remote.items()} == {k: v.tolist() for k, v in local.items()}
    # Matches of one key value keep the key: it lies below the pattern's fixed folder.
    local = next(iter(shardfeed.Loader(str(tree / "day=[2]" / "*.parquet"), **hive)))
    remote = next(iter(shardfeed.Loader(f"{base}/day=[2]/*.parquet?{query}", **hive)))
    assert local["day"].tolist() == remote["day"].tolist() == [2, 2, 2]
    assert local["v"].tolist() == remote["v"].tolist()
    with pytest.raises(shardfeed.DatasetNotFoundError, match="matches no file or folder"):
        shardfeed.Loader(f"{base}/day=3*/*.parquet?{query}")
    with pytest.raises(shardfeed.DatasetNotFoundError, match="matches no file or folder"):
        shardfeed.Loader(f"{base}/nowhere/*.parquet?{query}")
