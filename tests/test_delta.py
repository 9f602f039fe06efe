"""Delta Lake tables: the rows of the table's latest version, not every file in its folder.

Tables are written by the `deltalake` package (delta-rs), whose own reader is the
reference: after any history of appends, overwrites, deletes, compactions and
checkpoints, the loader's epoch holds exactly the rows `DeltaTable.to_pyarrow_table()`
holds.
"""

from __future__ import annotations

import decimal
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import HashBucket

from .conftest import digest
from .s3_server import s3_env, s3_server


def rows(first: int, count: int) -> pa.Table:
    ids = np.arange(first, first + count, dtype=np.int64)
    return pa.table({"id": ids, "x": ids.astype(np.float32) / 2, "k": ids % 3})


def delivered_ids(source: Any, **kwargs: Any) -> list[int]:
    loader = shardfeed.Loader(
        source, batch_size=7, columns=["id"], drop_last=False, output="numpy", **kwargs
    )
    return sorted(int(i) for b in loader for i in b["id"])


def table_ids(path: Path) -> list[int]:
    return sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table()["id"].to_pylist())


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 40)),
        st.tuples(st.just("overwrite"), st.integers(1, 40)),
        st.tuples(st.just("delete"), st.integers(2, 4)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0)),
    ),
    min_size=1,
    max_size=7,
)


def apply_history(path: Path, ops: list[tuple[str, int]], partitioned: bool) -> None:
    partition_by = ["k"] if partitioned else None
    deltalake.write_deltalake(str(path), rows(0, 30), partition_by=partition_by)
    next_id = 30
    for op, n in ops:
        if op in ("append", "overwrite"):
            deltalake.write_deltalake(
                str(path), rows(next_id, n), mode=op, partition_by=partition_by
            )
            next_id += n
        elif op == "delete":
            deltalake.DeltaTable(str(path)).delete(f"id % {n} = 0")
        elif op == "compact":
            deltalake.DeltaTable(str(path)).optimize.compact()
        else:
            deltalake.DeltaTable(str(path)).create_checkpoint()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, partitioned=st.booleans())
def test_any_history_reads_as_the_latest_version(ops, partitioned):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table"
        apply_history(path, ops, partitioned)
        expected = table_ids(path)
        if not expected:  # everything deleted: an empty table is said to be one
            with pytest.raises(shardfeed.DatasetNotFoundError, match=r"Delta table.*is empty"):
                delivered_ids(path, shuffle=False)
            return
        assert delivered_ids(path, shuffle=True, seed=3) == expected
        assert delivered_ids(path, shuffle=False) == expected


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A partitioned table after an overwrite, a delete, a checkpoint and an append:
    its folder holds files of four versions."""
    path = tmp_path / "table"
    apply_history(path, [("overwrite", 25), ("delete", 3), ("checkpoint", 0), ("append", 9)], True)
    return path


def test_a_table_whose_rows_were_all_deleted_says_it_is_empty(tmp_path):
    """Its folder holds old versions' files; "no Parquet files under" was wrong."""
    path = tmp_path / "table"
    apply_history(path, [("overwrite", 1), ("delete", 2)], False)
    assert table_ids(path) == []
    with pytest.raises(shardfeed.DatasetNotFoundError, match=r"Delta table .* is empty"):
        shardfeed.Loader(path, batch_size=4)


def test_the_folder_holds_more_than_the_table(history):
    on_disk = pads.dataset(history, format="parquet", partitioning="hive")
    assert on_disk.count_rows() > len(table_ids(history))  # what a plain read would give
    loader = shardfeed.Loader(history, batch_size=4, columns=["id", "k"], drop_last=False)
    assert loader.num_rows == len(table_ids(history))


def test_a_table_inside_a_folder_and_a_remote_copy(history, tmp_path):
    outer = tmp_path / "outer"
    shutil.copytree(history, outer / "t")
    pq.write_table(rows(1000, 5), outer / "plain.parquet")
    assert delivered_ids(outer, partitioning=None) == sorted(
        table_ids(history) + list(range(1000, 1005))
    )
    args = dict(batch_size=4, columns=["id", "k"], seed=2, with_sample_id=True, output="numpy")
    local = shardfeed.Loader(history, **args)
    with s3_server() as server, s3_env(server):
        remote = shardfeed.Loader(server.upload_folder(history, "delta", "t"), **args)
        assert remote.fingerprint == local.fingerprint
        assert digest(remote) == digest(local)


