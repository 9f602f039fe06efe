"""Folders of Apache Iceberg and Apache Hudi tables are refused with a message saying what
to pass instead: their data files include superseded versions (rows since deleted or
rewritten), which reading every Parquet file below the folder would deliver silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed

from .s3_server import s3_env, s3_server


def part(first: int, n: int = 4) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64())})


def iceberg(root: Path, metadata_name: str = "v2.metadata.json") -> Path:
    """The layout an Iceberg writer leaves after an overwrite: both snapshots' data files."""
    (root / "data" / "day=1").mkdir(parents=True)
    (root / "metadata").mkdir()
    pq.write_table(part(0), root / "data" / "day=1" / "00000-0-old.parquet")  # snapshot 1
    pq.write_table(part(100), root / "data" / "day=1" / "00000-1-new.parquet")  # snapshot 2
    (root / "metadata" / "v1.metadata.json").write_text(json.dumps({"format-version": 2}))
    (root / "metadata" / metadata_name).write_text(json.dumps({"format-version": 2}))
    (root / "metadata" / "snap-1-1-abc.avro").write_bytes(b"Obj\x01")
    return root


def hudi(root: Path) -> Path:
    """A copy-on-write Hudi table: two versions of one file group."""
    (root / "p=1").mkdir(parents=True)
    (root / ".hoodie").mkdir()
    (root / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")
    (root / "p=1" / ".hoodie_partition_metadata").write_text("partitionDepth=1\n")
    pq.write_table(part(0), root / "p=1" / "fg1_0-1-0_20240101.parquet")
    pq.write_table(part(0), root / "p=1" / "fg1_0-2-0_20240102.parquet")
    return root


def ids(source, **kw) -> list[int]:
    ld = shardfeed.Loader(source, batch_size=3, drop_last=False, output="numpy", **kw)
    return sorted(int(i) for b in ld for i in b["id"])


@pytest.mark.parametrize("metadata_name", ["v2.metadata.json", "00001-4f1c-9e2a.metadata.json"])
def test_an_iceberg_table_is_refused_naming_it_and_what_to_pass(tmp_path, metadata_name):
    table = iceberg(tmp_path / "events", metadata_name)
    with pytest.raises(shardfeed.InvalidArgumentError) as e:
        shardfeed.Loader(table)
    message = str(e.value)
    assert "Apache Iceberg table" in message
    assert f"source '{table}'" in message
    assert "plan_files()" in message  # what to pass instead
    # Its data folder, or a partition folder in it, given alone.
    for source in (table / "data", f"{table / 'data'}/", table / "data" / "day=1"):
        with pytest.raises(shardfeed.InvalidArgumentError, match=r"folder above it.*Iceberg"):
            shardfeed.Loader(source)
    # A table below the folder given is named by its path under it.
    lake = tmp_path / "lake"
    shutil.copytree(table, lake / "db" / "events")
    pq.write_table(part(500), lake / "plain.parquet")
    with pytest.raises(shardfeed.InvalidArgumentError, match=rf"'{lake}/db/events' is an Apache"):
        shardfeed.Loader(lake)


def test_files_named_one_by_one_or_by_a_glob_are_read_as_named(tmp_path):
    table = iceberg(tmp_path / "t")
    new = table / "data" / "day=1" / "00000-1-new.parquet"
    assert ids(new) == [100, 101, 102, 103]
    assert ids([new]) == [100, 101, 102, 103]
    assert ids(str(table / "data" / "**" / "*.parquet")) == [0, 1, 2, 3, 100, 101, 102, 103]


def test_a_hudi_table_is_refused(tmp_path):
    table = hudi(tmp_path / "h")
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"Apache Hudi table.*inputFiles"):
        shardfeed.Loader(table)
    assert ids(table / "p=1" / "fg1_0-2-0_20240102.parquet") == [0, 1, 2, 3]
    # Its partition folder given alone, with either kind of partition marker.
    with pytest.raises(
        shardfeed.InvalidArgumentError, match=r"'.*/p=1' is a partition folder of an Apache Hudi"
    ):
        shardfeed.Loader(table / "p=1")
    marker = table / "p=1" / ".hoodie_partition_metadata"
    marker.rename(marker.with_name(".hoodie_partition_metadata.parquet"))
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"partition folder of an Apache Hudi"):
        shardfeed.Loader(table / "p=1")
    # The files named one by one are read as named.
    assert ids(str(table / "p=1" / "*.parquet")) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_lookalikes_are_read(tmp_path):
    # A project's data/ beside a metadata/ folder of its own: no Iceberg metadata file.
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "metadata").mkdir()
    (project / "metadata" / "labels.json").write_text("{}")
    (project / "metadata" / "metadata.json").write_text("{}")  # not <x>.metadata.json
    pq.write_table(part(0), project / "data" / "a.parquet")
    assert ids(project / "data") == [0, 1, 2, 3]
    # A dataset whose folder holds Iceberg-like names below a partition, not at a table root.
    other = tmp_path / "other"
    (other / "k=1").mkdir(parents=True)
    pq.write_table(part(7), other / "k=1" / "a.parquet")
    (other / "notes.metadata.json").write_text("{}")  # not inside a metadata/ folder
    assert ids(other) == [7, 8, 9, 10]


def test_a_delta_table_with_iceberg_metadata_is_read_through_its_log(tmp_path):
    # Delta UniForm writes Iceberg metadata beside the Delta log; the log decides.
    table = tmp_path / "uniform"
    deltalake.write_deltalake(str(table), part(0))
    deltalake.write_deltalake(str(table), part(50), mode="overwrite")
    (table / "metadata").mkdir()
    (table / "metadata" / "v1.metadata.json").write_text("{}")
    assert ids(table) == [50, 51, 52, 53]


def test_an_iceberg_table_on_s3_is_refused_too(tmp_path):
    table = iceberg(tmp_path / "t")
    with s3_server() as server, s3_env(server):
        uri = server.upload_folder(table, "lake", "events")
        with pytest.raises(shardfeed.InvalidArgumentError, match="Apache Iceberg table"):
            shardfeed.Loader(uri)
        for below in ("events/data", "events/data/day=1"):
            with pytest.raises(shardfeed.InvalidArgumentError, match=r"folder above.*Iceberg"):
                shardfeed.Loader(server.uri("lake", below))
        new = server.uri("lake", "events/data/day=1/00000-1-new.parquet")
        assert ids(new) == [100, 101, 102, 103]
