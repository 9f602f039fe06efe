"""Delta Lake tables whose columns are mapped by name (delta.columnMapping.mode = name).

Their Parquet files name columns by physical names ("col-<uuid>"); the log's schema gives
each its display name. RENAME COLUMN changes only the display name and DROP COLUMN only
the schema, so the reference here is each live file read by pyarrow with its columns
renamed as the latest schema says and the dropped ones left out. The tables are written
by deltalake (which writes such tables but reads them back as nulls); renames and drops
are commits of a new metaData, as Spark writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed

from .test_deletion_vectors import delete_rows, live_adds, log_actions


def write(path: Path, first: int, n: int, mode: str = "append") -> None:
    ids = np.arange(first, first + n, dtype=np.int64)
    table = pa.table({
        "id": ids,
        "x": ids.astype(np.float64) / 4,
        "user": pa.StructArray.from_arrays(
            [pa.array(ids % 90, pa.int32()), pa.array(ids % 5)],
            names=["age", "city"],
        ),
    })  # fmt: skip
    deltalake.write_deltalake(
        str(path), table, mode=mode, configuration={"delta.columnMapping.mode": "name"}
    )


def schema_of(path: Path) -> dict[str, Any]:
    meta = [a["metaData"] for a in log_actions(path) if "metaData" in a][-1]
    return json.loads(meta["schemaString"])


def alter(path: Path, change) -> None:
    """A commit of the latest metaData with its schema changed by `change`."""
    meta = [a["metaData"] for a in log_actions(path) if "metaData" in a][-1]
    schema = json.loads(meta["schemaString"])
    change(schema["fields"])
    meta = {**meta, "schemaString": json.dumps(schema)}
    version = len(list((path / "_delta_log").glob("*.json")))
    commit = path / "_delta_log" / f"{version:020d}.json"
    commit.write_text(json.dumps({"metaData": meta}) + "\n")


def expected(path: Path, deleted: dict[str, set[int]] | None = None) -> dict[str, list[Any]]:
    """Each live file's flattened columns under the schema's display names."""
    deleted = deleted or {}
    display: dict[str, str] = {}
    top: set[str] = set()

    def walk(fields: list[dict[str, Any]], is_top: bool) -> None:
        for f in fields:
            physical = f["metadata"]["delta.columnMapping.physicalName"]
            display[physical] = f["name"]
            if is_top:
                top.add(physical)
            if isinstance(f["type"], dict) and f["type"]["type"] == "struct":
                walk(f["type"]["fields"], False)

    walk(schema_of(path)["fields"], True)
    out: dict[str, list[Any]] = {}
    for file in sorted(live_adds(path)):
        table = pq.read_table(path / file)
        gone = deleted.get(file, set())
        keep = pa.array([i for i in range(table.num_rows) if i not in gone], pa.int64())
        for name in table.column_names:
            if name not in top:
                continue
            column = table[name].combine_chunks().take(keep)
            if pa.types.is_struct(column.type):
                for k in range(column.type.num_fields):
                    child = column.type.field(k).name
                    key = f"{display[name]}.{display.get(child, child)}"
                    out.setdefault(key, []).extend(column.field(k).to_pylist())
            else:
                out.setdefault(display[name], []).extend(column.to_pylist())
    return out


def delivered(path: Path, **kwargs: Any) -> dict[str, list[Any]]:
    loader = shardfeed.Loader(path, batch_size=7, drop_last=False, shuffle=False,
                              output="numpy", **kwargs)  # fmt: skip
    out: dict[str, list[Any]] = {}
    for batch in loader:
        for name, values in batch.items():
            out.setdefault(name, []).extend(v.item() if hasattr(v, "item") else v for v in values)
    return out


def by_id(columns: dict[str, list[Any]]) -> list[tuple[Any, ...]]:
    names = sorted(columns)
    return sorted(zip(*(columns[n] for n in names), strict=True))


@pytest.fixture
def mapped(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    write(path, 0, 50, mode="error")
    write(path, 50, 30)
    return path


def test_files_are_read_under_the_tables_names(mapped):
    physical = pq.read_schema(mapped / sorted(live_adds(mapped))[0]).names
    assert all(n.startswith("col-") for n in physical)  # what the files hold
    want = expected(mapped)
    assert sorted(want) == ["id", "user.age", "user.city", "x"]
    got = delivered(mapped, columns=sorted(want))
    assert by_id(got) == by_id(want)


def test_a_renamed_and_a_dropped_column(mapped):
    def rename_and_drop(fields: list[dict[str, Any]]) -> None:
        fields[1]["name"] = "score"  # x, renamed
        fields[2]["type"]["fields"][0]["name"] = "years"  # user.age, renamed
        del fields[0]  # id, dropped

    alter(mapped, rename_and_drop)
    ids = np.arange(80, 90)  # a file written after: the same physical names
    deltalake.write_deltalake(str(mapped), pa.table({
        "score": ids / 4,
        "user": pa.StructArray.from_arrays(
            [pa.array(ids % 90, pa.int32()), pa.array(ids % 5)],
            names=["years", "city"]),
    }), mode="append")  # fmt: skip
    want = expected(mapped)
    assert sorted(want) == ["score", "user.city", "user.years"]
    assert len(want["score"]) == 90  # the file written after the rename is read too
    assert sorted(delivered(mapped)) == sorted(want)  # every column: the dropped one is not
    assert by_id(delivered(mapped, columns=sorted(want))) == by_id(want)
    with pytest.raises(shardfeed.ColumnNotFoundError):
        shardfeed.Loader(mapped, batch_size=7, columns=["x"])
    with pytest.raises(shardfeed.ColumnNotFoundError):
        shardfeed.Loader(mapped, batch_size=7, columns=["id"])
    # A filter names the column by its new name.
    got = delivered(mapped, columns=["score"], filter=[("score", ">=", 20.0)])
    assert sorted(got["score"]) == sorted(v for v in want["score"] if v >= 20.0)


def test_mapped_columns_with_deletion_vectors(mapped):
    files = sorted(live_adds(mapped))
    deleted = {files[0]: {0, 3, 4, 10}}
    delete_rows(mapped, deleted, "i")
    want = expected(mapped, deleted)
    assert by_id(delivered(mapped, columns=sorted(want))) == by_id(want)


def test_a_table_mapped_by_id_is_refused(tmp_path):
    path = tmp_path / "t"
    write(path, 0, 10, mode="error")
    meta = [a["metaData"] for a in log_actions(path) if "metaData" in a][-1]
    changed = {**meta, "configuration": {"delta.columnMapping.mode": "id"}}
    (path / "_delta_log" / f"{1:020d}.json").write_text(json.dumps({"metaData": changed}) + "\n")
    with pytest.raises(shardfeed.InvalidDataError, match="mapped by id"):
        shardfeed.Loader(path, batch_size=4)


def write_partitioned(path: Path, first: int, n: int, mode: str = "append") -> None:
    ids = np.arange(first, first + n, dtype=np.int64)
    deltalake.write_deltalake(str(path), pa.table({
        "id": ids,
        "x": ids.astype(np.float64) / 4,
        "day": pa.array([f"d{v % 3}" for v in ids]),
        "hour": pa.array([None if v % 7 == 0 else int(v % 5) for v in ids], pa.int64()),
    }), mode=mode, partition_by=["day", "hour"],
        configuration={"delta.columnMapping.mode": "name"})  # fmt: skip


def partitioned_reference(path: Path) -> list[tuple[Any, ...]]:
    """(id, x, day, hour) of every live row: each file read by pyarrow under the
    schema's names, its partition values from its add action (by physical name)."""
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"]
                for f in schema_of(path)["fields"]}  # fmt: skip
    rows = []
    for file, add in sorted(live_adds(path).items()):
        table = pq.read_table(path / file)
        values = add["partitionValues"]
        day, hour = values[physical["day"]], values[physical["hour"]]
        ids = table[physical["id"]].to_pylist()
        xs = table[physical["x"]].to_pylist()
        hour_value = None if hour is None else int(hour)
        rows += [(i, x, day, hour_value) for i, x in zip(ids, xs, strict=True)]
    return sorted(rows)