def test_one_partition_folder_of_a_table(history):
    table = deltalake.DeltaTable(str(history)).to_pyarrow_table()
    for k in (0, 1, 2):
        expected = sorted(
            i
            for i, kk in zip(table["id"].to_pylist(), table["k"].to_pylist(), strict=True)
            if kk == k
        )
        assert delivered_ids(history / f"k={k}") == expected


def test_a_vacuumed_live_file_is_named(history):
    live = deltalake.DeltaTable(str(history)).file_uris()[0]
    Path(live).unlink()
    with pytest.raises(shardfeed.DatasetNotFoundError, match=r"Delta table .*not in its folder"):
        shardfeed.Loader(history, batch_size=4, columns=["id"])


def test_a_damaged_log_is_named(history):
    expected = table_ids(history)
    log = history / "_delta_log"
    checkpoint = next(log.glob("*.checkpoint.parquet"))
    checkpoint.write_bytes(b"PAR1 not a checkpoint PAR1")
    # Commits from 0 on rebuild the table without it, as Delta's readers do; without
    # them, the checkpoint is named.
    assert delivered_ids(history) == expected
    first = sorted(log.glob("*.json"))[0]
    kept = first.read_bytes()
    first.unlink()
    with pytest.raises(shardfeed.InvalidDataError, match=checkpoint.name):
        shardfeed.Loader(history, batch_size=4, columns=["id"])
    first.write_bytes(kept)
    checkpoint.unlink()  # commits from 0 on are still there: read without it
    assert delivered_ids(history) == expected
    last = sorted(log.glob("*.json"))[-1]
    last.write_text('{"add": {"path": ')
    with pytest.raises(shardfeed.InvalidDataError, match=last.name):
        shardfeed.Loader(history, batch_size=4, columns=["id"])
    # A text whose first value is null crashed Arrow's JSON reader (found by the fuzzer).
    last.write_text("null\n")
    with pytest.raises(shardfeed.InvalidDataError, match=rf"{last.name}.*not a JSON object"):
        shardfeed.Loader(history, batch_size=4, columns=["id"])
    sorted(log.glob("*.json"))[1].unlink()
    with pytest.raises(shardfeed.InvalidDataError, match="no commit 1 and no checkpoint"):
        shardfeed.Loader(history, batch_size=4, columns=["id"])


def test_info_names_the_version_read(history, capsys):
    from shardfeed import cli

    assert cli.main(["info", str(history)]) == 0
    table = deltalake.DeltaTable(str(history))
    assert json.loads(capsys.readouterr().out)["delta_tables"] == [
        {"table": str(history), "version": table.version(), "files": len(table.file_uris())}
    ]


def test_files_of_a_table_named_one_by_one(history):
    """Its live files, as deltalake lists them, read as the table; a file a later commit
    removed (a glob over the folder finds them too) is refused, naming the table."""
    live = deltalake.DeltaTable(str(history)).file_uris()
    assert delivered_ids(live) == table_ids(history)
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"Delta table .* does not hold"):
        shardfeed.Loader(f"{history}/**/*.parquet", batch_size=4, columns=["id"])


def test_an_empty_partition_value_is_null_as_delta_says(tmp_path):
    """Delta writes a null partition value as an empty folder value ("p="); plain Hive
    folders keep "" as pyarrow reads them."""
    path = tmp_path / "t"
    table = pa.table({"id": [0, 1, 2], "p": pa.array([None, "x", None], pa.string())})
    deltalake.write_deltalake(str(path), table, partition_by=["p"])
    reference = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    nulls = sorted(
        i
        for i, p in zip(reference["id"].to_pylist(), reference["p"].to_pylist(), strict=True)
        if p is None
    )
    loader = shardfeed.Loader(path, batch_size=1, columns=["id", "p"], drop_last=False,
                              output="numpy", transforms=[HashBucket("p", num_buckets=7)],
                              fill_null={"p": -1}, shuffle=False)  # fmt: skip
    got = [(int(b["id"][0]), int(b["p"][0])) for b in loader]
    assert sorted(i for i, p in got if p == -1) == nulls == [0, 2]


