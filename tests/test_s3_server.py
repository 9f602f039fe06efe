"""The S3 test server harness itself: start, upload, list and read via pyarrow, stop."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .s3_server import s3_env, s3_server


def _write(root: Path) -> dict[str, pa.Table]:
    tables = {}
    for i, name in enumerate(["a.parquet", "sub/b.parquet"]):
        table = pa.table({"id": np.arange(i * 10, i * 10 + 10, dtype=np.int64)})
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / name)
        tables[name] = table
    return tables


def _refused(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_start_upload_list_read_stop(tmp_path: Path) -> None:
    tables = _write(tmp_path)
    before = dict(os.environ)
    with s3_server() as s3:
        uri = s3.upload_folder(tmp_path, "bucket", "ds")
        assert uri == f"s3://bucket/ds?endpoint_override=127.0.0.1:{s3.port}&scheme=http"
        with s3_env(s3):
            fs, path = pafs.FileSystem.from_uri(uri)
            assert path == "bucket/ds"
            listed = fs.get_file_info(pafs.FileSelector(path, recursive=True))
            files = sorted(i.path for i in listed if i.type == pafs.FileType.File)
            assert files == ["bucket/ds/a.parquet", "bucket/ds/sub/b.parquet"]
            for name, table in tables.items():
                assert pq.read_table(f"{path}/{name}", filesystem=fs).equals(table)
        with s3_env(s3, endpoint_env=True):  # a plain URI, the endpoint from AWS_ENDPOINT_URL
            fs, path = pafs.FileSystem.from_uri("s3://bucket/ds")
            assert (
                fs.get_file_info(f"{path}/a.parquet").size
                == (tmp_path / "a.parquet").stat().st_size
            )
        s3.reset()
        assert s3.client().list_buckets()["Buckets"] == []
        process, port = s3.process, s3.port
    assert process.returncode is not None  # stopped
    assert _refused(port)
    assert dict(os.environ) == before  # s3_env restored everything