def test_a_partitioned_mapped_table_under_random_prefixes(tmp_path):
    """What Databricks and delta-rs write for a partitioned table mapped by name:
    files under random two-character prefixes, their partition values only in
    the log, keyed by physical names. Read from a checkpoint and commits after it."""
    path = tmp_path / "t"
    write_partitioned(path, 0, 40, mode="error")
    deltalake.DeltaTable(str(path)).create_checkpoint()
    write_partitioned(path, 40, 25)
    assert list((path / "_delta_log").glob("*.checkpoint.parquet"))
    assert not any("=" in file for file in live_adds(path))  # no folder names a value
    want = partitioned_reference(path)
    assert len(want) == 65 and {r[3] for r in want} == {None, 0, 1, 2, 3, 4}
    days = shardfeed.vocabulary(path, "day")
    assert sorted(days) == ["d0", "d1", "d2"]
    got = delivered(path, columns=["id", "x", "hour", "day"], fill_null={"hour": -1},
                    transforms=[shardfeed.transforms.Vocabulary("day", values=days)])  # fmt: skip
    rows = zip(got["id"], got["x"], got["day"], got["hour"], strict=True)
    assert sorted((i, x, days[d - 1], None if h == -1 else h) for i, x, d, h in rows) == want
    # A filter on partition values prunes by them.
    got = delivered(path, columns=["id"], filter=[("day", "==", "d1"), ("hour", "==", 2)])
    assert sorted(got["id"]) == [r[0] for r in want if r[2] == "d1" and r[3] == 2]