def test_a_tables_partition_columns_stay_with_partitioning_none(tmp_path):
    """partitioning=None reads folders as plain paths; a Delta table's partition values
    come from its log and are its columns: they were dropped (ColumnNotFoundError)."""
    table = tmp_path / "region=7" / "t"  # a Hive folder above the table: a plain path now
    deltalake.write_deltalake(str(table), pa.table({"id": [0, 1, 2, 3], "k": [1, 1, 2, None]}),
                              partition_by=["k"])  # fmt: skip
    for partitioning, columns in (("hive", ["id", "region", "k"]), (None, ["id", "k"])):
        loader = shardfeed.Loader(tmp_path, batch_size=4, output="numpy", shuffle=False,
                                  partitioning=partitioning, fill_null={"k": -1})  # fmt: skip
        assert [name for name, *_ in loader.outputs] == columns, partitioning
        (batch,) = list(loader)
        assert sorted(zip(batch["id"].tolist(), batch["k"].tolist(), strict=True)) == [
            (0, 1), (1, 1), (2, 2), (3, -1)]  # fmt: skip
    # Beside it a plain file, a table partitioned otherwise and one not partitioned (with
    # "hive", files that disagree on their keys): each reads null in the keys it lacks.
    pq.write_table(pa.table({"id": [9]}), tmp_path / "plain.parquet")
    deltalake.write_deltalake(str(tmp_path / "j"), pa.table({"id": [10], "j": [4]}),
                              partition_by=["j"])  # fmt: skip
    deltalake.write_deltalake(str(tmp_path / "none"), pa.table({"id": [11]}))
    loader = shardfeed.Loader(tmp_path, batch_size=7, output="numpy", shuffle=False,
                              partitioning=None, fill_null=-1)  # fmt: skip
    assert [name for name, *_ in loader.outputs] == ["id", "j", "k"]  # keys as first met
    (batch,) = list(loader)
    assert sorted(zip(*(batch[c].tolist() for c in ("id", "k", "j")), strict=True)) == [
        (0, 1, -1), (1, 1, -1), (2, 2, -1), (3, -1, -1), (9, -1, -1), (10, -1, 4),
        (11, -1, -1)]  # fmt: skip
    with pytest.raises(shardfeed.SchemaMismatchError, match="pass partitioning=None"):
        list(shardfeed.Loader(tmp_path, batch_size=7, fill_null=-1))


def test_a_partition_folder_the_table_no_longer_reads_names_the_table(tmp_path):
    """Rewritten into other partitions, a table's old folder holds only removed files: it
    said 'no Parquet files under' a folder that holds some, naming no table."""
    path = tmp_path / "t"
    rows = pa.table({"id": [0, 1], "k": [1, 2], "j": [5, 5]})
    deltalake.write_deltalake(str(path), rows, partition_by=["k"])
    deltalake.write_deltalake(str(path), rows, partition_by=["j"], mode="overwrite",
                              schema_mode="overwrite")  # fmt: skip
    assert list((path / "k=1").glob("*.parquet"))  # still there, no longer the table's
    named = rf"'{path / 'k=1'}' is a folder of the Delta table '{path}'"
    with pytest.raises(shardfeed.DatasetNotFoundError, match=named):
        shardfeed.Loader(path / "k=1")
    assert delivered_ids(path / "j=5") == [0, 1]
    # Remotely, the table as a URI the user can pass back: scheme, bucket and query.
    with s3_server() as server, s3_env(server):
        uri = server.upload_folder(path, "lake", "t")
        base, query = uri.split("?")
        with pytest.raises(shardfeed.DatasetNotFoundError) as raised:
            shardfeed.Loader(f"{base}/k=1?{query}")
        assert f"is a folder of the Delta table '{uri}'" in str(raised.value)


def test_a_checkpoint_that_does_not_read_gives_way_to_an_older_one(tmp_path):
    """A 0-byte newest checkpoint (a full disk) failed the whole table, though an older
    checkpoint and the commits since rebuild it, as Delta's readers do."""
    path = tmp_path / "t"
    for first in range(0, 50, 10):
        deltalake.write_deltalake(str(path), rows(first, 10), mode="append")
        if first in (10, 30):
            deltalake.DeltaTable(str(path)).create_checkpoint()
    log = path / "_delta_log"
    newest, _ = sorted(log.glob("*.checkpoint.parquet"), reverse=True)
    assert table_ids(path) == list(range(50))
    newest.write_bytes(b"")  # (deltalake's reader fails on it too)
    assert delivered_ids(path) == list(range(50))
    # Without the commits since the older one, the newest's failure is what is said.
    (log / f"{2:020d}.json").unlink()
    with pytest.raises(shardfeed.InvalidDataError, match=newest.name):
        delivered_ids(path)


def write_log(table: Path, actions: list[list[dict]]) -> None:
    """Commits written by hand, one list of actions each (a table's own schema)."""
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for version, commit in enumerate(actions):
        text = "".join(json.dumps(a) + "\n" for a in commit)
        (log / f"{version:020d}.json").write_text(text)


def add(path: str) -> dict:
    return {"add": {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 1,
                    "dataChange": True}}  # fmt: skip


def test_log_paths_not_folders_say_what_a_table_holds(tmp_path):
    """An unpartitioned table whose files lie in "k=1/" folders has no column k (its log
    has no partition columns), and a remove that names a file by an absolute URI, or
    unescaped where its add was escaped, removes it (the protocol's paths are URIs)."""
    table = tmp_path / "t"
    for rel, first in (("k=1/a.parquet", 0), ("k=2/b.parquet", 10), ("k=2/c d.parquet", 20)):
        (table / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows(first, 3).select(["id"]), table / rel)
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}}]}  # fmt: skip
    meta = {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": [],
                         "configuration": {}, "createdTime": 1}}  # fmt: skip
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    write_log(table, [
        [protocol, meta, add("k=1/a.parquet"), add("k=2/b.parquet"), add("k=2/c%20d.parquet")],
        [{"remove": {"path": (table / "k=1" / "a.parquet").as_uri(), "dataChange": True}},
         {"remove": {"path": "k=2/c d.parquet", "dataChange": True}}],
    ])  # fmt: skip
    loader = shardfeed.Loader(table, batch_size=1, drop_last=False, output="numpy")
    assert [name for name, *_ in loader.outputs] == ["id"]
    assert delivered_ids(table) == [10, 11, 12]
    # Read through a symbolic link, the remove naming the real path still removes.
    link = tmp_path / "link"
    link.symlink_to(table)
    assert delivered_ids(link) == [10, 11, 12]


def test_columns_the_log_adds_or_widens_read_as_the_table_says(tmp_path):
    """A column added since the table's last write (ADD COLUMNS) is null in every row, as
    Delta's readers give it, and one whose type the table widened since every file was
    written (int to long, float to double, date to timestamp_ntz) reads as the wider type:
    a later write does not change the columns or dtypes a loader delivers."""
    path = tmp_path / "added"
    deltalake.write_deltalake(str(path), pa.table({"id": pa.array([0, 1, 2], pa.int64())}))
    deltalake.DeltaTable(str(path)).alter.add_columns(
        [deltalake.Field("n", "integer", nullable=True)])  # fmt: skip
    assert deltalake.DeltaTable(str(path)).to_pyarrow_table()["n"].null_count == 3
    loader = shardfeed.Loader(path, batch_size=3, output="numpy", fill_null={"n": -1},
                              shuffle=False)  # fmt: skip
    assert [name for name, *_ in loader.outputs] == ["id", "n"]
    (batch,) = list(loader)
    assert batch["n"].dtype == np.int32 and batch["n"].tolist() == [-1, -1, -1]
    with pytest.raises(shardfeed.InvalidDataError, match=r"'n' \(not in this file"):
        list(shardfeed.Loader(path, batch_size=3, output="numpy", shuffle=False))

    table = tmp_path / "widened"
    table.mkdir()
    day = pa.array([19723, 19724], pa.int32()).cast(pa.date32())  # 2024-01-01 and -02
    cents = pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.50")], pa.decimal128(5, 2))
    pq.write_table(pa.table({"i": pa.array([1, -2], pa.int32()), "s": pa.array([3, 4], pa.int16()),
                             "f": pa.array([0.5, 1.5], pa.float32()), "d": day,
                             "w": pa.array([7, -8], pa.int32()), "c": cents,
                             "short": pa.array([7, -8], pa.int32())}),
                   table / "a.parquet")  # fmt: skip
    nested = {"type": "struct", "fields": []}
    declared = [("i", "long"), ("s", "double"), ("f", "double"), ("d", "timestamp_ntz"),
                ("w", "decimal(12,2)"), ("c", "decimal(8,3)"), ("short", "decimal(9,0)"),
                ("later", "decimal(10,2)"), ("nested", nested)]  # fmt: skip
    fields = [{"name": name, "type": kind, "nullable": True, "metadata": {}}
              for name, kind in declared]  # fmt: skip
    schema = {"type": "struct", "fields": fields}
    meta = {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": [],
                         "configuration": {}, "createdTime": 1}}  # fmt: skip
    features = ["typeWidening", "timestampNtz"]
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                             "readerFeatures": features, "writerFeatures": features}}  # fmt: skip
    write_log(table, [[protocol, meta, add("a.parquet")]])
    loader = shardfeed.Loader(table, batch_size=2, output="numpy", columns=["i", "s", "f", "d"],
                              shuffle=False)  # fmt: skip
    (batch,) = list(loader)
    assert batch["i"].dtype == np.int64 and batch["i"].tolist() == [1, -2]
    assert batch["s"].dtype == np.float64 and batch["s"].tolist() == [3.0, 4.0]
    assert batch["f"].dtype == np.float64 and batch["f"].tolist() == [0.5, 1.5]
    assert batch["d"].tolist() == [19723 * 86_400_000_000, 19724 * 86_400_000_000]  # µs
    # To a decimal that holds every value (an int to decimal(10 + k, s), a decimal to more
    # digits): float64, as every decimal column; not to one that may not hold them.
    (wide,) = list(shardfeed.Loader(table, batch_size=2, output="numpy", shuffle=False,
                                    columns=["w", "c", "short"]))  # fmt: skip
    assert {n: (v.dtype, v.tolist()) for n, v in wide.items()} == {
        "w": (np.float64, [7.0, -8.0]), "c": (np.float64, [1.25, -3.5]),
        "short": (np.int32, [7, -8])}  # fmt: skip
    # However the table's files are named: by a glob, one by one, the folder twice.
    for source in (f"{table}/*.parquet", [table / "a.parquet"], [table, table]):
        (again,) = list(shardfeed.Loader(source, batch_size=2, output="numpy",
                                         columns=["i", "s", "f", "d"], shuffle=False))  # fmt: skip
        assert {n: (v.dtype, v.tolist()) for n, v in again.items()} == {
            n: (v.dtype, v.tolist()) for n, v in batch.items()}, source  # fmt: skip
    # One file through a link to the table's folder, one not: one table, not two.
    pq.write_table(pq.read_table(table / "a.parquet"), table / "b.parquet")
    (table / "_delta_log" / f"{1:020d}.json").write_text(json.dumps(add("b.parquet")) + "\n")
    (tmp_path / "link").symlink_to(table)
    linked = shardfeed.Loader([tmp_path / "link" / "a.parquet", table / "b.parquet"],
                              batch_size=4, output="numpy", columns=["i", "f"])  # fmt: skip
    ((_, i_dtype, _), (_, f_dtype, _)) = linked.outputs
    assert (i_dtype, f_dtype) == ("int64", "float64"), linked.outputs
    (batch,) = list(shardfeed.Loader(table, batch_size=4, output="numpy", columns=["later"],
                                     fill_null=0.0, shuffle=False))  # fmt: skip
    assert batch["later"].tolist() == [0.0] * 4
    with pytest.raises(shardfeed.ColumnNotFoundError):  # only primitive columns are added
        shardfeed.Loader(table, columns=["nested"])

    # The log's columns against the files read: "id" for a file's "ID" is that column (no
    # case twin, which would fail every loader); a plain file beside the table keeps its
    # own type, which the table's widening does not change.
    lake = tmp_path / "lake"
    (lake / "t").mkdir(parents=True)
    files = pa.table({"ID": pa.array([1, 2], pa.int64()), "i": pa.array([3, 4], pa.int32())})
    pq.write_table(files, lake / "t" / "a.parquet")
    fields = [{"name": name, "type": "long", "nullable": True, "metadata": {}}
              for name in ("id", "i")]  # fmt: skip
    meta["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": fields})
    write_log(lake / "t", [[protocol, meta, add("a.parquet")]])
    (batch,) = list(shardfeed.Loader(lake / "t", batch_size=2, output="numpy", shuffle=False))
    assert sorted(batch) == ["ID", "i"] and batch["i"].dtype == np.int64
    pq.write_table(pa.table({"ID": [5], "i": pa.array([6], pa.int16())}), lake / "plain.parquet")
    got = list(shardfeed.Loader(lake, batch_size=3, output="numpy", shuffle=False))
    assert got[0]["i"].dtype == np.int32 and sorted(got[0]["i"].tolist()) == [3, 4, 6]
